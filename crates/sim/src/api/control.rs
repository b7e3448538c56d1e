//! `/_sim/*`: the control endpoints (same bearer token as the API) that drive counts,
//! compaction and restarts from outside the process (`/_sim/faults` is the fault plan's own, in
//! [`crate::fault`]).
//!
//! - `GET /_sim/counts` returns `{"<verb> <resource>": n}`; `DELETE` resets them.
//! - `GET /_sim/ground-truth` returns the ground-truth ledger: every pod ever created, with its
//!   phase transitions, exit codes and removal time (JSON), to audit a client against.
//! - `POST /_sim/compact` drops the watch history.
//! - `POST /_sim/restart?seconds=N` drops every connection and refuses new ones for N seconds.
//! - `POST /_sim/freeze?seconds=N` freezes every connection, and every new one for N seconds
//!   (a network freeze; the caller's own connection freezes too, after the answer).

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::state::AppState;
use crate::status::{ApiError, ErrorResponse};

/// The control routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/_sim/counts", get(counts).delete(reset_counts))
        .route("/_sim/ground-truth", get(ground_truth))
        .route("/_sim/compact", post(compact))
        .route("/_sim/restart", post(restart))
        .route("/_sim/freeze", post(freeze))
}

async fn counts(State(state): State<AppState>) -> Response {
    Json(state.counts().snapshot().to_json()).into_response()
}

async fn reset_counts(State(state): State<AppState>) -> StatusCode {
    state.counts().reset();
    StatusCode::NO_CONTENT
}

async fn ground_truth(State(state): State<AppState>) -> Response {
    Json(ground_truth_json(&state.cluster().ground_truth())).into_response()
}

/// The ledger as JSON: `{"pods": [{uid, namespace, name, labels, transitions: [{phase, at}],
/// exitCodes, deletedAt}]}`, times in RFC 3339 (second precision, like k8s `Time`).
pub fn ground_truth_json(pods: &[podline_sim_core::cluster::PodHistory]) -> serde_json::Value {
    let pods: Vec<serde_json::Value> = pods
        .iter()
        .map(|p| {
            serde_json::json!({
                "uid": p.uid,
                "namespace": p.namespace,
                "name": p.name,
                "labels": p.labels,
                "transitions": p.transitions.iter().map(|(phase, at)| {
                    serde_json::json!({"phase": phase, "at": at.to_string()})
                }).collect::<Vec<_>>(),
                "exitCodes": p.exit_codes,
                "deletedAt": p.deleted_at.map(|at| at.to_string()),
            })
        })
        .collect();
    serde_json::json!({ "pods": pods })
}

async fn compact(State(state): State<AppState>) -> StatusCode {
    state.cluster().compact();
    StatusCode::NO_CONTENT
}

#[derive(Debug, Deserialize)]
struct RestartParams {
    #[serde(default)]
    seconds: f64,
}

async fn restart(State(state): State<AppState>, Query(params): Query<RestartParams>) -> Response {
    if !(0.0..=3600.0).contains(&params.seconds) {
        return ApiError::bad_request("seconds must be between 0 and 3600").into_response();
    }
    let Some(server) = state.server() else {
        return ApiError::new(409, "Conflict", "this API is not served over a socket")
            .into_response();
    };
    let down = Duration::from_secs_f64(params.seconds);
    // Answer first, then restart: the caller's own connection is dropped with the others.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.restart(down).await;
    });
    (StatusCode::ACCEPTED, "restarting\n").into_response()
}

/// `POST /_sim/freeze?seconds=N`: a network freeze of N seconds (see `Sim::freeze_all_for`).
async fn freeze(State(state): State<AppState>, Query(params): Query<RestartParams>) -> Response {
    if !(0.0..=3600.0).contains(&params.seconds) {
        return ApiError::bad_request("seconds must be between 0 and 3600").into_response();
    }
    let Some(server) = state.server() else {
        return ApiError::new(409, "Conflict", "this API is not served over a socket")
            .into_response();
    };
    let duration = Duration::from_secs_f64(params.seconds);
    // Answer first, then freeze: the caller's own connection freezes with the others.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.freeze_all_for(duration);
    });
    (StatusCode::ACCEPTED, "freezing\n").into_response()
}
