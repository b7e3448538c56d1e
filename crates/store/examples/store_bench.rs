//! Measures pod events/s recorded into a store, with the recorder's batching pattern.
//!
//! ```text
//! cargo run --release -p podline-store --example store_bench -- [DB] [PODS] [BATCH]
//! # DB: a SQLite path (default: a temp file) or postgres://...; PODS default 25000; BATCH 500
//! ```
#![allow(clippy::unwrap_used)]

use podline_store::bench::{BenchConfig, run};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = tempfile::tempdir()?;
    let db = args
        .next()
        .unwrap_or_else(|| dir.path().join("bench.db").display().to_string());
    let pods = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(25_000);
    let batch_size = args.next().map(|s| s.parse()).transpose()?.unwrap_or(500);
    let store = podline_store::open(&db).await?;
    let config = BenchConfig {
        pods,
        batch_size,
        ..Default::default()
    };
    let report = run(store.as_ref(), &config).await?;
    println!(
        "{}: {} events in {} batches of {batch_size}: {:.0} events/s, batch p50 {:?}, p99 {:?}",
        store.backend(),
        report.events,
        report.batches,
        report.events_per_sec,
        report.batch_p50,
        report.batch_p99
    );
    Ok(())
}
