//! The reads pages, the JSON API and the event stream share: runs with what the pages derive
//! from them, one run with its timeline, one pod. Depends on the store, the query
//! parameters and the timeline, never on a handler.

use jiff::Timestamp;
use podline_store::{PodFilter, PodKey, PodRecord, RunFilter, RunStatus, RunSummary, StoreRead};
use serde::Serialize;

use crate::error::UiError;
use crate::params::RunQuery;
use crate::timeline::Timeline;

/// A run summary with what the pages derive from it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunView {
    #[serde(flatten)]
    pub summary: RunSummary,
    pub status: RunStatus,
    pub succeeded: u64,
    pub failed: u64,
}

impl From<RunSummary> for RunView {
    fn from(summary: RunSummary) -> Self {
        Self {
            status: summary.status(),
            succeeded: summary.succeeded(),
            failed: summary.failed(),
            summary,
        }
    }
}

/// One run with its timeline.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunDetail {
    pub run: RunView,
    pub timeline: Timeline,
}

/// The runs matching `query`, newest first.
pub(crate) async fn list_runs(
    store: &dyn StoreRead,
    query: &RunQuery,
) -> Result<Vec<RunView>, UiError> {
    let filter = query.filter(Timestamp::now())?;
    Ok(store
        .runs(&filter)
        .await?
        .into_iter()
        .map(RunView::from)
        .collect())
}

/// Most pods one run's timeline draws.
pub(crate) const MAX_RUN_PODS: u32 = 5_000;

/// One run and its timeline, or `NotFound`.
pub(crate) async fn load_run(
    store: &dyn StoreRead,
    namespace: &str,
    run: &str,
) -> Result<RunDetail, UiError> {
    let summary = store
        .runs(&RunFilter {
            namespace: Some(namespace.to_owned()),
            ..RunFilter::default()
        })
        .await?
        .into_iter()
        .find(|r| r.run == run)
        .ok_or_else(|| UiError::NotFound(format!("no run {run:?} in namespace {namespace:?}")))?;
    let pods = store
        .pods(&PodFilter {
            namespace: Some(namespace.to_owned()),
            run: Some(run.to_owned()),
            limit: Some(MAX_RUN_PODS),
            ..PodFilter::default()
        })
        .await?;
    Ok(RunDetail {
        run: summary.into(),
        timeline: Timeline::build(&pods, Timestamp::now()),
    })
}

/// One pod by uid, or `NotFound`.
pub(crate) async fn load_pod(store: &dyn StoreRead, uid: &str) -> Result<PodRecord, UiError> {
    store
        .pod(&PodKey::Uid(uid.to_owned()))
        .await?
        .ok_or_else(|| UiError::NotFound(format!("no recorded pod with uid {uid:?}")))
}

/// Most pods one `/api/changes` answer lists.
pub(crate) const CHANGES_LIMIT: u32 = 500;
