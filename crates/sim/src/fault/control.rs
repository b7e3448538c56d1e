//! `/_sim/faults`, the fault plan's control endpoint (same bearer token as the API): `GET` lists
//! the rules, `POST` adds rules (a plan, a list, or one rule, JSON or YAML), `DELETE` clears
//! them.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};

use super::handle::FaultHandle;
use super::plan::FaultPlan;
use crate::api::{AppState, read_raw_body};
use crate::status::{ApiError, ErrorResponse};

/// The `/_sim/faults` routes, editing the rules of `faults`.
pub fn routes(faults: FaultHandle) -> Router<AppState> {
    Router::new()
        .route(
            "/_sim/faults",
            get(list_faults).post(add_faults).delete(clear_faults),
        )
        .layer(Extension(faults))
}

async fn list_faults(Extension(faults): Extension<FaultHandle>) -> Response {
    Json(FaultPlan {
        rules: faults.list(),
    })
    .into_response()
}

async fn add_faults(
    State(state): State<AppState>,
    Extension(faults): Extension<FaultHandle>,
    req: Request,
) -> Response {
    // Within the same body cap and read timeout as the API's own writes.
    let body = match read_raw_body(&state, req).await {
        Ok(body) => String::from_utf8_lossy(&body.bytes).into_owned(),
        Err(err) => return err.into_response(),
    };
    match FaultPlan::parse(&body) {
        Ok(plan) => {
            let added = plan.rules.len();
            for rule in plan.rules {
                faults.push(rule);
            }
            (
                StatusCode::CREATED,
                Json(serde_json::json!({ "added": added })),
            )
                .into_response()
        }
        Err(err) => ApiError::bad_request(err.to_string()).into_response(),
    }
}

async fn clear_faults(Extension(faults): Extension<FaultHandle>) -> StatusCode {
    faults.clear();
    StatusCode::NO_CONTENT
}
