//! The conformance suite's harness: a [`Target`] is an API server under test, either `podline sim`
//! started in-process (the default, and what CI runs) or a real cluster named by
//! `PODLINE_CONFORMANCE_KUBECONFIG`, with a fresh namespace of its own.
//!
//! Why it exists: the sim's promise is that no client can tell it from kube-apiserver 1.32 except
//! by its faults. Each test in `tests/conformance/` states one behaviour of kube-apiserver as an
//! assertion over raw HTTP (status, reason, message, body shape) through a real client's
//! connection, so the same test proves the sim right in CI and checks the statement itself against
//! a real cluster:
//!
//! ```sh
//! cargo nextest run -p podline-conformance                                   # against the sim
//! PODLINE_CONFORMANCE_KUBECONFIG=~/.kube/config \
//!   cargo nextest run -p podline-conformance --run-ignored all               # against a cluster
//! ```
//!
//! On a cluster the suite creates and deletes only its own namespaces (`podline-conformance-*`),
//! and needs the rights to do so. The differences it tolerates between a cluster and the sim are
//! listed in one place, [`Difference`]; a test that meets one asks [`Target::tolerates`].
//!
//! Must not depend on podline's own client stack or recorder: it checks the API server, with
//! kube-rs's plain client, as any user's tool would talk to it.

use std::time::Duration;

use http::{Method, Request, StatusCode};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use podline_sim::{Sim, SimConfig};
use serde_json::Value;

/// The environment variable naming a real cluster's kubeconfig; unset, the suite runs on the sim.
pub const KUBECONFIG_ENV: &str = "PODLINE_CONFORMANCE_KUBECONFIG";

/// Which kind of API server a [`Target`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// `podline sim`, started in-process for this test.
    Sim,
    /// A real cluster, from [`KUBECONFIG_ENV`].
    Cluster,
}

/// The known, accepted differences between a real cluster and the sim: the one list of what the
/// suite tolerates. Anything not named here must be identical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    /// A real cluster schedules pods onto real nodes and pulls real images, so timings, node
    /// names, pod IPs and container ids differ; the sim's kubelet is scripted.
    KubeletTimings,
    /// A real cluster has more API groups, resources and admission plugins installed (CRDs,
    /// webhooks, quotas) than the sim serves; discovery lists are compared for what the sim
    /// serves, not for equality.
    InstalledApis,
}

impl Difference {
    /// Whether the difference applies on a target of this kind (each is a real cluster's).
    fn applies_to(self, kind: TargetKind) -> bool {
        match self {
            Difference::KubeletTimings | Difference::InstalledApis => kind == TargetKind::Cluster,
        }
    }
}

/// An API server under test with a namespace of its own (deleted when the target drops).
pub struct Target {
    client: kube::Client,
    namespace: String,
    kind: TargetKind,
    /// Keeps the in-process sim alive for the test.
    sim: Option<Sim>,
    /// The kubeconfig kubectl is given: the cluster's, or a file written for the sim.
    kubeconfig: Kubeconfig,
    /// The cluster's client configuration, for the namespace's deletion on drop: that needs a
    /// client of its own, since `client`'s connection tasks run on the test's runtime, which is
    /// blocked while drop waits.
    cluster_config: Option<kube::Config>,
}

/// Where a [`Target`]'s kubeconfig is, for kubectl.
enum Kubeconfig {
    /// The cluster's (from [`KUBECONFIG_ENV`]).
    Path(std::path::PathBuf),
    /// Written for the sim; deleted with the target.
    Temp(tempfile::NamedTempFile),
}

