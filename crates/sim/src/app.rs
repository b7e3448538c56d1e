//! [`app`]: the whole API as one axum router, layered in the order a request meets them: the
//! health probes (no token), then the API's front (bearer auth; classification, counting and
//! audit), then the fault layer, then content negotiation over the handlers (the API's and the
//! fault plan's `/_sim/faults`). The one place that knows both the API and the faults above it.

use axum::Router;
use axum::middleware;

use crate::api::{self, AppState};
use crate::fault::{self, FaultHandle};

/// The whole API as a router over `state`, with the fault rules of `faults` applied to every
/// resource request (for in-process tests: `tower::ServiceExt::oneshot`; the server serves the
/// same router).
pub fn app(state: AppState, faults: FaultHandle) -> Router {
    let api = api::routes()
        .merge(fault::control::routes(faults.clone()))
        .layer(middleware::from_fn(api::negotiate))
        .layer(middleware::from_fn(api::end_json_with_newline))
        .layer(middleware::from_fn_with_state(
            faults,
            fault::layer::fault_layer,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            api::classify_and_count,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            api::authenticate,
        ));
    let probes = api::probes().layer(middleware::from_fn_with_state(
        state.clone(),
        api::refuse_bad_tokens,
    ));
    probes.merge(api).with_state(state)
}
