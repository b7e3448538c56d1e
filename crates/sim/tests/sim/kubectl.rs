//! kubectl against the sim over HTTPS, each run bounded by a timeout: over HTTP/2 (what kubectl
//! negotiates by ALPN when offered, as against a real API server) and over HTTP/1.1 (a sim that
//! does not offer h2).

use std::time::Duration;

use podline_sim::{Sim, SimConfig};
use tokio::process::Command;

use super::kubectl_kit::{kubectl, ok};

async fn https_sim() -> Sim {
    podline_testkit::start_sim(SimConfig::default().kubelet_enabled(false)).await
}

async fn https_sim_http1_only() -> Sim {
    podline_testkit::start_sim(SimConfig::default().kubelet_enabled(false).http1_only(true)).await
}

/// Starts kubectl with its stdout piped, for commands that stream (`get -w`, `logs -f`); it is
/// killed when the handle is dropped.
fn kubectl_streaming(kubeconfig: &std::path::Path, args: &[&str]) -> tokio::process::Child {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs")
}

#[tokio::test]
async fn kubectl_runs_gets_patches_selects_and_deletes_pods_over_http2() {
    let sim = https_sim().await;
    kubectl_crud(&sim).await;
    let (http1, http2) = sim.requests_by_version();
    assert!(
        http2 > 0 && http1 == 0,
        "kubectl spoke HTTP/2: {http1} HTTP/1.1 and {http2} HTTP/2 requests"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_runs_gets_patches_selects_and_deletes_pods_over_http1() {
    let sim = https_sim_http1_only().await;
    kubectl_crud(&sim).await;
    let (http1, http2) = sim.requests_by_version();
    assert!(
        http1 > 0 && http2 == 0,
        "kubectl fell back to HTTP/1.1: {http1} HTTP/1.1 and {http2} HTTP/2 requests"
    );
    sim.shutdown().await;
}

async fn kubectl_crud(sim: &Sim) {
    let kc = podline_testkit::kubeconfig_file(sim);
    let path = kc.path();
    ok(&kubectl(
        path,
        &[
            "run",
            "hello",
            "--image=busybox",
            "--restart=Never",
            "--labels=app=web",
        ],
    )
    .await);
    ok(&kubectl(
        path,
        &[
            "run",
            "other",
            "--image=busybox",
            "--restart=Never",
            "--labels=app=db",
        ],
    )
    .await);
    let json = ok(&kubectl(path, &["get", "pod", "hello", "-o", "json"]).await);
    let pod: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(pod["metadata"]["name"], "hello");
    assert_eq!(pod["status"]["phase"], "Pending");
    let names = ok(&kubectl(path, &["get", "pods", "-l", "app=web", "-o", "name"]).await);
    assert_eq!(names.trim(), "pod/hello");
    ok(&kubectl(
        path,
        &[
            "patch",
            "pod",
            "hello",
            "--subresource=status",
            "-p",
            r#"{"status":{"phase":"Running"}}"#,
        ],
    )
    .await);
    let phase = ok(&kubectl(
        path,
        &["get", "pod", "hello", "-o", "jsonpath={.status.phase}"],
    )
    .await);
    assert_eq!(phase, "Running");
    ok(&kubectl(path, &["delete", "pod", "other", "--wait=false"]).await);
    let names = ok(&kubectl(path, &["get", "pods", "-o", "name"]).await);
    assert_eq!(names.trim(), "pod/hello");
}

#[tokio::test]
async fn kubectl_get_pods_watch_sees_a_new_pod_arrive() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let mut child = kubectl_streaming(
        kc.path(),
        &["get", "pods", "-w", "-o", "name", "--request-timeout=0"],
    );
    let stdout = child.stdout.take().expect("stdout");
    // Give kubectl time to list and start watching, then create a pod through the API.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    let started = podline_testkit::wait_until(Duration::from_secs(20), || async {
        sim.counts().get("watch", "pods") > 0
    })
    .await;
    assert!(started, "kubectl started a watch");
    pods.create(&Default::default(), &super::common::pod("arrives"))
        .await
        .expect("create");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line within 20 s")
        .expect("read");
    assert_eq!(line.as_deref(), Some("pod/arrives"));
    child.kill().await.expect("kill");
    sim.shutdown().await;
}

