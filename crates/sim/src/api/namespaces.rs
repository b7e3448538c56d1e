//! The HTTP side of namespace deletion: DELETE of a namespace and PUT of its `finalize`
//! subresource. What they do (Terminating, the namespace controller, the finalizer) is
//! [`podline_sim_core::controllers::namespace`].

use axum::response::Response;
use http::StatusCode;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use podline_sim_core::controllers::namespace;
use podline_sim_core::status::ApiError;

use super::AppState;
use super::respond::json_response;

/// DELETE of a namespace: answers the Namespace, now Terminating.
pub fn delete_namespace(
    state: &AppState,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let json = namespace::delete_namespace(state.cluster(), name, opts)?;
    Ok(json_response(StatusCode::OK, json))
}

/// PUT `namespaces/{name}/finalize`: replaces `spec.finalizers` (only) with the body's.
pub fn finalize(state: &AppState, name: &str, body: &[u8]) -> Result<Response, ApiError> {
    let sent: Namespace = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type Namespace): {e}"
        ))
    })?;
    let finalizers = sent.spec.and_then(|s| s.finalizers).unwrap_or_default();
    let json = namespace::finalize(state.cluster(), name, &finalizers)?;
    Ok(json_response(StatusCode::OK, json))
}
