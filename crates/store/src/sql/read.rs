//! The read path: queries for the CLI, the UI, reconcile and health.
//!
//! Free-text columns are read through [`get_text`] (the codec's unescape) and compared with
//! escaped filter values, so what comes out is exactly what was written.

use std::collections::BTreeMap;

use sqlx::any::AnyRow;
use sqlx::{Any, AnyPool, AssertSqlSafe, Row};

use super::codec::{map_from_json, rv_from, text, text_from, text_from_opt, ts_from, ts_from_opt};
use super::write::Params;
use crate::error::StoreError;
use crate::failures::{self, FailureFilter, FailureGroup, IMAGE_PULL_REASONS};
use crate::model::{ContainerObservation, ContainerState, PhaseTransition, ResumePoint};
use crate::records::{
    ChangedPod, Changes, Counts, LivePod, LiveScope, PodFilter, PodKey, PodRecord, RunFilter,
    RunSummary,
};
use crate::target::Backend;

type Query<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

/// How many uids go into one `IN (...)` list when loading children.
const UIDS_PER_QUERY: usize = 500;

const POD_SELECT: &str = "SELECT uid, namespace, name, rv, run, labels, annotations, owner, \
     node, phase, reason, message, created_at, scheduled_at, started_at, finished_at, \
     deletion_requested_at, deleted_at, final_state_observed, recorded_at, updated_at FROM pods";

/// Newest first; pods known only from their deletion sort by when they were recorded.
const POD_ORDER: &str = " ORDER BY COALESCE(created_at, recorded_at) DESC, uid";

fn get<'r, T>(row: &'r AnyRow, op: &'static str, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Any> + sqlx::Type<Any>,
{
    row.try_get(column)
        .map_err(|source| StoreError::Query { op, source })
}

/// A free-text column, unescaped (see [`text_from`]).
fn get_text(row: &AnyRow, op: &'static str, column: &str) -> Result<String, StoreError> {
    get::<String>(row, op, column).map(text_from)
}

/// A nullable free-text column, unescaped.
fn get_text_opt(
    row: &AnyRow,
    op: &'static str,
    column: &str,
) -> Result<Option<String>, StoreError> {
    get::<Option<String>>(row, op, column).map(text_from_opt)
}

fn pod_from_row(row: &AnyRow) -> Result<PodRecord, StoreError> {
    const OP: &str = "read pod";
    Ok(PodRecord {
        uid: get_text(row, OP, "uid")?,
        namespace: get_text(row, OP, "namespace")?,
        name: get_text(row, OP, "name")?,
        resource_version: rv_from("pods.rv", get(row, OP, "rv")?)?,
        run: get_text_opt(row, OP, "run")?,
        labels: map_from_json("pods.labels", &get::<String>(row, OP, "labels")?)?,
        annotations: map_from_json("pods.annotations", &get::<String>(row, OP, "annotations")?)?,
        owner: get_text_opt(row, OP, "owner")?,
        node: get_text_opt(row, OP, "node")?,
        phase: get_text_opt(row, OP, "phase")?,
        reason: get_text_opt(row, OP, "reason")?,
        message: get_text_opt(row, OP, "message")?,
        created_at: ts_from_opt("pods.created_at", get(row, OP, "created_at")?)?,
        scheduled_at: ts_from_opt("pods.scheduled_at", get(row, OP, "scheduled_at")?)?,
        started_at: ts_from_opt("pods.started_at", get(row, OP, "started_at")?)?,
        finished_at: ts_from_opt("pods.finished_at", get(row, OP, "finished_at")?)?,
        deletion_requested_at: ts_from_opt(
            "pods.deletion_requested_at",
            get(row, OP, "deletion_requested_at")?,
        )?,
        deleted_at: ts_from_opt("pods.deleted_at", get(row, OP, "deleted_at")?)?,
        final_state_observed: get::<i64>(row, OP, "final_state_observed")? != 0,
        recorded_at: ts_from("pods.recorded_at", get(row, OP, "recorded_at")?)?,
        updated_at: ts_from("pods.updated_at", get(row, OP, "updated_at")?)?,
        containers: Vec::new(),
        transitions: Vec::new(),
    })
}