/// `kubectl logs -f` follows a running container's log as it is written and exits when the
/// container terminates (the sim's kubelet spreads `log-lines` over the run).
#[tokio::test]
async fn kubectl_logs_follow_streams_until_the_container_exits() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    ok(&kubectl(
        path,
        &[
            "run",
            "talker",
            "--image=busybox",
            "--restart=Never",
            "--annotations=sim.podline.io/duration=2s",
            "--annotations=sim.podline.io/log-lines=5",
        ],
    )
    .await);
    ok(&kubectl(
        path,
        &[
            "wait",
            "--for=condition=Ready",
            "pod/talker",
            "--timeout=20s",
        ],
    )
    .await);
    // Started while the container runs, so the lines after the first arrive through the follow.
    let out = ok(&kubectl(path, &["logs", "-f", "talker"]).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["line 1", "line 2", "line 3", "line 4", "line 5"],
        "kubectl logs -f printed: {out}"
    );
    ok(&kubectl(
        path,
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Succeeded",
            "pod/talker",
            "--timeout=10s",
        ],
    )
    .await);
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_creates_a_namespace_and_runs_a_pod_in_it() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    // kubectl sends this create as protobuf only.
    ok(&kubectl(path, &["create", "namespace", "team-a"]).await);
    let json = ok(&kubectl(path, &["get", "namespace", "team-a", "-o", "json"]).await);
    let namespace: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(namespace["metadata"]["name"], "team-a");
    assert!(namespace["metadata"]["uid"].is_string());
    ok(&kubectl(
        path,
        &[
            "run",
            "hello",
            "-n",
            "team-a",
            "--image=busybox",
            "--restart=Never",
        ],
    )
    .await);
    let names = ok(&kubectl(path, &["get", "pods", "-n", "team-a", "-o", "name"]).await);
    assert_eq!(names.trim(), "pod/hello");
    let again = kubectl(path, &["create", "namespace", "team-a"]).await;
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("AlreadyExists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    sim.shutdown().await;
}

/// `kubectl get pods` prints what it prints on a cluster: the sim answers its
/// `as=Table;v=v1;g=meta.k8s.io` request with kubectl's pod columns (Name, Ready, Status,
/// Restarts, Age; `-o wide` adds IP, Node, Nominated Node, Readiness Gates), computed per pod.
#[tokio::test]
async fn kubectl_get_pods_prints_the_server_side_table_columns() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&Default::default(), &super::common::pod("table-pod"))
        .await
        .expect("create");
    let out = ok(&kubectl(kc.path(), &["get", "pods"]).await);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(&row[..4], ["table-pod", "0/1", "Pending", "0"], "{out}");
    assert!(row[4].ends_with('s'), "an age in seconds: {out}");
    let wide = ok(&kubectl(kc.path(), &["get", "pods", "-o", "wide"]).await);
    let header = wide.lines().next().expect("a header");
    for column in ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"] {
        assert!(header.contains(column), "{column} in {wide}");
    }
    assert!(
        wide.lines().nth(1).expect("a row").contains("<none>"),
        "{wide}"
    );
    let namespaces = ok(&kubectl(kc.path(), &["get", "namespaces"]).await);
    let header: Vec<&str> = namespaces
        .lines()
        .next()
        .expect("a header")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "STATUS", "AGE"], "{namespaces}");
    assert!(namespaces.contains("Active"), "{namespaces}");
    sim.shutdown().await;
}

/// `kubectl get pods -w` prints the header once, then a row per change: its list is a Table with
/// column definitions, and its watch's Tables, converted per event, keep kubectl's columns (the
/// first event carries the definitions, later ones none, as kube-apiserver sends them).
#[tokio::test]
async fn kubectl_get_pods_watch_prints_one_header_then_a_row_per_change() {
    use tokio::io::AsyncBufReadExt as _;

    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&Default::default(), &super::common::pod("watched-1"))
        .await
        .expect("create");
    let mut child = kubectl_streaming(kc.path(), &["get", "pods", "--watch"]);
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next_line = async || {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("kubectl printed no more lines"))
            .expect("reading kubectl's output")
            .expect("kubectl ended early");
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let header = next_line().await;
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let first = next_line().await;
    assert_eq!(
        &first[..4],
        ["watched-1", "0/1", "Pending", "0"],
        "{first:?}"
    );
    pods.create(&Default::default(), &super::common::pod("watched-2"))
        .await
        .expect("create");
    let second = next_line().await;
    assert_eq!(
        &second[..4],
        ["watched-2", "0/1", "Pending", "0"],
        "a row, not a second header: {second:?}"
    );
    child.kill().await.expect("kill kubectl");
    sim.shutdown().await;
}

