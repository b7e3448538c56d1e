//! The write path: one batch, one transaction, a handful of multi-row statements.
//!
//! Every statement is idempotent on its own (upserts guarded by resourceVersion, inserts that
//! skip conflicts, deletions guarded by `deleted_at IS NULL`), so re-applying a batch after a
//! crash or a lost connection changes nothing.
//!
//! Every free-text value is bound through [`text`](super::codec::text) (NUL escaped, see the
//! codec), so no content a container can produce makes a statement fail.

use std::collections::BTreeMap;

use jiff::Timestamp;
use sqlx::{Any, AnyConnection, AssertSqlSafe};

use super::codec::{map_json, rv, text, text_opt, ts, ts_opt};
use crate::error::StoreError;
use crate::model::{ApplyReport, Batch, ResumePoint};
use crate::plan::{Deletion, Plan};
use crate::target::Backend;

/// Most rows per multi-row statement. Large enough to amortise the round trip, small enough to
/// stay far below SQLite's 32,766 and PostgreSQL's 65,535 bind-parameter limits (19 columns here).
const ROWS_PER_STATEMENT: usize = 256;

/// Splits `items` into chunks whose lengths are powers of two (at most `ROWS_PER_STATEMENT`):
/// 300 rows become 256 + 32 + 8 + 4. Batches of every size then reuse at most nine statement
/// shapes per table, so prepared statements stay in the driver's cache instead of being
/// re-parsed for each new batch size.
fn chunks<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = rest.len().min(ROWS_PER_STATEMENT);
        // Largest power of two <= len (len >= 1 here).
        let size = 1 << (usize::BITS - 1 - len.leading_zeros());
        let (head, tail) = rest.split_at(size);
        rest = tail;
        Some(head)
    })
}

type Query<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

/// Writes the batch on `conn`, which must be inside a transaction the caller commits.
pub(crate) async fn apply_in_tx(
    conn: &mut AnyConnection,
    backend: Backend,
    batch: &Batch,
    now: Timestamp,
) -> Result<ApplyReport, StoreError> {
    let plan = Plan::from_batch(batch);
    let now = ts(now);
    let mut report = ApplyReport {
        ops: batch.ops.len(),
        rejected: plan.rejected.clone(),
        ..Default::default()
    };
    report.pods_written = upsert_pods(conn, backend, &plan, now).await?;
    upsert_containers(conn, backend, &plan).await?;
    report.transitions_added = insert_transitions(conn, backend, &plan).await?;
    report.deletions_recorded = record_deletions(conn, backend, &plan, now).await?;
    if let Some(resume) = &batch.resume {
        save_resume_point(conn, resume, now).await?;
    }
    Ok(report)
}

const POD_COLUMNS: &str = "uid, namespace, name, rv, run, labels, annotations, owner, node, \
     phase, reason, message, created_at, scheduled_at, started_at, finished_at, \
     deletion_requested_at, recorded_at, updated_at";
const POD_COLUMN_COUNT: usize = 19;

async fn upsert_pods(
    conn: &mut AnyConnection,
    backend: Backend,
    plan: &Plan<'_>,
    now: i64,
) -> Result<u64, StoreError> {
    let mut written = 0;
    for chunk in chunks(&plan.pods) {
        let sql = format!(
            "INSERT INTO pods ({POD_COLUMNS}) VALUES {} \
             ON CONFLICT (uid) DO UPDATE SET \
             namespace = excluded.namespace, name = excluded.name, rv = excluded.rv, \
             run = excluded.run, labels = excluded.labels, annotations = excluded.annotations, \
             owner = excluded.owner, node = excluded.node, phase = excluded.phase, \
             reason = excluded.reason, message = excluded.message, \
             created_at = excluded.created_at, scheduled_at = excluded.scheduled_at, \
             started_at = excluded.started_at, finished_at = excluded.finished_at, \
             deletion_requested_at = excluded.deletion_requested_at, \
             updated_at = excluded.updated_at \
             WHERE excluded.rv > pods.rv",
            Params::new(backend).rows(chunk.len(), POD_COLUMN_COUNT)
        );
        let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
        for obs in chunk {
            query = query
                .bind(text(&obs.uid))
                .bind(text(&obs.namespace))
                .bind(text(&obs.name))
                .bind(rv(obs.resource_version))
                .bind(text_opt(obs.run.as_deref()))
                .bind(map_json(&obs.labels))
                .bind(map_json(&obs.annotations))
                .bind(text_opt(obs.owner.as_deref()))
                .bind(text_opt(obs.node.as_deref()))
                .bind(text(&obs.phase))
                .bind(text_opt(obs.reason.as_deref()))
                .bind(text_opt(obs.message.as_deref()))
                .bind(ts_opt(obs.created_at))
                .bind(ts_opt(obs.scheduled_at))
                .bind(ts_opt(obs.started_at))
                .bind(ts_opt(obs.finished_at))
                .bind(ts_opt(obs.deletion_requested_at))
                .bind(now)
                .bind(now);
        }
        written += query
            .execute(&mut *conn)
            .await
            .map_err(StoreError::query("apply"))?
            .rows_affected();
    }
    Ok(written)
}

