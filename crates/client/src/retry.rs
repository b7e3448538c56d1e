//! What to do about a failed Kubernetes call ([`classify`]), kept apart from how to retry it
//! ([`RetryPolicy`] and [`retry`]).
//!
//! Classification is a pure function of the error, so its table can be tested on its own and
//! reused by the watch, the launcher and the recorder. Retrying is backon driven by
//! [`FullJitter`], bounded by attempts and by a deadline that counts
//! response time, honouring the server's Retry-After (capped) and logging every retry as one line.
//!
//! | HTTP status / error | [`Disposition`] | reason label |
//! |---|---|---|
//! | 409, reason `AlreadyExists` | `AlreadyExists` | – |
//! | 409, any other reason (e.g. `Conflict` from quota admission) | `Retry` | `conflict` |
//! | 429 | `Retry` (+ Retry-After) | `too_many_requests` |
//! | 500, 502, 503, 504 | `Retry` (+ Retry-After if given) | `server_error` |
//! | 408, client-side timeouts | `Retry` | `timeout` |
//! | connection refused / reset, TLS handshake I/O, truncated body | `Retry` | `transport` |
//! | 400, 401, 403, 404, 405, 410, 415, 422 | `Fatal` | `bad_request`, `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`, `gone`, `unsupported_media_type`, `invalid` |
//! | the server's TLS certificate is rejected, an `http://` URL names a TLS server or an `https://` URL a plain-HTTP one | `Fatal` | `tls` |
//! | any other status, undecodable bodies, bad config | `Fatal` | `client_error`, `server_error`, `unexpected_status`, `decode`, `config`, `auth` |
//!
//! 410 is fatal here because a *unary* call cannot fix it by repeating itself; the watch handles
//! 410 itself (by re-listing) and never asks this table about it.
//!
//! Retry-After: kube 5 turns an error response into `Error::Api(Status)` and drops the HTTP
//! headers, so only `details.retryAfterSeconds` in the body survives. [`crate::connect`] installs a
//! layer that copies a `Retry-After` header into that field when the body lacks it, so both forms
//! reach [`classify`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, Retryable};
use kube::core::Status;
use tokio::time::Instant;

use crate::backoff::FullJitter;
pub use crate::reason::Reason;
use crate::transport::{FailureKind, TransportFailure};

