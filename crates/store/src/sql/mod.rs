//! The SQL store: one implementation for SQLite and PostgreSQL through sqlx's `Any` driver.
//!
//! Both backends run the same statements (`$N` placeholders, `ON CONFLICT` upserts, BIGINT and
//! TEXT columns only); the [`Backend`] decides the few things that differ: connection pragmas,
//! how a write transaction starts, and pool size.

mod codec;
mod disk;
mod read;
mod schema;
mod shm;
mod write;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Executor};

use crate::error::StoreError;
use crate::failures::{FailureFilter, FailureGroup};
use crate::model::{ApplyReport, Batch, ResumePoint};
use crate::records::{
    Changes, Counts, LivePod, LiveScope, MigrationReport, PodFilter, PodKey, PodRecord, RunFilter,
    RunSummary,
};
use crate::store::{StoreRead, StoreWrite};
use crate::target::{Backend, DbTarget};
use disk::DiskGuard;

/// Connection pool settings; the defaults suit one recorder plus a few readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSettings {
    /// Most connections open at once. SQLite has one writer anyway; extra connections serve
    /// concurrent readers (WAL lets them read while the recorder writes).
    pub max_connections: u32,
    /// How long a caller waits for a free (or new) connection before a retryable error.
    /// Bounded so a dead database shows up as an error and a failed readiness check, not a hang.
    pub acquire_timeout: Duration,
    /// SQLite: how long a writer waits for another writer's lock before `SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Longest a [`StoreWrite::health`] probe may take before it reports the store not writable:
    /// a readiness probe must answer even when the database hangs (a lock, a half-dead server).
    pub health_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: 4,
            acquire_timeout: Duration::from_secs(10),
            busy_timeout: Duration::from_secs(5),
            health_timeout: Duration::from_secs(5),
        }
    }
}

/// Connections of a read-write SQLite store opened by [`crate::open`]: the one writer and one
/// more, so that a health probe or a reconcile read never waits behind the writer for a
/// connection. More would buy nothing (SQLite has one writer) and cost memory: each connection
/// keeps its own page cache ([`SQLITE_CACHE_KIB`]) on its own worker thread.
const SQLITE_WRITER_CONNECTIONS: u32 = 2;

/// Page cache of each read-write SQLite connection, in KiB (SQLite's default is 2000).
const SQLITE_CACHE_KIB: u32 = 1024;

impl PoolSettings {
    /// The settings [`crate::open`] uses for `backend`: the defaults, with SQLite's connections
    /// capped at two (`SQLITE_WRITER_CONNECTIONS`); read-only stores keep the default, for
    /// concurrent readers.
    pub fn for_read_write(backend: Backend) -> Self {
        let defaults = Self::default();
        match backend {
            Backend::Sqlite => Self {
                max_connections: SQLITE_WRITER_CONNECTIONS,
                ..defaults
            },
            Backend::Postgres => defaults,
        }
    }
}

/// Whether a connection may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadWrite,
    ReadOnly,
}

/// The SQL-backed [`Store`]: SQLite (embedded default) or PostgreSQL (scale-out).
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: AnyPool,
    backend: Backend,
    target: DbTarget,
    health_timeout: Duration,
    /// A read-write SQLite store's defence against a full disk, a read-only remount or a
    /// deleted file (see [`disk`]); `None` for PostgreSQL and read-only stores.
    disk: Option<Arc<DiskGuard>>,
}

impl SqlStore {
    /// Connects (creating the SQLite file if needed) without migrating; call
    /// [`StoreWrite::migrate`] next, or use [`open`](crate::open) which does both.
    pub async fn connect(target: &DbTarget, settings: &PoolSettings) -> Result<Self, StoreError> {
        Self::connect_mode(target, settings, Access::ReadWrite).await
    }

