//! The writer's memo of what MLMD holds: types, run contexts, pods and the
//! newest artifact per URI, each bounded.
//!
//! Why a module of its own: it is only a cache (losing it costs round trips,
//! never correctness), and its bounds are the original writer's LRU sizes;
//! kept apart, the eviction rule is tested on its own.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::kfp::patch::{InputRef, OutputRef};
use crate::proto::*;

/// What this writer knows of one pod's execution.
#[derive(Clone, Debug)]
pub(super) struct PodMemo {
    pub(super) execution: Execution,
    pub(super) inputs: Vec<InputRef>,
    pub(super) outputs: Option<Vec<OutputRef>>,
}

/// A bounded map that forgets its oldest entries (the original's LRUs,
/// sized by the same variables).
#[derive(Debug)]
pub(super) struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Eq + Hash + Clone, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }
    pub(super) fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }
    pub(super) fn remove<Q>(&mut self, k: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        // The key stays in `order` until it is the oldest: harmless, as
        // eviction of a missing key removes nothing.
        self.map.remove(k);
    }
    pub(super) fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

/// Everything the writer memoizes.
#[derive(Debug)]
pub(super) struct Memo {
    pub(super) execution_types: HashMap<String, i64>,
    pub(super) artifact_types: HashMap<String, i64>,
    pub(super) context_type: Option<i64>,
    pub(super) contexts: Bounded<(String, String), Context>,
    pub(super) pods: Bounded<String, PodMemo>,
    /// The newest artifact id per URI this writer wrote or read: inputs
    /// whose upstream it recorded need no `GetArtifactsByURI`.
    pub(super) artifacts: Bounded<String, i64>,
}

impl Memo {
    /// An empty memo holding up to `pod_cache` pods (and as many artifact
    /// URIs) and `context_cache` run contexts.
    pub(super) fn new(pod_cache: usize, context_cache: usize) -> Self {
        Memo {
            execution_types: HashMap::new(),
            artifact_types: HashMap::new(),
            context_type: None,
            contexts: Bounded::new(context_cache),
            pods: Bounded::new(pod_cache),
            artifacts: Bounded::new(pod_cache),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_should_forget_the_oldest_entry() {
        let mut b = Bounded::new(2);
        b.insert(1, "a");
        b.insert(2, "b");
        b.insert(1, "a2");
        b.insert(3, "c");
        assert_eq!(b.get(&1), None);
        assert_eq!(b.get(&2), Some(&"b"));
        assert_eq!(b.get(&3), Some(&"c"));
    }
}
