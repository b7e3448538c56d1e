//! The phase of a pod (`status.phase`), typed, in one place: the launcher, the recorders, the
//! store, the UI and the binary all used to spell `"Succeeded"` and its siblings as strings.
//!
//! The API's values are the five `PodPhase` constants of `k8s.io/api/core/v1` (`types.go`:
//! `PodPending`, `PodRunning`, `PodSucceeded`, `PodFailed`, `PodUnknown`); k8s-openapi carries
//! the field as a plain `String`. Records and wire formats keep the API's spelling
//! ([`Phase::as_str`]); code matches on the enum ([`Phase::parse`]).
//!
//! ```
//! use podline_phase::Phase;
//!
//! assert_eq!(Phase::parse("Succeeded"), Some(Phase::Succeeded));
//! assert!(Phase::Failed.is_terminal());
//! assert_eq!(Phase::Running.as_str(), "Running");
//! ```

use std::fmt;

/// A pod's `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Accepted by the API server, not yet running (scheduling, pulling images).
    Pending,
    /// Bound to a node, and at least one container started.
    Running,
    /// Every container exited 0 and none will restart.
    Succeeded,
    /// Every container ended, at least one in failure (or the pod could not run at all).
    Failed,
    /// The pod's state could not be obtained (deprecated by Kubernetes, still a valid value).
    Unknown,
}

impl Phase {
    /// Every phase, in lifecycle order.
    pub const ALL: [Phase; 5] = [
        Phase::Pending,
        Phase::Running,
        Phase::Succeeded,
        Phase::Failed,
        Phase::Unknown,
    ];

    /// The API's spelling, as stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Unknown => "Unknown",
        }
    }

    /// The phase the API spells `text`, if any (exact, case-sensitive, as the API server
    /// compares it).
    pub fn parse(text: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|phase| phase.as_str() == text)
    }

    /// Whether a pod in this phase is done: it never leaves [`Phase::Succeeded`] or
    /// [`Phase::Failed`].
    pub const fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }

    /// Whether `text` is a terminal phase's spelling.
    pub fn is_terminal_str(text: &str) -> bool {
        Phase::parse(text).is_some_and(Phase::is_terminal)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_should_round_trip_through_its_spelling() {
        for phase in Phase::ALL {
            assert_eq!(Phase::parse(phase.as_str()), Some(phase));
            assert_eq!(phase.to_string(), phase.as_str());
        }
        assert_eq!(Phase::parse("succeeded"), None);
        assert_eq!(Phase::parse(""), None);
    }

    #[test]
    fn only_succeeded_and_failed_should_be_terminal() {
        let terminal: Vec<Phase> = Phase::ALL.into_iter().filter(|p| p.is_terminal()).collect();
        assert_eq!(terminal, [Phase::Succeeded, Phase::Failed]);
        assert!(Phase::is_terminal_str("Failed"));
        assert!(!Phase::is_terminal_str("Running"));
        assert!(!Phase::is_terminal_str("bogus"));
    }
}
