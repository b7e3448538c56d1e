//! [`FaultHandle`]: the live fault rules of a sim, and the per-request decision the fault layer
//! acts on.

use std::sync::{Arc, Mutex, MutexGuard};

use super::plan::{FaultAction, FaultPlan, FaultRule};
use crate::api::RequestInfo;

/// The live fault rules of a sim. Cheap to clone; every clone edits the same rules.
#[derive(Debug, Clone, Default)]
pub struct FaultHandle {
    rules: Arc<Mutex<Vec<FaultRule>>>,
}

impl FaultHandle {
    /// A handle holding `plan`'s rules.
    pub fn new(plan: FaultPlan) -> Self {
        Self {
            rules: Arc::new(Mutex::new(plan.rules)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<FaultRule>> {
        self.rules.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a rule (evaluated after the existing ones).
    pub fn push(&self, rule: FaultRule) {
        self.lock().push(rule);
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The current rules (with `times` showing what is left).
    pub fn list(&self) -> Vec<FaultRule> {
        self.lock().clone()
    }

    /// Decides what happens to a request: the sum of matching latencies and the first matching
    /// non-latency action that fires. Consumes one of each fired rule's `times`.
    pub fn decide(&self, info: &RequestInfo) -> (u64, Option<FaultAction>) {
        let mut rules = self.lock();
        let mut latency = 0;
        let mut action = None;
        for rule in rules.iter_mut() {
            if !rule.matches(info) {
                continue;
            }
            let is_latency = matches!(rule.action, FaultAction::Latency { .. });
            if !is_latency && action.is_some() {
                continue;
            }
            if rule.times == Some(0) {
                continue;
            }
            if let Some(p) = rule.probability
                && rand::random::<f64>() >= p
            {
                continue;
            }
            if let Some(n) = rule.times.as_mut() {
                *n -= 1;
            }
            match &rule.action {
                FaultAction::Latency { ms } => latency += ms,
                other => action = Some(other.clone()),
            }
        }
        rules.retain(|r| r.times != Some(0));
        (latency, action)
    }
}