/// The kubelet registers its node, so `kubectl get nodes` prints kubectl's node columns (Name,
/// Status, Roles, Age, Version; `-o wide` adds the IPs, OS image, kernel and runtime) with the
/// node Ready; `kubectl cordon` makes it `Ready,SchedulingDisabled` and a new pod waits
/// Unschedulable (FailedScheduling) until `kubectl uncordon`; a sim without a kubelet, like a
/// control plane without nodes, lists none.
#[tokio::test]
async fn kubectl_get_nodes_lists_the_kubelets_ready_node() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let node = podline_sim::KubeletConfig::default().node_name;
    let out = ok(&kubectl(kc.path(), &["get", "nodes"]).await);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{out}"
    );
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(
        [row[0], row[1], row[2], row[4]],
        [node.as_str(), "Ready", "<none>", "v1.32.4+podline-sim"],
        "{out}"
    );
    let wide = ok(&kubectl(kc.path(), &["get", "nodes", "-o", "wide"]).await);
    let header = wide.lines().next().expect("a header");
    for column in [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ] {
        assert!(header.contains(column), "{column} in {wide}");
    }
    let row = wide.lines().nth(1).expect("a row");
    assert!(
        row.contains("172.18.0.2") && row.contains("podline-sim://"),
        "{wide}"
    );
    // Its heartbeat Lease, as `kubectl get leases -n kube-node-lease` shows on a cluster.
    let leases = ok(&kubectl(kc.path(), &["get", "leases", "-n", "kube-node-lease"]).await);
    let row: Vec<&str> = leases
        .lines()
        .nth(1)
        .expect("a lease row")
        .split_whitespace()
        .collect();
    assert_eq!([row[0], row[1]], [node.as_str(), node.as_str()], "{leases}");

    ok(&kubectl(kc.path(), &["cordon", &node]).await);
    let out = ok(&kubectl(kc.path(), &["get", "node", &node, "--no-headers"]).await);
    assert!(out.contains("Ready,SchedulingDisabled"), "{out}");
    // kube-controller-manager's node-lifecycle controller taints a cordoned node.
    let taints = || {
        let kc = kc.path().to_owned();
        let node = node.clone();
        async move {
            ok(&kubectl(
                &kc,
                &["get", "node", &node, "-o", "jsonpath={.spec.taints[*].key}"],
            )
            .await)
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), || async {
            taints().await.trim() == "node.kubernetes.io/unschedulable"
        })
        .await,
        "a cordoned node is tainted unschedulable: {}",
        taints().await
    );

    // Cordoned, the node takes no new pod: it waits Unschedulable until the node is uncordoned.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&Default::default(), &super::common::pod("waits"))
        .await
        .expect("create");
    let unschedulable = || {
        let pods = pods.clone();
        async move {
            pods.get("waits").await.ok().is_some_and(|p| {
                p.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                    })
            })
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), unschedulable).await,
        "a pod created on a cordoned node waits Unschedulable"
    );
    let messages = ok(&kubectl(
        kc.path(),
        &[
            "get",
            "events",
            "--field-selector",
            "reason=FailedScheduling",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    )
    .await);
    assert!(messages.contains("were unschedulable"), "{messages}");
    ok(&kubectl(kc.path(), &["uncordon", &node]).await);
    let bound = || {
        let pods = pods.clone();
        async move {
            pods.get("waits")
                .await
                .ok()
                .and_then(|p| p.spec.and_then(|s| s.node_name))
                .is_some()
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), bound).await,
        "uncordoned, the node takes the pod"
    );
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), || async {
            taints().await.trim().is_empty()
        })
        .await,
        "uncordoned, the node loses the taint: {}",
        taints().await
    );
    sim.shutdown().await;

    let bare = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&bare);
    let out = kubectl(kc.path(), &["get", "nodes"]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No resources found"),
        "{out:?}"
    );
    bare.shutdown().await;
}

