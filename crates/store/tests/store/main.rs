//! The store contract, run against every backend: SQLite (a temp file) and PostgreSQL (a fresh
//! database per test on 127.0.0.1:5432; `PODLINE_TEST_POSTGRES=skip` skips them loudly,
//! `PODLINE_TEST_POSTGRES=postgres://...` points at another server's admin database).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use podline_store::{
    Backend, Batch, ContainerState, FailureFilter, LiveScope, PodFilter, PodKey, PoolSettings,
    RunFilter, RunStatus, SqlStore, Store, StoreError, StoreOp, StoreRead, StoreWrite,
};
use sqlx::AssertSqlSafe;
use support::{TestDb, pod, ts};

/// Generates `<test>::sqlite` and `<test>::postgres` for each `async fn <test>(TestDb)`.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name(super::support::sqlite().await).await;
            }

            #[tokio::test]
            async fn postgres() {
                if let Some(db) = super::support::postgres().await {
                    super::$name(db).await;
                }
            }
        }
    )*};
}

on_every_backend!(
    reapplying_a_batch_should_change_nothing,
    older_or_equal_resource_versions_should_never_overwrite_newer_data,
    transitions_should_be_unique_and_the_first_time_should_win,
    deletion_should_be_recorded_once_and_never_undone,
    deletion_of_a_pod_never_seen_should_still_be_recorded,
    resume_point_should_commit_with_its_batch,
    failed_transaction_should_leave_neither_data_nor_resume_point,
    vanished_pods_should_be_marked_deleted_with_final_state_unknown,
    live_pods_should_list_only_undeleted_pods_in_scope,
    queries_should_filter_group_and_find_pods,
    migrations_should_be_idempotent_and_refuse_a_newer_schema,
    unstorable_ops_should_be_reported_without_blocking_the_batch,
    health_should_pass_when_writable_and_fail_when_closed,
    a_large_batch_should_be_split_into_several_statements,
    two_overlapping_writers_should_converge_to_the_newest_data,
    runs_should_filter_by_status_and_creation_time,
    failures_should_be_grouped_by_reason,
    changes_should_report_only_pods_written_after_the_mark,
    a_read_only_store_should_read_and_refuse_writes,
    hostile_free_text_should_be_stored_and_read_back_exactly,
    free_text_written_before_the_escape_should_read_back_unchanged_after_migrating,
);

fn upserts(pods: impl IntoIterator<Item = podline_store::PodObservation>) -> Vec<StoreOp> {
    pods.into_iter().map(StoreOp::Upsert).collect()
}

async fn reapplying_a_batch_should_change_nothing(db: TestDb) {
    let store = db.dyn_store();
    let batch = Batch::new(vec![
        StoreOp::Upsert(pod("a", 10, "Running")),
        StoreOp::Upsert(pod("b", 11, "Succeeded")),
        StoreOp::Deleted {
            uid: "b".into(),
            namespace: "default".into(),
            name: "pod-b".into(),
            resource_version: 12,
            at: ts(30),
            final_state_observed: true,
        },
    ])
    .with_resume("w", 12);

    let first = store.apply(&batch).await.unwrap();
    assert_eq!(first.pods_written, 2);
    assert_eq!(first.transitions_added, 2 + 3);
    assert_eq!(first.deletions_recorded, 1);
    let before = store.pods(&PodFilter::default()).await.unwrap();

    let again = store.apply(&batch).await.unwrap();
    assert_eq!(
        (
            again.pods_written,
            again.transitions_added,
            again.deletions_recorded
        ),
        (0, 0, 0)
    );
    let after = store.pods(&PodFilter::default()).await.unwrap();
    assert_eq!(before, after, "a replayed batch must not change any row");
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.pods, counts.transitions, counts.containers),
        (2, 5, 2)
    );
}

async fn older_or_equal_resource_versions_should_never_overwrite_newer_data(db: TestDb) {
    let store = db.dyn_store();
    store
        .apply(&Batch::new(upserts([pod("a", 5, "Running")])))
        .await
        .unwrap();

    // Older: ignored, in a later batch and inside one batch after a newer one.
    let mut stale = pod("a", 3, "Pending");
    stale.containers[0].image = "stale:1".into();
    store.apply(&Batch::new(upserts([stale]))).await.unwrap();
    // Equal version with different content: still ignored (same version means same object).
    let mut equal = pod("a", 5, "Running");
    equal.node = Some("other-node".into());
    let report = store.apply(&Batch::new(upserts([equal]))).await.unwrap();
    assert_eq!(report.pods_written, 0);

    let got = store.pod(&PodKey::Uid("a".into())).await.unwrap().unwrap();
    assert_eq!(got.resource_version, 5);
    assert_eq!(got.phase.as_deref(), Some("Running"));
    assert_eq!(got.node.as_deref(), Some("sim-node-1"));
    assert_eq!(got.containers[0].image, "busybox:1.36");

    // Newer wins, including containers; an older one in the same batch afterwards loses.
    let newer = pod("a", 9, "Failed");
    let report = store
        .apply(&Batch::new(upserts([newer, pod("a", 7, "Running")])))
        .await
        .unwrap();
    assert_eq!(report.pods_written, 1);
    let got = store.pod(&PodKey::Uid("a".into())).await.unwrap().unwrap();
    assert_eq!(got.resource_version, 9);
    assert_eq!(got.phase.as_deref(), Some("Failed"));
    assert_eq!(got.containers[0].exit_code, Some(3));
    assert_eq!(got.finished_at, Some(ts(20)));
}

async fn transitions_should_be_unique_and_the_first_time_should_win(db: TestDb) {
    let store = db.dyn_store();
    store
        .apply(&Batch::new(upserts([pod("a", 1, "Pending")])))
        .await
        .unwrap();
    // A later observation claims a different Pending time: the first one stays.
    let mut later = pod("a", 2, "Running");
    later.transitions[0].at = ts(999);
    let report = store.apply(&Batch::new(upserts([later]))).await.unwrap();
    assert_eq!(report.transitions_added, 1, "only Running is new");

    let got = store.pod(&PodKey::Uid("a".into())).await.unwrap().unwrap();
    let timeline: Vec<(&str, i64)> = got
        .transitions
        .iter()
        .map(|t| (t.phase.as_str(), t.at.as_second() - ts(0).as_second()))
        .collect();
    assert_eq!(timeline, vec![("Pending", 0), ("Running", 10)]);
}

