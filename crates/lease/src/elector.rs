//! The election loop: an explicit state machine (`Following` / `Leading` / `Stopped`), one async
//! step per state, and the watch channel that tells the application whether it may write.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use rand::RngExt;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backend::{KubeLeaseApi, LeaseApi, is_conflict, is_fatal};
use crate::config::{ElectionConfig, JITTER};
use crate::decide::{Decision, Observer, decide};
use crate::error::{CallError, ConfigError, ElectionError};
use crate::lead::{Ended, LeadError};
use crate::leadership::Leadership;
use crate::record;

/// Competes for one Lease with other replicas; [`LeaderElector::run`] starts it.
///
/// Every replica of a Deployment runs one, with the same lease name and its own identity (the pod
/// name). At most one of them is leader at any moment; if it dies, another takes over within the
/// lease duration of its last renewal; if it stops gracefully, it clears the lease and another
/// takes over at once (followers watch the lease, and poll it as a fallback).
#[derive(Clone)]
pub struct LeaderElector {
    client: kube::Client,
    namespace: String,
    name: String,
    identity: String,
    cfg: ElectionConfig,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// An elector for the Lease `namespace/lease_name`, competing as `identity`.
    ///
    /// The lease is created on first use. `identity` must be unique per replica: two processes
    /// with the same identity both believe they hold the lease.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
        cfg: ElectionConfig,
    ) -> Result<Self, ConfigError> {
        let identity = identity.into();
        if identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        Ok(Self {
            client,
            namespace: namespace.into(),
            name: lease_name.into(),
            identity,
            cfg,
        })
    }

    /// Starts competing in a background task and returns the handle that says whether this
    /// replica leads. Must be called inside a tokio runtime. For work that should simply run
    /// while this replica leads, [`LeaderElector::lead`] does the rest.
    pub fn run(self) -> Leadership {
        let api = KubeLeaseApi {
            api: Api::namespaced(self.client, &self.namespace),
            name: self.name.clone(),
        };
        spawn(api, self.namespace, self.name, self.identity, self.cfg)
    }

    /// Runs `work` only while this replica holds the Lease, and returns how that ended.
    ///
    /// - Stands by (competing) until this replica leads; `work` is not called before. Shutdown
    ///   meanwhile returns [`Ended::ShutdownBeforeLeading`].
    /// - Then calls `work` with a token that is cancelled on `shutdown`: the work should finish
    ///   what it holds (flush) and return. Once it returns, the Lease is released, so a standby
    ///   takes over at once rather than after the lease duration, and its result is returned:
    ///   [`Ended::WorkFinished`], or [`LeadError::Work`].
    /// - If leadership is lost first (another replica took the Lease, or renewals failed until
    ///   the renew deadline), the work future is dropped at once, without being awaited, and its
    ///   token cancelled (for the tasks it spawned): [`LeadError::Lost`]. A write already in
    ///   flight may still land, so keep writes idempotent.
    /// - An election that fails for good (RBAC forbids the Lease) returns
    ///   [`LeadError::Election`], whether standing by or leading.
    pub async fn lead<F, Fut, T, E>(
        self,
        shutdown: &CancellationToken,
        work: F,
    ) -> Result<Ended<T>, LeadError<E>>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        crate::lead::lead(self.run(), shutdown, work).await
    }
}

/// Spawns the election loop over any [`LeaseApi`] (the real API, or a fake in unit tests).
pub(crate) fn spawn<A: LeaseApi>(
    api: A,
    namespace: String,
    name: String,
    identity: String,
    cfg: ElectionConfig,
) -> Leadership {
    let (tx, rx) = watch::channel(false);
    let cancel = CancellationToken::new();
    let span = info_span!("lease", namespace = %namespace, lease = %name, identity = %identity);
    let election = Election {
        api,
        namespace,
        name,
        identity: identity.clone(),
        cfg,
        leader: tx,
        cancel: cancel.clone(),
        observer: Observer::default(),
    };
    let task = tokio::spawn(election.run().instrument(span));
    Leadership::new(identity, rx, cancel, task)
}

/// Where the elector is. Each variant's step says what it does next.
enum State {
    /// Not leader. Step: read the lease; take it if free, ours or expired (conditional write),
    /// else wait until the next poll or the expiry, whichever is sooner, noting every version
    /// the lease watch delivers meanwhile (a release ends the wait at once).
    Following,
    /// Leader. Step: sleep until the next renewal, then renew (conditional write), retrying until
    /// the renew deadline; on a lost race or the deadline, step down to `Following`.
    Leading(Term),
    /// Cancelled (after releasing the lease if we held it). The loop ends.
    Stopped,
}

