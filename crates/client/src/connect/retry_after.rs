//! A layer that keeps a `Retry-After` header: kube drops the headers of an error answer when it
//! builds `Error::Api`, so the header's value is copied into the Status body
//! (`details.retryAfterSeconds`), where [`crate::retry::classify`] finds it.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::{Body, DynBody};
use tower::{BoxError, ServiceExt};

/// Wraps a service so error answers carry their `Retry-After` header inside the Status body.
pub(super) fn retry_after_into_status<S>(
    inner: S,
) -> impl tower::Service<
    Request<Body>,
    Response = Response<Box<DynBody>>,
    Error = BoxError,
    Future = impl Future<Output = Result<Response<Box<DynBody>>, BoxError>> + Send,
> + Send
where
    S: tower::Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    inner.and_then(copy_retry_after)
}

/// If `resp` is an error with a `Retry-After: <seconds>` header and a JSON Status body without
/// `details.retryAfterSeconds`, puts the header's value there. Anything else passes unchanged.
pub async fn copy_retry_after(
    resp: Response<Box<DynBody>>,
) -> Result<Response<Box<DynBody>>, BoxError> {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(resp);
    }
    let Some(seconds) = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return Ok(resp);
    };
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let patched = patch_status_body(&bytes, seconds).unwrap_or(bytes);
    let body: Box<DynBody> = Box::new(
        http_body_util::Full::new(patched).map_err(|never| -> BoxError { match never {} }),
    );
    Ok(Response::from_parts(parts, body))
}

/// The Status JSON with `details.retryAfterSeconds` set, or `None` if the body is not a Status
/// object or already has a value.
fn patch_status_body(bytes: &Bytes, seconds: u32) -> Option<Bytes> {
    let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let object = value.as_object_mut()?;
    let details = object
        .entry("details")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    if details
        .get("retryAfterSeconds")
        .and_then(serde_json::Value::as_u64)
        .is_some_and(|s| s > 0)
    {
        return None;
    }
    details.insert("retryAfterSeconds".into(), seconds.into());
    serde_json::to_vec(&value).ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::retry::{Disposition, classify};

    #[tokio::test]
    async fn retry_after_header_should_reach_classify() {
        let service = tower::service_fn(|_req: Request<Body>| async {
            let body: Box<DynBody> = Box::new(
                http_body_util::Full::new(Bytes::from_static(
                    br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}"#,
                ))
                .map_err(|never| -> BoxError { match never {} }),
            );
            Ok::<_, BoxError>(
                Response::builder()
                    .status(429)
                    .header("Retry-After", "7")
                    .body(body)
                    .unwrap(),
            )
        });
        let client = kube::Client::new(retry_after_into_status(service), "default");
        let api: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::default_namespaced(client);
        let err = api.get("x").await.unwrap_err();
        assert_eq!(
            classify(&err),
            Disposition::Retry {
                reason: crate::reason::Reason::TooManyRequests,
                retry_after: Some(Duration::from_secs(7))
            }
        );
    }

    #[test]
    fn patch_should_keep_a_retry_after_already_in_the_body() {
        let body = Bytes::from_static(br#"{"code":429,"details":{"retryAfterSeconds":3}}"#);
        assert_eq!(patch_status_body(&body, 9), None);
        let not_json = Bytes::from_static(b"too many requests");
        assert_eq!(patch_status_body(&not_json, 9), None);
    }
}
