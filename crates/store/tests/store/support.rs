//! Test databases: a SQLite file in a temp dir, or a fresh PostgreSQL database per test.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use podline_store::{
    ContainerObservation, ContainerState, DbTarget, PhaseTransition, PodObservation, PoolSettings,
    SqlStore, Store, StoreWrite,
};
use sqlx::{AssertSqlSafe, Connection};

/// Admin URL used to create and drop per-test PostgreSQL databases.
const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A migrated store plus whatever keeps its database alive; dropping it removes the database.
pub struct TestDb {
    pub store: Arc<SqlStore>,
    pub target: DbTarget,
    _guard: Guard,
}

/// Held only for its `Drop`: removes the temp dir or the PostgreSQL database.
#[allow(dead_code)]
enum Guard {
    Sqlite(tempfile::TempDir),
    Postgres(PgDrop),
}

/// Drops the per-test PostgreSQL database, even when the test panicked.
struct PgDrop {
    admin_url: String,
    name: String,
}

impl Drop for PgDrop {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Async drop doesn't exist: drop the database from a helper thread with its own runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                    let _ = sqlx::raw_sql(AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&mut conn)
                    .await;
                }
            });
        })
        .join();
    }
}

impl TestDb {
    /// The store as the recorder sees it.
    pub fn dyn_store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Opens a second, independent store on the same database (a restarted process).
    pub async fn reopen(&self, settings: &PoolSettings) -> SqlStore {
        let store = SqlStore::connect(&self.target, settings).await.unwrap();
        store.migrate().await.unwrap();
        store
    }
}

pub async fn sqlite() -> TestDb {
    sqlite_with(&PoolSettings::default()).await
}

pub async fn sqlite_with(settings: &PoolSettings) -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let target = DbTarget::Sqlite {
        path: dir.path().join("podline.db"),
    };
    let store = SqlStore::connect(&target, settings).await.unwrap();
    store.migrate().await.unwrap();
    TestDb {
        store: Arc::new(store),
        target,
        _guard: Guard::Sqlite(dir),
    }
}

/// The admin URL, or `None` (with a loud message) when PODLINE_TEST_POSTGRES=skip.
pub fn postgres_admin_url() -> Option<String> {
    match std::env::var("PODLINE_TEST_POSTGRES") {
        Ok(v) if v == "skip" => {
            eprintln!(
                "\n*** PODLINE_TEST_POSTGRES=skip: PostgreSQL store tests are SKIPPED, nothing was checked ***\n"
            );
            None
        }
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some(DEFAULT_ADMIN_URL.to_owned()),
    }
}

pub async fn postgres() -> Option<TestDb> {
    postgres_with(&PoolSettings::default()).await
}

pub async fn postgres_with(settings: &PoolSettings) -> Option<TestDb> {
    let admin_url = postgres_admin_url()?;
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|err| {
            panic!(
                "cannot reach PostgreSQL at {admin_url} ({err}); start it, point \
             PODLINE_TEST_POSTGRES at an admin URL, or set PODLINE_TEST_POSTGRES=skip"
            )
        });
    let name = format!("podline_t_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let guard = PgDrop {
        admin_url: admin_url.clone(),
        name: name.clone(),
    };
    let url = match admin_url.rsplit_once('/') {
        Some((base, _db)) => format!("{base}/{name}"),
        None => panic!("admin URL {admin_url} has no database part"),
    };
    let target = DbTarget::parse(&url).unwrap();
    let store = SqlStore::connect(&target, settings).await.unwrap();
    store.migrate().await.unwrap();
    Some(TestDb {
        store: Arc::new(store),
        target,
        _guard: Guard::Postgres(guard),
    })
}

/// `2026-01-01T00:00:00Z + secs`.
pub fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_767_225_600 + secs).unwrap()
}

/// A realistic observation of pod `uid` at `rv` in `phase`, with transitions up to that phase.
pub fn pod(uid: &str, rv: u64, phase: &str) -> PodObservation {
    let order = ["Pending", "Running", "Succeeded"];
    let reached = order.iter().position(|p| *p == phase).unwrap_or(0);
    let mut transitions: Vec<PhaseTransition> = order[..=reached]
        .iter()
        .enumerate()
        .map(|(i, p)| PhaseTransition::new(*p, ts(i as i64 * 10)))
        .collect();
    if phase == "Failed" {
        transitions.push(PhaseTransition::new("Failed", ts(20)));
    }
    let terminated = matches!(phase, "Succeeded" | "Failed");
    PodObservation {
        uid: uid.to_owned(),
        namespace: "default".to_owned(),
        name: format!("pod-{uid}"),
        resource_version: rv,
        run: Some("run-1".to_owned()),
        labels: BTreeMap::from([("app".to_owned(), "test".to_owned())]),
        annotations: BTreeMap::from([("note".to_owned(), "hello".to_owned())]),
        owner: Some("Workflow/wf-1".to_owned()),
        node: Some("sim-node-1".to_owned()),
        phase: phase.to_owned(),
        reason: None,
        message: None,
        created_at: Some(ts(0)),
        scheduled_at: Some(ts(1)),
        started_at: (reached > 0).then(|| ts(10)),
        finished_at: terminated.then(|| ts(20)),
        deletion_requested_at: None,
        containers: vec![ContainerObservation {
            name: "main".to_owned(),
            image: "busybox:1.36".to_owned(),
            image_id: Some("sha256:abc".to_owned()),
            state: Some(if terminated {
                ContainerState::Terminated
            } else if reached > 0 {
                ContainerState::Running
            } else {
                ContainerState::Waiting
            }),
            reason: terminated.then(|| "Completed".to_owned()),
            message: None,
            exit_code: terminated.then_some(if phase == "Failed" { 3 } else { 0 }),
            restarts: 0,
            started_at: (reached > 0).then(|| ts(10)),
            finished_at: terminated.then(|| ts(20)),
        }],
        transitions,
    }
}