/// A response as the client saw it: status, headers and body bytes.
#[derive(Debug)]
pub struct Raw {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: http::HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

impl Raw {
    /// The body as JSON; panics with the body when it is not JSON (the test then fails there).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}), status {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `content-type` header, or "".
    pub fn content_type(&self) -> &str {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl Target {
    /// A target for one test: the cluster of [`KUBECONFIG_ENV`] if set, else a new sim with its
    /// kubelet on (plain HTTP). Either way a fresh namespace is created for the test.
    pub async fn new() -> Target {
        Target::with_sim_config(podline_testkit::test_config()).await
    }

    /// Like [`Target::new`], with this sim configuration when no cluster is given.
    pub async fn with_sim_config(config: SimConfig) -> Target {
        let (client, kind, sim, kubeconfig, cluster_config) = match std::env::var_os(KUBECONFIG_ENV)
        {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(&path)
                    .unwrap_or_else(|e| panic!("{KUBECONFIG_ENV}={path:?}: {e}"));
                let mut config =
                    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                        .await
                        .unwrap_or_else(|e| panic!("{KUBECONFIG_ENV}={path:?}: {e}"));
                // The suite checks each answer as the server gives it: kube's silent retries of
                // 429, 503 and 504 would hide them (and wait out a budget's 429 for minutes).
                config.default_retry = false;
                let client = kube::Client::try_from(config.clone())
                    .unwrap_or_else(|e| panic!("cannot build a client: {e}"));
                let path = std::path::PathBuf::from(&path);
                (
                    client,
                    TargetKind::Cluster,
                    None,
                    Kubeconfig::Path(path),
                    Some(config),
                )
            }
            None => {
                let sim = podline_testkit::start_sim(config).await;
                let mut sim_config = podline_testkit::kube_config(&sim).await;
                sim_config.default_retry = false;
                let client = kube::Client::try_from(sim_config)
                    .unwrap_or_else(|e| panic!("cannot build a client: {e}"));
                let file = podline_testkit::kubeconfig_file(&sim);
                (
                    client,
                    TargetKind::Sim,
                    Some(sim),
                    Kubeconfig::Temp(file),
                    None,
                )
            }
        };
        let namespace = format!("podline-conformance-{:08x}", rand::random::<u32>());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create namespace {namespace}: {e}"));
        Target {
            client,
            namespace,
            kind,
            sim,
            kubeconfig,
            cluster_config,
        }
    }

    /// Which kind of server this is.
    pub fn kind(&self) -> TargetKind {
        self.kind
    }

    /// Whether this target may differ from kube-apiserver in this known way.
    pub fn tolerates(&self, difference: Difference) -> bool {
        difference.applies_to(self.kind)
    }

    /// The in-process sim, when the target is one (for tests that inject a fault or read the
    /// sim's ledger; they skip the part on a cluster).
    pub fn sim(&self) -> Option<&Sim> {
        self.sim.as_ref()
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A kube client for the target (kube-rs defaults).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// `/api/v1/namespaces/<ns>/<resource>`, the path of a core resource in the test namespace.
    pub fn core_path(&self, resource: &str) -> String {
        format!("/api/v1/namespaces/{}/{resource}", self.namespace)
    }

    /// Sends one request as the client would, and returns the answer whatever its status.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> Raw {
        let mut request = Request::builder().method(method.clone()).uri(path);
        if let Some(content_type) = content_type {
            request = request.header(http::header::CONTENT_TYPE, content_type);
        }
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        let request = request
            .body(kube::client::Body::from(body))
            .unwrap_or_else(|e| panic!("bad request {method} {path}: {e}"));
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.send(request))
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: no answer within 30 s"))
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status();
        let headers = response.headers().clone();
        let body = tokio::time::timeout(
            Duration::from_secs(30),
            response.into_body().collect_bytes(),
        )
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: body not complete within 30 s"))
        .unwrap_or_else(|e| panic!("{method} {path}: reading the body: {e}"))
        .to_vec();
        Raw {
            status,
            headers,
            body,
        }
    }

    /// GET `path` sending `token` as the bearer token and no other credential (no client
    /// certificate), for tests of authentication.
    pub async fn get_with_token(&self, token: &str, path: &str) -> Raw {
        let mut config = match (&self.sim, &self.cluster_config) {
            (Some(sim), _) => podline_testkit::kube_config(sim).await,
            (None, Some(config)) => config.clone(),
            (None, None) => panic!("a target is a sim or a cluster"),
        };
        let file = tempfile::NamedTempFile::new().expect("a temporary file");
        std::fs::write(file.path(), token).expect("write the token");
        config.auth_info = kube::config::AuthInfo {
            token_file: Some(file.path().to_string_lossy().into_owned()),
            ..kube::config::AuthInfo::default()
        };
        config.default_retry = false;
        let client =
            kube::Client::try_from(config).unwrap_or_else(|e| panic!("cannot build a client: {e}"));
        let request = Request::builder()
            .uri(path)
            .body(kube::client::Body::empty())
            .unwrap_or_else(|e| panic!("bad request GET {path}: {e}"));
        let response = tokio::time::timeout(Duration::from_secs(30), client.send(request))
            .await
            .unwrap_or_else(|_| panic!("GET {path}: no answer within 30 s"))
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect_bytes()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: reading the body: {e}"))
            .to_vec();
        Raw {
            status,
            headers,
            body,
        }
    }

    /// GET `path` (JSON).
    pub async fn get(&self, path: &str) -> Raw {
        self.request(
            Method::GET,
            path,
            None,
            Some("application/json"),
            Vec::new(),
        )
        .await
    }