/// What a caller should do about a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Transient: the same call may succeed later.
    Retry {
        /// Why: [`Reason::Conflict`], [`Reason::TooManyRequests`], [`Reason::ServerError`],
        /// [`Reason::Transport`] or [`Reason::Timeout`].
        reason: Reason,
        /// How long the server asked us to wait (uncapped; [`RetryPolicy`] caps it).
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

/// Calls `found` on every error in the cause chain, including the error wrapped inside an
/// `io::Error` (whose `source()` skips it) and the cause a [`TransportFailure`] describes in its
/// message instead of returning it from `source()`.
pub(crate) fn any_cause(
    err: &(dyn std::error::Error + 'static),
    found: &dyn Fn(&(dyn std::error::Error + 'static)) -> bool,
) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if found(e) {
            return true;
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            && any_cause(inner, found)
        {
            return true;
        }
        if let Some(cause) = e
            .downcast_ref::<TransportFailure>()
            .and_then(TransportFailure::cause)
            && any_cause(cause, found)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Whether TLS rejected the server's certificate: no retry fixes that (wrong CA, wrong name).
fn is_bad_certificate(err: &(dyn std::error::Error + 'static)) -> bool {
    any_cause(err, &|e| {
        matches!(
            e.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_))
        )
    })
}

/// Whether an `http://` URL reached a TLS server, or an `https://` URL a plain-HTTP one: no
/// retry fixes that either.
fn speaks_tls(err: &(dyn std::error::Error + 'static)) -> bool {
    any_cause(err, &|e| {
        e.downcast_ref::<TransportFailure>().is_some_and(|f| {
            matches!(
                f.kind(),
                FailureKind::SpeaksTls | FailureKind::SpeaksPlainHttp
            )
        })
    })
}

/// Whether a timeout (ours, tower's, hyper-timeout's or the OS's) is somewhere in the cause chain.
fn is_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    any_cause(err, &|e| {
        e.is::<tokio::time::error::Elapsed>()
            || e.is::<tower::timeout::error::Elapsed>()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
    })
}

/// How a unary call is retried: full-jitter backoff, at most `max_attempts` calls in total, an
/// overall deadline that includes response time, and a cap on the server's Retry-After.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    backoff: FullJitter,
    max_attempts: u32,
    deadline: Option<Duration>,
    max_retry_after: Duration,
}

impl RetryPolicy {
    /// Builds a policy from a backoff; defaults: 8 attempts, a 2-minute deadline, Retry-After
    /// capped at 30 s (a misbehaving proxy must not park us for an hour).
    pub fn new(backoff: FullJitter) -> Self {
        Self {
            backoff,
            max_attempts: 8,
            deadline: Some(Duration::from_secs(120)),
            max_retry_after: Duration::from_secs(30),
        }
    }

    /// Total calls allowed, the first included (1 = never retry). Values below 1 mean 1.
    #[must_use]
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Overall time budget from the first call, responses included; `None` = attempts only.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The longest Retry-After we honour.
    #[must_use]
    pub fn with_max_retry_after(mut self, cap: Duration) -> Self {
        self.max_retry_after = cap;
        self
    }

    /// Total calls allowed.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The overall deadline, if any.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The backoff the delays are drawn from.
    pub fn backoff(&self) -> &FullJitter {
        &self.backoff
    }

    /// The delay before the next call, given the backoff's proposal and the error: at least the
    /// server's Retry-After (capped), never past the deadline.
    fn adjust(
        &self,
        err: &kube::Error,
        proposed: Option<Duration>,
        started: Instant,
    ) -> Option<Duration> {
        let mut delay = proposed?;
        if let Disposition::Retry {
            retry_after: Some(after),
            ..
        } = classify(err)
        {
            delay = delay.max(after.min(self.max_retry_after));
        }
        if let Some(deadline) = self.deadline {
            let remaining = deadline.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return None;
            }
            delay = delay.min(remaining);
        }
        Some(delay)
    }
}

impl Default for RetryPolicy {
    /// 100 ms doubling to 15 s: fits a burst of 50 creates answered 409 (see the brief).
    fn default() -> Self {
        // Proven invariant: base > 0, cap >= base, factor >= 1.
        #[allow(clippy::unwrap_used)]
        let backoff =
            FullJitter::try_new(Duration::from_millis(100), Duration::from_secs(15), 2.0).unwrap();
        Self::new(backoff)
    }
}

/// The result of [`retry_counted`]: the outcome and how many calls it took.
#[derive(Debug)]
pub struct Retried<T> {
    /// The last call's result (the first success, or the error we gave up on).
    pub result: Result<T, kube::Error>,
    /// How many calls were made (1 = no retry).
    pub attempts: u32,
}

/// Runs `op` and retries it per `policy` while [`classify`] says `Retry`.
///
/// Each retry logs one line at info: `op`, attempt, status code, reason and delay. Fatal and
/// AlreadyExists errors return at once. `op` must be safe to repeat (a create with a fixed name is).
pub async fn retry<T, F, Fut>(policy: &RetryPolicy, op_name: &str, op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry_counted(policy, op_name, op).await.result
}

/// Like [`retry`], and also reports how many calls were made (for "retries" in summaries).
pub async fn retry_counted<T, F, Fut>(policy: &RetryPolicy, op_name: &str, mut op: F) -> Retried<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    let attempts = AtomicU32::new(0);
    let backoff = policy
        .backoff
        .clone()
        .with_max_attempts(policy.max_attempts - 1)
        .build();
    let result = (|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        op()
    })
    .retry(backoff)
    .when(|e| classify(e).is_retryable())
    .adjust(|e, proposed| policy.adjust(e, proposed, started))
    .notify(|e, delay| {
        let disposition = classify(e);
        tracing::info!(
            op = op_name,
            attempt = attempts.load(Ordering::Relaxed),
            status = status_code(e),
            reason = disposition.reason().as_str(),
            delay_ms = delay.as_millis() as u64,
            "retrying",
        );
    })
    .await;
    if let Err(e) = &result {
        let n = attempts.load(Ordering::Relaxed);
        tracing::debug!(op = op_name, attempts = n, error = %e, "giving up");
    }
    Retried {
        result,
        attempts: attempts.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::StatusDetails;

    fn status(code: u16, reason: &str) -> Status {
        Status::failure("test", reason).with_code(code)
    }

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(status(code, reason).boxed())
    }

    fn api_retry_after(code: u16, secs: u32) -> kube::Error {
        let details: StatusDetails =
            serde_json::from_value(serde_json::json!({ "retryAfterSeconds": secs })).unwrap();
        kube::Error::Api(
            status(code, "TooManyRequests")
                .with_details(details)
                .boxed(),
        )
    }

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

    fn fast_policy() -> RetryPolicy {
        RetryPolicy::new(
            FullJitter::try_new(Duration::from_millis(1), Duration::from_millis(10), 2.0).unwrap(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn fatal_errors_should_never_be_retried() {
        for code in [400, 401, 403, 404, 422] {
            let calls = AtomicU32::new(0);
            let out = retry_counted(&fast_policy(), "create", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(api(code, "x"))
            })
            .await;
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{code}");
            assert_eq!(out.attempts, 1);
        }
        let calls = AtomicU32::new(0);
        let _ = retry(&fast_policy(), "create", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(api(409, "AlreadyExists"))
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_should_be_retried_until_success() {
        let calls = AtomicU32::new(0);
        let out = retry_counted(&fast_policy(), "create", || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(api(409, "Conflict"))
            } else {
                Ok("pod")
            }
        })
        .await;
        assert_eq!(out.result.unwrap(), "pod");
        assert_eq!(out.attempts, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn max_attempts_should_bound_the_calls() {
        let calls = AtomicU32::new(0);
        let out = retry_counted(&fast_policy().with_max_attempts(3), "create", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(api(503, ""))
        })
        .await;
        assert!(out.result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_should_be_honoured_and_capped() {
        let policy = fast_policy().with_max_retry_after(Duration::from_secs(5));
        // Honoured: the server asks for 2 s, far above the 10 ms backoff cap.
        let start = Instant::now();
        let calls = AtomicU32::new(0);
        let _ = retry(&policy, "create", || async {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(api_retry_after(429, 2))
            } else {
                Ok(())
            }
        })
        .await;
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(2), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        // Capped: the server asks for an hour, we wait 5 s.
        let start = Instant::now();
        let calls = AtomicU32::new(0);
        let _ = retry(&policy, "create", || async {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(api_retry_after(429, 3600))
            } else {
                Ok(())
            }
        })
        .await;
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(5), "{waited:?}");
        assert!(waited < Duration::from_secs(6), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_should_count_response_time() {
        // Each answer takes 1 s (like a slow 409 under load); the budget is 5 s.
        let policy = fast_policy()
            .with_max_attempts(1000)
            .with_deadline(Some(Duration::from_secs(5)));
        let start = Instant::now();
        let calls = AtomicU32::new(0);
        let out = retry_counted(&policy, "create", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err::<(), _>(api(409, "Conflict"))
        })
        .await;
        assert!(out.result.is_err());
        let n = calls.load(Ordering::SeqCst);
        assert!((5..=6).contains(&n), "{n} calls");
        // Never more than one call past the deadline.
        assert!(start.elapsed() <= Duration::from_secs(6) + Duration::from_millis(10));
    }

    use proptest::prelude::*;

    proptest! {
        /// The delay the policy picks: at least the capped Retry-After, never past the deadline,
        /// and none once the deadline has passed.
        #[test]
        fn adjusted_delays_should_respect_retry_after_cap_and_deadline(
            proposed_ms in 0u64..20_000,
            retry_after_s in proptest::option::of(0u32..10_000),
            cap_s in 1u64..60,
            deadline_s in 1u64..300,
            elapsed_s in 0u64..400,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            rt.block_on(async {
                let policy = fast_policy()
                    .with_max_retry_after(Duration::from_secs(cap_s))
                    .with_deadline(Some(Duration::from_secs(deadline_s)));
                let started = Instant::now();
                tokio::time::advance(Duration::from_secs(elapsed_s)).await;
                let err = match retry_after_s {
                    Some(s) => api_retry_after(429, s),
                    None => api(429, "TooManyRequests"),
                };
                let proposed = Duration::from_millis(proposed_ms);
                let remaining = Duration::from_secs(deadline_s).saturating_sub(Duration::from_secs(elapsed_s));
                match policy.adjust(&err, Some(proposed), started) {
                    None => prop_assert!(remaining.is_zero()),
                    Some(d) => {
                        prop_assert!(d <= remaining);
                        let floor = retry_after_s
                            .map(|s| Duration::from_secs(u64::from(s)).min(Duration::from_secs(cap_s)))
                            .unwrap_or_default()
                            .max(proposed);
                        prop_assert_eq!(d, floor.min(remaining));
                    }
                }
                prop_assert_eq!(policy.adjust(&err, None, started), None);
                Ok(())
            })?;
        }
    }
}
