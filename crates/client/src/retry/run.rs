//! The retry loop: runs a call and retries it per a [`RetryPolicy`] while the error's
//! [`Classify::disposition`] (for kube errors, [`classify`](super::classify)) says `Retry`,
//! logging each retry as one line.

use std::sync::atomic::{AtomicU32, Ordering};

use backon::{BackoffBuilder, Retryable};
use tokio::time::Instant;

use super::disposition::Classify;
use super::policy::RetryPolicy;

/// The result of [`retry_counted`]: the outcome and how many calls it took.
#[derive(Debug)]
pub struct Retried<T, E = kube::Error> {
    /// The last call's result (the first success, or the error we gave up on).
    pub result: Result<T, E>,
    /// How many calls were made (1 = no retry).
    pub attempts: u32,
}

/// Runs `op` and retries it per `policy` while its error's [`Classify::disposition`] says
/// `Retry` (a kube error's is [`classify`](super::classify)'s table).
///
/// Each retry logs one line at info: `op`, attempt, status code, reason and delay. Fatal and
/// AlreadyExists errors return at once. `op` must be safe to repeat (a create with a fixed name is).
pub async fn retry<T, E, F, Fut>(policy: &RetryPolicy, op_name: &str, op: F) -> Result<T, E>
where
    E: Classify,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry_counted(policy, op_name, op).await.result
}

/// Like [`retry`], and also reports how many calls were made (for "retries" in summaries).
pub async fn retry_counted<T, E, F, Fut>(
    policy: &RetryPolicy,
    op_name: &str,
    mut op: F,
) -> Retried<T, E>
where
    E: Classify,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let attempts = AtomicU32::new(0);
    let backoff = policy
        .backoff()
        .clone()
        .with_max_attempts(policy.max_attempts() - 1)
        .build();
    let result = (|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        op()
    })
    .retry(backoff)
    .when(|e| e.disposition().is_retryable())
    .adjust(|e, proposed| policy.adjust(e.disposition(), proposed, started))
    .notify(|e, delay| {
        let disposition = e.disposition();
        tracing::info!(
            op = op_name,
            attempt = attempts.load(Ordering::Relaxed),
            status = e.status_code(),
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
    use std::time::Duration;

    use super::*;
    use crate::retry::test_support::{api, api_retry_after, fast_policy};

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
}