async fn deletion_should_be_recorded_once_and_never_undone(db: TestDb) {
    let store = db.dyn_store();
    let deleted = |at, observed| StoreOp::Deleted {
        uid: "a".into(),
        namespace: "default".into(),
        name: "pod-a".into(),
        resource_version: 20,
        at,
        final_state_observed: observed,
    };
    let first = store
        .apply(&Batch::new(vec![
            StoreOp::Upsert(pod("a", 19, "Succeeded")),
            deleted(ts(40), true),
        ]))
        .await
        .unwrap();
    assert_eq!(first.deletions_recorded, 1);

    // A second deletion (replay, or a later relist) and a vanish: nothing changes.
    let second = store
        .apply(&Batch::new(vec![
            deleted(ts(50), false),
            StoreOp::Vanished {
                uid: "a".into(),
                at: ts(60),
            },
        ]))
        .await
        .unwrap();
    assert_eq!(second.deletions_recorded, 0);

    // A stale upsert after the deletion does not resurrect the pod...
    store
        .apply(&Batch::new(upserts([pod("a", 2, "Running")])))
        .await
        .unwrap();
    // ...and neither does a newer one (e.g. a late final object): data moves, deletion stays.
    store
        .apply(&Batch::new(upserts([pod("a", 25, "Succeeded")])))
        .await
        .unwrap();

    let got = store.pod(&PodKey::Uid("a".into())).await.unwrap().unwrap();
    assert_eq!(got.deleted_at, Some(ts(40)));
    assert!(got.final_state_observed);
    assert_eq!(got.resource_version, 25);
    assert_eq!(got.phase.as_deref(), Some("Succeeded"));
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.deleted, counts.live, counts.vanished), (1, 0, 0));
}

async fn deletion_of_a_pod_never_seen_should_still_be_recorded(db: TestDb) {
    let store = db.dyn_store();
    store
        .apply(&Batch::new(vec![StoreOp::Deleted {
            uid: "ghost".into(),
            namespace: "ns1".into(),
            name: "ghost-pod".into(),
            resource_version: 30,
            at: ts(5),
            final_state_observed: false,
        }]))
        .await
        .unwrap();
    let got = store
        .pod(&PodKey::Uid("ghost".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.resource_version, 0, "no observation yet");
    assert_eq!(got.phase, None);
    assert_eq!(got.deleted_at, Some(ts(5)));

    // The observation arriving afterwards (out of order) fills the row; it stays deleted.
    let mut late = pod("ghost", 29, "Succeeded");
    late.namespace = "ns1".into();
    store.apply(&Batch::new(upserts([late]))).await.unwrap();
    let got = store
        .pod(&PodKey::Uid("ghost".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.phase.as_deref(), Some("Succeeded"));
    assert_eq!(got.deleted_at, Some(ts(5)));
}

async fn resume_point_should_commit_with_its_batch(db: TestDb) {
    let store = db.dyn_store();
    assert_eq!(store.resume_point("w").await.unwrap(), None);
    store
        .apply(&Batch::new(upserts([pod("a", 7, "Pending")])).with_resume("w", 7))
        .await
        .unwrap();
    store
        .apply(&Batch::new(vec![]).with_resume("other", 3))
        .await
        .unwrap();
    assert_eq!(
        store
            .resume_point("w")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        7
    );
    assert_eq!(
        store
            .resume_point("other")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        3
    );

    // A batch without a resume point leaves it alone; a new one replaces it.
    store
        .apply(&Batch::new(upserts([pod("b", 8, "Pending")])))
        .await
        .unwrap();
    assert_eq!(
        store
            .resume_point("w")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        7
    );
    store
        .apply(&Batch::new(vec![]).with_resume("w", 9))
        .await
        .unwrap();

    // Survives a restart of the process (a new pool on the same database).
    let reopened = db.reopen(&PoolSettings::default()).await;
    assert_eq!(
        reopened
            .resume_point("w")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        9
    );
}

async fn failed_transaction_should_leave_neither_data_nor_resume_point(db: TestDb) {
    let store = db.dyn_store();
    store
        .apply(&Batch::new(upserts([pod("a", 1, "Pending")])).with_resume("w", 1))
        .await
        .unwrap();

    // Make the transitions insert (which runs after the pod upserts) fail for phase "Boom".
    let trigger = match db.target.backend() {
        Backend::Sqlite => vec![
            "CREATE TRIGGER boom BEFORE INSERT ON transitions WHEN NEW.phase = 'Boom' \
             BEGIN SELECT RAISE(ABORT, 'boom'); END",
        ],
        Backend::Postgres => vec![
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.phase = 'Boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER boom BEFORE INSERT ON transitions FOR EACH ROW EXECUTE FUNCTION boom()",
        ],
    };
    for sql in trigger {
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(db.store.pool())
            .await
            .unwrap();
    }
    let mut bad = pod("b", 5, "Pending");
    bad.transitions
        .push(podline_store::PhaseTransition::new("Boom", ts(3)));
    let batch = Batch::new(upserts([pod("a", 4, "Running"), bad])).with_resume("w", 5);
    let err = store.apply(&batch).await.unwrap_err();
    assert!(
        !err.is_retryable(),
        "a constraint failure is not transient: {err:?}"
    );

    assert_eq!(
        store
            .resume_point("w")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        1
    );
    assert!(store.pod(&PodKey::Uid("b".into())).await.unwrap().is_none());
    let a = store.pod(&PodKey::Uid("a".into())).await.unwrap().unwrap();
    assert_eq!(a.resource_version, 1, "the upsert of a rolled back too");
    assert_eq!(a.transitions.len(), 1);
}

async fn vanished_pods_should_be_marked_deleted_with_final_state_unknown(db: TestDb) {
    let store = db.dyn_store();
    store
        .apply(&Batch::new(vec![
            StoreOp::Upsert(pod("a", 1, "Running")),
            StoreOp::Upsert(pod("b", 2, "Running")),
            StoreOp::Upsert(pod("c", 3, "Succeeded")),
            StoreOp::Deleted {
                uid: "c".into(),
                namespace: "default".into(),
                name: "pod-c".into(),
                resource_version: 4,
                at: ts(30),
                final_state_observed: true,
            },
        ]))
        .await
        .unwrap();
    let uids = vec![
        "a".to_owned(),
        "b".to_owned(),
        "c".to_owned(),
        "unknown".to_owned(),
    ];
    assert_eq!(store.mark_vanished(&uids, ts(100)).await.unwrap(), 2);
    assert_eq!(
        store.mark_vanished(&uids, ts(200)).await.unwrap(),
        0,
        "once only"
    );

    let a = store.pod(&PodKey::Uid("a".into())).await.unwrap().unwrap();
    assert_eq!(a.deleted_at, Some(ts(100)));
    assert!(!a.final_state_observed);
    let c = store.pod(&PodKey::Uid("c".into())).await.unwrap().unwrap();
    assert_eq!(c.deleted_at, Some(ts(30)));
    assert!(
        c.final_state_observed,
        "an observed deletion is not overwritten"
    );
    assert!(
        store
            .pod(&PodKey::Uid("unknown".into()))
            .await
            .unwrap()
            .is_none()
    );
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.live, counts.deleted, counts.vanished), (0, 3, 2));
}

