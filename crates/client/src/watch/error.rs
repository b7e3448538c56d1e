//! Errors a watch yields as stream items, named by the phase that failed.

use std::time::Duration;

use kube::core::Status;

use crate::retry::{Disposition, classify};

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
    #[error("LIST failed ({reason}): {source}")]
    ListFailed {
        /// Metric label.
        reason: &'static str,
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
    /// A watch request failed before its stream opened.
    #[error("watch request failed ({reason}): {source}")]
    WatchStartFailed {
        /// Metric label.
        reason: &'static str,
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
    /// An open watch stream broke (transport error or undecodable line).
    #[error("watch stream failed ({reason}): {source}")]
    StreamFailed {
        /// Metric label.
        reason: &'static str,
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
    /// The server sent an ERROR event in the stream (410 Expired is the common one).
    #[error("watch stream returned {code} {status_reason}: {message}", code = .status.code, status_reason = .status.reason, message = .status.message)]
    StreamStatus {
        /// Metric label.
        reason: &'static str,
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
    /// A short stable label: `client_timeout`, `reset`, `refused`, `transport`, `http_5xx`,
    /// `too_many_requests`, `gone`, `forbidden`, `unauthorized`, `not_found`, ...
    pub fn reason(&self) -> &'static str {
        match self {
            WatchError::ListFailed { reason, .. }
            | WatchError::WatchStartFailed { reason, .. }
            | WatchError::StreamFailed { reason, .. }
            | WatchError::StreamStatus { reason, .. } => reason,
            WatchError::ClientTimeout { .. } => "client_timeout",
            WatchError::NoResourceVersion => "no_resource_version",
        }
    }

    /// True when no retry can fix it (401, 403, 404 namespace, a bad selector...): the stream ends
    /// after yielding it, and a daemon should exit non-zero with this message.
    pub fn is_fatal(&self) -> bool {
        match self {
            WatchError::ListFailed { source, .. } | WatchError::WatchStartFailed { source, .. } => {
                is_fatal_error(source)
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
            WatchError::ListFailed { source, .. }
            | WatchError::WatchStartFailed { source, .. }
            | WatchError::StreamFailed { source, .. } => match source {
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
        other => matches!(classify(other), Disposition::Fatal { reason } if reason != "decode"),
    }
}

pub(crate) fn is_fatal_status(status: &Status) -> bool {
    status.code != 410
        && matches!(
            crate::retry::classify_status(status),
            Disposition::Fatal { .. }
        )
}

/// The watch's reason label for a kube error (finer than [`classify`]'s: connection refused and
/// mid-stream resets are told apart, 5xx is `http_5xx`).
pub(crate) fn reason_of(err: &kube::Error) -> &'static str {
    if let kube::Error::Api(s) = err {
        return reason_of_status(s);
    }
    if chain_has_io_kind(err, std::io::ErrorKind::ConnectionRefused) {
        return "refused";
    }
    match classify(err) {
        Disposition::Retry {
            reason: "timeout", ..
        } => "client_timeout",
        Disposition::Retry { .. } => match err {
            kube::Error::ReadEvents(_) => "reset",
            _ => "transport",
        },
        other => other.reason(),
    }
}

pub(crate) fn reason_of_status(status: &Status) -> &'static str {
    match status.code {
        410 => "gone",
        429 => "too_many_requests",
        500..=599 => "http_5xx",
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
                source: api(code),
            };
            assert!(e.is_fatal(), "{code}");
        }
        for code in [410, 429, 500, 503, 504] {
            let e = WatchError::WatchStartFailed {
                reason: reason_of(&api(code)),
                source: api(code),
            };
            assert!(!e.is_fatal(), "{code}");
        }
        let t = WatchError::ClientTimeout {
            phase: Phase::Stream,
            timeout: Duration::from_secs(1),
        };
        assert!(!t.is_fatal());
        assert_eq!(t.reason(), "client_timeout");
    }

    #[test]
    fn reasons_should_be_metric_labels() {
        assert_eq!(reason_of(&api(410)), "gone");
        assert_eq!(reason_of(&api(429)), "too_many_requests");
        assert_eq!(reason_of(&api(503)), "http_5xx");
        assert_eq!(reason_of(&api(403)), "forbidden");
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            reason_of(&kube::Error::Service(Box::new(refused))),
            "refused"
        );
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(reason_of(&kube::Error::ReadEvents(reset)), "reset");
    }
}
