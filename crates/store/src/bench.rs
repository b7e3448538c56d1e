//! A synthetic write load, so the benchmark command (and `examples/store_bench.rs`) measures
//! pod events per second into any backend with the recorder's batching pattern.

use podline_phase::Phase;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::error::StoreError;
use crate::model::{
    Batch, ContainerObservation, ContainerState, PhaseTransition, PodObservation, StoreOp,
};
use crate::store::StoreWrite;

/// Shape of the synthetic load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchConfig {
    /// Pods to run through their lifecycle. Each makes 4 events: Pending, Running, Succeeded
    /// (upserts with growing resourceVersions) and Deleted.
    pub pods: usize,
    /// Ops per batch (one transaction each), like the recorder's batching.
    pub batch_size: usize,
    /// Pods in flight at once: events of this many pods interleave, as they do in a watch.
    pub window: usize,
    /// Watch key for the resume point written with every batch.
    pub watch_key: String,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            pods: 10_000,
            batch_size: 500,
            window: 1_000,
            watch_key: "bench".to_owned(),
        }
    }
}

/// What the load measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Pod events applied.
    pub events: usize,
    /// Batches (transactions) applied.
    pub batches: usize,
    /// Wall time of all `apply` calls (event generation excluded).
    pub elapsed: Duration,
    /// Throughput.
    pub events_per_sec: f64,
    /// Median batch commit latency.
    pub batch_p50: Duration,
    /// 99th percentile batch commit latency.
    pub batch_p99: Duration,
}

/// Generates the events of `config.pods` pods (interleaved in windows), then applies them in
/// batches of `config.batch_size`, each with a resume point, and reports the throughput.
pub async fn run(store: &dyn StoreWrite, config: &BenchConfig) -> Result<BenchReport, StoreError> {
    let batches = generate(config);
    let events: usize = batches.iter().map(|b| b.ops.len()).sum();
    let mut latencies = Vec::with_capacity(batches.len());
    let start = Instant::now();
    for batch in &batches {
        let t = Instant::now();
        store.apply(batch).await?;
        latencies.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Ok(BenchReport {
        events,
        batches: batches.len(),
        elapsed,
        events_per_sec: events as f64 / elapsed.as_secs_f64().max(1e-9),
        batch_p50: pct(0.50),
        batch_p99: pct(0.99),
    })
}

/// The batches of the synthetic load, in watch order.
pub fn generate(config: &BenchConfig) -> Vec<Batch> {
    let base: Timestamp = Timestamp::now();
    let mut rv = 0_u64;
    let mut ops = Vec::with_capacity(config.pods * 4);
    let window = config.window.max(1);
    for first in (0..config.pods).step_by(window) {
        let last = (first + window).min(config.pods);
        for stage in 0..4 {
            for i in first..last {
                rv += 1;
                ops.push(event(i, stage, rv, base));
            }
        }
    }
    let mut batches = Vec::new();
    let mut seen_rv = 0;
    let size = config.batch_size.max(1);
    let mut ops = ops.into_iter().peekable();
    while ops.peek().is_some() {
        let chunk: Vec<StoreOp> = ops.by_ref().take(size).collect();
        seen_rv += chunk.len() as u64;
        batches.push(Batch::new(chunk).with_resume(config.watch_key.clone(), seen_rv));
    }
    batches
}

fn event(i: usize, stage: usize, rv: u64, base: Timestamp) -> StoreOp {
    let uid = format!("00000000-0000-4000-8000-{i:012}");
    let at = |secs: i64| base + SignedDuration::from_secs(i as i64 + secs);
    if stage == 3 {
        return StoreOp::Deleted {
            uid,
            namespace: "bench".to_owned(),
            name: format!("task-{i}"),
            resource_version: rv,
            at: at(4),
            final_state_observed: true,
        };
    }
    let phases = [Phase::Pending, Phase::Running, Phase::Succeeded].map(Phase::as_str);
    let transitions = phases[..=stage]
        .iter()
        .enumerate()
        .map(|(k, p)| PhaseTransition::new(*p, at(k as i64)))
        .collect();
    let state = [
        ContainerState::Waiting,
        ContainerState::Running,
        ContainerState::Terminated,
    ][stage];
    StoreOp::Upsert(PodObservation {
        uid,
        namespace: "bench".to_owned(),
        name: format!("task-{i}"),
        resource_version: rv,
        run: Some(format!("run-{}", i / 50)),
        labels: BTreeMap::from([
            ("app".to_owned(), "bench".to_owned()),
            ("podline.io/run".to_owned(), format!("run-{}", i / 50)),
            ("podline.io/launch-id".to_owned(), format!("l-{i}")),
        ]),
        annotations: BTreeMap::from([("sim.podline.io/duration".to_owned(), "1s".to_owned())]),
        owner: None,
        node: (stage > 0).then(|| "sim-node-1".to_owned()),
        phase: phases[stage].to_owned(),
        reason: None,
        message: None,
        created_at: Some(at(0)),
        scheduled_at: Some(at(0)),
        started_at: (stage > 0).then(|| at(1)),
        finished_at: (stage > 1).then(|| at(2)),
        deletion_requested_at: None,
        containers: vec![ContainerObservation {
            name: "main".to_owned(),
            image: "busybox:1.36".to_owned(),
            image_id: (stage > 0).then(|| "docker.io/library/busybox@sha256:abc".to_owned()),
            state: Some(state),
            reason: (stage == 2).then(|| "Completed".to_owned()),
            message: None,
            exit_code: (stage == 2).then_some(0),
            restarts: 0,
            started_at: (stage > 0).then(|| at(1)),
            finished_at: (stage > 1).then(|| at(2)),
        }],
        transitions,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn generated_load_should_have_four_events_per_pod_and_growing_resume_points() {
        let config = BenchConfig {
            pods: 10,
            batch_size: 7,
            window: 4,
            ..Default::default()
        };
        let batches = generate(&config);
        let events: usize = batches.iter().map(|b| b.ops.len()).sum();
        assert_eq!(events, 40);
        let rvs: Vec<u64> = batches
            .iter()
            .filter_map(|b| b.resume.as_ref().map(|r| r.resource_version))
            .collect();
        assert!(rvs.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*rvs.last().unwrap(), 40);
    }
}
