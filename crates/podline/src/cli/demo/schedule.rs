//! What each round of the demo does, and the pods a launching round runs.

use std::collections::BTreeMap;

use podline_launch::TaskSpec;
use rand::RngExt as _;

/// What one round does besides the create storm and log resets that last the whole demo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Pods only.
    Plain,
    /// The recorder's connection freezes (a frozen proxy).
    Freeze,
    /// Watch streams reset mid-chunk.
    Resets,
    /// An API server restart with a compaction of its watch history during the outage.
    Restart,
    /// Watches end early and a LIST answers 503.
    EndEarly,
    /// A `podline run --count N --parallel N` process is SIGKILLed while all its pods run; the
    /// reaper must delete them.
    KillLauncher,
    /// The recorder stops for longer than the API server's watch history while the round's
    /// pods run, finish and are deleted; its finalizer must keep their final states.
    RecorderOutage,
}

/// The rounds in order; rounds past its end (`--rounds` over its length) are plain.
pub const SCHEDULE: [Round; 7] = [
    Round::Plain,
    Round::Freeze,
    Round::Resets,
    Round::Restart,
    Round::EndEarly,
    Round::KillLauncher,
    Round::RecorderOutage,
];

impl Round {
    /// Round `round` (1-based) of the schedule; every round is plain with `--no-faults`.
    pub fn of(round: usize, no_faults: bool) -> Round {
        if no_faults {
            return Round::Plain;
        }
        round
            .checked_sub(1)
            .and_then(|i| SCHEDULE.get(i))
            .copied()
            .unwrap_or(Round::Plain)
    }
}

/// The label value naming round `round`'s run (`podline.io/run`).
pub fn run_name(round: usize) -> String {
    format!("demo-round-{round}")
}

/// One launching round's tasks: scripted pods with random durations and log lines. In every ten
/// pods three fail on purpose, so the store (and `podline ui`'s failures view) has each kind of
/// failure to show: one exits 1, one is OOM-killed (exit 137), and one's image cannot be pulled
/// (the launcher gives up and deletes it). Returns the specs and the exit codes each is expected
/// to end with.
pub fn round_specs(round: usize, kind: Round, pods: usize) -> (Vec<TaskSpec>, Vec<u8>) {
    let mut rng = rand::rng();
    let mut specs = Vec::with_capacity(pods);
    let mut codes = Vec::with_capacity(pods);
    for i in 0..pods {
        let mut annotations = BTreeMap::new();
        // The restart round's pods outlive the outage, so none is created, finished and deleted
        // while the API is down (only a finalizer could record the final state of such a pod).
        let duration_ms = if kind == Round::Restart {
            rng.random_range(4000..6000)
        } else {
            rng.random_range(300..1500)
        };
        annotations.insert(
            "sim.podline.io/duration".to_string(),
            format!("{duration_ms}ms"),
        );
        if kind != Round::Restart {
            // Some scheduling wait and image pull, as on a real node, so the timeline in
            // `podline ui` shows each stage (Kubernetes times have whole seconds).
            annotations.insert(
                "sim.podline.io/schedule-delay".to_string(),
                format!("{}ms", rng.random_range(0..1200)),
            );
            annotations.insert(
                "sim.podline.io/pull-delay".to_string(),
                format!("{}ms", rng.random_range(0..1800)),
            );
        }
        annotations.insert(
            "sim.podline.io/log-lines".to_string(),
            rng.random_range(1..20).to_string(),
        );
        let exit_code = match ScriptedOutcome::of(kind, i) {
            ScriptedOutcome::Succeed => 0,
            ScriptedOutcome::Exit1 => {
                annotations.insert("sim.podline.io/exit-code".to_string(), "1".to_string());
                1
            }
            ScriptedOutcome::OomKilled => {
                annotations.insert("sim.podline.io/oom".to_string(), "true".to_string());
                137
            }
            ScriptedOutcome::ImagePullError => {
                annotations.insert(
                    "sim.podline.io/image-error".to_string(),
                    "ErrImagePull".to_string(),
                );
                podline_launch::exit::START_FAILED
            }
        };
        specs.push(TaskSpec {
            name: Some(format!("demo-r{round}-{i}")),
            image: Some("busybox:1.36".into()),
            command: vec!["sh".into(), "-c".into(), "echo working; sleep 1".into()],
            annotations,
            run: Some(run_name(round)),
            ..TaskSpec::default()
        });
        codes.push(exit_code);
    }
    (specs, codes)
}

/// How a demo pod is scripted to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptedOutcome {
    /// Exits 0.
    Succeed,
    /// Exits 1.
    Exit1,
    /// Killed for memory (137).
    OomKilled,
    /// Its image cannot be pulled.
    ImagePullError,
}

impl ScriptedOutcome {
    /// Pod `i` of a round of `kind`: the 8th, 9th and 10th of every ten fail, each differently.
    /// In the restart round the image-pull failure exits 1 instead: its pod would be deleted
    /// within moments of its creation, possibly while the API is down. The recorder outage
    /// round keeps it: such a pod (deleted before it ran, grace 0) waits in Terminating for the
    /// restarted recorder, whose start-up sweep records and releases it.
    pub fn of(kind: Round, i: usize) -> Self {
        match i % 10 {
            7 => ScriptedOutcome::Exit1,
            8 => ScriptedOutcome::OomKilled,
            9 if kind == Round::Restart => ScriptedOutcome::Exit1,
            9 => ScriptedOutcome::ImagePullError,
            _ => ScriptedOutcome::Succeed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_script_failures_and_name_their_run() {
        let (specs, codes) = round_specs(3, Round::Resets, 40);
        assert_eq!(specs.len(), 40);
        assert_eq!(codes.len(), 40);
        assert!(
            specs
                .iter()
                .all(|spec| spec.run.as_deref() == Some("demo-round-3"))
        );
        for (spec, code) in specs.iter().zip(&codes) {
            let scripted = |key: &str| spec.annotations.get(&format!("sim.podline.io/{key}"));
            match code {
                0 => assert!(scripted("exit-code").is_none() && scripted("oom").is_none()),
                1 => assert_eq!(scripted("exit-code").map(String::as_str), Some("1")),
                137 => assert_eq!(scripted("oom").map(String::as_str), Some("true")),
                code => {
                    assert_eq!(*code, podline_launch::exit::START_FAILED);
                    assert!(scripted("image-error").is_some());
                }
            }
        }
        let failing = |kind| {
            (0..10)
                .map(|i| ScriptedOutcome::of(kind, i))
                .filter(|o| *o != ScriptedOutcome::Succeed)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            failing(Round::Plain),
            [
                ScriptedOutcome::Exit1,
                ScriptedOutcome::OomKilled,
                ScriptedOutcome::ImagePullError
            ]
        );
        assert!(!failing(Round::Restart).contains(&ScriptedOutcome::ImagePullError));
        assert!(failing(Round::RecorderOutage).contains(&ScriptedOutcome::ImagePullError));
    }

    #[test]
    fn the_schedule_ends_with_the_crash_rounds_and_no_faults_makes_every_round_plain() {
        assert_eq!(Round::of(1, false), Round::Plain);
        assert_eq!(Round::of(4, false), Round::Restart);
        assert_eq!(Round::of(6, false), Round::KillLauncher);
        assert_eq!(Round::of(SCHEDULE.len(), false), Round::RecorderOutage);
        assert_eq!(Round::of(SCHEDULE.len() + 1, false), Round::Plain);
        assert_eq!(Round::of(0, false), Round::Plain);
        assert!((1..=SCHEDULE.len()).all(|r| Round::of(r, true) == Round::Plain));
    }
}