/// One stretch of leadership, as this replica knows it.
struct Term {
    /// The lease as we last wrote it; its resourceVersion guards the next write.
    lease: Box<Lease>,
    /// When the request that last renewed the lease was sent (our clock).
    renewed_at: Instant,
}

impl Term {
    /// Until when we may act as leader without another successful renewal.
    fn valid_until(&self, cfg: &ElectionConfig) -> Instant {
        self.renewed_at + cfg.renew_deadline()
    }
}

/// Result of one follower attempt.
enum Attempt {
    Acquired(Term),
    NotYet(Instant),
}

/// Why a renewal failed.
enum RenewError {
    /// The lease now belongs to someone else (or was deleted).
    Lost(Option<String>),
    /// Our copy was stale but the lease is still ours: retry at once with this copy.
    Stale(Box<Lease>),
    /// The call failed; retry until the deadline.
    Api(kube::Error),
}

struct Election<A> {
    api: A,
    namespace: String,
    name: String,
    identity: String,
    cfg: ElectionConfig,
    leader: watch::Sender<bool>,
    cancel: CancellationToken,
    observer: Observer,
}

/// The lease watch while following; dropped while leading (a leader needs no news). Kept out of
/// [`Election`] because a stream is `Send` but not `Sync`.
type Changes = Option<BoxStream<'static, Lease>>;

impl<A: LeaseApi> Election<A> {
    async fn run(mut self) -> Result<(), ElectionError> {
        let mut state = State::Following;
        let mut changes: Changes = None;
        let result = loop {
            let step = match state {
                State::Following => self.follow(&mut changes).await,
                State::Leading(term) => {
                    changes = None;
                    self.lead(term).await
                }
                State::Stopped => break Ok(()),
            };
            match step {
                Ok(next) => state = next,
                Err(err) => break Err(err),
            }
        };
        self.set_leader(false, "the election ended");
        result
    }

