//! The check that a pod store equals the sim's ground truth: every pod, every transition (at
//! second precision, the wire precision of Kubernetes `Time`), each terminal state once, every
//! container's exit code, every deletion, and nothing the sim never created.
//!
//! Why a crate of its own: the recorder's fault tests, the kill -9 test and `podline demo` (a
//! shipping command) all end with the same question, "did we record exactly what happened?", and
//! must answer it the same way; the binary must not depend on the test kit to ask it. It depends
//! on the sim (the ground truth) and the store (what was recorded), and on nothing else.
//!
//! ```no_run
//! # async fn t(sim: &podline_sim::Sim, store: &dyn podline_store::StoreRead) {
//! let report = podline_audit::compare(store, &sim.ground_truth()).await.unwrap();
//! assert!(report.is_ok(), "{report}");
//! # }
//! ```

use podline_phase::Phase;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use podline_sim::PodHistory;
use podline_store::{PodFilter, PodRecord, StoreError, StoreRead};

/// What [`compare`] found. Empty problem lists mean the store equals the ground truth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditReport {
    /// Pods in the ground truth.
    pub expected: usize,
    /// Pods in the store.
    pub recorded: usize,
    /// Transitions in the ground truth.
    pub expected_transitions: usize,
    /// Transitions in the store.
    pub recorded_transitions: usize,
    /// Ground-truth pods the store lacks (`namespace/name uid`).
    pub missing: Vec<String>,
    /// Stored pods the sim never created.
    pub unexpected: Vec<String>,
    /// Pods recorded differently from what happened (one line per difference).
    pub mismatches: Vec<String>,
    /// Stored pods marked deleted with their final state unknown (`namespace/name uid`): they
    /// vanished while no recorder watched (a relist no longer listed them). Not a difference
    /// from the ground truth by itself (a pod recorded finished before it vanished matches it),
    /// so it does not make [`AuditReport::is_ok`] false; the guarantees that say "no final state
    /// lost" (finalizers) assert that it is empty.
    pub vanished: Vec<String>,
}

impl AuditReport {
    /// Whether the store equals the ground truth.
    pub fn is_ok(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.mismatches.is_empty()
    }

    /// Every problem, one per line (missing, unexpected, mismatches).
    pub fn problems(&self) -> impl Iterator<Item = String> + '_ {
        self.missing
            .iter()
            .map(|p| format!("missing: {p}"))
            .chain(self.unexpected.iter().map(|p| format!("unexpected: {p}")))
            .chain(self.mismatches.iter().cloned())
    }
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} pods and {} of {} transitions recorded",
            self.recorded, self.expected, self.recorded_transitions, self.expected_transitions
        )?;
        if self.is_ok() {
            return write!(f, "; store equals ground truth");
        }
        let total = self.missing.len() + self.unexpected.len() + self.mismatches.len();
        write!(f, "; {total} problem(s):")?;
        for problem in self.problems().take(20) {
            write!(f, "\n  {problem}")?;
        }
        if total > 20 {
            write!(f, "\n  ... and {} more", total - 20)?;
        }
        Ok(())
    }
}

/// Compares everything in `store` with the sim's `truth` (from `sim.ground_truth()`).
pub async fn compare(
    store: &dyn StoreRead,
    truth: &[PodHistory],
) -> Result<AuditReport, StoreError> {
    let pods = store.pods(&PodFilter::default()).await?;
    Ok(compare_records(&pods, truth))
}

/// [`compare`] on already loaded records (pure, for unit tests and custom filters).
pub fn compare_records(pods: &[PodRecord], truth: &[PodHistory]) -> AuditReport {
    let mut report = AuditReport {
        expected: truth.len(),
        recorded: pods.len(),
        expected_transitions: truth.iter().map(|h| h.transitions.len()).sum(),
        recorded_transitions: pods.iter().map(|p| p.transitions.len()).sum(),
        ..AuditReport::default()
    };
    let by_uid: HashMap<&str, &PodRecord> = pods.iter().map(|p| (p.uid.as_str(), p)).collect();
    let truth_uids: HashMap<&str, &PodHistory> =
        truth.iter().map(|h| (h.uid.as_str(), h)).collect();

    for pod in pods {
        if !truth_uids.contains_key(pod.uid.as_str()) {
            report
                .unexpected
                .push(format!("{}/{} {}", pod.namespace, pod.name, pod.uid));
        }
    }
    report.vanished = pods
        .iter()
        .filter(|p| p.deleted_at.is_some() && !p.final_state_observed)
        .map(|p| format!("{}/{} {}", p.namespace, p.name, p.uid))
        .collect();
    for history in truth {
        let who = format!("{}/{} {}", history.namespace, history.name, history.uid);
        let Some(pod) = by_uid.get(history.uid.as_str()) else {
            report.missing.push(who);
            continue;
        };
        check_pod(&who, pod, history, &mut report.mismatches);
    }
    report
}

