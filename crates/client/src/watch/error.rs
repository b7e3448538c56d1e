//! Errors a watch yields as stream items, named by the phase that failed.

use std::time::Duration;

use kube::core::Status;

use crate::reason::Reason;
use crate::retry::classify;

/// The phase a client timeout interrupted, for messages and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a LIST page.
    List,
    /// Waiting for a watch request's response headers.
    WatchStart,
    /// Waiting for the next item of an open watch stream.
    Stream,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::List => "waiting for a LIST page",
            Phase::WatchStart => "waiting for the watch response",
            Phase::Stream => "waiting for the next watch event",
        })
    }
}

/// A failure the watch recovered from (or, if [`WatchError::is_fatal`], could not).
///
/// Every error is yielded as an `Err` item and the stream goes on: the watch has already decided
/// how to recover (back off and resume from the last resourceVersion, or re-list after 410). Only
/// fatal errors end the stream. Use [`WatchError::reason`] as a metric label.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// A LIST page failed (the list resumes from the same page, or restarts after 410).
    #[error("LIST failed ({reason}): {error}")]
    ListFailed {
        /// Why, as a metric label.
        reason: Reason,
        /// What kube reported. Printed in the message and deliberately not returned from
        /// `source()`, so a `{:#}` chain shows it once.
        error: kube::Error,
    },
    /// A watch request failed before its stream opened.
    #[error("watch request failed ({reason}): {error}")]
    WatchStartFailed {
        /// Why, as a metric label.
        reason: Reason,
        /// What kube reported. Printed in the message and deliberately not returned from
        /// `source()`, so a `{:#}` chain shows it once.
        error: kube::Error,
    },
    /// An open watch stream broke (transport error or undecodable line).
    #[error("watch stream failed ({reason}): {error}")]
    StreamFailed {
        /// Why, as a metric label.
        reason: Reason,
        /// What kube reported. Printed in the message and deliberately not returned from
        /// `source()`, so a `{:#}` chain shows it once.
        error: kube::Error,
    },
    /// The server sent an ERROR event in the stream (410 Expired is the common one).
    #[error("watch stream returned {code} {status_reason}: {message}", code = .status.code, status_reason = .status.reason, message = .status.message)]
    StreamStatus {
        /// Why, as a metric label.
        reason: Reason,
        /// The Status object the server sent.
        status: Box<Status>,
    },
    /// Nothing arrived within the client timeout; the connection is treated as dead.
    #[error("no answer within the client timeout ({timeout:?}) while {phase}")]
    ClientTimeout {
        /// What we were waiting for.
        phase: Phase,
        /// The configured client timeout.
        timeout: Duration,
    },
    /// A LIST answered without a resourceVersion, so there is nothing to watch from.
    #[error("LIST returned no resourceVersion")]
    NoResourceVersion,
}

impl WatchError {
    /// Why: [`Reason::ClientTimeout`], [`Reason::Reset`], [`Reason::Refused`],
    /// [`Reason::Transport`], [`Reason::Http5xx`], [`Reason::TooManyRequests`], [`Reason::Gone`],
    /// [`Reason::Forbidden`], ... (`.as_str()` is the metric label).
    pub fn reason(&self) -> Reason {
        match self {
            WatchError::ListFailed { reason, .. }
            | WatchError::WatchStartFailed { reason, .. }
            | WatchError::StreamFailed { reason, .. }
            | WatchError::StreamStatus { reason, .. } => *reason,
            WatchError::ClientTimeout { .. } => Reason::ClientTimeout,
            WatchError::NoResourceVersion => Reason::NoResourceVersion,
        }
    }

    /// True when no retry can fix it (401, 403, 404 namespace, a bad selector...): the stream ends
    /// after yielding it, and a daemon should exit non-zero with this message.
    pub fn is_fatal(&self) -> bool {
        match self {
            WatchError::ListFailed { error, .. } | WatchError::WatchStartFailed { error, .. } => {
                is_fatal_error(error)
            }
            WatchError::StreamStatus { status, .. } => is_fatal_status(status),
            WatchError::StreamFailed { .. }
            | WatchError::ClientTimeout { .. }
            | WatchError::NoResourceVersion => false,
        }
    }

