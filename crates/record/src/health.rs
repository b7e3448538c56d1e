//! The store's part of the recorder's readiness: what [`podline_daemon::Health`] cannot know by
//! itself while the writer has nothing to write.
//!
//! The daemon's readiness needs the store writable. Each batch the writer commits (or fails to)
//! reports that; [`probe_store`] covers an idle recorder with a real, time-bounded write every
//! interval, so a database that went away is noticed within one probe interval even when no pod
//! changes.
//!
//! A SQLite disk that fills up (or goes read-only) makes every write fail, so the store part
//! turns false at the first failed write; the store replaces the connections that saw the fault,
//! so the first write (or probe) after the disk recovers succeeds and readiness comes back within
//! one retry period (the writer's backoff, at most its cap) without a restart.

use std::sync::Arc;
use std::time::Duration;

use podline_daemon::Health;
use podline_store::StoreWrite;
use tokio_util::sync::CancellationToken;

/// Keeps the store part of readiness true to the store while the writer has nothing to write:
/// every `every`, unless a write reported on the store within that time, runs [`StoreWrite::health`]
/// (a real write, bounded in time) and records the verdict. Returns when `stop` is cancelled.
pub async fn probe_store(
    store: Arc<dyn StoreWrite>,
    health: Arc<Health>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if health.store_verdict_age() < every {
            continue; // the writer just found out
        }
        match store.health().await {
            Ok(()) => health.set_store_writable(true),
            Err(err) => {
                if health.is_store_writable() {
                    tracing::warn!(error = %err, "store probe failed: not ready until it recovers");
                }
                health.set_store_writable(false);
            }
        }
    }
}