fn check_pod(who: &str, pod: &PodRecord, history: &PodHistory, out: &mut Vec<String>) {
    let stored: BTreeMap<&str, Vec<i64>> =
        pod.transitions.iter().fold(BTreeMap::new(), |mut acc, t| {
            acc.entry(t.phase.as_str())
                .or_default()
                .push(t.at.as_second());
            acc
        });
    for (phase, times) in &stored {
        if times.len() > 1 {
            out.push(format!(
                "{who}: phase {phase} recorded {} times",
                times.len()
            ));
        }
    }
    let terminal = stored.keys().filter(|p| Phase::is_terminal_str(p)).count();
    if terminal > 1 {
        out.push(format!("{who}: {terminal} terminal phases recorded"));
    }
    for (phase, at) in &history.transitions {
        match stored.get(phase.as_str()) {
            None => out.push(format!("{who}: transition {phase} at {at} not recorded")),
            Some(times) if !times.contains(&at.as_second()) => out.push(format!(
                "{who}: transition {phase} at {at} recorded at second(s) {times:?}"
            )),
            Some(_) => {}
        }
    }
    for phase in stored.keys() {
        if !history.transitions.iter().any(|(p, _)| p == phase) {
            out.push(format!(
                "{who}: transition {phase} recorded but never happened"
            ));
        }
    }
    for (container, code) in &history.exit_codes {
        let recorded = pod
            .containers
            .iter()
            .find(|c| &c.name == container)
            .and_then(|c| c.exit_code);
        if recorded != Some(*code) {
            out.push(format!(
                "{who}: container {container} exit code {code}, recorded {recorded:?}"
            ));
        }
    }
    match (history.deleted_at, pod.deleted_at) {
        (Some(_), None) => out.push(format!("{who}: deleted, but the store has it live")),
        (None, Some(_)) => out.push(format!("{who}: recorded deleted, but it still exists")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use podline_store::PhaseTransition;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn history() -> PodHistory {
        PodHistory {
            uid: "u1".into(),
            namespace: "ns".into(),
            name: "p".into(),
            labels: BTreeMap::new(),
            transitions: vec![
                ("Pending".into(), t("2026-01-01T00:00:00.400Z")),
                ("Running".into(), t("2026-01-01T00:00:01.900Z")),
                ("Succeeded".into(), t("2026-01-01T00:00:03Z")),
            ],
            exit_codes: BTreeMap::from([("main".to_owned(), 0)]),
            deleted_at: None,
        }
    }

    fn record() -> PodRecord {
        PodRecord {
            uid: "u1".into(),
            namespace: "ns".into(),
            name: "p".into(),
            resource_version: 1,
            run: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner: None,
            node: None,
            phase: Some("Succeeded".into()),
            reason: None,
            message: None,
            created_at: None,
            scheduled_at: None,
            started_at: None,
            finished_at: None,
            deletion_requested_at: None,
            deleted_at: None,
            final_state_observed: false,
            recorded_at: t("2026-01-01T00:00:00Z"),
            updated_at: t("2026-01-01T00:00:00Z"),
            containers: vec![podline_store::ContainerObservation {
                name: "main".into(),
                exit_code: Some(0),
                ..Default::default()
            }],
            transitions: vec![
                PhaseTransition::new("Pending", t("2026-01-01T00:00:00Z")),
                PhaseTransition::new("Running", t("2026-01-01T00:00:01Z")),
                PhaseTransition::new("Succeeded", t("2026-01-01T00:00:03Z")),
            ],
        }
    }

    #[test]
    fn equal_at_second_precision_is_ok() {
        let report = compare_records(&[record()], &[history()]);
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.expected_transitions, 3);
    }

    #[test]
    fn pods_deleted_with_an_unknown_final_state_are_counted_as_vanished() {
        let mut observed = record();
        observed.deleted_at = Some(t("2026-01-01T00:00:05Z"));
        observed.final_state_observed = true;
        let mut gone = observed.clone();
        gone.uid = "u2".into();
        gone.final_state_observed = false;
        let mut truth = history();
        truth.deleted_at = Some(t("2026-01-01T00:00:05Z"));
        let mut truth2 = truth.clone();
        truth2.uid = "u2".into();
        let report = compare_records(&[observed, gone], &[truth, truth2]);
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.vanished, ["ns/p u2"]);
    }

    #[test]
    fn every_kind_of_difference_is_reported() {
        let mut wrong = record();
        wrong.transitions[1].at = t("2026-01-01T00:00:02Z");
        wrong
            .transitions
            .push(PhaseTransition::new("Failed", t("2026-01-01T00:00:04Z")));
        wrong.containers[0].exit_code = Some(1);
        wrong.deleted_at = Some(t("2026-01-01T00:00:05Z"));
        let mut stranger = record();
        stranger.uid = "u2".into();
        let mut gone = history();
        gone.uid = "u3".into();
        let report = compare_records(&[wrong, stranger], &[history(), gone]);
        assert!(!report.is_ok());
        assert_eq!(report.missing.len(), 1);
        assert_eq!(report.unexpected.len(), 1);
        let text = report.to_string();
        for needle in [
            "transition Running",
            "2 terminal phases",
            "Failed recorded but never happened",
            "exit code 0, recorded Some(1)",
            "still exists",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in {text}");
        }
    }
}
