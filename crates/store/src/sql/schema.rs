//! Versioned schema migrations, run on every start.
//!
//! One list of migrations in portable SQL (TEXT and BIGINT columns only), recorded in
//! `podline_schema`. Each migration runs in its own transaction together with its version row,
//! so a crash mid-migration leaves the previous version intact. Concurrent starters are
//! serialised (PostgreSQL advisory lock, SQLite `BEGIN IMMEDIATE`), so two replicas starting at
//! once apply each migration exactly once.

use sqlx::AnyPool;

use crate::error::StoreError;
use crate::records::MigrationReport;
use crate::target::Backend;

/// One schema change.
pub(crate) struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub statements: &'static [&'static str],
}

/// All migrations, oldest first. Append only: never edit a released migration.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "pods, containers, transitions, resume points",
        statements: &[
            // One row per pod uid: the latest observation plus deletion facts.
            "CREATE TABLE IF NOT EXISTS pods (
            uid TEXT PRIMARY KEY,
            namespace TEXT NOT NULL,
            name TEXT NOT NULL,
            rv BIGINT NOT NULL,
            run TEXT,
            labels TEXT NOT NULL DEFAULT '{}',
            annotations TEXT NOT NULL DEFAULT '{}',
            owner TEXT,
            node TEXT,
            phase TEXT,
            reason TEXT,
            message TEXT,
            created_at BIGINT,
            scheduled_at BIGINT,
            started_at BIGINT,
            finished_at BIGINT,
            deletion_requested_at BIGINT,
            deleted_at BIGINT,
            deleted_rv BIGINT,
            final_state_observed BIGINT NOT NULL DEFAULT 0,
            recorded_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS pods_by_name ON pods (namespace, name)",
            "CREATE INDEX IF NOT EXISTS pods_by_run ON pods (run)",
            "CREATE INDEX IF NOT EXISTS pods_by_created ON pods (created_at)",
            // Containers of the latest observation; rv makes updates monotonic like pods.
            "CREATE TABLE IF NOT EXISTS containers (
            uid TEXT NOT NULL,
            name TEXT NOT NULL,
            rv BIGINT NOT NULL,
            position BIGINT NOT NULL,
            image TEXT NOT NULL,
            image_id TEXT,
            state TEXT,
            reason TEXT,
            message TEXT,
            exit_code BIGINT,
            restarts BIGINT NOT NULL,
            started_at BIGINT,
            finished_at BIGINT,
            PRIMARY KEY (uid, name)
        )",
            // Each phase once per pod, first time wins.
            "CREATE TABLE IF NOT EXISTS transitions (
            uid TEXT NOT NULL,
            phase TEXT NOT NULL,
            at BIGINT NOT NULL,
            PRIMARY KEY (uid, phase)
        )",
            // Watch positions, committed with the data they cover.
            "CREATE TABLE IF NOT EXISTS resume_points (
            watch_key TEXT PRIMARY KEY,
            rv BIGINT NOT NULL,
            updated_at BIGINT NOT NULL
        )",
            // Target of the readiness write probe.
            "CREATE TABLE IF NOT EXISTS podline_health (
            id BIGINT PRIMARY KEY,
            checked_at BIGINT NOT NULL
        )",
        ],
    },
    Migration {
        version: 2,
        description: "index pods by write time (live readers ask what changed since)",
        statements: &["CREATE INDEX IF NOT EXISTS pods_by_updated ON pods (updated_at)"],
    },
    Migration {
        version: 3,
        description: "escape the free-text escape character in rows written before it existed",
        // From this version on free text is stored escaped (see `codec::text`): NUL as `␀0`,
        // `␀` as `␀␀`. Rows written before hold `␀` raw; doubling it makes them read back
        // unchanged. (They hold no NUL: PostgreSQL refused those, SQLite cut them.)
        statements: &[
            "UPDATE pods SET uid = REPLACE(uid, '␀', '␀␀'), \
             namespace = REPLACE(namespace, '␀', '␀␀'), name = REPLACE(name, '␀', '␀␀'), \
             run = REPLACE(run, '␀', '␀␀'), owner = REPLACE(owner, '␀', '␀␀'), \
             node = REPLACE(node, '␀', '␀␀'), phase = REPLACE(phase, '␀', '␀␀'), \
             reason = REPLACE(reason, '␀', '␀␀'), message = REPLACE(message, '␀', '␀␀') \
             WHERE uid LIKE '%␀%' OR namespace LIKE '%␀%' OR name LIKE '%␀%' \
             OR run LIKE '%␀%' OR owner LIKE '%␀%' OR node LIKE '%␀%' OR phase LIKE '%␀%' \
             OR reason LIKE '%␀%' OR message LIKE '%␀%'",
            "UPDATE containers SET uid = REPLACE(uid, '␀', '␀␀'), \
             name = REPLACE(name, '␀', '␀␀'), image = REPLACE(image, '␀', '␀␀'), \
             image_id = REPLACE(image_id, '␀', '␀␀'), state = REPLACE(state, '␀', '␀␀'), \
             reason = REPLACE(reason, '␀', '␀␀'), message = REPLACE(message, '␀', '␀␀') \
             WHERE uid LIKE '%␀%' OR name LIKE '%␀%' OR image LIKE '%␀%' \
             OR image_id LIKE '%␀%' OR state LIKE '%␀%' OR reason LIKE '%␀%' \
             OR message LIKE '%␀%'",
            "UPDATE transitions SET uid = REPLACE(uid, '␀', '␀␀'), \
             phase = REPLACE(phase, '␀', '␀␀') WHERE uid LIKE '%␀%' OR phase LIKE '%␀%'",
            "UPDATE resume_points SET watch_key = REPLACE(watch_key, '␀', '␀␀') \
             WHERE watch_key LIKE '%␀%'",
        ],
    },
];