/// Fills containers and transitions of `pods` with two queries per chunk of uids.
async fn load_children(
    pool: &AnyPool,
    backend: Backend,
    pods: &mut [PodRecord],
) -> Result<(), StoreError> {
    const OP: &str = "read pod";
    let index: BTreeMap<String, usize> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.uid.clone(), i))
        .collect();
    let uids: Vec<&str> = index.keys().map(String::as_str).collect();
    for chunk in uids.chunks(UIDS_PER_QUERY) {
        let list = Params::new(backend).list(chunk.len());
        let sql = format!(
            "SELECT uid, name, image, image_id, state, reason, message, exit_code, restarts, \
             started_at, finished_at FROM containers WHERE uid IN ({list}) ORDER BY uid, position"
        );
        let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
        for uid in chunk {
            query = query.bind(text(uid));
        }
        for row in query.fetch_all(pool).await.map_err(StoreError::query(OP))? {
            let uid = get_text(&row, OP, "uid")?;
            let Some(&i) = index.get(&uid) else { continue };
            let state: Option<String> = get(&row, OP, "state")?;
            let exit_code: Option<i64> = get(&row, OP, "exit_code")?;
            let restarts: i64 = get(&row, OP, "restarts")?;
            pods[i].containers.push(ContainerObservation {
                name: get_text(&row, OP, "name")?,
                image: get_text(&row, OP, "image")?,
                image_id: get_text_opt(&row, OP, "image_id")?,
                state: state.as_deref().and_then(ContainerState::parse),
                reason: get_text_opt(&row, OP, "reason")?,
                message: get_text_opt(&row, OP, "message")?,
                exit_code: exit_code
                    .map(|c| {
                        i32::try_from(c).map_err(|_| StoreError::Corrupt {
                            what: "containers.exit_code",
                            value: c.to_string(),
                        })
                    })
                    .transpose()?,
                restarts: u32::try_from(restarts).map_err(|_| StoreError::Corrupt {
                    what: "containers.restarts",
                    value: restarts.to_string(),
                })?,
                started_at: ts_from_opt("containers.started_at", get(&row, OP, "started_at")?)?,
                finished_at: ts_from_opt("containers.finished_at", get(&row, OP, "finished_at")?)?,
            });
        }

        let sql = format!(
            "SELECT uid, phase, at FROM transitions WHERE uid IN ({list}) ORDER BY uid, at, phase"
        );
        let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
        for uid in chunk {
            query = query.bind(text(uid));
        }
        for row in query.fetch_all(pool).await.map_err(StoreError::query(OP))? {
            let uid = get_text(&row, OP, "uid")?;
            let Some(&i) = index.get(&uid) else { continue };
            pods[i].transitions.push(PhaseTransition {
                phase: get_text(&row, OP, "phase")?,
                at: ts_from("transitions.at", get(&row, OP, "at")?)?,
            });
        }
    }
    Ok(())
}

pub(crate) async fn pods(
    pool: &AnyPool,
    backend: Backend,
    filter: &PodFilter,
) -> Result<Vec<PodRecord>, StoreError> {
    let mut conditions = Vec::new();
    let mut values: Vec<String> = Vec::new();
    for (column, value) in [
        ("run", &filter.run),
        ("phase", &filter.phase),
        ("namespace", &filter.namespace),
    ] {
        if let Some(value) = value {
            values.push(text(value));
            conditions.push(format!("{column} = ${}", values.len()));
        }
    }
    let mut sql = String::from(POD_SELECT);
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
    }
    sql.push_str(POD_ORDER);
    if filter.limit.is_some() {
        sql.push_str(&format!(" LIMIT ${}", values.len() + 1));
    }
    let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
    for value in values {
        query = query.bind(value);
    }
    if let Some(limit) = filter.limit {
        query = query.bind(i64::from(limit));
    }
    let rows = query
        .fetch_all(pool)
        .await
        .map_err(StoreError::query("pods"))?;
    let mut pods = rows
        .iter()
        .map(pod_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    load_children(pool, backend, &mut pods).await?;
    Ok(pods)
}

