//! Full-jitter exponential backoff, and a wrapper that forgets old failures.
//!
//! Why full jitter: when many clients fail at once (50 creates answered 409 together), a backoff
//! without randomness makes them all come back together and lose the same race again. AWS's
//! "full jitter" draws each delay uniformly from `[0, envelope]`, where the envelope grows
//! exponentially (`base * factor^n`) up to `cap`. It spreads retries the most for the least total
//! waiting.
//!
//! - [`FullJitter`] is the validated configuration (a backon [`BackoffBuilder`]), with an optional
//!   attempt limit and an overall deadline measured on tokio's clock from [`BackoffBuilder::build`],
//!   so time spent waiting for responses counts too.
//! - [`FullJitterBackoff`] is the running iterator of delays (a backon [`backon::Backoff`]).
//! - [`ResetAfterHealthy`] wraps a builder for long-running loops (the watch): after a quiet period
//!   without failures the envelope starts small again.
//!
//! ```
//! use std::time::Duration;
//! use podline_client::backoff::FullJitter;
//! use backon::BackoffBuilder;
//!
//! let policy = FullJitter::try_new(Duration::from_millis(100), Duration::from_secs(15), 2.0)
//!     .expect("valid backoff")
//!     .with_max_attempts(8);
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! # rt.block_on(async {
//! let delays: Vec<Duration> = policy.build().collect();
//! assert_eq!(delays.len(), 8);
//! assert!(delays.iter().all(|d| *d <= Duration::from_secs(15)));
//! # });
//! ```

use std::time::Duration;

use backon::BackoffBuilder;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use crate::error::InvalidBackoff;

/// Configuration of a full-jitter exponential backoff: attempt `n` (from 0) sleeps
/// `uniform(0, min(cap, base * factor^n))`.
///
/// Build it with [`FullJitter::try_new`] (which validates), then optionally bound it with
/// [`FullJitter::with_max_attempts`] and [`FullJitter::with_deadline`]. It is cheap to clone, so one
/// configuration can start many independent backoffs.
#[derive(Debug, Clone, PartialEq)]
pub struct FullJitter {
    base: Duration,
    cap: Duration,
    factor: f64,
    max_attempts: Option<u32>,
    deadline: Option<Duration>,
    seed: Option<u64>,
}

impl FullJitter {
    /// Validates and builds a backoff: `base > 0`, `cap >= base`, `factor >= 1` and finite.
    ///
    /// Invalid settings are rejected rather than clamped, so a typo in a flag fails loudly.
    pub fn try_new(base: Duration, cap: Duration, factor: f64) -> Result<Self, InvalidBackoff> {
        if base.is_zero() {
            return Err(InvalidBackoff::ZeroBase);
        }
        if cap < base {
            return Err(InvalidBackoff::CapBelowBase { base, cap });
        }
        if !factor.is_finite() || factor < 1.0 {
            return Err(InvalidBackoff::Factor(factor));
        }
        Ok(Self {
            base,
            cap,
            factor,
            max_attempts: None,
            deadline: None,
            seed: None,
        })
    }

    /// A doubling backoff from fixed settings, for defaults written in code: evaluated in a
    /// `const` block (`const { FullJitter::doubling(base, cap) }`), a zero `base` or a `cap`
    /// below it fails the build instead of needing an `unwrap()` at run time. Settings a user
    /// gives go through [`FullJitter::try_new`].
    pub const fn doubling(base: Duration, cap: Duration) -> Self {
        assert!(!base.is_zero(), "a backoff's base must be above zero");
        assert!(
            cap.as_nanos() >= base.as_nanos(),
            "a backoff's cap must not be below its base"
        );
        Self {
            base,
            cap,
            factor: 2.0,
            max_attempts: None,
            deadline: None,
            seed: None,
        }
    }

    /// Stops after `n` delays (so at most `n + 1` calls of the retried operation).
    #[must_use]
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Stops once `deadline` has passed since the backoff was built, and never hands out a delay
    /// that would end past it. The clock is tokio's, and it runs while responses are awaited too.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Makes the jitter reproducible (tests and benchmarks); production uses OS entropy.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The smallest envelope (the upper bound of the first delay).
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The largest envelope: no delay is ever longer.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The configured attempt limit, if any.
    pub fn max_attempts(&self) -> Option<u32> {
        self.max_attempts
    }

    /// The configured overall deadline, if any.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The upper bound of the delay for attempt `n` (from 0): `min(cap, base * factor^n)`.
    pub fn envelope(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt).unwrap_or(i32::MAX);
        let nanos = self.base.as_nanos() as f64 * self.factor.powi(exponent);
        let cap_nanos = self.cap.as_nanos() as f64;
        if !nanos.is_finite() || nanos >= cap_nanos {
            self.cap
        } else {
            // `nanos < cap_nanos`, and a Duration's nanos fit in a u64 for any sane cap.
            Duration::from_nanos(nanos as u64)
        }
    }
}

