//! Bounded connects: a new connection that is not usable within the connect timeout is
//! abandoned and tried again, with full-jitter backoff, and the failures are logged at a rate.
//!
//! Why: PING ([`crate::ping`]) notices a dead connection within seconds, but the connection
//! opened next may be dead too (a frozen network accepts nothing, or a proxy accepts the TCP
//! connection and never answers the TLS handshake). One connect bounded only by the old 30 s
//! timeout kept a recorder silent and blind for 30 s after the network came back. Here each
//! attempt (TCP connect, proxy tunnel, TLS handshake) gets the connect timeout (default: the
//! PING timeout, so a connection is never given longer to come up than a live one has to answer
//! a PING), then the next attempt starts after a short full-jitter delay, until the dial's budget
//! (the old bound: the client timeout, at most 30 s) is spent; then the request fails with the
//! last error and the caller's own retry (the watch's backoff, [`crate::retry`]) takes over.
//! The HTTP/2 handshake after TLS needs no timer of its own: a new connection that never hears
//! from the server is closed by PING like any other.
//!
//! Only attempts that time out are retried here: a refused or reset connection, or a rejected
//! certificate, fails the request at once as before, so the caller classifies it (a certificate
//! problem is not retried at all). Abandoned attempts are warned about at once, then at most once
//! per [`WARN_EVERY`] with the count so far, and a success after a warning says how many
//! attempts failed; the log is shared by every connect of one client.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use backon::BackoffBuilder;
use futures::future::BoxFuture;
use http::Uri;
use tokio::time::{Duration, Instant};
use tower::{BoxError, Service, ServiceExt};

use crate::backoff::FullJitter;
use crate::timeouts::format_duration;

/// The smallest delay envelope between two attempts.
const BACKOFF_BASE: Duration = Duration::from_millis(50);
/// The largest delay between two attempts (also at most half the connect timeout): small, so a
/// network that comes back is used within about one attempt.
const BACKOFF_CAP: Duration = Duration::from_secs(1);
/// At most one warning per this long during one run of failing connects.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// How a dial is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DialLimits {
    /// Each attempt (TCP + proxy + TLS) is abandoned after this long.
    pub attempt: Duration,
    /// Attempts stop once this long has passed since the dial began; the last error is returned.
    pub budget: Duration,
}

impl DialLimits {
    /// The backoff between attempts: full jitter from [`BACKOFF_BASE`] up to [`BACKOFF_CAP`] or
    /// half an attempt, whichever is smaller.
    fn backoff(&self) -> FullJitter {
        let cap = BACKOFF_CAP.min(self.attempt / 2).max(BACKOFF_BASE);
        // Invariant: the base is 50 ms (> 0), cap >= base (the `max` above), factor 2 >= 1.
        #[allow(clippy::expect_used)]
        FullJitter::try_new(BACKOFF_BASE, cap, 2.0).expect("base > 0, cap >= base, factor >= 1")
    }
}

/// The rate limiter of the warnings about abandoned attempts (modelled on
/// [`crate::watch::OutageLog`], but every abandoned attempt counts: none is routine).
#[derive(Debug, Default)]
struct DialLog {
    /// Abandoned attempts since the last connection that came up.
    failures: u32,
    /// When the last warning of this run of failures was logged.
    warned_at: Option<Instant>,
}

impl DialLog {
    /// An attempt was abandoned: `Some(count)` when it is to be warned about.
    fn failed(&mut self) -> Option<u32> {
        self.failures = self.failures.saturating_add(1);
        let now = Instant::now();
        if self
            .warned_at
            .is_some_and(|at| now.duration_since(at) < WARN_EVERY)
        {
            return None;
        }
        self.warned_at = Some(now);
        Some(self.failures)
    }

    /// A connection came up: `Some(count)` when failures had been warned about.
    fn succeeded(&mut self) -> Option<u32> {
        let failures = std::mem::take(&mut self.failures);
        self.warned_at.take().map(|_| failures)
    }
}

/// A connector whose connects are bounded and retried (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct BoundedConnect<C> {
    inner: C,
    limits: DialLimits,
    /// The server, without credentials, for the log lines.
    server: Arc<str>,
    log: Arc<Mutex<DialLog>>,
}

impl<C> BoundedConnect<C> {
    /// Wraps `inner` (TCP, proxy and TLS); `server` names the server in log lines.
    pub(crate) fn new(inner: C, limits: DialLimits, server: &str) -> Self {
        Self {
            inner,
            limits,
            server: server.into(),
            log: Arc::default(),
        }
    }
}

/// Why an attempt was abandoned: it did not finish within the connect timeout. Its kind is
/// [`std::io::ErrorKind::TimedOut`], which [`crate::retry`] treats as a transient timeout.
pub(crate) fn abandoned(attempt: Duration) -> BoxError {
    Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "no connection within the connect timeout ({}): TCP connect and TLS handshake not done",
            format_duration(attempt)
        ),
    ))
}

impl<C> Service<Uri> for BoundedConnect<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Response: Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<C::Response, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Each call waits for its own clone of the inner connector.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.dial_since(uri, Instant::now()).await })
    }
}

impl<C> BoundedConnect<C> {
    /// How each dial is bounded.
    pub(crate) fn limits(&self) -> DialLimits {
        self.limits
    }
}

