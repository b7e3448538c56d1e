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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn tracked(flights: &SingleFlight) -> usize {
        flights.keys().len()
    }

    /// Callers of one key take turns (never two inside at once), other keys are not held up,
    /// and the map forgets every key once its last caller is done.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_caller_per_key_at_a_time_and_no_key_is_kept_after_its_last_caller() {
        let flights = Arc::new(SingleFlight::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (flights, inside, most) = (flights.clone(), inside.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let _held = flights.lock("wf".to_owned()).await;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        // Another key is free while "wf" is busy.
        let other = tokio::time::timeout(Duration::from_secs(5), flights.lock("other".to_owned()))
            .await
            .expect("another key does not wait for wf");
        drop(other);
        for task in tasks {
            task.await.expect("a caller panicked");
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "two callers held wf at once"
        );
        assert_eq!(tracked(&flights), 0, "keys left after their last caller");
    }

    /// A key with a waiter stays while the holder leaves; it goes with the waiter.
    #[tokio::test]
    async fn a_key_is_kept_while_someone_waits_for_it() {
        let flights = Arc::new(SingleFlight::default());
        let first = flights.lock("wf".to_owned()).await;
        let waiter = {
            let flights = flights.clone();
            tokio::spawn(async move {
                let _second = flights.lock("wf".to_owned()).await;
            })
        };
        // The waiter has cloned the key's lock once the count says so.
        while flights.keys().get("wf").map_or(0, Arc::strong_count) < 3 {
            tokio::task::yield_now().await;
        }
        drop(first);
        assert_eq!(tracked(&flights), 1, "the waiter's key was dropped");
        waiter.await.expect("the waiter panicked");
        assert_eq!(tracked(&flights), 0);
    }
}