pub(crate) async fn pod(
    pool: &AnyPool,
    backend: Backend,
    key: &PodKey,
) -> Result<Option<PodRecord>, StoreError> {
    let row = match key {
        PodKey::Uid(uid) => by_uid(pool, uid).await?,
        PodKey::Name { namespace, name } => {
            let sql = format!("{POD_SELECT} WHERE namespace = $1 AND name = $2{POD_ORDER} LIMIT 1");
            let found = sqlx::query(AssertSqlSafe(sql))
                .bind(text(namespace))
                .bind(text(name))
                .fetch_optional(pool)
                .await
                .map_err(StoreError::query("pod"))?;
            match found {
                Some(row) => Some(row),
                None => by_uid(pool, name).await?,
            }
        }
    };
    let Some(row) = row else { return Ok(None) };
    let mut pods = vec![pod_from_row(&row)?];
    load_children(pool, backend, &mut pods).await?;
    Ok(pods.pop())
}

async fn by_uid(pool: &AnyPool, uid: &str) -> Result<Option<AnyRow>, StoreError> {
    let sql = format!("{POD_SELECT} WHERE uid = $1");
    sqlx::query(AssertSqlSafe(sql))
        .bind(text(uid))
        .fetch_optional(pool)
        .await
        .map_err(StoreError::query("pod"))
}

