//! The HTTP API: discovery, OpenAPI, one handler per resource, selectors, patch types,
//! validation, watch and log streams, the `/_sim` control endpoints, content negotiation, and
//! the front every request passes first (health probes, bearer auth, classification, counting,
//! audit).
//!
//! The API sits on the object store ([`podline_sim_core::cluster`]) and knows nothing of the
//! layers above it: [`crate::app`] assembles the whole router (the fault layer between the front
//! and the handlers), and the server it is served on is reached only through [`Transport`].

mod apply;
mod binding;
mod body;
mod control;
mod decode;
mod delete;
mod discovery;
mod eviction;
mod exec;
pub mod exec_fault;
mod filter;
mod front;
mod gojson;
mod logs;
mod namespaces;
pub mod openapi;
mod patch;
mod protobuf;
pub(crate) mod query;
mod request_info;
mod resources;
mod respond;
mod selector;
mod state;
mod table;
mod watch;

use axum::Router;
use axum::routing::get;

pub(crate) use body::read_raw_body;
pub(crate) use front::{authenticate, classify_and_count, probes, refuse_bad_tokens};
pub use query::query_flag;
pub use request_info::{RequestInfo, Verb};
pub(crate) use respond::end_json_with_newline;
pub use selector::{FieldSelector, LabelSelector};
pub use state::{
    AppState, BodyLimits, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_MAX_REQUEST_BODY, Transport,
};
pub(crate) use table::negotiate;

/// The API's handlers, without middleware: discovery (`/version` is public, in
/// [`probes`]), OpenAPI, the `/_sim` control endpoints
/// and, for every other path, the resource dispatcher (see [`crate::app`] for what wraps them).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api", get(discovery::api_versions))
        .route("/api/v1", get(discovery::core_v1))
        .route("/apis", get(discovery::api_groups))
        .route("/apis/{group}", get(discovery::api_group))
        .route("/apis/{group}/{version}", get(discovery::group_version))
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::v3_index))
        .route("/openapi/v3/{*gv}", get(openapi::v3_group_version))
        .merge(control::routes())
        .fallback(resources::dispatch)
}
