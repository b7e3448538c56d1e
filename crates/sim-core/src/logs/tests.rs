use std::time::Duration;

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

async fn read_all(store: &LogStore, query: LogQuery) -> String {
    let chunks: Vec<Bytes> = store.stream("u", "c", query).collect().await;
    String::from_utf8(chunks.concat()).unwrap()
}

fn store_with(lines: &[(&str, &str)]) -> LogStore {
    let store = LogStore::new();
    for (at, line) in lines {
        store.append("u", "c", line, t(at));
    }
    store
}

fn three_lines() -> LogStore {
    store_with(&[
        ("2026-01-01T00:00:01.5Z", "one"),
        ("2026-01-01T00:00:02Z", "two"),
        ("2026-01-01T00:00:03.25Z", "three"),
    ])
}

#[tokio::test]
async fn stream_should_return_all_lines_with_newlines() {
    let store = three_lines();
    assert_eq!(
        read_all(&store, LogQuery::default()).await,
        "one\ntwo\nthree\n"
    );
}

#[tokio::test]
async fn stream_should_prefix_fixed_width_timestamps() {
    let store = three_lines();
    let query = LogQuery {
        timestamps: true,
        ..LogQuery::default()
    };
    assert_eq!(
        read_all(&store, query).await,
        "2026-01-01T00:00:01.500000000Z one\n\
         2026-01-01T00:00:02.000000000Z two\n\
         2026-01-01T00:00:03.250000000Z three\n"
    );
}

#[tokio::test]
async fn tail_lines_should_keep_the_last_n() {
    let store = three_lines();
    let query = LogQuery {
        tail_lines: Some(2),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "two\nthree\n");
    let query = LogQuery {
        tail_lines: Some(0),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "");
    let query = LogQuery {
        tail_lines: Some(10),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "one\ntwo\nthree\n");
}

#[tokio::test]
async fn since_time_should_be_inclusive() {
    let store = three_lines();
    let query = LogQuery {
        since_time: Some(t("2026-01-01T00:00:02Z")),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "two\nthree\n");
}

#[tokio::test]
async fn since_time_at_second_precision_should_include_later_fractions() {
    let store = three_lines();
    // A client sends sinceTime with whole seconds: a line at 00:00:01.5 is after 00:00:01.
    let query = LogQuery {
        since_time: Some(t("2026-01-01T00:00:01Z")),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "one\ntwo\nthree\n");
}

#[tokio::test]
async fn tail_should_apply_before_since() {
    let store = three_lines();
    let query = LogQuery {
        tail_lines: Some(2),
        since_time: Some(t("2026-01-01T00:00:03Z")),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "three\n");
}

#[tokio::test]
async fn since_seconds_should_filter_relative_to_now() {
    let store = LogStore::new();
    let now = Timestamp::now();
    store.append("u", "c", "old", now - SignedDuration::from_secs(120));
    store.append("u", "c", "new", now - SignedDuration::from_secs(5));
    let query = LogQuery {
        since_seconds: Some(60),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "new\n");
}

#[tokio::test]
async fn limit_bytes_should_cut_the_output() {
    let store = three_lines();
    let query = LogQuery {
        limit_bytes: Some(6),
        ..LogQuery::default()
    };
    assert_eq!(read_all(&store, query).await, "one\ntw");
}

#[tokio::test]
async fn multi_line_append_should_become_separate_lines() {
    let store = LogStore::new();
    store.append("u", "c", "a\nb\n", t("2026-01-01T00:00:00Z"));
    assert_eq!(store.line_count("u", "c"), 2);
    assert_eq!(read_all(&store, LogQuery::default()).await, "a\nb\n");
}

#[tokio::test]
async fn unknown_container_should_stream_nothing() {
    let store = LogStore::new();
    assert_eq!(read_all(&store, LogQuery::default()).await, "");
}

#[tokio::test]
async fn follow_should_deliver_new_lines_and_end_at_finish() {
    let store = Arc::new(LogStore::new());
    store.append("u", "c", "first", Timestamp::now());
    let query = LogQuery {
        follow: true,
        ..LogQuery::default()
    };
    let mut stream = store.stream("u", "c", query);
    assert_eq!(stream.next().await.unwrap(), Bytes::from("first\n"));

    let writer = Arc::clone(&store);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        writer.append("u", "c", "second", Timestamp::now());
        tokio::time::sleep(Duration::from_millis(20)).await;
        writer.finish("u", "c");
    });
    let rest: Vec<Bytes> = tokio::time::timeout(Duration::from_secs(5), stream.collect())
        .await
        .expect("follow must end when the container finishes");
    assert_eq!(rest.concat(), b"second\n");
}

#[tokio::test]
async fn follow_before_first_line_should_wait_for_it() {
    let store = Arc::new(LogStore::new());
    let query = LogQuery {
        follow: true,
        ..LogQuery::default()
    };
    let stream = store.stream("u", "c", query);
    store.append("u", "c", "late", Timestamp::now());
    store.finish("u", "c");
    let all: Vec<Bytes> = tokio::time::timeout(Duration::from_secs(5), stream.collect())
        .await
        .unwrap();
    assert_eq!(all.concat(), b"late\n");
}

#[tokio::test]
async fn removing_the_pod_should_end_followers() {
    let store = LogStore::new();
    let query = LogQuery {
        follow: true,
        ..LogQuery::default()
    };
    let stream = store.stream("u", "c", query);
    store.remove_pod("u");
    let all: Vec<Bytes> = tokio::time::timeout(Duration::from_secs(5), stream.collect())
        .await
        .expect("remove_pod must end the follow stream");
    assert!(all.is_empty());
    assert_eq!(store.line_count("u", "c"), 0);
}

#[tokio::test]
async fn without_follow_lines_appended_later_should_not_be_read() {
    let store = three_lines();
    let mut stream = store.stream("u", "c", LogQuery::default());
    store.append("u", "c", "four", t("2026-01-01T00:00:04Z"));
    let mut all = Vec::new();
    while let Some(chunk) = stream.next().await {
        all.extend_from_slice(&chunk);
    }
    assert_eq!(all, b"one\ntwo\nthree\n");
}

#[tokio::test]
async fn appends_after_finish_should_be_ignored() {
    let store = three_lines();
    store.finish("u", "c");
    store.append("u", "c", "four", t("2026-01-01T00:00:04Z"));
    assert!(store.is_finished("u", "c"));
    assert_eq!(store.line_count("u", "c"), 3);
}

#[tokio::test]
async fn big_logs_should_come_in_bounded_chunks() {
    let store = LogStore::new();
    let line = "x".repeat(1000);
    for _ in 0..200 {
        store.append("u", "c", &line, t("2026-01-01T00:00:00Z"));
    }
    let chunks: Vec<Bytes> = store.stream("u", "c", LogQuery::default()).collect().await;
    assert!(chunks.len() > 1);
    assert!(chunks.iter().all(|c| c.len() <= 64 * 1024 + 1001));
    assert_eq!(chunks.concat().len(), 200 * 1001);
}
