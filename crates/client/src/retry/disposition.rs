//! The classification table: what to do about a failed call ([`Disposition`]), a pure function
//! of the error (see the table in [`super`]).

use std::time::Duration;

use kube::core::Status;

use super::cause::{is_bad_certificate, is_timeout, speaks_tls};
use crate::reason::Reason;

/// What a caller should do about a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Transient: the same call may succeed later.
    Retry {
        /// Why: [`Reason::Conflict`], [`Reason::TooManyRequests`], [`Reason::ServerError`],
        /// [`Reason::Transport`] or [`Reason::Timeout`].
        reason: Reason,
        /// How long the server asked us to wait (uncapped; [`RetryPolicy`](super::RetryPolicy)
        /// caps it).
        retry_after: Option<Duration>,
    },
    /// A create found the name taken (409 `AlreadyExists`). It may be our own earlier attempt
    /// whose response was lost, so the caller decides (read the object, compare its launch id).
    AlreadyExists,
    /// Repeating the call cannot help (bad request, no permission, missing namespace...).
    Fatal {
        /// Why, e.g. [`Reason::Forbidden`], [`Reason::Invalid`], [`Reason::NotFound`].
        reason: Reason,
    },
}

impl Disposition {
    /// Whether a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Disposition::Retry { .. })
    }

    /// Whether no retry can fix it ([`Disposition::Fatal`]).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Disposition::Fatal { .. })
    }

    /// Why ([`Reason::AlreadyExists`] for [`Disposition::AlreadyExists`]); `.as_str()` is the
    /// metric label.
    pub fn reason(&self) -> Reason {
        match self {
            Disposition::Retry { reason, .. } | Disposition::Fatal { reason } => *reason,
            Disposition::AlreadyExists => Reason::AlreadyExists,
        }
    }
}

/// An error the retry loop can judge: what to do about it, and its HTTP status when it has one.
/// It exists so a call built from several kube calls (a finalizer removal that reads and
/// patches, say) retries through the same loop, backoff and log line as a single call, instead
/// of a loop of its own.
pub trait Classify: std::fmt::Display {
    /// What a caller should do about it.
    fn disposition(&self) -> Disposition;
    /// The HTTP status code behind it, for the retry log line (None for transport errors).
    fn status_code(&self) -> Option<u16> {
        None
    }
}

impl Classify for kube::Error {
    fn disposition(&self) -> Disposition {
        classify(self)
    }
    fn status_code(&self) -> Option<u16> {
        status_code(self)
    }
}

/// Classifies any error from a kube call (see the module table).
pub fn classify(err: &kube::Error) -> Disposition {
    use kube::Error as E;
    #[allow(unreachable_patterns)] // kube's feature-gated variants differ by enabled features
    match err {
        E::Api(status) => classify_status(status),
        E::HyperError(e) if e.is_timeout() => transient(Reason::Timeout),
        E::HyperError(_) => transient(Reason::Transport),
        E::Service(e) => {
            if is_bad_certificate(e.as_ref()) || speaks_tls(e.as_ref()) {
                fatal(Reason::Tls)
            } else if is_timeout(e.as_ref()) {
                transient(Reason::Timeout)
            } else {
                transient(Reason::Transport)
            }
        }
        E::ReadEvents(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            transient(Reason::Timeout)
        }
        E::ReadEvents(_) => transient(Reason::Transport),
        // A body cut short by a dropped connection fails to parse at its end: transient.
        E::SerdeError(e) if e.is_eof() => transient(Reason::Transport),
        E::SerdeError(_) | E::FromUtf8(_) | E::LinesCodecMaxLineLengthExceeded => {
            fatal(Reason::Decode)
        }
        E::Auth(_) => fatal(Reason::Auth),
        _ => fatal(Reason::Config),
    }
}