impl BackoffBuilder for FullJitter {
    type Backoff = FullJitterBackoff;

    fn build(self) -> FullJitterBackoff {
        let rng = match self.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => rand::make_rng::<StdRng>(),
        };
        FullJitterBackoff {
            config: self,
            attempt: 0,
            started: Instant::now(),
            rng,
        }
    }
}

/// A running full-jitter backoff: an iterator of delays that ends (`None`) when the attempt
/// limit or the deadline is reached. Use it through backon (`op.retry(config)`) or directly.
#[derive(Debug)]
pub struct FullJitterBackoff {
    config: FullJitter,
    attempt: u32,
    started: Instant,
    rng: StdRng,
}

impl FullJitterBackoff {
    /// Starts over: attempt 0, and the deadline counts from now.
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.started = Instant::now();
    }

    /// How many delays were handed out since the start (or the last reset).
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Time left before the deadline, if one is set.
    pub fn remaining(&self) -> Option<Duration> {
        self.config
            .deadline
            .map(|d| d.saturating_sub(self.started.elapsed()))
    }
}

impl Iterator for FullJitterBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self
            .config
            .max_attempts
            .is_some_and(|max| self.attempt >= max)
        {
            return None;
        }
        let envelope = self.config.envelope(self.attempt);
        let mut delay = Duration::from_nanos(
            self.rng
                .random_range(0..=u64::try_from(envelope.as_nanos()).unwrap_or(u64::MAX)),
        );
        if let Some(remaining) = self.remaining() {
            if remaining.is_zero() {
                return None;
            }
            delay = delay.min(remaining);
        }
        self.attempt = self.attempt.saturating_add(1);
        Some(delay)
    }
}

/// Wraps a backoff so that it starts over after `healthy` time without a failure.
///
/// Why: a watch that ran fine for an hour and then hits one reset should reconnect quickly, not
/// at the 30 s envelope it reached during an outage the day before. Each call of `next()` means
/// "a failure happened now"; if the previous failure is older than `healthy`, the inner backoff is
/// rebuilt first. Time is tokio's, so tests can pause it.
#[derive(Debug)]
pub struct ResetAfterHealthy<B: BackoffBuilder + Clone> {
    builder: B,
    current: B::Backoff,
    healthy: Duration,
    last_failure: Option<Instant>,
}

impl<B: BackoffBuilder + Clone> ResetAfterHealthy<B> {
    /// Starts a backoff from `builder` that resets after `healthy` without a failure.
    pub fn new(builder: B, healthy: Duration) -> Self {
        Self {
            current: builder.clone().build(),
            builder,
            healthy,
            last_failure: None,
        }
    }

    /// Forgets all failures now (e.g. after a clean, expected end of a watch).
    pub fn reset(&mut self) {
        self.current = self.builder.clone().build();
        self.last_failure = None;
    }
}