impl<C> BoundedConnect<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    /// One dial (attempts until one comes up or the budget is spent), its budget counted from
    /// `started`: a request that waited for another's dial ([`crate::flight`]) before dialling
    /// itself gets only what is left of its own budget.
    pub(crate) async fn dial_since(
        self,
        uri: Uri,
        started: Instant,
    ) -> Result<C::Response, BoxError> {
        let mut delays = self.limits.backoff().build();
        let mut attempt = 0u32;
        loop {
            attempt = attempt.saturating_add(1);
            let connecting = self.inner.clone().oneshot(uri.clone());
            // The last attempt gets what is left of the budget, so a dial never outlasts it.
            let left = self.limits.budget.saturating_sub(started.elapsed());
            let bound = self.limits.attempt.min(left);
            let err = match tokio::time::timeout(bound, connecting).await {
                Ok(Ok(conn)) => {
                    if let Some(failures) = self.lock().succeeded() {
                        tracing::info!(
                            server = %self.server,
                            failures,
                            "connected to the API server again after {failures} abandoned connection attempts"
                        );
                    }
                    return Ok(conn);
                }
                // Refused, reset, TLS rejected...: the caller classifies it (see the module doc).
                Ok(Err(err)) => return Err(err.into()),
                Err(_) => abandoned(self.limits.attempt),
            };
            let delay = delays.next().unwrap_or(BACKOFF_CAP);
            let out_of_budget = started.elapsed() + delay >= self.limits.budget;
            if let Some(failures) = self.lock().failed() {
                tracing::warn!(
                    server = %self.server,
                    failures,
                    attempt,
                    timeout = %format_duration(self.limits.attempt),
                    "a new connection to the API server did not come up within the connect timeout; {}",
                    if out_of_budget { "giving up on this request" } else { "retrying" }
                );
            } else {
                tracing::debug!(server = %self.server, attempt, "connection attempt abandoned");
            }
            if out_of_budget {
                return Err(err);
            }
            tokio::time::sleep(delay).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DialLog> {
        // A panic while holding this lock leaves only counters behind: keep using them.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A connector whose first `hang` calls never finish, then answer `Ok(n)` (the attempt
    /// number); or `Err` for every call when `refuse` is set.
    #[derive(Clone)]
    struct Hanging {
        calls: Arc<AtomicU32>,
        hang: u32,
        refuse: bool,
    }

    impl Service<Uri> for Hanging {
        type Response = u32;
        type Error = std::io::Error;
        type Future = BoxFuture<'static, Result<u32, std::io::Error>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _uri: Uri) -> Self::Future {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let (hang, refuse) = (self.hang, self.refuse);
            Box::pin(async move {
                if refuse {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        "refused",
                    ));
                }
                if n <= hang {
                    std::future::pending::<()>().await;
                }
                Ok(n)
            })
        }
    }

    fn limits(attempt_ms: u64, budget_ms: u64) -> DialLimits {
        DialLimits {
            attempt: Duration::from_millis(attempt_ms),
            budget: Duration::from_millis(budget_ms),
        }
    }

    fn connector(hang: u32, refuse: bool) -> (BoundedConnect<Hanging>, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let inner = Hanging {
            calls: calls.clone(),
            hang,
            refuse,
        };
        (
            BoundedConnect::new(inner, limits(1000, 30_000), "https://sim"),
            calls,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_hanging_past_the_connect_timeout_should_be_abandoned_and_retried() {
        let (mut dial, calls) = connector(3, false);
        let started = Instant::now();
        let conn = dial.call(Uri::from_static("https://sim")).await.unwrap();
        assert_eq!(
            conn, 4,
            "three hung attempts were abandoned, the fourth came up"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        let took = started.elapsed();
        // 3 abandoned attempts of 1 s, plus 3 delays of at most half an attempt each.
        assert!(
            took >= Duration::from_secs(3) && took <= Duration::from_millis(4500),
            "{took:?}"
        );
        let log = dial.lock();
        assert_eq!(log.failures, 0, "the success ended the run of failures");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dial_should_give_up_with_a_timeout_when_its_budget_is_spent() {
        let (mut dial, inner_calls) = connector(u32::MAX, false);
        dial.limits = limits(1000, 5000);
        let started = Instant::now();
        let err = dial
            .call(Uri::from_static("https://sim"))
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(took <= Duration::from_secs(5), "{took:?}");
        let io = err.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        assert!(io.to_string().contains("connect timeout (1s)"), "{io}");
        let calls = inner_calls.load(Ordering::SeqCst);
        assert!((3..=5).contains(&calls), "{calls} attempts");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_connect_should_fail_at_once_for_the_caller_to_classify() {
        let (mut dial, calls) = connector(0, true);
        let err = dial
            .call(Uri::from_static("https://sim"))
            .await
            .unwrap_err();
        let io = err.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn abandoned_attempts_should_be_warned_about_at_once_then_once_per_interval() {
        let mut log = DialLog::default();
        assert_eq!(log.failed(), Some(1));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(log.failed(), None);
        tokio::time::advance(WARN_EVERY).await;
        assert_eq!(log.failed(), Some(3));
        assert_eq!(log.succeeded(), Some(3));
        assert_eq!(log.succeeded(), None);
        assert_eq!(log.failed(), Some(1), "a new run of failures warns at once");
    }

    #[test]
    fn the_backoff_should_stay_within_half_an_attempt() {
        assert_eq!(limits(1000, 1).backoff().cap(), Duration::from_millis(500));
        assert_eq!(limits(10_000, 1).backoff().cap(), BACKOFF_CAP);
        assert_eq!(limits(20, 1).backoff().cap(), BACKOFF_BASE);
    }
}