    /// The API Status behind this error, if the server sent one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            WatchError::ListFailed { error, .. }
            | WatchError::WatchStartFailed { error, .. }
            | WatchError::StreamFailed { error, .. } => match error {
                kube::Error::Api(s) => Some(s),
                _ => None,
            },
            WatchError::StreamStatus { status, .. } => Some(status),
            _ => None,
        }
    }

    /// True for 410 Gone/Expired: the watch re-lists.
    pub fn is_gone(&self) -> bool {
        self.status().is_some_and(|s| s.code == 410)
    }
}

/// Fatal for a watch: what [`classify`] calls fatal, except 410 (handled by re-listing) and
/// undecodable data (handled by resuming).
pub(crate) fn is_fatal_error(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(s) => is_fatal_status(s),
        other => {
            let disposition = classify(other);
            disposition.is_fatal() && disposition.reason() != Reason::Decode
        }
    }
}

pub(crate) fn is_fatal_status(status: &Status) -> bool {
    status.code != 410 && crate::retry::classify_status(status).is_fatal()
}

/// The watch's reason label for a kube error (finer than [`classify`]'s: connection refused and
/// mid-stream resets are told apart, 5xx is `http_5xx`).
pub(crate) fn reason_of(err: &kube::Error) -> Reason {
    if let kube::Error::Api(s) = err {
        return reason_of_status(s);
    }
    if chain_has_io_kind(err, std::io::ErrorKind::ConnectionRefused) {
        return Reason::Refused;
    }
    let disposition = classify(err);
    match disposition.reason() {
        Reason::Timeout if disposition.is_retryable() => Reason::ClientTimeout,
        _ if disposition.is_retryable() => match err {
            kube::Error::ReadEvents(_) => Reason::Reset,
            _ => Reason::Transport,
        },
        other => other,
    }
}

pub(crate) fn reason_of_status(status: &Status) -> Reason {
    match status.code {
        410 => Reason::Gone,
        429 => Reason::TooManyRequests,
        500..=599 => Reason::Http5xx,
        _ => crate::retry::classify_status(status).reason(),
    }
}

fn chain_has_io_kind(err: &kube::Error, kind: std::io::ErrorKind) -> bool {
    crate::retry::any_cause(err, &|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("m", "r").with_code(code).boxed())
    }

    #[test]
    fn fatal_should_mean_what_no_retry_can_fix() {
        for code in [400, 401, 403, 404, 422] {
            let e = WatchError::ListFailed {
                reason: reason_of(&api(code)),
                error: api(code),
            };
            assert!(e.is_fatal(), "{code}");
        }
        for code in [410, 429, 500, 503, 504] {
            let e = WatchError::WatchStartFailed {
                reason: reason_of(&api(code)),
                error: api(code),
            };
            assert!(!e.is_fatal(), "{code}");
        }
        let t = WatchError::ClientTimeout {
            phase: Phase::Stream,
            timeout: Duration::from_secs(1),
        };
        assert!(!t.is_fatal());
        assert_eq!(t.reason(), Reason::ClientTimeout);
    }

    #[test]
    fn reasons_should_be_metric_labels() {
        assert_eq!(reason_of(&api(410)).as_str(), "gone");
        assert_eq!(reason_of(&api(429)).as_str(), "too_many_requests");
        assert_eq!(reason_of(&api(503)).as_str(), "http_5xx");
        assert_eq!(reason_of(&api(403)).as_str(), "forbidden");
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            reason_of(&kube::Error::Service(Box::new(refused))),
            Reason::Refused
        );
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(reason_of(&kube::Error::ReadEvents(reset)), Reason::Reset);
    }

    /// `{:#}` (and the binary's chain printer) walks `source()`: the kube message must appear
    /// once, not once from the message and again from the source.
    #[test]
    fn a_failed_call_should_print_the_kube_message_once_in_a_chain() {
        let source = api(503);
        let text = source.to_string();
        for err in [
            WatchError::ListFailed {
                reason: reason_of(&source),
                error: api(503),
            },
            WatchError::WatchStartFailed {
                reason: reason_of(&source),
                error: api(503),
            },
            WatchError::StreamFailed {
                reason: reason_of(&source),
                error: api(503),
            },
        ] {
            let chain = format!("{:#}", anyhow_like(&err));
            assert_eq!(chain.matches(&text).count(), 1, "{chain}");
        }
    }

    /// What `anyhow`'s `{:#}` prints: the message and every `source()`, joined by ": ".
    fn anyhow_like(err: &(dyn std::error::Error + 'static)) -> String {
        let mut out = err.to_string();
        let mut cause = err.source();
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }
}