    /// Connects for reading only (the UI): SQLite opens the existing file with `mode=ro` and
    /// `query_only`, PostgreSQL sessions default to read-only transactions. Never creates or
    /// migrates anything: a missing file, or a schema other than this build's, is an error that
    /// says what to do.
    pub async fn connect_read_only(
        target: &DbTarget,
        settings: &PoolSettings,
    ) -> Result<Self, StoreError> {
        let store = Self::connect_mode(target, settings, Access::ReadOnly).await?;
        schema::check_readable(&store.pool)
            .await
            .map_err(|err| shm::explain_unreadable(target, err))?;
        Ok(store)
    }

    async fn connect_mode(
        target: &DbTarget,
        settings: &PoolSettings,
        access: Access,
    ) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let read_only = access == Access::ReadOnly;
        let url = target.driver_url_for(read_only)?;
        let backend = target.backend();
        let busy_ms = settings.busy_timeout.as_millis();
        let disk = match target {
            DbTarget::Sqlite { path } if !read_only => Some(Arc::new(DiskGuard::new(
                std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            ))),
            _ => None,
        };
        let stale = disk.clone();
        let pool = AnyPoolOptions::new()
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            // After a disk fault, connections opened before it are closed, not reused.
            .before_acquire(move |_conn, meta| {
                let keep = stale.as_ref().is_none_or(|disk| disk.keeps(meta.age));
                Box::pin(async move { Ok(keep) })
            })
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if read_only {
                        match backend {
                            Backend::Sqlite => {
                                conn.execute("PRAGMA query_only = ON").await?;
                                conn.execute(sqlx::AssertSqlSafe(format!(
                                    "PRAGMA busy_timeout = {busy_ms}"
                                )))
                                .await?;
                            }
                            Backend::Postgres => {
                                conn.execute("SET default_transaction_read_only = on")
                                    .await?;
                            }
                        }
                        return Ok(());
                    }
                    if backend == Backend::Sqlite {
                        // WAL: readers never block the writer; NORMAL: durable at every
                        // checkpoint, and a crash loses at most the last transactions, never
                        // consistency (the resume point rolls back with its data).
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute("PRAGMA synchronous = NORMAL").await?;
                        // A small page cache per connection: the recorder's writes land on
                        // recently touched pages, and a miss is a read from the OS's own cache,
                        // while each connection's cache (2 MiB by default) stays resident in a
                        // daemon that platform teams size by its resident set.
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "PRAGMA cache_size = -{SQLITE_CACHE_KIB}"
                        )))
                        .await?;
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "PRAGMA busy_timeout = {busy_ms}"
                        )))
                        .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|source| StoreError::Connect {
                target: target.to_string(),
                source,
            })?;
        if let Some(disk) = &disk {
            disk.opened();
        }
        Ok(Self {
            pool,
            backend,
            target: target.clone(),
            health_timeout: settings.health_timeout,
            disk,
        })
    }

    /// The database this store talks to (redacted when displayed).
    pub fn target(&self) -> &DbTarget {
        &self.target
    }

    /// The underlying pool, for tests and tools that need raw SQL (e.g. fault injection).
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every connection; pending writes must be awaited first.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A disk fault named as such (and the connections that saw it retired); other errors as
    /// they are.
    fn classify(&self, err: StoreError) -> StoreError {
        match &self.disk {
            Some(disk) => disk.classify(err),
            None => err,
        }
    }

    /// Before a write on SQLite: notices a deleted or replaced file, and (re)creates the schema
    /// after one, so the write lands in a file podline and its readers use.
    async fn prepare_write(&self) -> Result<(), StoreError> {
        let Some(disk) = &self.disk else {
            return Ok(());
        };
        disk.check_file();
        if disk.take_migrate() {
            match schema::migrate(&self.pool, self.backend).await {
                Ok(_) => {
                    disk.migrated(true);
                    tracing::info!(db = %disk.path().display(), "database schema re-created");
                }
                Err(err) => {
                    disk.migrated(false);
                    return Err(disk.classify(err));
                }
            }
        }
        Ok(())
    }

    async fn apply_batch(&self, batch: &Batch) -> Result<ApplyReport, StoreError> {
        self.prepare_write().await?;
        self.apply_in_tx(batch)
            .await
            .map_err(|err| self.classify(err))
    }

    async fn apply_in_tx(&self, batch: &Batch) -> Result<ApplyReport, StoreError> {
        let mut tx = match self.backend {
            // Take the write lock up front so the transaction never fails halfway on a lock
            // upgrade; busy_timeout makes it wait for another writer instead.
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
        .map_err(StoreError::begin_failed("apply"))?;
        let report = write::apply_in_tx(&mut tx, self.backend, batch, Timestamp::now()).await?;
        tx.commit().await.map_err(StoreError::query("apply"))?;
        Ok(report)
    }

    async fn write_probe(&self) -> Result<(), StoreError> {
        self.prepare_write().await?;
        self.probe_once().await.map_err(|err| self.classify(err))
    }

    async fn probe_once(&self) -> Result<(), StoreError> {
        let probe = sqlx::query(
            "INSERT INTO podline_health (id, checked_at) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at",
        )
        .bind(Timestamp::now().as_microsecond())
        .execute(&self.pool);
        match tokio::time::timeout(self.health_timeout, probe).await {
            Ok(done) => done.map(|_| ()).map_err(StoreError::query("health")),
            Err(_) => Err(StoreError::Timeout {
                op: "health",
                after: self.health_timeout,
            }),
        }
    }
}