const CONTAINER_COLUMN_COUNT: usize = 13;

async fn upsert_containers(
    conn: &mut AnyConnection,
    backend: Backend,
    plan: &Plan<'_>,
) -> Result<(), StoreError> {
    for chunk in chunks(&plan.containers) {
        let sql = format!(
            "INSERT INTO containers (uid, name, rv, position, image, image_id, state, reason, \
             message, exit_code, restarts, started_at, finished_at) VALUES {} \
             ON CONFLICT (uid, name) DO UPDATE SET \
             rv = excluded.rv, position = excluded.position, image = excluded.image, \
             image_id = excluded.image_id, state = excluded.state, reason = excluded.reason, \
             message = excluded.message, exit_code = excluded.exit_code, \
             restarts = excluded.restarts, started_at = excluded.started_at, \
             finished_at = excluded.finished_at \
             WHERE excluded.rv > containers.rv",
            Params::new(backend).rows(chunk.len(), CONTAINER_COLUMN_COUNT)
        );
        let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
        for (obs, position, c) in chunk {
            query = query
                .bind(text(&obs.uid))
                .bind(text(&c.name))
                .bind(rv(obs.resource_version))
                .bind(i64::try_from(*position).unwrap_or(i64::MAX))
                .bind(text(&c.image))
                .bind(text_opt(c.image_id.as_deref()))
                .bind(c.state.map(|s| s.as_str()))
                .bind(text_opt(c.reason.as_deref()))
                .bind(text_opt(c.message.as_deref()))
                .bind(c.exit_code.map(i64::from))
                .bind(i64::from(c.restarts))
                .bind(ts_opt(c.started_at))
                .bind(ts_opt(c.finished_at));
        }
        query
            .execute(&mut *conn)
            .await
            .map_err(StoreError::query("apply"))?;
    }
    Ok(())
}

async fn insert_transitions(
    conn: &mut AnyConnection,
    backend: Backend,
    plan: &Plan<'_>,
) -> Result<u64, StoreError> {
    let mut added = 0;
    for chunk in chunks(&plan.transitions) {
        let sql = format!(
            "INSERT INTO transitions (uid, phase, at) VALUES {} \
             ON CONFLICT (uid, phase) DO NOTHING",
            Params::new(backend).rows(chunk.len(), 3)
        );
        let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
        for (uid, phase, at) in chunk {
            query = query.bind(text(uid)).bind(text(phase)).bind(ts(*at));
        }
        added += query
            .execute(&mut *conn)
            .await
            .map_err(StoreError::query("apply"))?
            .rows_affected();
    }
    Ok(added)
}

async fn record_deletions(
    conn: &mut AnyConnection,
    backend: Backend,
    plan: &Plan<'_>,
    now: i64,
) -> Result<u64, StoreError> {
    let mut observed = Vec::new();
    let mut vanished: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for (uid, deletion) in &plan.deletions {
        match deletion {
            Deletion::Observed { .. } => observed.push((*uid, *deletion)),
            Deletion::Vanished { at } => vanished.entry(ts(*at)).or_default().push(uid),
        }
    }
    let mut recorded = 0;

    // Observed deletions: insert a minimal row (rv 0: no observation yet) if the pod was never
    // seen, otherwise mark it deleted unless it already is.
    for chunk in chunks(&observed) {
        let sql = format!(
            "INSERT INTO pods (uid, namespace, name, rv, deleted_at, deleted_rv, \
             final_state_observed, recorded_at, updated_at) VALUES {} \
             ON CONFLICT (uid) DO UPDATE SET deleted_at = excluded.deleted_at, \
             deleted_rv = excluded.deleted_rv, \
             final_state_observed = excluded.final_state_observed, \
             updated_at = excluded.updated_at \
             WHERE pods.deleted_at IS NULL",
            Params::new(backend).rows(chunk.len(), 9)
        );
        let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
        for (uid, deletion) in chunk {
            let Deletion::Observed {
                namespace,
                name,
                resource_version,
                at,
                final_state_observed,
            } = deletion
            else {
                continue;
            };
            query = query
                .bind(text(uid))
                .bind(text(namespace))
                .bind(text(name))
                .bind(0_i64)
                .bind(ts(*at))
                .bind(rv(*resource_version))
                .bind(i64::from(*final_state_observed))
                .bind(now)
                .bind(now);
        }
        recorded += query
            .execute(&mut *conn)
            .await
            .map_err(StoreError::query("apply"))?
            .rows_affected();
    }

    // Vanished pods: only pods we know and still believe alive.
    for (at, uids) in vanished {
        for chunk in chunks(&uids) {
            let mut params = Params::new(backend);
            let sql = format!(
                "UPDATE pods SET deleted_at = {}, final_state_observed = 0, updated_at = {} \
                 WHERE deleted_at IS NULL AND uid IN ({})",
                params.next(),
                params.next(),
                params.list(chunk.len())
            );
            let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql)).bind(at).bind(now);
            for uid in chunk {
                query = query.bind(text(uid));
            }
            recorded += query
                .execute(&mut *conn)
                .await
                .map_err(StoreError::query("apply"))?
                .rows_affected();
        }
    }
    Ok(recorded)
}

