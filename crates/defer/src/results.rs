//! What a resumed deferred task reads from its ended pod: KPO's XCom value through the sidecar
//! ([`read_xcom`]) and the base container's log, bounded ([`read_log`]).
//!
//! Both run on the worker that resumes the task (as KubernetesPodOperator's `trigger_reentry`
//! does), not in the triggerer: the triggerer only waits, so its memory does not grow with what
//! the tasks print or return.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::LogParams;
use podline_client::retry::RetryPolicy;
use podline_launch::xcom;
use serde::Serialize;

use crate::error::DeferError;

/// The XCom of an ended pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Xcom {
    /// The pod carries KPO's XCom sidecar (without one, the value is not read).
    pub sidecar: bool,
    /// `/airflow/xcom/return.json` as the sidecar served it (`None`: empty or missing).
    pub value: Option<String>,
}

/// Reads KPO's XCom value of pod `name` through its sidecar (`pods/exec`, then the sidecar is
/// stopped), as the synchronous launcher does (podline-launch's `xcom`).
pub async fn read_xcom(api: &Api<Pod>, name: &str) -> Result<Xcom, DeferError> {
    let calls = RetryPolicy::default().with_deadline(Some(std::time::Duration::from_secs(30)));
    let pod = podline_client::retry::retry(&calls, "get pod", || api.get(name))
        .await
        .map_err(|source| DeferError::Api {
            action: "reading the pod for its XCom",
            source,
        })?;
    if !xcom::has_sidecar(&pod) {
        return Ok(Xcom::default());
    }
    let value = xcom::extract(api, name)
        .await
        .map_err(|err| DeferError::Xcom(err.to_string()))?;
    Ok(Xcom {
        sidecar: true,
        value,
    })
}

/// The base container's log, as the task log shows it after the pod ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Log {
    /// The log text (at most the limit asked for, cut at a line's end when possible).
    pub text: String,
    /// The log was longer than the limit: only its beginning is in `text`.
    pub truncated: bool,
}

/// Reads container `container` of pod `name`'s log, at most `limit` bytes (`limitBytes` on the
/// server, so no more is ever sent or held).
pub async fn read_log(
    api: &Api<Pod>,
    name: &str,
    container: &str,
    limit: usize,
) -> Result<Log, DeferError> {
    let calls = RetryPolicy::default().with_deadline(Some(std::time::Duration::from_secs(30)));
    // One byte more than asked: whether the log was longer is told without reading it all.
    let params = LogParams {
        container: Some(container.to_owned()),
        limit_bytes: Some(i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1)),
        ..LogParams::default()
    };
    let mut text =
        podline_client::retry::retry(&calls, "read the pod's log", || api.logs(name, &params))
            .await
            .map_err(|source| DeferError::Api {
                action: "reading the base container's log",
                source,
            })?;
    let truncated = text.len() > limit;
    if truncated {
        let mut cut = limit;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        if let Some(end) = text.rfind('\n') {
            text.truncate(end + 1);
        }
    }
    Ok(Log { text, truncated })
}
