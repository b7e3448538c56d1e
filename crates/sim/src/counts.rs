//! Request counts by (verb, resource), so a test can assert "the client did not re-list".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Live counters (shared by the middleware and [`crate::Sim::counts`]).
#[derive(Debug, Clone, Default)]
pub struct Counter {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
}

impl Counter {
    /// Counts one request.
    pub fn record(&self, verb: &str, resource: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        match counts.get_mut(&(verb.to_owned(), resource.to_owned())) {
            Some(n) => *n += 1,
            None => {
                counts.insert((verb.to_owned(), resource.to_owned()), 1);
            }
        }
    }

    /// A snapshot.
    pub fn snapshot(&self) -> RequestCounts {
        RequestCounts {
            counts: self
                .counts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    /// Resets every counter to zero.
    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// A snapshot of request counts. Resources are named like fault rules (`pods`, `pods/log`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    counts: BTreeMap<(String, String), u64>,
}

impl RequestCounts {
    /// How many `verb` requests on `resource` were made, e.g. `get("list", "pods")`.
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.counts
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Every (verb, resource, count).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, u64)> {
        self.counts
            .iter()
            .map(|((v, r), n)| (v.as_str(), r.as_str(), *n))
    }

    /// As a JSON object `{"list pods": 3, ...}` for the control endpoint.
    pub fn to_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .iter()
            .map(|(v, r, n)| (format!("{v} {r}"), serde_json::Value::from(n)))
            .collect();
        serde_json::Value::Object(map)
    }
}
