//! Single-flight locks: one resolution at a time per key.
//!
//! Why a module of its own: it is the writer's only concurrency device, and
//! it must forget a key once nobody waits for it (or the map grows with
//! every workflow ever seen); that rule is easier to check alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One resolution at a time per key: the first caller resolves (and
/// memoizes), the others wait for it and then find the memo.
///
/// Why: 8 workers starting on a backlog of one workflow's pods would all
/// miss the memo at once and race to create the same context (a 1000-pod
/// backlog made 440 `PutContexts`, 338 of them answered `AlreadyExists`).
#[derive(Debug, Default)]
pub(super) struct SingleFlight {
    keys: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SingleFlight {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        // A map of locks only; it stays consistent if a holder panicked.
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until no other caller holds `key`, then hold it until the
    /// guard is dropped.
    pub(super) async fn lock(&self, key: String) -> FlightGuard<'_> {
        let cell = self.keys().entry(key.clone()).or_default().clone();
        let guard = cell.lock_owned().await;
        FlightGuard {
            flights: self,
            key,
            guard: Some(guard),
        }
    }
}

/// Held while resolving a key; forgets the key when nobody waits for it.
pub(super) struct FlightGuard<'a> {
    flights: &'a SingleFlight,
    key: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut keys = self.flights.keys();
        // Only the map holds it: no waiter (waiters clone it under this lock).
        if keys
            .get(&self.key)
            .is_some_and(|cell| Arc::strong_count(cell) == 1)
        {
            keys.remove(&self.key);
        }
    }
}