pub(crate) async fn runs(
    pool: &AnyPool,
    filter: &RunFilter,
) -> Result<Vec<RunSummary>, StoreError> {
    const OP: &str = "runs";
    let mut sql = String::from(
        "SELECT namespace, run, phase, COUNT(*) AS pods, COUNT(deleted_at) AS deleted, \
         COUNT(CASE WHEN deleted_at IS NULL AND (phase IS NULL OR phase NOT IN \
           ('Succeeded', 'Failed')) THEN 1 END) AS active, \
         MIN(created_at) AS first_created, MAX(finished_at) AS last_finished \
         FROM pods WHERE run IS NOT NULL",
    );
    if filter.namespace.is_some() {
        sql.push_str(" AND namespace = $1");
    }
    sql.push_str(" GROUP BY namespace, run, phase");
    let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
    if let Some(ns) = &filter.namespace {
        query = query.bind(text(ns));
    }
    let rows = query.fetch_all(pool).await.map_err(StoreError::query(OP))?;
    let mut runs: BTreeMap<(String, String), RunSummary> = BTreeMap::new();
    for row in &rows {
        let namespace = get_text(row, OP, "namespace")?;
        let run = get_text(row, OP, "run")?;
        let phase = get_text_opt(row, OP, "phase")?;
        let pods = count(get(row, OP, "pods")?);
        let deleted = count(get(row, OP, "deleted")?);
        let active = count(get(row, OP, "active")?);
        let first = ts_from_opt("pods.created_at", get(row, OP, "first_created")?)?;
        let last = ts_from_opt("pods.finished_at", get(row, OP, "last_finished")?)?;
        let summary = runs
            .entry((namespace.clone(), run.clone()))
            .or_insert_with(|| RunSummary {
                namespace,
                run,
                pods: 0,
                phases: BTreeMap::new(),
                deleted: 0,
                active: 0,
                first_created_at: None,
                last_finished_at: None,
            });
        summary.pods += pods;
        summary.deleted += deleted;
        summary.active += active;
        if let Some(phase) = phase {
            *summary.phases.entry(phase).or_default() += pods;
        }
        summary.first_created_at = min_opt(summary.first_created_at, first);
        summary.last_finished_at = summary.last_finished_at.max(last);
    }
    let mut runs: Vec<RunSummary> = runs
        .into_values()
        .filter(|r| filter.status.is_none_or(|s| r.status() == s))
        .filter(|r| {
            filter
                .created_after
                .is_none_or(|t| r.first_created_at.is_some_and(|c| c >= t))
        })
        .filter(|r| {
            filter
                .created_before
                .is_none_or(|t| r.first_created_at.is_some_and(|c| c < t))
        })
        .collect();
    runs.sort_by(|a, b| {
        b.first_created_at
            .cmp(&a.first_created_at)
            .then_with(|| a.run.cmp(&b.run))
    });
    if let Some(limit) = filter.limit {
        runs.truncate(limit as usize);
    }
    Ok(runs)
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub(crate) async fn counts(pool: &AnyPool) -> Result<Counts, StoreError> {
    const OP: &str = "counts";
    let row = sqlx::query(
        "SELECT COUNT(*) AS pods, COUNT(deleted_at) AS deleted, \
         COUNT(CASE WHEN deleted_at IS NOT NULL AND final_state_observed = 0 THEN 1 END) AS vanished \
         FROM pods",
    )
    .fetch_one(pool)
    .await
    .map_err(StoreError::query(OP))?;
    let pods = count(get(&row, OP, "pods")?);
    let deleted = count(get(&row, OP, "deleted")?);
    let vanished = count(get(&row, OP, "vanished")?);
    let scalar = |sql: &'static str| async move {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(pool)
            .await
            .map(count)
            .map_err(StoreError::query(OP))
    };
    let runs = scalar(
        "SELECT COUNT(*) FROM (SELECT DISTINCT namespace, run FROM pods WHERE run IS NOT NULL) AS r",
    )
    .await?;
    let transitions = scalar("SELECT COUNT(*) FROM transitions").await?;
    let containers = scalar("SELECT COUNT(*) FROM containers").await?;
    let mut phases = BTreeMap::new();
    for row in
        sqlx::query("SELECT phase, COUNT(*) AS n FROM pods WHERE phase IS NOT NULL GROUP BY phase")
            .fetch_all(pool)
            .await
            .map_err(StoreError::query(OP))?
    {
        phases.insert(get_text(&row, OP, "phase")?, count(get(&row, OP, "n")?));
    }
    Ok(Counts {
        pods,
        live: pods - deleted,
        deleted,
        vanished,
        runs,
        transitions,
        containers,
        phases,
    })
}

pub(crate) async fn live_pods(
    pool: &AnyPool,
    scope: &LiveScope,
) -> Result<Vec<LivePod>, StoreError> {
    const OP: &str = "live_pods";
    let mut sql =
        String::from("SELECT uid, namespace, name, rv, labels FROM pods WHERE deleted_at IS NULL");
    if scope.namespace.is_some() {
        sql.push_str(" AND namespace = $1");
    }
    let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
    if let Some(ns) = &scope.namespace {
        query = query.bind(text(ns));
    }
    query
        .fetch_all(pool)
        .await
        .map_err(StoreError::query(OP))?
        .iter()
        .map(|row| {
            Ok(LivePod {
                uid: get_text(row, OP, "uid")?,
                namespace: get_text(row, OP, "namespace")?,
                name: get_text(row, OP, "name")?,
                resource_version: rv_from("pods.rv", get(row, OP, "rv")?)?,
                labels: map_from_json("pods.labels", &get::<String>(row, OP, "labels")?)?,
            })
        })
        .collect()
}

