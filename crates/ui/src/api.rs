//! The JSON API under `/api/`: the data behind every page, for scripts and other tools.
//! Documented in `docs/ui.md`.

use axum::Json;
use axum::extract::{Path, Query};
use jiff::Timestamp;
use podline_store::{
    Changes, Counts, FailureGroup, PodFilter, PodKey, PodRecord, RunFilter, RunStatus, RunSummary,
    Store,
};
use serde::Serialize;

use crate::error::{ApiError, UiError};
use crate::params::{ChangeQuery, FailureQuery, PodQuery, RunQuery};
use crate::server::State;
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
    store: &dyn Store,
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
    store: &dyn Store,
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
pub(crate) async fn load_pod(store: &dyn Store, uid: &str) -> Result<PodRecord, UiError> {
    store
        .pod(&PodKey::Uid(uid.to_owned()))
        .await?
        .ok_or_else(|| UiError::NotFound(format!("no recorded pod with uid {uid:?}")))
}

/// `GET /api/runs`.
pub(crate) async fn runs(
    state: State,
    Query(query): Query<RunQuery>,
) -> Result<Json<Vec<RunView>>, ApiError> {
    Ok(Json(list_runs(state.store.as_ref(), &query).await?))
}

/// `GET /api/runs/{namespace}/{run}`.
pub(crate) async fn run(
    state: State,
    Path((namespace, run)): Path<(String, String)>,
) -> Result<Json<RunDetail>, ApiError> {
    Ok(Json(
        load_run(state.store.as_ref(), &namespace, &run).await?,
    ))
}

/// `GET /api/pods`.
pub(crate) async fn pods(
    state: State,
    Query(query): Query<PodQuery>,
) -> Result<Json<Vec<PodRecord>>, ApiError> {
    Ok(Json(state.store.pods(&query.filter()?).await?))
}

/// `GET /api/pods/{uid}`.
pub(crate) async fn pod(
    state: State,
    Path(uid): Path<String>,
) -> Result<Json<PodRecord>, ApiError> {
    Ok(Json(load_pod(state.store.as_ref(), &uid).await?))
}

/// `GET /api/failures`.
pub(crate) async fn failures(
    state: State,
    Query(query): Query<FailureQuery>,
) -> Result<Json<Vec<FailureGroup>>, ApiError> {
    Ok(Json(state.store.failures(&query.filter()).await?))
}

/// `GET /api/counts`.
pub(crate) async fn counts(state: State) -> Result<Json<Counts>, ApiError> {
    Ok(Json(state.store.counts().await?))
}

/// Most pods one `/api/changes` answer lists.
pub(crate) const CHANGES_LIMIT: u32 = 500;

/// `GET /api/changes?since=MARK`.
pub(crate) async fn changes(
    state: State,
    Query(query): Query<ChangeQuery>,
) -> Result<Json<Changes>, ApiError> {
    Ok(Json(
        state.store.changes(query.since()?, CHANGES_LIMIT).await?,
    ))
}