/// The schema version this build writes.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Applies every migration newer than the database's version.
pub(crate) async fn migrate(
    pool: &AnyPool,
    backend: Backend,
) -> Result<MigrationReport, StoreError> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS podline_schema (
            version BIGINT PRIMARY KEY,
            description TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        )",
    )
    .execute(pool)
    .await
    .map_err(StoreError::query("migrate"))?;

    let mut report = MigrationReport::default();
    let mut first = true;
    for migration in MIGRATIONS {
        let failed = |source| StoreError::Migrate {
            version: migration.version,
            description: migration.description,
            source,
        };
        let mut tx = begin_exclusive(pool, backend).await.map_err(failed)?;
        let current: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM podline_schema")
                .fetch_one(&mut *tx)
                .await
                .map_err(failed)?;
        if first {
            report.from_version = current;
            first = false;
            if current > latest_version() {
                return Err(StoreError::SchemaTooNew {
                    found: current,
                    known: latest_version(),
                });
            }
        }
        if current >= migration.version {
            continue;
        }
        for statement in migration.statements {
            sqlx::query(*statement)
                .execute(&mut *tx)
                .await
                .map_err(failed)?;
        }
        sqlx::query(
            "INSERT INTO podline_schema (version, description, applied_at) VALUES ($1, $2, $3)",
        )
        .bind(migration.version)
        .bind(migration.description)
        .bind(jiff::Timestamp::now().as_microsecond())
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        report.applied.push(migration.version);
        tracing::info!(
            version = migration.version,
            description = migration.description,
            "applied store migration"
        );
    }
    report.to_version = report.from_version.max(latest_version());
    Ok(report)
}

/// Checks, without writing, that a reader can use this database: a podline store at exactly
/// the schema version this build reads.
pub(crate) async fn check_readable(pool: &AnyPool) -> Result<(), StoreError> {
    let found: i64 =
        match sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(version), 0) FROM podline_schema")
            .fetch_one(pool)
            .await
        {
            Ok(version) => version,
            // No schema table: an empty file or not a podline store. Any other database error
            // (a file SQLite cannot open, a lock) is reported as it is, not as "version 0".
            Err(sqlx::Error::Database(db)) if is_missing_table(db.as_ref()) => 0,
            Err(source) => return Err(StoreError::Query { op: "open", source }),
        };
    let needed = latest_version();
    if found > needed {
        return Err(StoreError::SchemaTooNew {
            found,
            known: needed,
        });
    }
    if found < needed {
        return Err(StoreError::SchemaTooOld { found, needed });
    }
    Ok(())
}

/// Whether a database error says the table does not exist (SQLite "no such table", PostgreSQL
/// 42P01 undefined_table).
fn is_missing_table(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.code().as_deref() == Some("42P01") || db.message().starts_with("no such table")
}

/// Starts a transaction that excludes other writers from the start: SQLite `BEGIN IMMEDIATE`
/// (no lock upgrade, so no SQLITE_BUSY halfway), PostgreSQL a transaction-scoped advisory lock
/// for migrations.
async fn begin_exclusive(
    pool: &AnyPool,
    backend: Backend,
) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
    match backend {
        Backend::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await,
        Backend::Postgres => {
            let mut tx = pool.begin().await?;
            // Arbitrary constant identifying "podline schema migration".
            sqlx::query("SELECT pg_advisory_xact_lock(7021700170)")
                .execute(&mut *tx)
                .await?;
            Ok(tx)
        }
    }
}
