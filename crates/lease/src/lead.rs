//! Work that runs only while this replica holds the Lease: [`LeaderElector::lead`].
//!
//! The loop every leader-elected daemon needs, written once: stand by until the Lease is ours,
//! then start the work; stop it the moment leadership is lost; on shutdown let it finish, then
//! release the Lease so a standby takes over at once; and say how it all ended.
//!
//! [`LeaderElector::lead`]: crate::LeaderElector::lead

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::ElectionError;
use crate::leadership::Leadership;

/// How [`LeaderElector::lead`](crate::LeaderElector::lead) ended without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended<T> {
    /// Shutdown came while this replica stood by: it never led, and the work never started.
    ShutdownBeforeLeading,
    /// This replica led and the work returned `Ok` with this value (after shutdown, or on its
    /// own); then the Lease was released.
    WorkFinished(T),
}

/// Why [`LeaderElector::lead`](crate::LeaderElector::lead) ended with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeadError<E> {
    /// This replica stopped leading while the work ran: another replica took the Lease, or
    /// renewals kept failing until the renew deadline (which comes before the Lease could expire,
    /// so before anyone else may take it). The work was dropped at once, without a chance to
    /// finish, as another replica may already be doing it. A daemon should exit non-zero; when it
    /// is restarted it stands by.
    #[error(
        "lost the lease (another replica took it, or it could not be renewed in time): stopped so \
         that only the new leader writes"
    )]
    Lost,
    /// The work returned this error; the Lease was released (a failed release is only logged,
    /// so this error is not masked).
    #[error(transparent)]
    Work(E),
    /// The election failed for good (the API refused the Lease in a way no retry fixes), or
    /// releasing the Lease at the end failed.
    #[error(transparent)]
    Election(#[from] ElectionError),
    /// The election stopped by itself without an error before this replica led. Not expected (it
    /// only stops once cancelled, and only this loop cancels it); reported so that it cannot pass
    /// for a clean stop.
    #[error("leader election ended unexpectedly")]
    ElectionEnded,
}

/// Runs `work` only while `leadership` leads; see [`LeaderElector::lead`](crate::LeaderElector::lead).
pub(crate) async fn lead<F, Fut, T, E>(
    mut leadership: Leadership,
    shutdown: &CancellationToken,
    work: F,
) -> Result<Ended<T>, LeadError<E>>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    info!(
        identity = leadership.identity(),
        "standing by for the lease"
    );
    tokio::select! {
        biased;
        () = shutdown.cancelled() => {
            leadership.release().await?;
            return Ok(Ended::ShutdownBeforeLeading);
        }
        leader = leadership.wait_until_leader() => {
            if !leader {
                leadership.finished().await?;
                return Err(LeadError::ElectionEnded);
            }
        }
    }

    let mut leading = leadership.subscribe();
    let stop = shutdown.child_token();
    let outcome = tokio::select! {
        biased;
        // Checked first: an ex-leader must not go on, even if the work is ready to return.
        _ = leading.wait_for(|leader| !*leader) => None,
        outcome = work(stop.clone()) => Some(outcome),
    };
    // The work future is dropped by now; tasks it spawned with `stop` see it cancelled.
    stop.cancel();
    let released = leadership.release().await;
    let Some(outcome) = outcome else {
        // The election may have ended with an error rather than a step-down: report that one.
        released?;
        return Err(LeadError::Lost);
    };
    match (outcome, released) {
        (Ok(value), Ok(())) => Ok(Ended::WorkFinished(value)),
        (Ok(_), Err(err)) => Err(LeadError::Election(err)),
        (Err(err), released) => {
            if let Err(release) = released {
                warn!(error = %release, "the work failed, and releasing the lease failed too");
            }
            Err(LeadError::Work(err))
        }
    }
}