/// Classifies an API `Status` (an HTTP error answer) by code, telling the two 409s apart by
/// `reason` as apimachinery does.
pub fn classify_status(status: &Status) -> Disposition {
    let retry_after = status
        .details
        .as_ref()
        .map(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(u64::from(s)));
    match status.code {
        409 if status.reason == "AlreadyExists" => Disposition::AlreadyExists,
        409 => Disposition::Retry {
            reason: Reason::Conflict,
            retry_after,
        },
        429 => Disposition::Retry {
            reason: Reason::TooManyRequests,
            retry_after,
        },
        500 | 502 | 503 | 504 => Disposition::Retry {
            reason: Reason::ServerError,
            retry_after,
        },
        408 => Disposition::Retry {
            reason: Reason::Timeout,
            retry_after,
        },
        400 => fatal(Reason::BadRequest),
        401 => fatal(Reason::Unauthorized),
        403 => fatal(Reason::Forbidden),
        404 => fatal(Reason::NotFound),
        405 => fatal(Reason::MethodNotAllowed),
        410 => fatal(Reason::Gone),
        415 => fatal(Reason::UnsupportedMediaType),
        422 => fatal(Reason::Invalid),
        c if (400..500).contains(&c) => fatal(Reason::ClientError),
        c if (500..600).contains(&c) => fatal(Reason::ServerError),
        _ => fatal(Reason::UnexpectedStatus),
    }
}

/// The HTTP status code of an API error, for logs and metrics.
pub fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn transient(reason: Reason) -> Disposition {
    Disposition::Retry {
        reason,
        retry_after: None,
    }
}

fn fatal(reason: Reason) -> Disposition {
    Disposition::Fatal { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::test_support::{api, api_retry_after, status};

    #[test]
    fn the_two_409s_should_be_told_apart_by_reason() {
        assert_eq!(
            classify(&api(409, "AlreadyExists")),
            Disposition::AlreadyExists
        );
        assert_eq!(
            classify(&api(409, "Conflict")),
            Disposition::Retry {
                reason: Reason::Conflict,
                retry_after: None
            }
        );
    }

    #[test]
    fn the_status_table_should_be_total_and_match_the_docs() {
        for code in 0..=u16::MAX {
            // Total: every code gets an answer with a non-empty label.
            let d = classify_status(&status(code, ""));
            assert!(!d.reason().as_str().is_empty(), "{code}");
            let retryable = matches!(code, 408 | 409 | 429 | 500 | 502 | 503 | 504);
            assert_eq!(d.is_retryable(), retryable, "{code}: {d:?}");
        }
        for (code, label) in [
            (400, "bad_request"),
            (401, "unauthorized"),
            (403, "forbidden"),
            (404, "not_found"),
            (405, "method_not_allowed"),
            (410, "gone"),
            (415, "unsupported_media_type"),
            (422, "invalid"),
        ] {
            let d = classify(&api(code, "x"));
            assert!(d.is_fatal(), "{code}");
            assert_eq!(d.reason().as_str(), label);
        }
        assert_eq!(
            classify(&api(429, "")).reason().as_str(),
            "too_many_requests"
        );
        assert_eq!(classify(&api(503, "")).reason().as_str(), "server_error");
    }

    #[test]
    fn transport_and_decode_errors_should_be_classified() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            classify(&kube::Error::Service(Box::new(refused)))
                .reason()
                .as_str(),
            "transport"
        );
        let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "read timeout");
        assert_eq!(
            classify(&kube::Error::Service(Box::new(timed_out)))
                .reason()
                .as_str(),
            "timeout"
        );
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(
            classify(&kube::Error::ReadEvents(reset)).reason().as_str(),
            "transport"
        );
        let eof = serde_json::from_str::<serde_json::Value>("{\"a\":").unwrap_err();
        assert!(classify(&kube::Error::SerdeError(eof)).is_retryable());
        let garbage = serde_json::from_str::<serde_json::Value>("nope").unwrap_err();
        assert_eq!(
            classify(&kube::Error::SerdeError(garbage)),
            Disposition::Fatal {
                reason: Reason::Decode
            }
        );
    }

    #[test]
    fn retry_after_should_come_from_status_details() {
        assert_eq!(
            classify(&api_retry_after(429, 7)),
            Disposition::Retry {
                reason: Reason::TooManyRequests,
                retry_after: Some(Duration::from_secs(7))
            }
        );
    }
}