    /// Sends `body` as JSON with `method` to `path`.
    pub async fn send_json(&self, method: Method, path: &str, body: &Value) -> Raw {
        self.request(
            method,
            path,
            Some("application/json"),
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    /// Runs kubectl against the target in the test's namespace (at most 30 s) and returns what
    /// it did.
    pub async fn kubectl(&self, args: &[&str]) -> std::process::Output {
        let kubeconfig = match &self.kubeconfig {
            Kubeconfig::Path(path) => path.as_path(),
            Kubeconfig::Temp(file) => file.path(),
        };
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--namespace")
            .arg(&self.namespace)
            .args(args)
            .kill_on_drop(true);
        tokio::time::timeout(Duration::from_secs(30), cmd.output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?}: no answer within 30 s"))
            .unwrap_or_else(|e| panic!("kubectl {args:?} does not run: {e}"))
    }

    /// Whether the target has a node to run pods: the sim's kubelet, or on a cluster at least
    /// one Node. Tests of what a kubelet or the scheduler does call it first and return early
    /// (saying so) when it is false, so a cluster without nodes skips them rather than failing.
    pub async fn has_nodes(&self) -> bool {
        if self.kind == TargetKind::Sim {
            return self
                .sim
                .as_ref()
                .is_some_and(|sim| sim.cluster().kubelet_enabled());
        }
        let nodes = self.get("/api/v1/nodes").await.json();
        nodes["items"].as_array().is_some_and(|i| !i.is_empty())
    }

    /// How many Nodes the target has (the `0/N nodes are available` of scheduler messages).
    pub async fn node_count(&self) -> usize {
        let nodes = self.get("/api/v1/nodes").await.json();
        nodes["items"].as_array().map_or(0, Vec::len)
    }

    /// A node a pod can be bound to: the sim's simulated node, or on a cluster the first node
    /// without taints (else the first node).
    pub async fn node_name(&self) -> String {
        if self.kind == TargetKind::Sim {
            return podline_sim::KubeletConfig::default().node_name;
        }
        let nodes = self.get("/api/v1/nodes").await.json();
        let items = nodes["items"].as_array().cloned().unwrap_or_default();
        let untainted = items
            .iter()
            .find(|n| n["spec"]["taints"].as_array().is_none_or(Vec::is_empty));
        untainted
            .or(items.first())
            .and_then(|n| n["metadata"]["name"].as_str())
            .unwrap_or_else(|| panic!("the cluster lists no nodes: {nodes}"))
            .to_owned()
    }

    /// The events a watch of `resource` (a path from [`Target::core_path`]) replays for the object
    /// `name` after `resource_version`, for `seconds` (the watch's `timeoutSeconds`).
    pub async fn events_since(
        &self,
        resource: &str,
        name: &str,
        resource_version: &str,
        seconds: u32,
    ) -> Vec<Value> {
        let r = self
            .get(&format!(
                "{resource}?watch=1&fieldSelector=metadata.name%3D{name}&resourceVersion={resource_version}&timeoutSeconds={seconds}"
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("event {l}: {e}")))
            .collect()
    }

    /// Creates a pod from JSON in the test namespace and returns the answer.
    pub async fn create_pod(&self, pod: &Value) -> Raw {
        self.send_json(Method::POST, &self.core_path("pods"), pod)
            .await
    }
}

impl Drop for Target {
    /// Deletes the test's namespace on a cluster (a sim simply stops). Runs on a thread of its own
    /// because drop can't await and the test's runtime may be shutting down.
    fn drop(&mut self) {
        let Some(config) = self.cluster_config.clone() else {
            return;
        };
        let namespace = self.namespace.clone();
        let joined = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                eprintln!("cannot delete namespace {namespace}: no runtime");
                return;
            };
            runtime.block_on(async move {
                let client = match kube::Client::try_from(config) {
                    Ok(client) => client,
                    Err(err) => {
                        eprintln!("cannot delete namespace {namespace}: {err}");
                        return;
                    }
                };
                let namespaces: Api<Namespace> = Api::all(client);
                if let Err(err) = namespaces
                    .delete(&namespace, &DeleteParams::default())
                    .await
                {
                    eprintln!("cannot delete namespace {namespace}: {err}");
                }
            });
        })
        .join();
        if joined.is_err() {
            eprintln!("deleting namespace {} panicked", self.namespace);
        }
    }
}

/// A minimal valid pod named `name` (one container, never restarted), as JSON.
pub fn pod(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "conformance"}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hello"]}],
            "restartPolicy": "Never"
        }
    })
}

/// Asserts that `raw` is a kube-apiserver Status answer with this code and reason, and returns
/// its message.
pub fn assert_status(raw: &Raw, code: u16, reason: &str) -> String {
    assert_eq!(raw.status.as_u16(), code, "status; body: {}", raw.text());
    let status = raw.json();
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["apiVersion"], "v1", "{status}");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["code"], code, "{status}");
    status["message"].as_str().unwrap_or_default().to_owned()
}