async fn live_pods_should_list_only_undeleted_pods_in_scope(db: TestDb) {
    let store = db.dyn_store();
    let mut other_ns = pod("x", 4, "Running");
    other_ns.namespace = "team-b".into();
    store
        .apply(&Batch::new(vec![
            StoreOp::Upsert(pod("a", 1, "Running")),
            StoreOp::Upsert(pod("b", 2, "Running")),
            StoreOp::Upsert(other_ns),
            StoreOp::Vanished {
                uid: "b".into(),
                at: ts(9),
            },
        ]))
        .await
        .unwrap();
    let mut all: Vec<String> = store
        .live_pods(&LiveScope::default())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.uid)
        .collect();
    all.sort();
    assert_eq!(all, ["a", "x"]);
    let scoped = store
        .live_pods(&LiveScope {
            namespace: Some("default".into()),
        })
        .await
        .unwrap();
    assert_eq!(scoped.len(), 1);
    assert_eq!(scoped[0].uid, "a");
    assert_eq!(scoped[0].resource_version, 1);
    assert_eq!(
        scoped[0].labels.get("app").map(String::as_str),
        Some("test")
    );
}

async fn queries_should_filter_group_and_find_pods(db: TestDb) {
    let store = db.dyn_store();
    let mut p = Vec::new();
    for (i, phase) in ["Succeeded", "Succeeded", "Failed"].iter().enumerate() {
        let mut o = pod(&format!("r1-{i}"), 10 + i as u64, phase);
        o.created_at = Some(ts(i as i64));
        p.push(o);
    }
    let mut r2 = pod("r2-0", 20, "Running");
    r2.run = Some("run-2".into());
    r2.created_at = Some(ts(100));
    p.push(r2);
    let mut norun = pod("solo", 21, "Pending");
    norun.run = None;
    norun.namespace = "ns2".into();
    p.push(norun);
    // Two pods with the same name over time: `show` finds the newest.
    let mut old = pod("reuse-old", 30, "Failed");
    old.name = "again".into();
    old.run = None;
    old.created_at = Some(ts(-100));
    let mut new = pod("reuse-new", 31, "Succeeded");
    new.name = "again".into();
    new.run = None;
    new.created_at = Some(ts(500));
    p.extend([old, new]);
    store.apply(&Batch::new(upserts(p))).await.unwrap();

    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].run, "run-2", "most recently created first");
    let r1 = &runs[1];
    assert_eq!(r1.pods, 3);
    assert_eq!(r1.phases.get("Succeeded"), Some(&2));
    assert_eq!(r1.phases.get("Failed"), Some(&1));
    assert_eq!(r1.first_created_at, Some(ts(0)));
    assert_eq!(r1.last_finished_at, Some(ts(20)));
    let limited = store
        .runs(&RunFilter {
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);

    let failed = store
        .pods(&PodFilter {
            run: Some("run-1".into()),
            phase: Some("Failed".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].uid, "r1-2");
    assert_eq!(failed[0].containers.len(), 1);
    assert_eq!(failed[0].containers[0].exit_code, Some(3));
    assert_eq!(failed[0].transitions.last().unwrap().phase, "Failed");
    assert_eq!(failed[0].owner.as_deref(), Some("Workflow/wf-1"));
    assert_eq!(
        failed[0].annotations.get("note").map(String::as_str),
        Some("hello")
    );

    let ns2 = store
        .pods(&PodFilter {
            namespace: Some("ns2".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ns2.len(), 1);
    let newest_two = store
        .pods(&PodFilter {
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap();
    let uids: Vec<&str> = newest_two.iter().map(|p| p.uid.as_str()).collect();
    assert_eq!(uids, ["reuse-new", "r2-0"]);

    let by_name = store
        .pod(&PodKey::parse("default/again", "ignored"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_name.uid, "reuse-new");
    let by_uid_as_name = store
        .pod(&PodKey::parse("reuse-old", "default"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        by_uid_as_name.uid, "reuse-old",
        "a bare uid works as the key"
    );
    assert!(
        store
            .pod(&PodKey::parse("nope", "default"))
            .await
            .unwrap()
            .is_none()
    );

    let counts = store.counts().await.unwrap();
    assert_eq!(counts.pods, 7);
    assert_eq!(counts.runs, 2);
    assert_eq!(counts.phases.get("Succeeded"), Some(&3));

    // Everything the CLI prints with -o json serializes.
    let json = serde_json::to_value(&by_name).unwrap();
    assert_eq!(json["containers"][0]["state"], "terminated");
    serde_json::to_string(&runs).unwrap();
    serde_json::to_string(&counts).unwrap();
}

async fn migrations_should_be_idempotent_and_refuse_a_newer_schema(db: TestDb) {
    let again = db.store.migrate().await.unwrap();
    assert!(again.applied.is_empty());
    assert_eq!(again.from_version, again.to_version);
    assert!(again.to_version >= 1);
    // A second process migrating the same database is harmless too.
    let other = db.reopen(&PoolSettings::default()).await;
    assert!(other.migrate().await.unwrap().applied.is_empty());
    // The data written before still reads back.
    db.store
        .apply(&Batch::new(upserts([pod("a", 1, "Pending")])))
        .await
        .unwrap();
    assert_eq!(other.counts().await.unwrap().pods, 1);

    sqlx::query(
        "INSERT INTO podline_schema (version, description, applied_at) VALUES (999, 'future', 0)",
    )
    .execute(db.store.pool())
    .await
    .unwrap();
    let err = other.migrate().await.unwrap_err();
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 999, .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

async fn unstorable_ops_should_be_reported_without_blocking_the_batch(db: TestDb) {
    let store = db.dyn_store();
    let report = store
        .apply(&Batch::new(upserts([
            pod("", 1, "Pending"),
            pod("huge", u64::MAX, "Pending"),
            pod("fine", 2, "Pending"),
        ])))
        .await
        .unwrap();
    assert_eq!(report.rejected.len(), 2);
    assert_eq!(report.pods_written, 1);
    assert!(
        store
            .pod(&PodKey::Uid("fine".into()))
            .await
            .unwrap()
            .is_some()
    );
}

async fn health_should_pass_when_writable_and_fail_when_closed(db: TestDb) {
    db.store.health().await.unwrap();
    db.store.health().await.unwrap();
    db.store.close().await;
    assert!(db.store.health().await.is_err());
}

async fn a_large_batch_should_be_split_into_several_statements(db: TestDb) {
    let store = db.dyn_store();
    // Far more rows than one statement carries (and than SQLite's parameter limit in one go).
    let pods: Vec<_> = (0..2_000)
        .map(|i| pod(&format!("p{i:05}"), i + 1, "Succeeded"))
        .collect();
    let report = store
        .apply(&Batch::new(upserts(pods)).with_resume("w", 2_000))
        .await
        .unwrap();
    assert_eq!(report.pods_written, 2_000);
    assert_eq!(report.transitions_added, 6_000);
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.pods, counts.containers, counts.transitions),
        (2_000, 2_000, 6_000)
    );
    let uids: Vec<String> = (0..2_000).map(|i| format!("p{i:05}")).collect();
    assert_eq!(store.mark_vanished(&uids, ts(1)).await.unwrap(), 2_000);
}

/// Two leaders overlap briefly during a Lease takeover: both write the same events, in different
/// orders, at the same time. The result must equal one writer's, with no deadlock or failure
/// that a retry doesn't fix.
async fn two_overlapping_writers_should_converge_to_the_newest_data(db: TestDb) {
    let batches: Vec<Batch> = (0..12_u64)
        .map(|k| {
            // Each batch touches 40 pods that other batches touch too, in shuffled order.
            let ops = (0..40_u64)
                .map(|j| {
                    let uid = format!("p{:02}", (j * 7 + k * 3) % 60);
                    let phase = ["Pending", "Running", "Succeeded"][(k % 3) as usize];
                    StoreOp::Upsert(pod(&uid, k * 100 + j + 1, phase))
                })
                .collect();
            Batch::new(ops).with_resume("w", k)
        })
        .collect();
    let expected_rv = |uid: &str| {
        batches
            .iter()
            .flat_map(|b| &b.ops)
            .filter_map(|op| match op {
                StoreOp::Upsert(o) if o.uid == uid => Some(o.resource_version),
                _ => None,
            })
            .max()
    };

    let writer = |store: std::sync::Arc<dyn Store>, order: Vec<Batch>| async move {
        for batch in &order {
            let mut attempts = 0;
            while let Err(err) = store.apply(batch).await {
                assert!(err.is_retryable(), "{err:?}");
                attempts += 1;
                assert!(attempts < 100, "{err:?}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let other: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(db.reopen(&PoolSettings::default()).await);
    let reversed: Vec<Batch> = batches.iter().rev().cloned().collect();
    tokio::join!(
        writer(db.dyn_store(), batches.clone()),
        writer(other, reversed)
    );

    let pods = db.store.pods(&PodFilter::default()).await.unwrap();
    assert_eq!(pods.len(), 60);
    for p in &pods {
        assert_eq!(Some(p.resource_version), expected_rv(&p.uid), "{}", p.uid);
        // The container row comes from the same (newest) observation as the pod row.
        let want = pod(&p.uid, p.resource_version, p.phase.as_deref().unwrap());
        assert_eq!(p.containers, want.containers, "{}", p.uid);
        let mut phases: Vec<&str> = p.transitions.iter().map(|t| t.phase.as_str()).collect();
        phases.dedup();
        assert_eq!(phases.len(), p.transitions.len(), "transitions unique");
    }
}

// ---- backend-specific tests ----

/// A SQLite writer blocked by another process's write lock gets a retryable error once the busy
/// timeout expires, and succeeds once the lock is gone.
#[tokio::test]
async fn sqlite_busy_should_be_retryable() {
    use sqlx::Connection;
    let db = support::sqlite_with(&PoolSettings {
        busy_timeout: Duration::from_millis(50),
        ..Default::default()
    })
    .await;
    let podline_store::DbTarget::Sqlite { path } = &db.target else {
        unreachable!()
    };
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();

    let batch = Batch::new(upserts([pod("a", 1, "Pending")]));
    let err = db.store.apply(&batch).await.unwrap_err();
    assert!(err.is_retryable(), "SQLITE_BUSY must be retryable: {err:?}");
    assert!(
        db.store.health().await.is_err(),
        "not writable while locked"
    );

    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    db.store.apply(&batch).await.unwrap();
    db.store.health().await.unwrap();
}

/// A database that hangs (here: a lock held by someone else) makes the readiness probe fail
/// within its timeout instead of hanging `/readyz`.
#[tokio::test]
async fn postgres_health_should_time_out_when_the_database_hangs() {
    use sqlx::Connection;
    let Some(db) = support::postgres_with(&PoolSettings {
        health_timeout: Duration::from_millis(300),
        ..Default::default()
    })
    .await
    else {
        return;
    };
    let podline_store::DbTarget::Postgres { url } = &db.target else {
        unreachable!()
    };
    let mut locker = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE podline_health IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let err = db.store.health().await.unwrap_err();
    assert!(matches!(err, StoreError::Timeout { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(started.elapsed() < Duration::from_secs(5));
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    db.store.health().await.unwrap();
}

fn pg_database_name(db: &TestDb) -> String {
    let podline_store::DbTarget::Postgres { url } = &db.target else {
        unreachable!()
    };
    url.rsplit('/').next().unwrap().to_owned()
}

/// Terminates every connection to the test database (what a PostgreSQL restart or failover
/// does to the recorder). Returns how many were killed.
async fn kill_connections(database: &str) -> i64 {
    use sqlx::Connection;
    let admin = support::postgres_admin_url().unwrap();
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

/// Connection loss mid-run: errors are classified retryable, the pool reconnects, and a writer
/// that retries loses nothing and duplicates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_loss_should_be_retryable_and_lose_nothing() {
    let Some(db) = support::postgres().await else {
        return;
    };
    let name = pg_database_name(&db);

    // Deterministic: a transaction whose connection dies fails with a retryable error.
    let mut tx = db.store.pool().begin().await.unwrap();
    sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap();
    assert!(kill_connections(&name).await >= 1);
    let source = sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap_err();
    let err = StoreError::Query {
        op: "apply",
        source,
    };
    assert!(err.is_retryable(), "{err:?}");
    drop(tx);
    // The pool replaces dead connections: the next write just works.
    db.store
        .apply(&Batch::new(upserts([pod("first", 1, "Pending")])))
        .await
        .unwrap();

    // Under load: a writer retrying with backoff while connections are killed repeatedly.
    let store = db.dyn_store();
    let writer = tokio::spawn(async move {
        let mut retryable_errors = 0;
        for k in 0..150_u64 {
            let ops = (0..20)
                .map(|j| StoreOp::Upsert(pod(&format!("b{k}-{j}"), k * 100 + j + 10, "Succeeded")))
                .collect();
            let batch = Batch::new(ops).with_resume("w", k);
            let mut attempts = 0;
            loop {
                match store.apply(&batch).await {
                    Ok(_) => break,
                    Err(err) => {
                        assert!(
                            err.is_retryable(),
                            "only retryable errors expected: {err:?}"
                        );
                        retryable_errors += 1;
                        attempts += 1;
                        assert!(attempts < 50, "gave up retrying batch {k}: {err:?}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }
        retryable_errors
    });
    let mut killed = 0;
    while !writer.is_finished() && killed < 200 {
        killed += kill_connections(&name).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let retryable_errors = writer.await.unwrap();
    eprintln!("killed {killed} connections; writer saw {retryable_errors} retryable errors");
    assert!(killed > 0, "the fault must actually have happened");

    let counts = db.store.counts().await.unwrap();
    assert_eq!(counts.pods, 150 * 20 + 1, "every pod once");
    assert_eq!(counts.transitions, (150 * 20) * 3 + 1);
    assert_eq!(
        db.store
            .resume_point("w")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        149
    );
    db.store.health().await.unwrap();
}

// ---- kill -9 of a SQLite writer ----

const CRASH_DB_ENV: &str = "PODLINE_STORE_CRASH_DB";
const CRASH_BATCH_PODS: u64 = 50;

/// Child half of the crash test: writes batches forever (until SIGKILLed), batch k holding pods
/// `c{k}-*` and resume point k. Does nothing when run normally.
#[test]
#[ignore = "child process of sqlite_kill_9_mid_write_should_keep_data_and_resume_point_consistent"]
fn crash_child_writer() {
    let Ok(path) = std::env::var(CRASH_DB_ENV) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = podline_store::open(&path).await.unwrap();
        let start = store
            .resume_point("crash")
            .await
            .unwrap()
            .map_or(0, |r| r.resource_version + 1);
        for k in start.. {
            let ops = (0..CRASH_BATCH_PODS)
                .map(|j| StoreOp::Upsert(pod(&format!("c{k}-{j}"), k * 1000 + j + 1, "Running")))
                .collect();
            store
                .apply(&Batch::new(ops).with_resume("crash", k))
                .await
                .unwrap();
        }
    });
}

/// `kill -9` of a process mid-write, 8 times: the resume point always matches the data exactly
/// (no partial batch, no data past the resume point), and the database stays intact.
#[tokio::test]
async fn sqlite_kill_9_mid_write_should_keep_data_and_resume_point_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let db = path.to_str().unwrap().to_owned();
    let exe = std::env::current_exe().unwrap();
    let mut last_resume = None;
    for round in 0..8 {
        let mut child = std::process::Command::new(&exe)
            .args(["crash_child_writer", "--exact", "--ignored", "--nocapture"])
            .env(CRASH_DB_ENV, &db)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the child has committed something new, then kill it at a random moment.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "child made no progress"
            );
            if path.exists()
                && let Ok(store) = podline_store::open(&db).await
            {
                let now = store.resume_point("crash").await.ok().flatten();
                if now.is_some() && now != last_resume {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let jitter = uuid::Uuid::new_v4().as_u128() % 150;
        tokio::time::sleep(Duration::from_millis(jitter as u64)).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let store = podline_store::open(&db).await.unwrap();
        let resume = store.resume_point("crash").await.unwrap().unwrap();
        let counts = store.counts().await.unwrap();
        assert_eq!(
            counts.pods,
            (resume.resource_version + 1) * CRASH_BATCH_PODS,
            "round {round}: data must match the resume point exactly"
        );
        last_resume = Some(resume);
    }
    let conn = podline_store::SqlStore::connect(
        &podline_store::DbTarget::parse(&db).unwrap(),
        &PoolSettings::default(),
    )
    .await
    .unwrap();
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(conn.pool())
        .await
        .unwrap();
    assert_eq!(check, "ok");
}

async fn runs_should_filter_by_status_and_creation_time(db: TestDb) {
    let store = db.dyn_store();
    let mut ops = Vec::new();
    for (run, created, phases) in [
        ("ok", 0, &["Succeeded", "Succeeded"][..]),
        ("bad", 100, &["Succeeded", "Failed"][..]),
        ("busy", 200, &["Running", "Succeeded"][..]),
    ] {
        for (i, phase) in phases.iter().enumerate() {
            let mut o = pod(&format!("{run}-{i}"), 1, phase);
            o.run = Some(run.into());
            o.created_at = Some(ts(created + i as i64));
            ops.push(StoreOp::Upsert(o));
        }
    }
    // A pod deleted while Pending (its image never pulled) is done and did not succeed.
    let mut never = pod("ok-never", 1, "Pending");
    never.run = Some("gone".into());
    never.created_at = Some(ts(300));
    ops.push(StoreOp::Upsert(never));
    ops.push(StoreOp::Deleted {
        uid: "ok-never".into(),
        namespace: "default".into(),
        name: "pod-ok-never".into(),
        resource_version: 2,
        at: ts(301),
        final_state_observed: true,
    });
    store.apply(&Batch::new(ops)).await.unwrap();

    let all = store.runs(&RunFilter::default()).await.unwrap();
    let status: Vec<(&str, RunStatus, u64, u64, u64)> = all
        .iter()
        .map(|r| {
            (
                r.run.as_str(),
                r.status(),
                r.succeeded(),
                r.failed(),
                r.active,
            )
        })
        .collect();
    assert_eq!(
        status,
        [
            ("gone", RunStatus::Failed, 0, 1, 0),
            ("busy", RunStatus::Running, 1, 0, 1),
            ("bad", RunStatus::Failed, 1, 1, 0),
            ("ok", RunStatus::Succeeded, 2, 0, 0),
        ]
    );
    let names = |runs: Vec<podline_store::RunSummary>| -> Vec<String> {
        runs.into_iter().map(|r| r.run).collect()
    };
    let failed = store
        .runs(&RunFilter {
            status: Some(RunStatus::Failed),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(failed), ["gone", "bad"]);
    let window = store
        .runs(&RunFilter {
            created_after: Some(ts(100)),
            created_before: Some(ts(300)),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(window), ["busy", "bad"]);
}

async fn failures_should_be_grouped_by_reason(db: TestDb) {
    let store = db.dyn_store();
    let mut oom = pod("oom", 1, "Failed");
    oom.containers[0].reason = Some("OOMKilled".into());
    oom.containers[0].exit_code = Some(137);
    let mut pull = pod("pull", 1, "Pending");
    pull.containers[0].state = Some(ContainerState::Waiting);
    pull.containers[0].reason = Some("ErrImagePull".into());
    pull.containers[0].message = Some("image busybox:nope: not found".into());
    let mut exit_a = pod("exit-a", 1, "Failed");
    exit_a.containers[0].reason = Some("Error".into());
    let mut exit_b = exit_a.clone();
    exit_b.uid = "exit-b".into();
    let mut evicted = pod("evicted", 1, "Failed");
    evicted.reason = Some("Evicted".into());
    evicted.message = Some("The node was low on memory".into());
    let mut other_ns = pod("other", 1, "Failed");
    other_ns.namespace = "elsewhere".into();
    let fine = pod("fine", 1, "Succeeded");
    let running = pod("running", 1, "Running");
    store
        .apply(&Batch::new(upserts([
            oom, pull, exit_a, exit_b, evicted, other_ns, fine, running,
        ])))
        .await
        .unwrap();

    let groups = store
        .failures(&FailureFilter {
            namespace: Some("default".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let summary: Vec<(&str, usize)> = groups
        .iter()
        .map(|g| (g.reason.as_str(), g.pods.len()))
        .collect();
    assert_eq!(
        summary,
        [
            ("Error (exit 3)", 2),
            ("Evicted", 1),
            ("ImagePull", 1),
            ("OOMKilled", 1)
        ]
    );
    let pull = &groups[2].pods[0];
    assert_eq!(pull.uid, "pull");
    assert_eq!(
        pull.failure.detail.as_deref(),
        Some("image busybox:nope: not found")
    );
    let everywhere = store.failures(&FailureFilter::default()).await.unwrap();
    assert_eq!(everywhere.iter().map(|g| g.pods.len()).sum::<usize>(), 6);
}

async fn changes_should_report_only_pods_written_after_the_mark(db: TestDb) {
    let store = db.dyn_store();
    let empty = store.changes(None, 100).await.unwrap();
    assert_eq!(empty.mark, None);
    store
        .apply(&Batch::new(upserts([pod("a", 1, "Pending")])))
        .await
        .unwrap();
    let start = store.changes(None, 100).await.unwrap();
    let mark = start.mark.expect("a mark once something is written");
    assert!(start.pods.is_empty(), "no since: only the mark");
    assert!(
        store
            .changes(Some(mark), 100)
            .await
            .unwrap()
            .pods
            .is_empty()
    );

    // The recorder's clock moves on between batches.
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .apply(&Batch::new(upserts([
            pod("a", 2, "Running"),
            pod("b", 1, "Pending"),
        ])))
        .await
        .unwrap();
    let changed = store.changes(Some(mark), 100).await.unwrap();
    let uids: Vec<&str> = changed.pods.iter().map(|p| p.uid.as_str()).collect();
    assert_eq!(uids.len(), 2);
    assert!(uids.contains(&"a") && uids.contains(&"b"), "{uids:?}");
    assert!(!changed.truncated);
    assert!(changed.mark > Some(mark));
    let limited = store.changes(Some(mark), 1).await.unwrap();
    assert_eq!(limited.pods.len(), 1);
    assert!(limited.truncated);
    assert!(
        store
            .changes(changed.mark, 100)
            .await
            .unwrap()
            .pods
            .is_empty()
    );
}

async fn a_read_only_store_should_read_and_refuse_writes(db: TestDb) {
    db.store
        .apply(&Batch::new(upserts([pod("a", 1, "Succeeded")])))
        .await
        .unwrap();
    let reader = SqlStore::connect_read_only(&db.target, &PoolSettings::default())
        .await
        .unwrap();
    assert_eq!(reader.counts().await.unwrap().pods, 1);
    assert!(
        reader
            .pod(&PodKey::Uid("a".into()))
            .await
            .unwrap()
            .is_some()
    );
    let err = reader
        .apply(&Batch::new(upserts([pod("b", 1, "Pending")])))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Query { .. }), "{err:?}");
    // The writer still works and the reader sees its new data.
    db.store
        .apply(&Batch::new(upserts([pod("c", 1, "Pending")])))
        .await
        .unwrap();
    assert_eq!(reader.counts().await.unwrap().pods, 2);
}

#[tokio::test]
async fn opening_a_missing_or_unmigrated_sqlite_file_read_only_should_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.db");
    let err = podline_store::open_read_only(&missing.to_string_lossy())
        .await
        .err()
        .expect("a missing store file is an error");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!missing.exists(), "a reader never creates the file");

    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let err = podline_store::open_read_only(&empty.to_string_lossy())
        .await
        .err()
        .expect("an empty file is not a store");
    assert!(
        matches!(err, StoreError::SchemaTooOld { found: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("podline record"), "{err}");
}

/// Text a container (or a careless user) can put in any free-text field: NUL (PostgreSQL
/// refuses it in TEXT, SQLite cut at it), the store's own escape character and look-alikes of
/// its escapes, control characters, noncharacters, bidi overrides, quotes and SQL.
fn hostile(tag: &str) -> String {
    const REST: &str = "\0exit\0\0 ␀ ␀0 ␀␀ \\0 \\u0000 \t\r\n\u{1b}[31m\u{7f}\u{85}\u{feff}\u{fffe}\u{ffff} \
                        \u{202e}evil\u{202c} 🧨 e\u{301} '; DROP TABLE pods; -- \"q\" \\\\";
    format!("{tag}:{REST}")
}

/// Issue 16: every free-text field is stored faithfully, whatever it contains, and a pod with
/// a hostile termination message is neither refused nor cut.
async fn hostile_free_text_should_be_stored_and_read_back_exactly(db: TestDb) {
    let store = db.dyn_store();
    let mut evil = pod(&hostile("uid"), 7, "Failed");
    evil.namespace = hostile("ns");
    evil.name = hostile("name");
    evil.run = Some(hostile("run"));
    evil.labels = std::collections::BTreeMap::from([(hostile("lk"), hostile("lv"))]);
    evil.annotations = std::collections::BTreeMap::from([(hostile("ak"), hostile("av"))]);
    evil.owner = Some(hostile("owner"));
    evil.node = Some(hostile("node"));
    evil.reason = Some(hostile("reason"));
    // Far longer than a kubelet's 4 KiB termination message, with NULs all along.
    evil.message = Some(hostile("message").repeat(2_000));
    let c = &mut evil.containers[0];
    c.name = hostile("container");
    c.image = hostile("image");
    c.image_id = Some(hostile("image-id"));
    c.reason = Some(hostile("c-reason"));
    c.message = Some(hostile("c-message").repeat(500));
    // A neighbour whose text is the stored form of the other's: it must not read back as NUL.
    let mut lookalike = pod("lookalike", 1, "Running");
    lookalike.message = Some("uid:␀0exit␀0␀0".to_owned());
    let key = hostile("watch");
    let deleted = StoreOp::Deleted {
        uid: hostile("gone"),
        namespace: hostile("ns"),
        name: hostile("gone-name"),
        resource_version: 9,
        at: ts(40),
        final_state_observed: true,
    };
    let batch = Batch::new(vec![
        StoreOp::Upsert(evil.clone()),
        StoreOp::Upsert(lookalike.clone()),
        deleted,
    ])
    .with_resume(&key, 9);
    let report = store.apply(&batch).await.unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert_eq!((report.pods_written, report.deletions_recorded), (2, 1));
    assert_eq!(
        store
            .resume_point(&key)
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        9
    );

    let check = |got: &podline_store::PodRecord| {
        assert_eq!(got.uid, evil.uid);
        assert_eq!(got.namespace, evil.namespace);
        assert_eq!(got.name, evil.name);
        assert_eq!(got.run, evil.run);
        assert_eq!(got.labels, evil.labels);
        assert_eq!(got.annotations, evil.annotations);
        assert_eq!(got.owner, evil.owner);
        assert_eq!(got.node, evil.node);
        assert_eq!(got.phase.as_deref(), Some("Failed"));
        assert_eq!(got.reason, evil.reason);
        assert_eq!(got.message, evil.message, "the message must not be cut");
        assert_eq!(got.containers, evil.containers);
        assert_eq!(got.transitions, evil.transitions);
    };
    let by_uid = store.pod(&PodKey::Uid(evil.uid.clone())).await.unwrap();
    check(&by_uid.unwrap());
    let by_name = store
        .pod(&PodKey::Name {
            namespace: evil.namespace.clone(),
            name: evil.name.clone(),
        })
        .await
        .unwrap();
    check(&by_name.unwrap());
    let filtered = store
        .pods(&PodFilter {
            run: evil.run.clone(),
            namespace: Some(evil.namespace.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(filtered.len(), 1);
    check(&filtered[0]);
    let other = store
        .pod(&PodKey::Uid("lookalike".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        other.message, lookalike.message,
        "the stored form is not NUL"
    );

    let gone = store
        .pod(&PodKey::Uid(hostile("gone")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (gone.namespace.as_str(), gone.name.as_str()),
        (hostile("ns").as_str(), hostile("gone-name").as_str())
    );
    let live = store
        .live_pods(&LiveScope {
            namespace: Some(evil.namespace.clone()),
        })
        .await
        .unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!((&live[0].uid, &live[0].name), (&evil.uid, &evil.name));
    let runs = store
        .runs(&RunFilter {
            namespace: Some(evil.namespace.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(Some(&runs[0].run), evil.run.as_ref());
    let failures = store
        .failures(&FailureFilter {
            run: evil.run.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let changes = store.changes(Some(ts(-1_000_000)), 10).await.unwrap();
    assert!(
        changes
            .pods
            .iter()
            .any(|p| p.uid == evil.uid && p.run == evil.run)
    );
    assert!(store.counts().await.unwrap().phases.contains_key("Failed"));

    // Re-applying the same batch changes nothing (the escaped keys compare equal).
    let again = store.apply(&batch).await.unwrap();
    assert_eq!((again.pods_written, again.deletions_recorded), (0, 0));
}

/// Rows written before the escape existed hold `␀` raw; migration 3 doubles it, so they read
/// back unchanged instead of being mistaken for escapes.
async fn free_text_written_before_the_escape_should_read_back_unchanged_after_migrating(
    db: TestDb,
) {
    let pool = db.store.pool();
    // A row as version 2 wrote it (raw text), and the schema put back to version 2.
    sqlx::query(
        "INSERT INTO pods (uid, namespace, name, rv, phase, message, recorded_at, updated_at) \
         VALUES ('old␀', 'default', 'old', 1, 'Failed', 'before ␀0 and ␀␀ and ␀', 0, 0)",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO transitions (uid, phase, at) VALUES ('old␀', 'Failed', 0)")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM podline_schema WHERE version >= 3")
        .execute(pool)
        .await
        .unwrap();
    let report = db.store.migrate().await.unwrap();
    assert_eq!(report.applied, vec![3]);
    let old = db
        .store
        .pod(&PodKey::Uid("old␀".into()))
        .await
        .unwrap()
        .expect("the old row, found by its real uid");
    assert_eq!(old.message.as_deref(), Some("before ␀0 and ␀␀ and ␀"));
    assert_eq!(old.transitions.len(), 1);
}

// ---- disk faults (SQLite) ----

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop; `None` (loudly) where
/// mounting is not permitted (not root, no CAP_SYS_ADMIN).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs { dir }),
            other => {
                eprintln!(
                    "\n*** cannot mount a tmpfs here ({other:?}): the real full-disk test is \
                     SKIPPED, nothing was checked ***\n"
                );
                None
            }
        }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Fills the file system to the last byte; returns the filler to delete.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5_u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        while file.write_all(&chunk[..1]).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// `n` pods with 4 KiB messages, uids `{prefix}-{i}`.
fn bulky(prefix: &str, n: usize) -> Vec<StoreOp> {
    upserts((0..n).map(|i| {
        let mut p = pod(&format!("{prefix}-{i}"), 1, "Running");
        p.message = Some(format!("{prefix} {i} ").repeat(400));
        p
    }))
}

async fn open_sqlite(path: &std::path::Path) -> SqlStore {
    let target = podline_store::DbTarget::Sqlite {
        path: path.to_owned(),
    };
    let store = SqlStore::connect(&target, &PoolSettings::for_read_write(Backend::Sqlite))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

/// Issue 16: a genuinely full file system (a 2 MiB tmpfs, filled) is reported as a full disk
/// naming the file, retryably, and once space comes back the very next write succeeds: the
/// connections that hit SQLITE_FULL are replaced instead of failing forever.
#[tokio::test]
async fn sqlite_full_disk_should_be_reported_and_survived() {
    let Some(fs) = Tmpfs::mount("2m") else { return };
    let db = fs.path().join("podline.db");
    let store = open_sqlite(&db).await;
    store.apply(&Batch::new(bulky("before", 20))).await.unwrap();
    let filler = fs.fill();

    let mut failed = None;
    let mut written = 20;
    for k in 0..200 {
        let batch = Batch::new(bulky(&format!("full{k}"), 20));
        match store.apply(&batch).await {
            Ok(_) => written += 20,
            Err(err) => {
                failed = Some((batch, err));
                break;
            }
        }
    }
    let (batch, err) = failed.expect("a full file system must fail a write");
    assert!(err.is_retryable(), "{err:?}");
    assert!(
        matches!(
            err,
            StoreError::Disk {
                fault: podline_store::DiskFault::Full,
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "database disk is full (SQLITE_FULL) at {}",
            db.display()
        )),
        "{message}"
    );
    assert_eq!(err.reason(), "disk_full");
    // Still full: still failing, still named.
    let again = store.apply(&batch).await.unwrap_err();
    assert!(again.is_retryable(), "{again:?}");

    std::fs::remove_file(filler).unwrap();
    // The very next attempt works, and so does everything after it.
    store.apply(&batch).await.unwrap();
    store.health().await.unwrap();
    store.apply(&Batch::new(bulky("after", 20))).await.unwrap();
    let counts = store.counts().await.unwrap();
    assert_eq!(counts.pods, written as u64 + 40);
    // A fresh process reads the same (nothing went to a connection's private state).
    store.close().await;
    let reader = open_sqlite(&db).await;
    assert_eq!(reader.counts().await.unwrap().pods, written as u64 + 40);
}

/// Issue 16: the database file deleted while open. The store notices, re-creates and migrates
/// it, and goes on writing into the file at the path (not into the deleted inode, where no
/// reader would ever see it).
#[tokio::test]
async fn sqlite_deleted_database_file_should_be_re_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let store = open_sqlite(&db).await;
    store
        .apply(&Batch::new(bulky("before", 5)).with_resume("w", 5))
        .await
        .unwrap();
    std::fs::remove_file(&db).unwrap();
    store
        .apply(&Batch::new(bulky("after", 3)).with_resume("w", 8))
        .await
        .unwrap();
    store.health().await.unwrap();
    assert!(db.is_file(), "re-created");

    let reader = SqlStore::connect_read_only(
        &podline_store::DbTarget::Sqlite { path: db.clone() },
        &PoolSettings::default(),
    )
    .await
    .unwrap();
    let counts = reader.counts().await.unwrap();
    assert_eq!(counts.pods, 3, "the new file holds what was written after");
    assert_eq!(
        reader
            .resume_point("w")
            .await
            .unwrap()
            .unwrap()
            .resource_version,
        8
    );
    // Deleting it with its -wal and -shm (`rm podline.db*`) is survived too.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    store.apply(&Batch::new(bulky("later", 2))).await.unwrap();
    assert_eq!(store.counts().await.unwrap().pods, 2);
}
