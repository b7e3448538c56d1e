//! Choosing the containers whose logs a run follows ([`LogSelection`]), each resumed exactly
//! after cut streams, and the lifecycle events a sink receives; against the sim, with the
//! stream cuts injected through its fault plan.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use podline_launch::{
    Cancel, Containers, LaunchConfig, Launcher, Lifecycle, LogConfig, LogSelection, LogSink,
    TaskSpec,
};
use podline_sim::fault::{FaultAction, FaultRule, FaultVerb};
use podline_testkit::{client, start_sim, test_config};

/// Records each line with its container, and the lifecycle events with the main container's
/// state in the pod each carries.
#[derive(Default)]
struct Recorder {
    lines: Mutex<Vec<(String, bool, String)>>,
    events: Mutex<Vec<(Lifecycle, Option<String>)>>,
}

impl LogSink for Recorder {
    fn write_line(&self, _line: &[u8]) {
        panic!("every line goes through container_line");
    }

    fn container_line(&self, container: &str, prefixed: bool, text: &[u8], _complete: bool) {
        self.lines.lock().unwrap().push((
            container.to_owned(),
            prefixed,
            String::from_utf8_lossy(text).into_owned(),
        ));
    }

    fn lifecycle(&self, event: Lifecycle, pod: Option<&Pod>) {
        // The main container's state then (terminated, running or waiting), or, while it has
        // not started, "started" if another container of the pod has: the launcher's start is
        // the pod's first started container, as a kubelet starts containers one by one.
        let statuses = pod
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(&[]);
        let started = |c: &&k8s_openapi::api::core::v1::ContainerStatus| {
            c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        };
        let state = statuses
            .iter()
            .find(|c| c.name == "base")
            .and_then(|c| c.state.as_ref())
            .map(|s| {
                if s.terminated.is_some() {
                    "terminated".to_owned()
                } else if s.running.is_some() {
                    "running".to_owned()
                } else if statuses.iter().any(|c| started(&c)) {
                    "started".to_owned()
                } else {
                    "waiting".to_owned()
                }
            });
        self.events.lock().unwrap().push((event, state));
    }
}

impl Recorder {
    fn of(&self, container: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _, _)| c == container)
            .map(|(_, _, t)| t.clone())
            .collect()
    }
}

fn config(selection: LogSelection) -> LaunchConfig {
    LaunchConfig {
        schedule_timeout: Duration::from_secs(10),
        startup_timeout: Duration::from_secs(10),
        log: LogConfig {
            stall_timeout: Duration::from_millis(300),
            post_termination: Duration::from_secs(10),
            ..LogConfig::default()
        },
        log_selection: Some(selection),
        ..LaunchConfig::default()
    }
}

/// A pod of three scripted containers: `base` and `side` write 120 numbered lines each over
/// two seconds, `quiet` one line.
fn task() -> TaskSpec {
    let container = |name: &str| Container {
        name: name.into(),
        image: Some("busybox".into()),
        ..Container::default()
    };
    let annotations: BTreeMap<String, String> = [
        ("log-lines.base", "120"),
        ("log-lines.side", "120"),
        ("logs.quiet", "not followed"),
        ("duration", "2s"),
    ]
    .into_iter()
    .map(|(k, v)| (format!("sim.podline.io/{k}"), v.to_owned()))
    .collect();
    TaskSpec {
        annotations,
        template: Some(Pod {
            spec: Some(PodSpec {
                containers: vec![container("base"), container("side"), container("quiet")],
                ..PodSpec::default()
            }),
            ..Pod::default()
        }),
        ..TaskSpec::default()
    }
}

/// Two containers chosen by name, their streams cut 12 times mid-run: each container's lines
/// arrive exactly once and in order, tagged with their container (prefixed, as several are
/// followed); the third container is not followed; the sink sees the pod's lifecycle in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chosen_containers_should_each_be_resumed_exactly_after_cut_streams() {
    let sim = start_sim(test_config()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Reset {
            after_bytes: None,
            after_events: Some(9),
        })
        .verb(FaultVerb::Log)
        .resource("pods/log")
        .times(12),
    );
    let launcher = Launcher::new(
        client(&sim).await,
        "default",
        config(LogSelection {
            containers: Containers::Named(vec!["base".into(), "side".into(), "nope".into()]),
            init_containers: Containers::None,
        }),
    );
    let sink = Arc::new(Recorder::default());
    let result = launcher.run(&task(), sink.clone(), &Cancel::new()).await;
    assert!(result.succeeded(), "{result:?}");
    let expected: Vec<String> = (1..=120).map(|i| format!("line {i}")).collect();
    assert_eq!(sink.of("base"), expected);
    assert_eq!(sink.of("side"), expected);
    assert!(sink.of("quiet").is_empty(), "not chosen");
    assert!(
        sink.lines
            .lock()
            .unwrap()
            .iter()
            .all(|(_, prefixed, _)| *prefixed)
    );
    assert!(result.log_reconnects >= 12, "{}", result.log_reconnects);
    let events: Vec<Lifecycle> = sink.events.lock().unwrap().iter().map(|e| e.0).collect();
    assert_eq!(
        events,
        [
            Lifecycle::Created,
            Lifecycle::Started,
            Lifecycle::Completed,
            Lifecycle::Teardown,
            Lifecycle::Cleanup
        ]
    );
    let events = sink.events.lock().unwrap().clone();
    assert!(
        matches!(
            events[1].1.as_deref(),
            Some("running" | "terminated" | "started")
        ),
        "{events:?}"
    );
    assert_eq!(events[2].1.as_deref(), Some("terminated"), "{events:?}");
}

/// One container chosen, not the main one: only its lines, unprefixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_chosen_container_should_be_followed_alone_unprefixed() {
    let sim = start_sim(test_config()).await;
    let launcher = Launcher::new(
        client(&sim).await,
        "default",
        config(LogSelection {
            containers: Containers::Named(vec!["quiet".into()]),
            init_containers: Containers::None,
        }),
    );
    let sink = Arc::new(Recorder::default());
    let result = launcher.run(&task(), sink.clone(), &Cancel::new()).await;
    assert!(result.succeeded(), "{result:?}");
    assert_eq!(
        sink.lines.lock().unwrap().clone(),
        [("quiet".to_owned(), false, "not followed".to_owned())]
    );
}
