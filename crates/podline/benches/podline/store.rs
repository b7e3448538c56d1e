//! Store benchmarks (issues 4 and 6): pod events per second written into SQLite and PostgreSQL
//! in the recorder's batch shape (500 ops per transaction, each with its resume point).

use anyhow::Context as _;
use podline_store::bench::{BenchConfig, run as run_load};

use super::report::Row;

const AREA: &str = "store";

/// Where the PostgreSQL benchmark writes (a scratch database it creates and drops).
const POSTGRES_ADMIN: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Runs the SQLite and (if reachable) PostgreSQL loads.
pub async fn run(pods: usize) -> anyhow::Result<Vec<Row>> {
    let config = BenchConfig {
        pods,
        ..BenchConfig::default()
    };
    let mut rows = Vec::new();

    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let path = dir.path().join("bench.db");
    let sqlite = podline_store::open(&path.to_string_lossy())
        .await
        .context("opening SQLite")?;
    let report = run_load(sqlite.as_ref(), &config)
        .await
        .context("SQLite load")?;
    rows.push(Row::at_least(
        AREA,
        format!(
            "pod events/s into SQLite ({} events, p99 commit {} ms)",
            report.events,
            report.batch_p99.as_millis()
        ),
        report.events_per_sec,
        20_000.0,
        "/s",
    ));

    match postgres_scratch().await {
        Ok((url, drop_db)) => {
            let postgres = podline_store::open(&url)
                .await
                .context("opening PostgreSQL")?;
            let report = run_load(postgres.as_ref(), &config)
                .await
                .context("PostgreSQL load")?;
            drop(postgres);
            drop_db.await;
            rows.push(Row::at_least(
                AREA,
                format!(
                    "pod events/s into PostgreSQL ({} events, p99 commit {} ms)",
                    report.events,
                    report.batch_p99.as_millis()
                ),
                report.events_per_sec,
                5_000.0,
                "/s",
            ));
        }
        Err(err) => eprintln!("skipping the PostgreSQL benchmark: {err:#}"),
    }
    Ok(rows)
}

/// Creates a scratch database and returns its URL plus a future that drops it.
async fn postgres_scratch() -> anyhow::Result<(String, impl std::future::Future<Output = ()>)> {
    use sqlx::Connection as _;
    let name = format!("podline_bench_{}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(POSTGRES_ADMIN)
        .await
        .context("connecting to PostgreSQL on 127.0.0.1:5432")?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .execute(&mut admin)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let drop_db = async move {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut admin)
        .await;
    };
    Ok((url, drop_db))
}
