//! The handle an application holds while it competes: "may I write?", and how to stop.

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::ElectionError;

/// A running election, returned by [`LeaderElector::run`](crate::LeaderElector::run).
///
/// Check [`is_leader`](Leadership::is_leader) (or watch [`subscribe`](Leadership::subscribe))
/// before each write. Stop with [`release`](Leadership::release) on SIGTERM so another replica
/// takes over at once. Dropping the handle also stops the election and releases the lease in the
/// background; [`abort`](Leadership::abort) stops it *without* releasing, like a crash.
#[derive(Debug)]
pub struct Leadership {
    identity: String,
    leader: watch::Receiver<bool>,
    cancel: CancellationToken,
    task: Option<JoinHandle<Result<(), ElectionError>>>,
}

impl Leadership {
    pub(crate) fn new(
        identity: String,
        leader: watch::Receiver<bool>,
        cancel: CancellationToken,
        task: JoinHandle<Result<(), ElectionError>>,
    ) -> Self {
        Self {
            identity,
            leader,
            cancel,
            task: Some(task),
        }
    }

    /// The identity this replica competes as (its `holderIdentity` when leading).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this replica leads right now. Turns false *before* the lease could expire if
    /// renewals fail, so a caller that checks it before each write doesn't write after another
    /// replica took over (a write already in flight may still land: keep writes idempotent).
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// A receiver that sees every change of leadership, for `select!` loops that start and stop
    /// work as leadership comes and goes. The channel closes when the election ends; a closed
    /// channel means "not leader" (after [`abort`](Leadership::abort) its last value may still
    /// read true, as nothing was left to clear it).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leader.clone()
    }

    /// Waits until this replica leads. Returns false if the election ended first (see
    /// [`finished`](Leadership::finished) for why).
    pub async fn wait_until_leader(&self) -> bool {
        let mut leader = self.leader.clone();
        leader.wait_for(|leading| *leading).await.is_ok()
    }

    /// Waits until the election ends by itself, which only happens on an error no retry can fix
    /// (e.g. RBAC forbids leases). A daemon selects on this to exit loudly. Returns `Ok(())` at
    /// once if the election already finished and its result was taken.
    pub async fn finished(&mut self) -> Result<(), ElectionError> {
        match self.task.as_mut() {
            Some(task) => {
                let result = task.await;
                self.task = None;
                result?
            }
            None => Ok(()),
        }
    }

    /// Stops competing gracefully: steps down (so [`is_leader`](Leadership::is_leader) is false
    /// from here on) and, if leading, clears the lease so another replica takes over at its next
    /// poll. Call it on SIGTERM, after the application stopped writing.
    pub async fn release(mut self) -> Result<(), ElectionError> {
        self.cancel.cancel();
        self.finished().await
    }

    /// Stops competing at once without touching the lease, as if the process had died: another
    /// replica takes over only when the lease expires. For tests, and for giving up quickly when
    /// the API is unreachable anyway.
    pub fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        // A no-op after `abort` (the task is gone) and after `release` (already cancelled).
        self.cancel.cancel();
    }
}