impl StoreWrite for SqlStore {
    fn backend(&self) -> &'static str {
        self.backend.as_str()
    }

    fn migrate(&self) -> BoxFuture<'_, Result<MigrationReport, StoreError>> {
        Box::pin(async move {
            schema::migrate(&self.pool, self.backend)
                .await
                .map_err(|err| self.classify(err))
        })
    }

    fn apply<'a>(&'a self, batch: &'a Batch) -> BoxFuture<'a, Result<ApplyReport, StoreError>> {
        Box::pin(self.apply_batch(batch))
    }

    fn resume_point<'a>(
        &'a self,
        watch_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<ResumePoint>, StoreError>> {
        Box::pin(async move {
            read::resume_point(&self.pool, watch_key)
                .await
                .map_err(|err| self.classify(err))
        })
    }

    fn live_pods<'a>(
        &'a self,
        scope: &'a LiveScope,
    ) -> BoxFuture<'a, Result<Vec<LivePod>, StoreError>> {
        Box::pin(async move {
            read::live_pods(&self.pool, scope)
                .await
                .map_err(|err| self.classify(err))
        })
    }

    fn last_recorded<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodRecord>, StoreError>> {
        Box::pin(
            async move { read::pod(&self.pool, self.backend, &PodKey::Uid(uid.to_owned())).await },
        )
    }

    fn health(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write_probe())
    }
}

impl StoreRead for SqlStore {
    fn runs<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Vec<RunSummary>, StoreError>> {
        Box::pin(read::runs(&self.pool, filter))
    }

    fn pods<'a>(
        &'a self,
        filter: &'a PodFilter,
    ) -> BoxFuture<'a, Result<Vec<PodRecord>, StoreError>> {
        Box::pin(read::pods(&self.pool, self.backend, filter))
    }

    fn pod<'a>(&'a self, key: &'a PodKey) -> BoxFuture<'a, Result<Option<PodRecord>, StoreError>> {
        Box::pin(read::pod(&self.pool, self.backend, key))
    }

    fn failures<'a>(
        &'a self,
        filter: &'a FailureFilter,
    ) -> BoxFuture<'a, Result<Vec<FailureGroup>, StoreError>> {
        Box::pin(read::failures(&self.pool, self.backend, filter))
    }

    fn changes(
        &self,
        since: Option<Timestamp>,
        limit: u32,
    ) -> BoxFuture<'_, Result<Changes, StoreError>> {
        Box::pin(read::changes(&self.pool, since, limit))
    }

    fn counts(&self) -> BoxFuture<'_, Result<Counts, StoreError>> {
        Box::pin(read::counts(&self.pool))
    }
}
