//! [`Filter`]: the selectors of a list or watch (namespace, labels, fields), parsed once.

use podline_sim_core::cluster::Facts;
use podline_sim_core::kinds::ApiKind;

use super::query::ListParams;
use super::request_info::RequestInfo;
use super::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;

/// Parsed selectors of a list or watch.
pub struct Filter {
    /// Namespace to keep (None: all).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Filter {
    /// Builds the filter of a request for kind `K`.
    pub fn new<K: ApiKind>(info: &RequestInfo, params: &ListParams) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or_default())?;
        let fields =
            FieldSelector::parse::<K>(params.field_selector.as_deref().unwrap_or_default())?;
        let namespace =
            (K::NAMESPACED && !info.namespace.is_empty()).then(|| info.namespace.clone());
        Ok(Self {
            namespace,
            labels,
            fields,
        })
    }

    /// Whether the selectors accept an object with these facts (the namespace is filtered by
    /// the caller).
    pub fn matches(&self, facts: &Facts) -> bool {
        self.labels.matches(|key| facts.label(key)) && self.fields.matches(facts)
    }

    /// Whether the filter has selectors (so events may need rewriting).
    pub fn has_selectors(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }
}
