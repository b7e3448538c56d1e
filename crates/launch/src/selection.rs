//! Which containers' logs a run follows, and the pod's lifecycle as a run reports it.
//!
//! KubernetesPodOperator lets a task choose the containers whose logs reach the task log (the
//! base container, all of them, one or a list by name) and whether the init containers' logs
//! come first. [`LogSelection`] is that choice; [`plan`] turns it into the containers to follow
//! for one pod. [`Lifecycle`] names the points of a run that wrappers hook into (Airflow's
//! `KubernetesPodOperatorCallback`s): they reach the [`crate::LogSink`], in the order they
//! happen, with the pod as it was then.

use k8s_openapi::api::core::v1::{Container, Pod};

/// A set of containers of a pod, chosen by kind or by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Containers {
    /// None of them.
    #[default]
    None,
    /// The run's main container only (for init containers: none).
    Main,
    /// All of them.
    All,
    /// These, by name; a name the pod does not have is skipped with a warning.
    Named(Vec<String>),
}

/// Which logs a run follows, when the plain [`crate::LogMode`] choices are not enough.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSelection {
    /// Regular containers whose logs are followed, as they run.
    pub containers: Containers,
    /// Init containers whose logs are read before the others, each one whole and in the pod's
    /// order (init containers that keep running, sidecars with `restartPolicy: Always`, are
    /// followed next to the regular containers instead).
    pub init_containers: Containers,
}

impl Default for LogSelection {
    fn default() -> Self {
        Self {
            containers: Containers::Main,
            init_containers: Containers::None,
        }
    }
}

/// The containers one run follows, in order, each with whether its lines get the `[name] `
/// prefix (they do when more than one container is followed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogPlan {
    /// Init containers read one after the other, before [`LogPlan::concurrent`] start.
    pub init_first: Vec<String>,
    /// Containers followed at the same time.
    pub concurrent: Vec<String>,
    /// Whether lines are prefixed with their container's name.
    pub prefixed: bool,
    /// Requested names the pod does not have.
    pub missing: Vec<String>,
}

/// The plan for `pod` (its main container `main`) under `selection`.
pub fn plan(selection: &LogSelection, pod: &Pod, main: &str) -> LogPlan {
    let spec = pod.spec.as_ref();
    let regular: Vec<&Container> = spec
        .map(|s| s.containers.iter().collect())
        .unwrap_or_default();
    let init: Vec<&Container> = spec
        .and_then(|s| s.init_containers.as_ref())
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let mut out = LogPlan::default();
    let chosen_init = pick(
        &selection.init_containers,
        &init,
        false,
        main,
        &mut out.missing,
    );
    let chosen = pick(
        &selection.containers,
        &regular,
        true,
        main,
        &mut out.missing,
    );
    for c in chosen_init {
        if c.restart_policy.as_deref() == Some("Always") {
            out.concurrent.push(c.name.clone());
        } else {
            out.init_first.push(c.name.clone());
        }
    }
    out.concurrent
        .extend(chosen.into_iter().map(|c| c.name.clone()));
    out.prefixed = out.init_first.len() + out.concurrent.len() > 1;
    out
}

/// The containers of `from` that `which` chooses (the main one only where `main_ok`), in the
/// pod's order; requested names `from` lacks are added to `missing`.
fn pick<'a>(
    which: &Containers,
    from: &[&'a Container],
    main_ok: bool,
    main: &str,
    missing: &mut Vec<String>,
) -> Vec<&'a Container> {
    match which {
        Containers::None => vec![],
        Containers::Main if main_ok => from.iter().copied().filter(|c| c.name == main).collect(),
        Containers::Main => vec![],
        Containers::All => from.to_vec(),
        Containers::Named(names) => {
            for name in names {
                if !from.iter().any(|c| &c.name == name) && !missing.contains(name) {
                    missing.push(name.clone());
                }
            }
            from.iter()
                .copied()
                .filter(|c| names.contains(&c.name))
                .collect()
        }
    }
}

/// A point in a run's life, reported to the [`crate::LogSink`] with the pod as it was then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// The pod was created (or adopted after a lost create response).
    Created,
    /// The run attached to a live pod of the same task instead of creating one.
    Reattached,
    /// The pod's containers started (the main container runs or has run).
    Started,
    /// The main container terminated (the task's outcome is known).
    Completed,
    /// The run is about to clean up: delete or keep the pod.
    Teardown,
    /// The clean-up is done (the pod is deleted, or kept).
    Cleanup,
}

impl Lifecycle {
    /// The event's name on podline's JSON output stream.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Reattached => "reattached",
            Self::Started => "started",
            Self::Completed => "completed",
            Self::Teardown => "teardown",
            Self::Cleanup => "cleanup",
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn container(name: &str, always: bool) -> Container {
        Container {
            name: name.into(),
            restart_policy: always.then(|| "Always".into()),
            ..Container::default()
        }
    }

    fn pod() -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![container("base", false), container("side", false)],
                init_containers: Some(vec![container("setup", false), container("proxy", true)]),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    /// The default is the main container alone, unprefixed: stdout is what it wrote.
    #[test]
    fn the_default_should_follow_the_main_container_unprefixed() {
        let p = plan(&LogSelection::default(), &pod(), "base");
        assert_eq!(p.concurrent, ["base"]);
        assert!(p.init_first.is_empty() && !p.prefixed);
    }

    /// Init containers come first unless they keep running; unknown names are reported.
    #[test]
    fn init_containers_should_be_read_first_and_unknown_names_reported() {
        let selection = LogSelection {
            containers: Containers::Named(vec!["side".into(), "nope".into()]),
            init_containers: Containers::All,
        };
        let p = plan(&selection, &pod(), "base");
        assert_eq!(p.init_first, ["setup"]);
        assert_eq!(p.concurrent, ["proxy", "side"]);
        assert_eq!(p.missing, ["nope"]);
        assert!(p.prefixed);
        let one = LogSelection {
            containers: Containers::None,
            init_containers: Containers::Named(vec!["setup".into()]),
        };
        let p = plan(&one, &pod(), "base");
        assert_eq!(
            (p.init_first.len(), p.concurrent.len(), p.prefixed),
            (1, 0, false)
        );
    }
}
