//! `podline._native`: podline inside a Python process, on ONE tokio runtime per process
//! (pyo3-async-runtimes' shared runtime), awaited from asyncio.
//!
//! - [`run_cli`]: the `podline` command itself (the wheel's `podline` script calls it, so
//!   `pip install podline` still gives the command; see docs/ARCHITECTURE.md).
//! - [`start_pod`]: the worker's half of a deferrable task (podline-defer's `start`: create with
//!   the launcher's guarantees, or reattach by task id); blocking, without the GIL.
//! - [`wait_pod`]: the triggerer's half: an awaitable that resolves with the pod's outcome;
//!   every wait of the process on one cluster and namespace shares one watch.
//! - [`delete_pod`]: the clean-up, only of a pod that carries the task's launch id.
//!
//! Results cross into Python as JSON text (podline-defer's `Started` and `Outcome`), so the
//! Python side reads one documented shape and this module stays a thin adapter.

// PyO3's macros expand to FFI code (`unsafe` blocks) in this crate; no hand-written unsafe here.
#![allow(unsafe_code)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_defer::{
    Cluster, ClusterKey, Clusters, DeferError, StartLimits, StartRequest, WaitOptions,
};
use podline_launch::LivenessConfig;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    PodlineError,
    PyRuntimeError,
    "A podline call failed; the message says what and why (never a credential)."
);

/// The clusters this process talks to (one connection and one watch per namespace each).
fn clusters() -> &'static Clusters {
    static CLUSTERS: OnceLock<Clusters> = OnceLock::new();
    CLUSTERS.get_or_init(Clusters::new)
}

fn key(kubeconfig: Option<String>, context: Option<String>) -> ClusterKey {
    ClusterKey {
        kubeconfig: kubeconfig.filter(|p| !p.is_empty()).map(PathBuf::from),
        context: context.filter(|c| !c.is_empty()),
    }
}

/// Runs `call` with the cluster `key` names on the process's one runtime, without the GIL, and
/// waits for it: the shape every blocking call of this module shares.
fn blocking<T, F, Fut>(py: Python<'_>, key: ClusterKey, call: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(Arc<Cluster>) -> Fut + Send,
    Fut: Future<Output = Result<T, DeferError>>,
{
    let runtime = pyo3_async_runtimes::tokio::get_runtime();
    py.detach(|| runtime.block_on(async { call(clusters().get(&key).await?).await }))
        .map_err(to_py)
}

fn to_py(err: DeferError) -> PyErr {
    PodlineError::new_err(err.to_string())
}

fn json<T: serde::Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|err| PodlineError::new_err(err.to_string()))
}

/// A start limit given in seconds (None: the launcher's default), bounded to a day.
fn seconds(value: Option<f64>) -> PyResult<Duration> {
    const DAY: f64 = 86_400.0;
    match value {
        None => Ok(podline_launch::wait::DEFAULT_STARTUP_TIMEOUT),
        Some(secs) if secs.is_finite() && secs > 0.0 && secs <= DAY => {
            Ok(Duration::from_secs_f64(secs))
        }
        Some(secs) => Err(PodlineError::new_err(format!(
            "a start timeout must be from 0 (excluded) to {DAY} seconds, got {secs}"
        ))),
    }
}

/// The executable's allocator tuning has no meaning in a Python process.
fn no_allocator_tuning() {}

/// Runs the `podline` command with `argv` (program name first) and returns its exit code.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| podline::exit_code_number(podline::run_cli(argv, no_allocator_tuning)))
}

/// Creates the task's pod (`pod_json`, its name used as is) with the launcher's guarantees, or
/// reattaches to the task's live pod; returns podline-defer's `Started` as JSON.
#[pyfunction]
#[pyo3(signature = (kubeconfig, context, namespace, pod_json, task_id=None, reattach=false))]
fn start_pod(
    py: Python<'_>,
    kubeconfig: Option<String>,
    context: Option<String>,
    namespace: Option<String>,
    pod_json: String,
    task_id: Option<String>,
    reattach: bool,
) -> PyResult<String> {
    let started = blocking(py, key(kubeconfig, context), |cluster| async move {
        let pod = podline_defer::start::pod_from_json(&pod_json)?;
        let ns = namespace.unwrap_or_else(|| cluster.namespace.clone());
        let mut request = StartRequest::new(pod, &ns);
        request.task_id = task_id;
        request.reattach = reattach;
        podline_defer::start(cluster.client.clone(), request).await
    })?;
    json(&started)
}