    /// The `Following` step.
    async fn follow(&mut self, changes: &mut Changes) -> Result<State, ElectionError> {
        let cancel = self.cancel.clone();
        let bound = self.cfg.renew_deadline();
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(State::Stopped),
            outcome = timeout(bound, self.try_acquire()) => outcome,
        };
        let next_try = match outcome {
            Ok(Err(fatal)) => return Err(fatal),
            Ok(Ok(Ok(Attempt::Acquired(term)))) => {
                self.set_leader(true, "acquired the lease");
                return Ok(State::Leading(term));
            }
            Ok(Ok(Ok(Attempt::NotYet(at)))) => at,
            Ok(Ok(Err(err))) => {
                debug!(error = %err, "lease poll failed; retrying");
                self.next_poll()
            }
            Err(_) => {
                debug!(timeout = ?bound, "lease poll timed out; retrying");
                self.next_poll()
            }
        };
        self.wait_watching(next_try, changes).await
    }

    /// A follower's wait for its next try. Every lease version the watch delivers is observed
    /// when it arrives, so the expiry is timed from the dead leader's last renewal as written,
    /// not from the next poll that happens to read it; a lease that becomes free or expired ends
    /// the wait early. Without a working watch this is a plain sleep until `next_try`.
    async fn wait_watching(
        &mut self,
        mut next_try: Instant,
        changes: &mut Changes,
    ) -> Result<State, ElectionError> {
        let cancel = self.cancel.clone();
        let changes = changes.get_or_insert_with(|| self.api.changes().boxed());
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(State::Stopped),
                () = sleep_until(next_try) => return Ok(State::Following),
                change = changes.next() => {
                    let Some(lease) = change else {
                        // The watch gave up (e.g. RBAC forbids it): poll only from now on.
                        *changes = futures::stream::pending().boxed();
                        continue;
                    };
                    let now = Instant::now();
                    let since = self.observer.observe(&lease, now);
                    match decide(&lease, &self.identity, since, now, self.cfg.lease_duration()) {
                        Decision::Acquire => return Ok(State::Following),
                        Decision::WaitUntil(expiry) => next_try = next_try.min(expiry),
                    }
                }
            }
        }
    }

    /// One follower attempt: read, decide, maybe write.
    async fn try_acquire(&mut self) -> Result<Result<Attempt, kube::Error>, ElectionError> {
        let current = match self.api.get().await {
            Ok(current) => current,
            Err(err) => return self.fatal_or(err),
        };
        let Some(current) = current else {
            let lease = record::fresh(
                &self.namespace,
                &self.name,
                &self.identity,
                self.cfg.lease_duration_seconds(),
                Timestamp::now(),
            );
            let sent = Instant::now();
            return match self.api.create(&lease).await {
                Ok(lease) => Ok(Ok(Attempt::Acquired(Term {
                    lease: Box::new(lease),
                    renewed_at: sent,
                }))),
                // Another elector created it first: read it at the next poll.
                Err(err) if is_conflict(&err) => Ok(Ok(Attempt::NotYet(self.next_poll()))),
                // A 404 on create means the namespace doesn't exist: no retry fixes that.
                Err(err) if is_fatal(&err) => Err(self.fatal(err)),
                Err(err) => Ok(Err(err)),
            };
        };
        let now = Instant::now();
        let since = self.observer.observe(&current, now);
        match decide(
            &current,
            &self.identity,
            since,
            now,
            self.cfg.lease_duration(),
        ) {
            Decision::WaitUntil(expiry) => Ok(Ok(Attempt::NotYet(expiry.min(self.next_poll())))),
            Decision::Acquire => {
                if let Some(previous) = record::holder(&current).filter(|h| *h != self.identity) {
                    info!(previous, "lease expired; taking over");
                }
                let claim = record::claimed(
                    &current,
                    &self.identity,
                    self.cfg.lease_duration_seconds(),
                    Timestamp::now(),
                );
                let sent = Instant::now();
                match self.api.replace(&claim).await {
                    Ok(lease) => Ok(Ok(Attempt::Acquired(Term {
                        lease: Box::new(lease),
                        renewed_at: sent,
                    }))),
                    // Someone wrote first (another follower, or the leader renewing).
                    Err(err) if is_conflict(&err) => Ok(Ok(Attempt::NotYet(self.next_poll()))),
                    Err(err) => self.fatal_or(err),
                }
            }
        }
    }

    /// The `Leading` step.
    async fn lead(&mut self, mut term: Term) -> Result<State, ElectionError> {
        let cancel = self.cancel.clone();
        tokio::select! {
            biased;
            () = cancel.cancelled() => return self.stop_leading(term.lease).await,
            () = sleep_until(term.renewed_at + self.cfg.retry_period()) => {}
        }
        let deadline = term.valid_until(&self.cfg);
        let mut stale_in_a_row = 0_u32;
        loop {
            let sent = Instant::now();
            if sent >= deadline {
                self.set_leader(false, "could not renew the lease before the renew deadline");
                return Ok(State::Following);
            }
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => return self.stop_leading(term.lease).await,
                outcome = timeout_at(deadline, self.renew(&term.lease)) => outcome,
            };
            match outcome {
                Ok(Ok(lease)) => {
                    return Ok(State::Leading(Term {
                        lease: Box::new(lease),
                        renewed_at: sent,
                    }));
                }
                Ok(Err(RenewError::Stale(lease))) => {
                    term.lease = lease;
                    // Retry at once with the fresh copy, but don't hammer the API server if
                    // it keeps answering 409 (a fault, or a misbehaving proxy).
                    stale_in_a_row += 1;
                    if stale_in_a_row > 1 {
                        let retry_at = (Instant::now() + self.cfg.retry_period()).min(deadline);
                        tokio::select! {
                            biased;
                            () = cancel.cancelled() => return self.stop_leading(term.lease).await,
                            () = sleep_until(retry_at) => {}
                        }
                    }
                }
                Ok(Err(RenewError::Lost(holder))) => {
                    let holder = holder.unwrap_or_default();
                    warn!(holder, "lost the lease to another replica");
                    self.set_leader(false, "the lease was taken over");
                    return Ok(State::Following);
                }
                Ok(Err(RenewError::Api(err))) if is_fatal(&err) => {
                    self.set_leader(false, "the API refused the renewal");
                    return Err(self.fatal(err));
                }
                Ok(Err(RenewError::Api(err))) => {
                    debug!(error = %err, "lease renewal failed; retrying");
                    let retry_at = (Instant::now() + self.cfg.retry_period()).min(deadline);
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return self.stop_leading(term.lease).await,
                        () = sleep_until(retry_at) => {}
                    }
                }
                Err(_) => {
                    self.set_leader(false, "could not renew the lease before the renew deadline");
                    return Ok(State::Following);
                }
            }
        }
    }

    /// One renewal: a conditional write; on a conflict, re-read to see whether it's still ours.
    async fn renew(&self, lease: &Lease) -> Result<Lease, RenewError> {
        let claim = record::claimed(
            lease,
            &self.identity,
            self.cfg.lease_duration_seconds(),
            Timestamp::now(),
        );
        match self.api.replace(&claim).await {
            Ok(lease) => Ok(lease),
            Err(err) if is_conflict(&err) => self.reread().await,
            // Deleted under us (e.g. by an operator): it isn't ours any more.
            Err(kube::Error::Api(status)) if status.code == 404 => Err(RenewError::Lost(None)),
            Err(err) => Err(RenewError::Api(err)),
        }
    }

    /// After a conflict: is the lease still ours (e.g. a renewal whose answer was lost did
    /// commit), or did someone take it?
    async fn reread(&self) -> Result<Lease, RenewError> {
        match self.api.get().await {
            Ok(Some(current)) if record::holder(&current) == Some(self.identity.as_str()) => {
                Err(RenewError::Stale(Box::new(current)))
            }
            Ok(Some(current)) => Err(RenewError::Lost(
                record::holder(&current).map(str::to_owned),
            )),
            Ok(None) => Err(RenewError::Lost(None)),
            Err(err) => Err(RenewError::Api(err)),
        }
    }

    /// Cancelled while leading: stop acting as leader first, then clear the lease (if configured)
    /// so a follower takes over at its next poll rather than after the lease duration.
    async fn stop_leading(&mut self, mut lease: Box<Lease>) -> Result<State, ElectionError> {
        self.set_leader(false, "stopping");
        if !self.cfg.releases_on_cancel() {
            return Ok(State::Stopped);
        }
        let bound = self.cfg.renew_deadline();
        let release = async {
            // A lost answer to our last renewal can make our copy stale: re-read and retry once.
            for _ in 0..2 {
                match self
                    .api
                    .replace(&record::released(&lease, Timestamp::now()))
                    .await
                {
                    Ok(_) => return Ok(true),
                    Err(err) if is_conflict(&err) => match self.reread().await {
                        Err(RenewError::Stale(current)) => lease = current,
                        Err(RenewError::Api(err)) => return Err(err),
                        Ok(_) | Err(RenewError::Lost(_)) => return Ok(false),
                    },
                    Err(err) => return Err(err),
                }
            }
            Ok(false)
        };
        match timeout(bound, release).await {
            Ok(Ok(true)) => {
                info!("released the lease");
                Ok(State::Stopped)
            }
            Ok(Ok(false)) => Ok(State::Stopped),
            Ok(Err(err)) => Err(self.release_failed(CallError::Api(err))),
            Err(_) => Err(self.release_failed(CallError::TimedOut(bound))),
        }
    }

    /// Publishes leadership (only when it changes) and logs the change once.
    fn set_leader(&self, leader: bool, why: &'static str) {
        let changed = self.leader.send_if_modified(|current| {
            let changed = *current != leader;
            *current = leader;
            changed
        });
        if changed {
            if leader {
                info!(why, "became leader");
            } else {
                info!(why, "stepped down");
            }
        }
    }

    /// When a follower polls next: one retry period, stretched by up to 20% at random.
    fn next_poll(&self) -> Instant {
        let factor = 1.0 + rand::rng().random_range(0.0..JITTER);
        Instant::now() + self.cfg.retry_period().mul_f64(factor)
    }

    fn fatal_or<T>(&self, err: kube::Error) -> Result<Result<T, kube::Error>, ElectionError> {
        if is_fatal(&err) && !matches!(&err, kube::Error::Api(s) if s.code == 404) {
            Err(self.fatal(err))
        } else {
            Ok(Err(err))
        }
    }

    fn fatal(&self, error: kube::Error) -> ElectionError {
        ElectionError::Fatal {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            error,
        }
    }

    fn release_failed(&self, error: CallError) -> ElectionError {
        ElectionError::Release {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            error,
        }
    }
}

/// How long a test (or caller) should allow for a takeover after a leader dies, when followers
/// can watch the lease: the lease duration, counted from the dead leader's last renewal (which
/// came before its death). Add the time the API server takes to deliver a watch event and answer
/// a read and a write; without a watch (RBAC forbids it), add one jittered poll,
/// [`ElectionConfig::retry_period`] x 1.2, for the renewal a follower saw late.
pub fn takeover_bound(cfg: &ElectionConfig) -> Duration {
    cfg.lease_duration()
}
