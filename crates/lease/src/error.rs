//! Errors: a bad configuration (caught before anything starts) and an election that cannot go on.

use std::time::Duration;

/// A rejected [`ElectionConfig`](crate::ElectionConfig): says which duration was wrong and what
/// was expected, so the flag or environment variable behind it can be fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `leaseDurationSeconds` is an integer on the Lease.
    #[error(
        "lease duration {lease_duration:?} is invalid: expected a whole number of seconds, at least 1s"
    )]
    LeaseDuration {
        /// The rejected value.
        lease_duration: Duration,
    },
    /// A leader must give up before its lease can expire under it.
    #[error(
        "renew deadline {renew_deadline:?} is invalid: expected more than zero and less than the lease duration {lease_duration:?}"
    )]
    RenewDeadline {
        /// The rejected value.
        renew_deadline: Duration,
        /// The lease duration it was compared with.
        lease_duration: Duration,
    },
    /// A leader needs time for at least one (jittered) retry before its deadline.
    #[error(
        "retry period {retry_period:?} is invalid: expected more than zero and, times 1.2 (jitter), less than the renew deadline {renew_deadline:?}"
    )]
    RetryPeriod {
        /// The rejected value.
        retry_period: Duration,
        /// The renew deadline it was compared with.
        renew_deadline: Duration,
    },
    /// Every elector needs a name to put into `holderIdentity`.
    #[error(
        "leader election identity is empty: expected a unique name per replica (e.g. the pod name)"
    )]
    EmptyIdentity,
}

/// Why an election stopped for good. Transient API errors (5xx, 409, timeouts, resets) never
/// end up here: the elector retries them, stepping down meanwhile if it was the leader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The API refused in a way no retry fixes: 401, 403 (RBAC: the service account needs
    /// get/create/update on leases), 404 on create (no such namespace), 400/422 (invalid name).
    #[error("leader election on lease {namespace}/{name} failed: {error}")]
    Fatal {
        /// The lease's namespace.
        namespace: String,
        /// The lease's name.
        name: String,
        /// The API's answer. Printed in the message and deliberately not returned from
        /// `source()`, so a `{:#}` chain shows it once.
        error: kube::Error,
    },
    /// Releasing the lease on shutdown failed; the next leader takes over after the lease
    /// duration instead of at once.
    #[error("could not release lease {namespace}/{name}: {error}")]
    Release {
        /// The lease's namespace.
        namespace: String,
        /// The lease's name.
        name: String,
        /// The API's answer, or a timeout (in the message, not `source()`, as for `Fatal`).
        error: CallError,
    },
    /// The election task panicked or was aborted.
    #[error("the leader election task ended abnormally")]
    Task(#[from] tokio::task::JoinError),
}

/// One failed call to the API server: an answer, or none in time.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The server (or the transport) answered with an error.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer before the caller's deadline (a stalled connection, or a leader's renew deadline).
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    /// What `{:#}` prints: the message, then every `source()`.
    fn chain(err: &(dyn std::error::Error + 'static)) -> String {
        let mut out = err.to_string();
        let mut cause = err.source();
        while let Some(c) = cause {
            out = format!("{out}: {c}");
            cause = c.source();
        }
        out
    }

    #[test]
    fn an_election_error_should_print_the_apis_answer_once() {
        let api = || {
            kube::Error::Api(
                Status::failure("no RBAC for leases", "Forbidden")
                    .with_code(403)
                    .boxed(),
            )
        };
        let fatal = ElectionError::Fatal {
            namespace: "ns".into(),
            name: "lease".into(),
            error: api(),
        };
        let release = ElectionError::Release {
            namespace: "ns".into(),
            name: "lease".into(),
            error: CallError::Api(api()),
        };
        // kube's own message (which itself shows the Status twice) must appear once.
        let kube_text = api().to_string();
        for err in [fatal, release] {
            let text = chain(&err);
            assert_eq!(text.matches(&kube_text).count(), 1, "{text}");
        }
    }
}