/// `kubectl get events` prints kubectl's event columns (Last Seen, Type, Reason, Object,
/// Message; `-o wide` adds Subobject, Source, First Seen, Count, Name) for the kubelet's events.
#[tokio::test]
async fn kubectl_get_events_prints_kubectls_event_columns() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&Default::default(), &super::common::pod("evented"))
        .await
        .expect("create");
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    let started = || {
        let events = events.clone();
        async move {
            events.list(&Default::default()).await.is_ok_and(|list| {
                list.items
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("Started"))
            })
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), started).await,
        "the kubelet reports the pod's start"
    );
    let out = ok(&kubectl(kc.path(), &["get", "events"]).await);
    let header: Vec<&str> = out
        .lines()
        .next()
        .expect("a header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{out}"
    );
    let scheduled = out
        .lines()
        .find(|line| line.contains("Scheduled"))
        .unwrap_or_else(|| panic!("a Scheduled row in {out}"));
    let row: Vec<&str> = scheduled.split_whitespace().collect();
    assert_eq!(
        row[1..5],
        ["Normal", "Scheduled", "pod/evented", "Successfully"],
        "{out}"
    );
    let wide = ok(&kubectl(kc.path(), &["get", "events", "-o", "wide"]).await);
    let header = wide.lines().next().expect("a header");
    for column in ["SUBOBJECT", "SOURCE", "FIRST SEEN", "COUNT", "NAME"] {
        assert!(header.contains(column), "{column} in {wide}");
    }
    let pulled = wide
        .lines()
        .find(|line| line.contains("Pulled"))
        .unwrap_or_else(|| panic!("a Pulled row in {wide}"));
    assert!(pulled.contains("spec.containers{main}"), "{wide}");
    assert!(pulled.contains("kubelet, sim-node-1"), "{wide}");
    sim.shutdown().await;
}

/// `kubectl create poddisruptionbudget` and `kubectl get pdb` print kubectl's budget columns
/// once the disruption controller has counted the pods, and `kubectl drain` is refused by the
/// budget with kube-apiserver's 429 (kubectl retries it until its timeout), leaving the pods.
#[tokio::test]
async fn kubectl_drain_is_held_back_by_a_disruption_budget() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let node = podline_sim::KubeletConfig::default().node_name;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    for name in ["web-a", "web-b"] {
        let mut pod = super::common::pod_json(name, serde_json::json!({"app": "web"}));
        pod.metadata.annotations =
            Some([("sim.podline.io/duration".to_owned(), "1h".to_owned())].into());
        pods.create(&Default::default(), &pod)
            .await
            .expect("create");
    }
    ok(&kubectl(
        kc.path(),
        &[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=2",
        ],
    )
    .await);
    let counted = || async {
        ok(&kubectl(
            kc.path(),
            &[
                "get",
                "pdb",
                "web",
                "-o",
                "jsonpath={.status.currentHealthy}",
            ],
        )
        .await)
            == "2"
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), counted).await,
        "the controller counts both ready pods"
    );
    let out = ok(&kubectl(kc.path(), &["get", "pdb"]).await);
    let mut lines = out.lines();
    let header = lines.next().expect("a header");
    for column in [
        "NAME",
        "MIN AVAILABLE",
        "MAX UNAVAILABLE",
        "ALLOWED DISRUPTIONS",
        "AGE",
    ] {
        assert!(header.contains(column), "{column} in {out}");
    }
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(row[..4], ["web", "2", "N/A", "0"], "{out}");

    let drain = kubectl(
        kc.path(),
        &[
            "drain",
            &node,
            "--force",
            "--pod-selector=app=web",
            "--timeout=2s",
        ],
    )
    .await;
    assert!(!drain.status.success(), "{drain:?}");
    let stderr = String::from_utf8_lossy(&drain.stderr);
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    let left = pods.list(&Default::default()).await.expect("list").items;
    assert_eq!(left.len(), 2, "the budget kept both pods");
    ok(&kubectl(kc.path(), &["uncordon", &node]).await);
    sim.shutdown().await;
}

