//! The JSON API under `/api/`: the data behind every page, for scripts and other tools.
//! Documented in `docs/ui.md`.

use axum::Json;
use axum::extract::{Path, Query};
use podline_store::{Changes, Counts, FailureGroup, PodRecord};

use crate::error::ApiError;
use crate::load::{CHANGES_LIMIT, RunDetail, RunView, list_runs, load_pod, load_run};
use crate::params::{ChangeQuery, FailureQuery, PodQuery, RunQuery};
use crate::state::State;

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

/// `GET /api/changes?since=MARK`.
pub(crate) async fn changes(
    state: State,
    Query(query): Query<ChangeQuery>,
) -> Result<Json<Changes>, ApiError> {
    Ok(Json(
        state.store.changes(query.since()?, CHANGES_LIMIT).await?,
    ))
}
