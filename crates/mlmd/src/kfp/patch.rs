//! The labels and annotations written back on the pod (KFP's contract: the
//! cache server copies `metadata_execution_id`, and `metadata_written` makes
//! every writer skip the pod from then on).

use std::collections::BTreeMap;

use serde::Serialize;

use super::keys::*;

/// A linked input, as listed in `metadata_input_artifact_ids`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputRef {
    /// Artifact id.
    pub id: i64,
    /// Input name.
    pub name: String,
    /// Artifact URI.
    pub uri: String,
}

/// A recorded output, as listed in `metadata_output_artifact_ids`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutputRef {
    /// Artifact id.
    pub id: i64,
    /// Output name.
    pub name: String,
    /// Artifact URI.
    pub uri: String,
    /// Artifact type name.
    pub r#type: String,
}

/// The contract's markers a pod carries now: its values of the labels and
/// annotations a [`PodPatch`] writes, and nothing else.
///
/// Why: the work queue keeps this instead of the whole pod (whose labels,
/// annotations and `ARGO_TEMPLATE` are tens of KB), and a patch only needs
/// these keys to leave out what the pod has already
/// ([`PodPatch::missing_from`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Markers {
    /// The marker labels present (execution id, context id, written).
    pub labels: BTreeMap<String, String>,
    /// The marker annotations present (input and output artifact ids).
    pub annotations: BTreeMap<String, String>,
}

impl Markers {
    /// The markers among a pod's `labels` and `annotations`.
    pub fn of(
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Markers {
        let pick = |from: Option<&BTreeMap<String, String>>, keys: &[&str]| {
            keys.iter()
                .filter_map(|k| Some(((*k).to_owned(), from?.get(*k)?.clone())))
                .collect()
        };
        Markers {
            labels: pick(
                labels,
                &[EXECUTION_ID_LABEL, CONTEXT_ID_LABEL, WRITTEN_LABEL],
            ),
            annotations: pick(annotations, &[INPUT_IDS_ANNOTATION, OUTPUT_IDS_ANNOTATION]),
        }
    }
}

/// Labels and annotations to merge into the pod's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPatch {
    /// Labels to set.
    pub labels: BTreeMap<String, String>,
    /// Annotations to set.
    pub annotations: BTreeMap<String, String>,
}

impl PodPatch {
    /// Phase 1 markers: the execution and context ids and the linked inputs.
    pub fn started(execution_id: i64, context_id: i64, inputs: &[InputRef]) -> PodPatch {
        let mut p = PodPatch::default();
        p.labels
            .insert(EXECUTION_ID_LABEL.into(), execution_id.to_string());
        p.labels
            .insert(CONTEXT_ID_LABEL.into(), context_id.to_string());
        p.annotations
            .insert(INPUT_IDS_ANNOTATION.into(), to_json(inputs));
        p
    }

    /// Phase 2 markers: `metadata_written=true` and the outputs.
    pub fn finished(outputs: &[OutputRef]) -> PodPatch {
        let mut p = PodPatch::default();
        p.labels.insert(WRITTEN_LABEL.into(), "true".into());
        p.annotations
            .insert(OUTPUT_IDS_ANNOTATION.into(), to_json(outputs));
        p
    }

    /// Both patches in one (a pod first seen finished).
    pub fn merge(mut self, other: PodPatch) -> PodPatch {
        self.labels.extend(other.labels);
        self.annotations.extend(other.annotations);
        self
    }

    /// True when nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }

    /// Only the entries the pod does not carry already (no-op patches are
    /// skipped: each patch wakes every watcher of the pod).
    pub fn missing_from(
        &self,
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> PodPatch {
        let differs = |have: Option<&BTreeMap<String, String>>, k: &String, v: &String| {
            have.and_then(|m| m.get(k)) != Some(v)
        };
        PodPatch {
            labels: self
                .labels
                .iter()
                .filter(|(k, v)| differs(labels, k, v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            annotations: self
                .annotations
                .iter()
                .filter(|(k, v)| differs(annotations, k, v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The JSON merge patch body (`metadata` only).
    pub fn to_merge_patch(&self) -> serde_json::Value {
        serde_json::json!({
            "metadata": { "labels": self.labels, "annotations": self.annotations }
        })
    }

    /// True when `labels`/`annotations` (from the patched pod) carry it all:
    /// the patch is verified, not assumed.
    pub fn applied_to(
        &self,
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> bool {
        self.missing_from(labels, annotations).is_empty()
    }
}

fn to_json<T: Serialize>(items: &[T]) -> String {
    // Serializing plain structs of strings and ints cannot fail.
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_patch_should_carry_kfp_keys() {
        let p = PodPatch::started(
            7,
            3,
            &[InputRef {
                id: 5,
                name: "data".into(),
                uri: "minio://b/k".into(),
            }],
        );
        assert_eq!(p.labels[EXECUTION_ID_LABEL], "7");
        assert_eq!(p.labels[CONTEXT_ID_LABEL], "3");
        assert_eq!(
            p.annotations[INPUT_IDS_ANNOTATION],
            r#"[{"id":5,"name":"data","uri":"minio://b/k"}]"#
        );
        let body = p.to_merge_patch();
        assert_eq!(body["metadata"]["labels"][EXECUTION_ID_LABEL], "7");
    }

    #[test]
    fn finished_patch_should_mark_written_and_list_outputs() {
        let p = PodPatch::finished(&[OutputRef {
            id: 9,
            name: "model".into(),
            uri: "minio://b/m".into(),
            r#type: "Model".into(),
        }]);
        assert_eq!(p.labels[WRITTEN_LABEL], "true");
        assert_eq!(
            p.annotations[OUTPUT_IDS_ANNOTATION],
            r#"[{"id":9,"name":"model","uri":"minio://b/m","type":"Model"}]"#
        );
    }

    #[test]
    fn markers_should_keep_only_the_keys_a_patch_writes() {
        let labels: BTreeMap<String, String> = [
            (EXECUTION_ID_LABEL.to_owned(), "7".to_owned()),
            ("app".to_owned(), "x".to_owned()),
        ]
        .into();
        let annotations: BTreeMap<String, String> = [
            (OUTPUT_IDS_ANNOTATION.to_owned(), "[]".to_owned()),
            (COMPONENT_SPEC_ANNOTATION.to_owned(), "{...}".to_owned()),
        ]
        .into();
        let m = Markers::of(Some(&labels), Some(&annotations));
        assert_eq!(m.labels.len(), 1);
        assert_eq!(m.annotations.len(), 1);
        // What a patch leaves out is the same whether it looks at the pod or its markers.
        let p = PodPatch::started(7, 3, &[]).merge(PodPatch::finished(&[]));
        assert_eq!(
            p.missing_from(Some(&m.labels), Some(&m.annotations)),
            p.missing_from(Some(&labels), Some(&annotations))
        );
    }

    #[test]
    fn missing_from_should_drop_what_the_pod_already_has() {
        let p = PodPatch::started(7, 3, &[]);
        let labels: BTreeMap<String, String> = [
            (EXECUTION_ID_LABEL.to_owned(), "7".to_owned()),
            (CONTEXT_ID_LABEL.to_owned(), "3".to_owned()),
        ]
        .into();
        let annotations: BTreeMap<String, String> =
            [(INPUT_IDS_ANNOTATION.to_owned(), "[]".to_owned())].into();
        assert!(p.applied_to(Some(&labels), Some(&annotations)));
        let partial = p.missing_from(Some(&labels), None);
        assert!(partial.labels.is_empty());
        assert_eq!(partial.annotations.len(), 1);
        assert!(!p.applied_to(None, None));
    }
}