async fn save_resume_point(
    conn: &mut AnyConnection,
    resume: &ResumePoint,
    now: i64,
) -> Result<(), StoreError> {
    // Last writer wins (not monotonic): after a relist on a recreated cluster the position must
    // be able to go back; the data itself stays monotonic per pod.
    sqlx::query(
        "INSERT INTO resume_points (watch_key, rv, updated_at) VALUES ($1, $2, $3) \
         ON CONFLICT (watch_key) DO UPDATE SET rv = excluded.rv, updated_at = excluded.updated_at",
    )
    .bind(text(&resume.watch_key))
    .bind(rv(resume.resource_version))
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::query("apply"))?;
    Ok(())
}

/// Bind-parameter placeholders in the backend's preferred style.
///
/// PostgreSQL needs numbered `$N`. SQLite accepts `$N` too, but binding a named parameter costs
/// a linear scan of the statement's parameter names (`sqlite3_bind_parameter_name`), which made
/// a 4,864-parameter insert quadratic (80% of a profile). Anonymous `?` parameters bind by
/// position for free.
pub(crate) struct Params {
    backend: Backend,
    next: usize,
}

impl Params {
    /// Placeholders starting at the first parameter.
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend, next: 1 }
    }

    /// The next placeholder.
    pub(crate) fn next(&mut self) -> String {
        let n = self.next;
        self.next += 1;
        match self.backend {
            Backend::Sqlite => "?".to_owned(),
            Backend::Postgres => format!("${n}"),
        }
    }

    /// `($1, $2), ($3, $4)` for `rows` rows of `cols` columns.
    pub(crate) fn rows(&mut self, rows: usize, cols: usize) -> String {
        let mut out = String::with_capacity(rows * cols * 5);
        for row in 0..rows {
            if row > 0 {
                out.push_str(", ");
            }
            out.push('(');
            out.push_str(&self.list(cols));
            out.push(')');
        }
        out
    }

    /// `$3, $4, $5` for a list of `len` values (an `IN (...)` list or one row).
    pub(crate) fn list(&mut self, len: usize) -> String {
        let mut out = String::with_capacity(len * 5);
        for i in 0..len {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&self.next());
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_should_number_rows_consecutively() {
        let mut pg = Params::new(Backend::Postgres);
        assert_eq!(pg.next(), "$1");
        assert_eq!(pg.rows(2, 2), "($2, $3), ($4, $5)");
        assert_eq!(pg.list(2), "$6, $7");
        let mut sqlite = Params::new(Backend::Sqlite);
        assert_eq!(sqlite.rows(2, 2), "(?, ?), (?, ?)");
    }

    #[test]
    fn chunks_should_be_powers_of_two_covering_every_item_once() {
        let items: Vec<usize> = (0..1000).collect();
        let sizes: Vec<usize> = chunks(&items).map(<[usize]>::len).collect();
        assert_eq!(sizes, [256, 256, 256, 128, 64, 32, 8]);
        let flat: Vec<usize> = chunks(&items).flatten().copied().collect();
        assert_eq!(flat, items);
        assert_eq!(chunks::<u8>(&[]).count(), 0);
        assert_eq!(
            chunks(&[1, 2, 3]).map(<[i32]>::len).collect::<Vec<_>>(),
            [2, 1]
        );
    }
}
