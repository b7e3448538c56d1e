//! Fresh stores for tests: a SQLite file in a temporary directory, or a PostgreSQL database of its
//! own (created on the server at 127.0.0.1:5432 and dropped afterwards), so tests running in
//! parallel never see each other's rows, and a recorder test can run against either backend.
//!
//! PostgreSQL is reached through `PODLINE_TEST_POSTGRES` (an admin URL; default
//! `postgres://postgres@127.0.0.1:5432/postgres`). `PODLINE_TEST_POSTGRES=skip` skips the
//! PostgreSQL variants, loudly.
//!
//! ```no_run
//! # async fn t() {
//! use podline_testkit::db::{Backend, TestDb};
//! let Some(db) = TestDb::fresh(Backend::Postgres).await else { return }; // skipped
//! let store = db.store.clone();
//! // ... run a recorder into `store`, then break its connections:
//! let killed = db.terminate_connections().await;
//! # }
//! ```

use std::sync::Arc;

use podline_store::Store;
use sqlx::{AssertSqlSafe, Connection as _};

/// Admin URL used to create and drop per-test PostgreSQL databases.
const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Which store a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in a temporary directory.
    Sqlite,
    /// A fresh PostgreSQL database.
    Postgres,
}

/// A migrated store of its own; dropping it removes the file or the database.
pub struct TestDb {
    /// The store, as the recorder takes it.
    pub store: Arc<dyn Store>,
    /// What `--db` would be for a `podline` process writing to the same store.
    pub url: String,
    /// The PostgreSQL database name (`None` for SQLite).
    pub pg_database: Option<String>,
    _guard: Guard,
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDb").field("url", &self.url).finish()
    }
}

/// Held for its `Drop`: the temporary directory or the database to drop.
#[allow(dead_code)]
enum Guard {
    Sqlite(tempfile::TempDir),
    Postgres(PgDrop),
}

impl TestDb {
    /// A fresh store on `backend`; `None` only when PostgreSQL tests are skipped on purpose.
    /// Panics (the test can't go on) when the database can't be created.
    pub async fn fresh(backend: Backend) -> Option<TestDb> {
        match backend {
            Backend::Sqlite => Some(Self::sqlite().await),
            Backend::Postgres => Self::postgres().await,
        }
    }

    async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("no temp dir: {err}"));
        let url = dir.path().join("podline.db").to_string_lossy().into_owned();
        let store = podline_store::open(&url)
            .await
            .unwrap_or_else(|err| panic!("cannot open SQLite at {url}: {err}"));
        TestDb {
            store,
            url,
            pg_database: None,
            _guard: Guard::Sqlite(dir),
        }
    }

    async fn postgres() -> Option<TestDb> {
        let admin_url = admin_url()?;
        let name = format!("podline_t_{}", uuid::Uuid::new_v4().simple());
        admin_sql(&admin_url, &format!("CREATE DATABASE {name}")).await;
        let guard = PgDrop {
            admin_url: admin_url.clone(),
            name: name.clone(),
        };
        let url = match admin_url.rsplit_once('/') {
            Some((base, _db)) => format!("{base}/{name}"),
            None => panic!("PODLINE_TEST_POSTGRES={admin_url} has no database part"),
        };
        let store = podline_store::open(&url)
            .await
            .unwrap_or_else(|err| panic!("cannot open PostgreSQL at {url}: {err}"));
        Some(TestDb {
            store,
            url,
            pg_database: Some(name),
            _guard: Guard::Postgres(guard),
        })
    }

    /// PostgreSQL only: kills every server connection to this database (`pg_terminate_backend`),
    /// as a server restart or a failover would, and returns how many were killed.
    pub async fn terminate_connections(&self) -> u64 {
        let (Some(name), Some(admin_url)) = (&self.pg_database, admin_url()) else {
            return 0;
        };
        let mut admin = admin_connection(&admin_url).await;
        let killed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()) AS killed",
        )
        .bind(name)
        .fetch_one(&mut admin)
        .await
        .unwrap_or_else(|err| panic!("pg_terminate_backend failed: {err}"));
        u64::try_from(killed).unwrap_or(0)
    }

    /// PostgreSQL only: refuses (`false`) or accepts again (`true`) new connections to this
    /// database; refusing also kills the open ones. The database is then as good as down.
    pub async fn allow_connections(&self, allow: bool) {
        let (Some(name), Some(admin_url)) = (&self.pg_database, admin_url()) else {
            return;
        };
        admin_sql(
            &admin_url,
            &format!("ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {allow}"),
        )
        .await;
        if !allow {
            self.terminate_connections().await;
        }
    }
}

/// The admin URL, or `None` (with a loud message) when `PODLINE_TEST_POSTGRES=skip`.
pub fn admin_url() -> Option<String> {
    match std::env::var("PODLINE_TEST_POSTGRES") {
        Ok(v) if v == "skip" => {
            eprintln!(
                "\n*** PODLINE_TEST_POSTGRES=skip: the PostgreSQL variant is SKIPPED, nothing was checked ***\n"
            );
            None
        }
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some(DEFAULT_ADMIN_URL.to_owned()),
    }
}

async fn admin_connection(admin_url: &str) -> sqlx::PgConnection {
    sqlx::PgConnection::connect(admin_url)
        .await
        .unwrap_or_else(|err| {
            panic!(
                "cannot reach PostgreSQL at {admin_url} ({err}); start it, point \
                 PODLINE_TEST_POSTGRES at an admin URL, or set PODLINE_TEST_POSTGRES=skip"
            )
        })
}

async fn admin_sql(admin_url: &str, sql: &str) {
    let mut admin = admin_connection(admin_url).await;
    if let Err(err) = sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(&mut admin)
        .await
    {
        panic!("{sql}: {err}");
    }
}

/// Drops the per-test database, even when the test panicked.
struct PgDrop {
    admin_url: String,
    name: String,
}

impl Drop for PgDrop {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let admin_url = self.admin_url.clone();
        // Async drop doesn't exist: drop it from a helper thread with its own runtime.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                    let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                }
            });
        })
        .join();
    }
}
