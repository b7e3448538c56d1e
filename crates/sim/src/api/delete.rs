//! The HTTP side of deletion: a DELETE's answer and `deletecollection`. What a delete does to
//! the store (preconditions, graceful pod deletion, finalizers, propagation) is
//! [`podline_sim_core::delete`], which the controllers share.

use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use podline_sim_core::delete::{Deleted, arrange_removal, delete_object, deleted_json};
use podline_sim_core::kinds::ApiKind;
use podline_sim_core::status::ApiError;

use super::respond::json_response;

/// The answer to a DELETE: pods always answer the object; other kinds a Success Status once gone,
/// and the object while it waits for finalizers.
pub(crate) fn delete_response<K: ApiKind>(deleted: &Deleted<K>) -> Response {
    match deleted {
        Deleted::Gone(obj) if K::RESOURCE != "pods" => super::respond::success_status(&**obj),
        Deleted::Gone(obj) => {
            let mut json = Vec::new();
            obj.write_json(&mut json);
            json_response(StatusCode::OK, json)
        }
        Deleted::Pending(json) => json_response(StatusCode::OK, json.clone()),
    }
}

/// `DELETE` on a collection (`deletecollection`): deletes each object the label and field
/// selectors match, as the registry's `DeleteCollection` does, and answers their list as the
/// deletes left them (pods being deleted gracefully carry their deletionTimestamp).
pub(crate) fn delete_collection<K: ApiKind>(
    state: &super::AppState,
    info: &super::RequestInfo,
    query: Option<&str>,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let params: super::query::ListParams = super::query::parse(query)?;
    let filter = super::filter::Filter::new::<K>(info, &params)?;
    let cluster = state.cluster();
    let (items, rv) = K::table(cluster).snapshot(filter.namespace.as_deref(), None);
    let mut out = Vec::new();
    for stored in items.iter().filter(|s| filter.matches(&s.facts)) {
        let obj = stored.decode();
        let namespace = obj.meta().namespace.clone().unwrap_or_default();
        let name = obj.meta().name.clone().unwrap_or_default();
        let mut one = opts.clone();
        // Delete what was listed, not a namesake created since.
        one.preconditions
            .get_or_insert_with(Default::default)
            .uid
            .get_or_insert_with(|| obj.meta().uid.clone().unwrap_or_default());
        match delete_object::<K>(cluster, &namespace, &name, &one) {
            Ok((deleted, pending)) => {
                arrange_removal(cluster, &namespace, &name, pending);
                out.extend(deleted_json(&deleted));
            }
            // Gone or replaced meanwhile: not ours to delete any more.
            Err(err) if err.code == 404 || err.code == 409 => {}
            Err(err) => return Err(err),
        }
    }
    Ok(json_response(StatusCode::OK, list_json::<K>(&out, rv)))
}

/// `items` (the JSON of each object) as a `<Kind>List` at `resource_version`.
pub(crate) fn list_json<K: ApiKind>(items: &[Bytes], resource_version: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"kind\":\"");
    out.extend_from_slice(K::LIST_KIND.as_bytes());
    out.extend_from_slice(b"\",\"apiVersion\":\"");
    out.extend_from_slice(K::API_VERSION.as_bytes());
    out.extend_from_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
    out.extend_from_slice(resource_version.to_string().as_bytes());
    out.extend_from_slice(b"\"},\"items\":[");
    for (i, json) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(json);
    }
    out.extend_from_slice(b"]}");
    out
}