pub(crate) async fn resume_point(
    pool: &AnyPool,
    watch_key: &str,
) -> Result<Option<ResumePoint>, StoreError> {
    let rv: Option<i64> = sqlx::query_scalar("SELECT rv FROM resume_points WHERE watch_key = $1")
        .bind(text(watch_key))
        .fetch_optional(pool)
        .await
        .map_err(StoreError::query("resume_point"))?;
    rv.map(|rv| {
        Ok(ResumePoint {
            watch_key: watch_key.to_owned(),
            resource_version: rv_from("resume_points.rv", rv)?,
        })
    })
    .transpose()
}

pub(crate) async fn changes(
    pool: &AnyPool,
    since: Option<jiff::Timestamp>,
    limit: u32,
) -> Result<Changes, StoreError> {
    const OP: &str = "changes";
    let newest: Option<i64> = sqlx::query_scalar("SELECT MAX(updated_at) FROM pods")
        .fetch_one(pool)
        .await
        .map_err(StoreError::query(OP))?;
    let mark = ts_from_opt("pods.updated_at", newest)?;
    let Some(since) = since else {
        return Ok(Changes {
            mark,
            pods: Vec::new(),
            truncated: false,
        });
    };
    let rows = sqlx::query(
        "SELECT uid, namespace, name, run, phase, deleted_at, updated_at FROM pods \
         WHERE updated_at > $1 ORDER BY updated_at, uid LIMIT $2",
    )
    .bind(super::codec::ts(since))
    .bind(i64::from(limit) + 1)
    .fetch_all(pool)
    .await
    .map_err(StoreError::query(OP))?;
    let mut pods = rows
        .iter()
        .map(|row| {
            Ok(ChangedPod {
                uid: get_text(row, OP, "uid")?,
                namespace: get_text(row, OP, "namespace")?,
                name: get_text(row, OP, "name")?,
                run: get_text_opt(row, OP, "run")?,
                phase: get_text_opt(row, OP, "phase")?,
                deleted: get::<Option<i64>>(row, OP, "deleted_at")?.is_some(),
                updated_at: ts_from("pods.updated_at", get(row, OP, "updated_at")?)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let truncated = pods.len() > limit as usize;
    pods.truncate(limit as usize);
    Ok(Changes {
        // A write that committed between the two statements shows up in `pods`; keep the mark
        // at least as new as what is returned, so it is not reported twice.
        mark: mark.max(pods.last().map(|p| p.updated_at)),
        pods,
        truncated,
    })
}

pub(crate) async fn failures(
    pool: &AnyPool,
    backend: Backend,
    filter: &FailureFilter,
) -> Result<Vec<FailureGroup>, StoreError> {
    // Candidates cheaply in SQL (any sign of failure), the exact reason in `failures::classify`.
    let mut values: Vec<String> = Vec::new();
    let pull_list: Vec<String> = IMAGE_PULL_REASONS
        .iter()
        .map(|reason| {
            values.push(text(reason));
            format!("${}", values.len())
        })
        .collect();
    let mut sql = format!(
        "{POD_SELECT} WHERE (phase = 'Failed' OR reason IS NOT NULL OR uid IN \
         (SELECT uid FROM containers WHERE (exit_code IS NOT NULL AND exit_code <> 0) \
         OR reason = 'OOMKilled' OR reason IN ({})))",
        pull_list.join(", ")
    );
    for (column, value) in [("namespace", &filter.namespace), ("run", &filter.run)] {
        if let Some(value) = value {
            values.push(text(value));
            sql.push_str(&format!(" AND {column} = ${}", values.len()));
        }
    }
    sql.push_str(POD_ORDER);
    let mut query: Query<'_> = sqlx::query(AssertSqlSafe(sql));
    for value in values {
        query = query.bind(value);
    }
    let rows = query
        .fetch_all(pool)
        .await
        .map_err(StoreError::query("failures"))?;
    let mut pods = rows
        .iter()
        .map(pod_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    load_children(pool, backend, &mut pods).await?;
    Ok(failures::group(&pods))
}
