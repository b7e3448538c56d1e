//! `GET /api/v1/namespaces/{ns}/pods/{name}/log`: the log endpoint over the kubelet's log store,
//! with the real server's container rules and errors.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use jiff::Timestamp;
use podline_sim_core::logs::LogQuery;
use podline_sim_core::validation::Causes;

use super::query::{self, LogParams};
use super::{AppState, RequestInfo};
use crate::status::ApiError;

/// Serves a pod's container log.
pub async fn pod_log(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let params: LogParams = query::parse(query)?;
    validate_log_params(&params, &info.name)?;
    let pod = state
        .cluster()
        .get_pod(&info.namespace, &info.name)
        .ok_or_else(|| ApiError::not_found("", "pods", &info.name))?;
    let spec = pod.spec.clone().unwrap_or_default();
    let names: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
    let init_names: Vec<String> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    let container = match params.container.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => {
            if !names.iter().chain(&init_names).any(|n| n == c) {
                let mut all = names.clone();
                all.extend(init_names.iter().cloned());
                return Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {}",
                    info.name
                )));
            }
            c.to_owned()
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {}, choose one of: [{}]",
                info.name,
                names.join(" ")
            );
            if !init_names.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init_names.join(" ")
                ));
            }
            return Err(ApiError::bad_request(message));
        }
    };
    // kube-apiserver's LogLocation: a pod not assigned to a node has no kubelet to ask, so the
    // answer is an empty location, which the handler serves as 204 No Content (empty body).
    if spec.node_name.as_deref().is_none_or(str::is_empty) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let status = pod.status.as_ref().and_then(|s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .find(|cs| cs.name == container)
            .cloned()
    });
    if params.previous == Some(true) {
        return Err(ApiError::bad_request(format!(
            "previous terminated container \"{container}\" in pod \"{}\" not found",
            info.name
        )));
    }
    let started = status
        .as_ref()
        .and_then(|cs| cs.state.as_ref())
        .is_some_and(|state| state.running.is_some() || state.terminated.is_some());
    if !started {
        let reason = status
            .as_ref()
            .and_then(|cs| cs.state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
            .unwrap_or_else(|| "ContainerCreating".to_owned());
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{}\" is waiting to start: {reason}",
            info.name
        )));
    }
    let since_time = match params.since_time.as_deref() {
        Some(t) => Some(t.parse::<Timestamp>().map_err(|e| {
            ApiError::bad_request(format!("invalid sinceTime {t:?}: {e} (expected RFC3339)"))
        })?),
        None => None,
    };
    let log_query = LogQuery {
        follow: params.follow == Some(true),
        timestamps: params.timestamps == Some(true),
        since_time,
        since_seconds: params.since_seconds,
        tail_lines: params.tail_lines,
        limit_bytes: params.limit_bytes,
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let stream = state
        .cluster()
        .logs()
        .stream(&uid, &container, log_query)
        .map(Ok::<_, Infallible>);
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}

/// kube-apiserver's `ValidatePodLogOptions`, checked before the pod is looked up: 422 Invalid
/// `PodLogOptions "<pod>" is invalid: ...` with one cause per bad field.
fn validate_log_params(params: &LogParams, pod: &str) -> Result<(), ApiError> {
    let mut causes = Causes::default();
    if let Some(n) = params.tail_lines.filter(|n| *n < 0) {
        causes.invalid(
            "tailLines",
            &n.to_string(),
            "must be greater than or equal to 0",
        );
    }
    if let Some(n) = params.limit_bytes.filter(|n| *n < 1) {
        causes.invalid("limitBytes", &n.to_string(), "must be greater than 0");
    }
    match (params.since_seconds, params.since_time.as_deref()) {
        (Some(_), Some(_)) => causes.forbidden(
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ),
        (Some(n), None) if n < 1 => {
            causes.invalid("sinceSeconds", &n.to_string(), "must be greater than 0");
        }
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("", "PodLogOptions", pod, causes.0))
    }
}