impl<B: BackoffBuilder + Clone> Iterator for ResetAfterHealthy<B> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = Instant::now();
        if self
            .last_failure
            .is_some_and(|last| now.duration_since(last) >= self.healthy)
        {
            self.current = self.builder.clone().build();
        }
        self.last_failure = Some(now);
        self.current.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn try_new_should_reject_invalid_settings() {
        assert_eq!(
            FullJitter::try_new(Duration::ZERO, ms(1), 2.0),
            Err(InvalidBackoff::ZeroBase)
        );
        assert_eq!(
            FullJitter::try_new(ms(10), ms(5), 2.0),
            Err(InvalidBackoff::CapBelowBase {
                base: ms(10),
                cap: ms(5)
            })
        );
        assert!(matches!(
            FullJitter::try_new(ms(1), ms(5), 0.5),
            Err(InvalidBackoff::Factor(_))
        ));
        assert!(matches!(
            FullJitter::try_new(ms(1), ms(5), f64::NAN),
            Err(InvalidBackoff::Factor(_))
        ));
        assert!(FullJitter::try_new(ms(5), ms(5), 1.0).is_ok());
    }

    /// The constant constructor builds what the validating one builds for the same settings.
    #[test]
    fn doubling_should_equal_try_new_with_factor_two() {
        const FIXED: FullJitter =
            FullJitter::doubling(Duration::from_millis(100), Duration::from_secs(15));
        assert_eq!(
            Ok(FIXED),
            FullJitter::try_new(Duration::from_millis(100), Duration::from_secs(15), 2.0)
        );
    }

    #[test]
    fn envelope_should_double_until_the_cap() {
        let b = FullJitter::try_new(ms(100), ms(1000), 2.0).unwrap();
        let envelopes: Vec<_> = (0..6).map(|n| b.envelope(n)).collect();
        assert_eq!(
            envelopes,
            vec![ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(b.envelope(u32::MAX), ms(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn max_attempts_should_end_the_backoff() {
        let b = FullJitter::try_new(ms(1), ms(10), 2.0)
            .unwrap()
            .with_max_attempts(3);
        assert_eq!(b.build().count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_should_count_time_spent_outside_sleeps() {
        let b = FullJitter::try_new(ms(100), ms(100), 1.0)
            .unwrap()
            .with_deadline(Duration::from_secs(1));
        let mut backoff = b.build();
        assert!(backoff.next().is_some());
        // A slow response (not a sleep) uses up the budget.
        tokio::time::advance(Duration::from_millis(950)).await;
        let last = backoff.next().expect("50 ms remain");
        assert!(last <= ms(50), "{last:?} would end past the deadline");
        tokio::time::advance(Duration::from_millis(50)).await;
        assert_eq!(backoff.next(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn seeded_backoffs_should_be_reproducible() {
        let b = FullJitter::try_new(ms(10), ms(10_000), 2.0)
            .unwrap()
            .with_max_attempts(10)
            .with_seed(7);
        let first: Vec<_> = b.clone().build().collect();
        let second: Vec<_> = b.build().collect();
        assert_eq!(first, second);
        // Full jitter: not every delay sits on its envelope.
        assert!(first.iter().enumerate().any(|(n, d)| {
            *d < FullJitter::try_new(ms(10), ms(10_000), 2.0)
                .unwrap()
                .envelope(n as u32)
        }));
    }

    #[tokio::test(start_paused = true)]
    async fn reset_after_healthy_should_start_small_again() {
        let b = FullJitter::try_new(ms(100), ms(100_000), 2.0)
            .unwrap()
            .with_max_attempts(3);
        let mut backoff = ResetAfterHealthy::new(b, Duration::from_secs(120));
        // Failures in a burst use up the three attempts.
        assert!(backoff.next().is_some());
        assert!(backoff.next().is_some());
        assert!(backoff.next().is_some());
        assert_eq!(backoff.next(), None);
        // A failure after a healthy period starts from attempt 0 again.
        tokio::time::advance(Duration::from_secs(121)).await;
        let d = backoff.next().expect("reset after a healthy period");
        assert!(d <= ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_should_drive_backon_retries() {
        use backon::Retryable;
        let calls = std::sync::atomic::AtomicU32::new(0);
        let b = FullJitter::try_new(ms(10), ms(100), 2.0)
            .unwrap()
            .with_max_attempts(4);
        let result: Result<(), &str> = (|| async {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err("nope")
        })
        .retry(b)
        .await;
        assert_eq!(result, Err("nope"));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 5);
    }

    fn valid_backoff() -> impl Strategy<Value = FullJitter> {
        (1u64..10_000, 0u64..1_000_000, 1.0f64..4.0, any::<u64>()).prop_map(
            |(base, extra, factor, seed)| {
                FullJitter::try_new(ms(base), ms(base + extra), factor)
                    .unwrap()
                    .with_seed(seed)
            },
        )
    }

    proptest! {
        #[test]
        fn delays_should_stay_within_zero_and_cap(b in valid_backoff(), n in 1u32..64) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            rt.block_on(async {
                let cap = b.cap();
                for (attempt, d) in b.clone().build().take(n as usize).enumerate() {
                    prop_assert!(d <= cap);
                    prop_assert!(d <= b.envelope(attempt as u32));
                }
                Ok(())
            })?;
        }

        #[test]
        fn envelope_should_grow_by_factor_until_cap(b in valid_backoff(), n in 0u32..40) {
            let now = b.envelope(n).as_nanos() as f64;
            let next = b.envelope(n + 1).as_nanos() as f64;
            let cap = b.cap().as_nanos() as f64;
            let expected = (now * b.factor).min(cap);
            // Nanosecond rounding only.
            prop_assert!((next - expected).abs() <= b.factor + 1.0, "n={n} now={now} next={next} expected={expected}");
            prop_assert!(next <= cap);
        }

        #[test]
        fn delays_should_never_end_past_the_deadline(
            b in valid_backoff(),
            deadline_ms in 1u64..100_000,
            response_ms in proptest::collection::vec(0u64..5_000, 1..30),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            rt.block_on(async {
                let deadline = ms(deadline_ms);
                let start = Instant::now();
                let mut backoff = b.with_deadline(deadline).build();
                for response in response_ms {
                    tokio::time::advance(ms(response)).await;
                    match backoff.next() {
                        Some(d) => {
                            prop_assert!(start.elapsed() + d <= deadline);
                            tokio::time::advance(d).await;
                        }
                        None => {
                            prop_assert!(start.elapsed() >= deadline);
                            break;
                        }
                    }
                }
                Ok(())
            })?;
        }
    }
}