/// An awaitable that resolves with pod `namespace/name`'s outcome (podline-defer's `Outcome`
/// as JSON) once its base container has ended, on this process's shared watch.
///
/// With `lease_seconds`, the pod is owned while it runs by this process's Lease of that
/// duration (one per process and cluster, renewed every third of it, never released: see
/// podline-defer's `ownership`); the first wait's duration is the process's.
#[pyfunction]
#[pyo3(signature = (kubeconfig, context, namespace, name, launch_id, base_container, lease_seconds=None, schedule_timeout=None, startup_timeout=None))]
#[allow(clippy::too_many_arguments)]
fn wait_pod<'py>(
    py: Python<'py>,
    kubeconfig: Option<String>,
    context: Option<String>,
    namespace: String,
    name: String,
    launch_id: String,
    base_container: String,
    lease_seconds: Option<u32>,
    schedule_timeout: Option<f64>,
    startup_timeout: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let key = key(kubeconfig, context);
    let start = match (schedule_timeout, startup_timeout) {
        (None, None) => None,
        (schedule, startup) => Some(StartLimits {
            schedule_timeout: seconds(schedule)?,
            startup_timeout: seconds(startup)?,
        }),
    };
    let config = lease_seconds
        .map(|secs| {
            let duration = Duration::from_secs(u64::from(secs));
            LivenessConfig::new(duration, duration / 3)
                .map_err(|err| PodlineError::new_err(err.to_string()))
        })
        .transpose()?;
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let cluster = clusters().get(&key).await.map_err(to_py)?;
        let owner = config.map(|config| cluster.liveness(config));
        let outcome = cluster
            .waiters
            .wait(
                &namespace,
                &name,
                &launch_id,
                &base_container,
                &WaitOptions {
                    owner: owner.as_deref(),
                    start,
                },
            )
            .await
            .map_err(to_py)?;
        json(&outcome)
    })
}

/// Deletes pod `namespace/name` if it carries `launch_id` (a pod of another launch is never
/// touched); returns whether a delete was made. Blocking, without the GIL.
#[pyfunction]
#[pyo3(signature = (kubeconfig, context, namespace, name, launch_id, grace_seconds=None))]
fn delete_pod(
    py: Python<'_>,
    kubeconfig: Option<String>,
    context: Option<String>,
    namespace: String,
    name: String,
    launch_id: String,
    grace_seconds: Option<u32>,
) -> PyResult<bool> {
    let deleted = blocking(py, key(kubeconfig, context), |cluster| async move {
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &namespace);
        let grace = grace_seconds.map(|s| Duration::from_secs(u64::from(s)));
        podline_defer::start::delete_if_ours(&api, &name, &launch_id, grace).await
    })?;
    Ok(deleted)
}

/// Reads KPO's XCom value of the ended pod `namespace/name` through its sidecar (then stops
/// the sidecar); returns podline-defer's `Xcom` as JSON (`sidecar` false: the pod has none).
/// Blocking, without the GIL.
#[pyfunction]
fn read_xcom(
    py: Python<'_>,
    kubeconfig: Option<String>,
    context: Option<String>,
    namespace: String,
    name: String,
) -> PyResult<String> {
    let read = blocking(py, key(kubeconfig, context), |cluster| async move {
        let api: Api<Pod> = Api::namespaced(cluster.upgrade_client.clone(), &namespace);
        podline_defer::results::read_xcom(&api, &name).await
    })?;
    json(&read)
}

/// Reads container `container` of pod `namespace/name`'s log, at most `limit_bytes`; returns
/// podline-defer's `Log` as JSON. Blocking, without the GIL.
#[pyfunction]
fn read_log(
    py: Python<'_>,
    kubeconfig: Option<String>,
    context: Option<String>,
    namespace: String,
    name: String,
    container: String,
    limit_bytes: usize,
) -> PyResult<String> {
    let read = blocking(py, key(kubeconfig, context), |cluster| async move {
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &namespace);
        podline_defer::results::read_log(&api, &name, &container, limit_bytes).await
    })?;
    json(&read)
}

/// The module: `podline._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(start_pod, m)?)?;
    m.add_function(wrap_pyfunction!(wait_pod, m)?)?;
    m.add_function(wrap_pyfunction!(delete_pod, m)?)?;
    m.add_function(wrap_pyfunction!(read_xcom, m)?)?;
    m.add_function(wrap_pyfunction!(read_log, m)?)?;
    m.add("PodlineError", m.py().get_type::<PodlineError>())?;
    Ok(())
}