/// `kubectl taint`: a NoSchedule taint keeps a pod that does not tolerate it Pending with
/// kube-scheduler's message, a pod that tolerates it runs, and once the taint is removed the
/// waiting pod is bound.
#[tokio::test]
async fn kubectl_taint_keeps_pods_that_do_not_tolerate_it_pending() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let node = podline_sim::KubeletConfig::default().node_name;
    ok(&kubectl(kc.path(), &["taint", "nodes", &node, "gpu=a100:NoSchedule"]).await);
    let taints = ok(&kubectl(
        kc.path(),
        &["get", "node", &node, "-o", "jsonpath={.spec.taints[*].key}"],
    )
    .await);
    assert_eq!(taints.trim(), "gpu");

    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&Default::default(), &super::common::pod("plain"))
        .await
        .expect("create");
    let mut tolerant = super::common::pod("tolerant");
    tolerant
        .spec
        .get_or_insert_with(Default::default)
        .tolerations = Some(vec![k8s_openapi::api::core::v1::Toleration {
        key: Some("gpu".to_owned()),
        operator: Some("Equal".to_owned()),
        value: Some("a100".to_owned()),
        effect: Some("NoSchedule".to_owned()),
        ..Default::default()
    }]);
    pods.create(&Default::default(), &tolerant)
        .await
        .expect("create");
    let bound = |name: &'static str| {
        let pods = pods.clone();
        async move {
            pods.get(name)
                .await
                .ok()
                .and_then(|p| p.spec.and_then(|s| s.node_name))
                .is_some()
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), || bound("tolerant")).await,
        "a pod tolerating the taint is placed"
    );
    let refused = || {
        let pods = pods.clone();
        async move {
            pods.get("plain").await.ok().is_some_and(|p| {
                p.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.reason.as_deref() == Some("Unschedulable")
                            && c.message.as_deref().is_some_and(|m| {
                                m.contains("1 node(s) had untolerated taint {gpu: a100}")
                            })
                    })
            })
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), refused).await,
        "a pod without the toleration waits Unschedulable"
    );
    ok(&kubectl(kc.path(), &["taint", "nodes", &node, "gpu-"]).await);
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), || bound("plain")).await,
        "the taint removed, the node takes the pod"
    );
    sim.shutdown().await;
}

/// `kubectl apply --server-side` creates a pod, re-applies a change of its own field, and is
/// refused with kube's conflict message when another manager owns the field, until forced, all
/// with kubectl's default validation (the sim's OpenAPI documents tell it the server validates).
#[tokio::test]
async fn kubectl_apply_server_side_creates_updates_and_reports_conflicts() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = |image: &str, label: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: applied\n  labels:\n    tier: {label}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
        )
    };
    let file = dir.path().join("pod.yaml");
    let file_arg = file.to_str().expect("utf-8 path");
    std::fs::write(&file, manifest("busybox:1.36", "one")).expect("write");
    let out = ok(&kubectl(path, &["apply", "--server-side", "-f", file_arg]).await);
    assert!(out.contains("pod/applied serverside-applied"), "{out}");
    std::fs::write(&file, manifest("busybox:1.36", "two")).expect("write");
    ok(&kubectl(path, &["apply", "--server-side", "-f", file_arg]).await);
    let labels = ok(&kubectl(
        path,
        &[
            "get",
            "pod",
            "applied",
            "-o",
            "jsonpath={.metadata.labels.tier}",
        ],
    )
    .await);
    assert_eq!(labels, "two");
    let managers = ok(&kubectl(
        path,
        &[
            "get",
            "pod",
            "applied",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}/{.metadata.managedFields[*].operation}",
        ],
    )
    .await);
    assert_eq!(managers, "kubectl/Apply", "{managers}");
    // Another manager applies a different image: a conflict with the first one.
    std::fs::write(&file, manifest("busybox:1.37", "two")).expect("write");
    let refused = kubectl(
        path,
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            file_arg,
        ],
    )
    .await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(r#"conflict with "kubectl": .spec.containers[name="main"].image"#),
        "{stderr}"
    );
    ok(&kubectl(
        path,
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            file_arg,
        ],
    )
    .await);
    let image = ok(&kubectl(
        path,
        &[
            "get",
            "pod",
            "applied",
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ],
    )
    .await);
    assert_eq!(image, "busybox:1.37");
    sim.shutdown().await;
}
