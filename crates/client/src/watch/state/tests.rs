//! Step-function tests against a scripted in-process API server, in paused tokio time.
//!
//! The fake is a `tower::service_fn` that hands every request to the test script, which answers
//! with JSON, an open stream it feeds line by line, an error (connection refused), or nothing
//! (a stall). Paused time makes the client timeout and backoff exact and instant.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::channel::{mpsc, oneshot};
use http::{Request, Response};
use http_body::Frame;
use http_body_util::StreamBody;
use k8s_openapi::api::core::v1::Pod;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::time::Instant;
use tower::BoxError;

use super::super::{Event, WatchConfig, WatchError, watch};
use crate::backoff::FullJitter;
use crate::reason::Reason;
use crate::timeouts::WatchTimeouts;

type Chunk = Result<Frame<Bytes>, std::io::Error>;
type FakeBody = StreamBody<mpsc::UnboundedReceiver<Chunk>>;
type Reply = Result<Response<FakeBody>, BoxError>;

/// One request seen by the fake, with the means to answer it.
struct Call {
    uri: http::Uri,
    reply: oneshot::Sender<Reply>,
}

impl Call {
    fn query(&self, key: &str) -> Option<String> {
        self.uri.query()?.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == key).then(|| v.to_string())
        })
    }

    fn is_watch(&self) -> bool {
        self.query("watch").as_deref() == Some("true")
    }

    fn json(self, code: u16, body: Value) {
        let (tx, rx) = mpsc::unbounded();
        let _ = tx.unbounded_send(Ok(Frame::data(Bytes::from(body.to_string()))));
        drop(tx);
        let response = Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(StreamBody::new(rx))
            .unwrap();
        let _ = self.reply.send(Ok(response));
    }

    fn status(self, code: u16, reason: &str) {
        self.json(
            code,
            json!({"kind":"Status","apiVersion":"v1","status":"Failure","message":format!("injected {code}"),"reason":reason,"code":code}),
        );
    }

    /// Answers 200 with an open body; the returned sender feeds it, dropping it ends it cleanly.
    fn stream(self) -> mpsc::UnboundedSender<Chunk> {
        let (tx, rx) = mpsc::unbounded();
        let response = Response::builder()
            .status(200)
            .body(StreamBody::new(rx))
            .unwrap();
        let _ = self.reply.send(Ok(response));
        tx
    }

    fn refuse(self) {
        let err = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let _ = self.reply.send(Err(Box::new(err)));
    }
}

fn send_line(tx: &mpsc::UnboundedSender<Chunk>, value: Value) {
    let mut line = value.to_string();
    line.push('\n');
    tx.unbounded_send(Ok(Frame::data(Bytes::from(line))))
        .unwrap();
}

fn pod(name: &str, rv: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"default","resourceVersion":rv,"uid":format!("uid-{name}")}})
}

fn pod_list(items: Vec<Value>, rv: &str, continue_token: Option<&str>) -> Value {
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({"apiVersion":"v1","kind":"PodList","metadata":metadata,"items":items})
}

fn added(name: &str, rv: &str) -> Value {
    json!({"type":"ADDED","object":pod(name, rv)})
}

fn bookmark(rv: &str) -> Value {
    json!({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":rv}}})
}

fn gone_event() -> Value {
    json!({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}})
}

struct Server {
    calls: mpsc::UnboundedReceiver<Call>,
}

impl Server {
    async fn next(&mut self) -> Call {
        self.calls.next().await.expect("the watch stopped calling")
    }

    async fn next_list(&mut self) -> Call {
        let call = self.next().await;
        assert!(!call.is_watch(), "expected a LIST, got {}", call.uri);
        call
    }

    async fn next_watch(&mut self, rv: &str) -> Call {
        let call = self.next().await;
        assert!(call.is_watch(), "expected a WATCH, got {}", call.uri);
        assert_eq!(
            call.query("resourceVersion").as_deref(),
            Some(rv),
            "{}",
            call.uri
        );
        call
    }
}

fn fake() -> (kube::Client, Server) {
    let (tx, rx) = mpsc::unbounded::<Call>();
    let service = tower::service_fn(move |req: Request<Body>| {
        let tx = tx.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            tx.unbounded_send(Call {
                uri: req.uri().clone(),
                reply,
            })
            .map_err(|_| -> BoxError { "fake server gone".into() })?;
            answer
                .await
                .map_err(|_| -> BoxError { "fake server dropped the call".into() })?
        }
    });
    (kube::Client::new(service, "default"), Server { calls: rx })
}

const SERVER: Duration = Duration::from_secs(20);
const CLIENT: Duration = Duration::from_secs(5);

fn config() -> WatchConfig {
    WatchConfig::default()
        .timeouts(WatchTimeouts::try_new(SERVER, CLIENT).unwrap())
        .backoff(
            FullJitter::try_new(Duration::from_millis(200), Duration::from_secs(2), 2.0)
                .unwrap()
                .with_seed(1),
        )
        .page_size(2)
}

type Watch = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Event<Pod>, WatchError>> + Send>>;

fn start(config: WatchConfig) -> (Watch, Server) {
    let (client, server) = fake();
    let api: kube::Api<Pod> = kube::Api::default_namespaced(client);
    (Box::pin(watch(api, config)), server)
}

async fn next(w: &mut Watch) -> Result<Event<Pod>, WatchError> {
    tokio::time::timeout(Duration::from_secs(3600), w.next())
        .await
        .expect("no item within an hour")
        .expect("the stream ended")
}

fn name(event: &Event<Pod>) -> Option<String> {
    match event {
        Event::Apply(p) | Event::InitApply(p) | Event::Delete(p) => p.metadata.name.clone(),
        _ => None,
    }
}

/// Drives the initial LIST (one page, one pod) and WATCH; returns the watch's body sender.
async fn list_then_watch(w: &mut Watch, server: &mut Server) -> mpsc::UnboundedSender<Chunk> {
    let script = async {
        server
            .next_list()
            .await
            .json(200, pod_list(vec![pod("a", "5")], "10", None));
        server.next_watch("10").await.stream()
    };
    let consume = async {
        assert!(matches!(next(w).await, Ok(Event::Init)));
        assert_eq!(name(&next(w).await.unwrap()).as_deref(), Some("a"));
        assert!(matches!(next(w).await, Ok(Event::InitDone)));
        match next(w).await {
            Ok(Event::Connected {
                reason,
                resource_version,
            }) => {
                assert_eq!(reason, Reason::Initial);
                assert_eq!(resource_version, "10");
            }
            other => panic!("expected Connected, got {other:?}"),
        }
    };
    let (tx, ()) = tokio::join!(script, consume);
    tx
}

#[tokio::test(start_paused = true)]
async fn list_should_page_and_watch_from_the_list_rv_with_bookmarks_and_server_timeout() {
    let (mut w, mut server) = start(config().labels("app=demo"));
    let script = async {
        let first = server.next_list().await;
        assert_eq!(first.query("limit").as_deref(), Some("2"));
        assert_eq!(first.query("labelSelector").as_deref(), Some("app%3Ddemo"));
        first.json(
            200,
            pod_list(vec![pod("a", "1"), pod("b", "2")], "", Some("tok")),
        );
        let second = server.next_list().await;
        assert_eq!(second.query("continue").as_deref(), Some("tok"));
        second.json(200, pod_list(vec![pod("c", "3")], "7", None));
        let w = server.next_watch("7").await;
        assert_eq!(w.query("timeoutSeconds").as_deref(), Some("20"));
        assert_eq!(w.query("allowWatchBookmarks").as_deref(), Some("true"));
        assert_eq!(w.query("labelSelector").as_deref(), Some("app%3Ddemo"));
        w.stream()
    };
    let consume = async {
        let mut names = vec![];
        assert!(matches!(next(&mut w).await, Ok(Event::Init)));
        for _ in 0..3 {
            names.push(name(&next(&mut w).await.unwrap()).unwrap());
        }
        assert_eq!(names, ["a", "b", "c"]);
        assert!(matches!(next(&mut w).await, Ok(Event::InitDone)));
        assert!(matches!(next(&mut w).await, Ok(Event::Connected { .. })));
    };
    let (_tx, ()) = tokio::join!(script, consume);
}

/// The routine case: the server ends the watch at timeoutSeconds; the watch resumes at once from
/// the last RV it saw (a bookmark's), with no LIST and no backoff.
#[tokio::test(start_paused = true)]
async fn clean_end_at_server_timeout_should_rewatch_from_last_rv_without_list() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    let started = Instant::now();
    send_line(&tx, added("b", "11"));
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("b"));
    // Bookmarks every 4 s keep the client timeout (5 s) from firing.
    for (i, rv) in ["12", "13", "14", "15"].iter().enumerate() {
        tokio::time::sleep_until(started + Duration::from_secs(4 * (i as u64 + 1))).await;
        send_line(&tx, bookmark(rv));
        assert!(matches!(next(&mut w).await, Ok(Event::Bookmark(b)) if b == *rv));
    }
    tokio::time::sleep_until(started + SERVER).await;
    drop(tx); // the server's clean end
    let (_tx, event) = tokio::join!(
        async {
            let call = server.next_watch("15").await;
            // No backoff before a routine reconnect.
            assert_eq!(started.elapsed(), SERVER);
            call.stream()
        },
        next(&mut w)
    );
    match event {
        Ok(Event::Connected {
            reason,
            resource_version,
        }) => {
            assert_eq!(reason, Reason::ServerTimeout);
            assert_eq!(resource_version, "15");
        }
        other => panic!("expected Connected, got {other:?}"),
    }
}

/// A silent stream is declared dead exactly at the client timeout, then resumed from its RV.
#[tokio::test(start_paused = true)]
async fn stall_should_fire_the_client_timeout_at_the_configured_bound() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(&tx, added("b", "11"));
    assert!(next(&mut w).await.is_ok());
    let stalled_at = Instant::now();
    let err = next(&mut w).await.unwrap_err();
    assert!(
        matches!(
            err,
            WatchError::ClientTimeout {
                phase: super::Phase::Stream,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.reason().as_str(), "client_timeout");
    assert!(!err.is_fatal());
    assert_eq!(stalled_at.elapsed(), CLIENT);
    // Resumed from the last event's RV after one backoff step (<= 200 ms), no LIST.
    let (_tx2, event) = tokio::join!(
        async {
            let call = server.next_watch("11").await;
            assert!(stalled_at.elapsed() <= CLIENT + Duration::from_millis(200));
            call.stream()
        },
        async {
            let _tx = tx; // the stalled connection stays open
            next(&mut w).await
        }
    );
    assert!(
        matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::ClientTimeout,
                ..
            })
        ),
        "{event:?}"
    );
}

/// 410 as an in-stream ERROR event (how a real apiserver answers an expired RV) re-lists.
#[tokio::test(start_paused = true)]
async fn gone_in_stream_should_relist() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(&tx, gone_event());
    let err = next(&mut w).await.unwrap_err();
    assert!(err.is_gone(), "{err}");
    assert_eq!(err.reason().as_str(), "gone");
    let script = async {
        server
            .next_list()
            .await
            .json(200, pod_list(vec![pod("z", "30")], "40", None));
        server.next_watch("40").await.stream()
    };
    let consume = async {
        assert!(matches!(next(&mut w).await, Ok(Event::Init)));
        assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("z"));
        assert!(matches!(next(&mut w).await, Ok(Event::InitDone)));
        assert!(matches!(
            next(&mut w).await,
            Ok(Event::Connected {
                reason: Reason::Gone,
                ..
            })
        ));
    };
    let (_tx, ()) = tokio::join!(script, consume);
}

/// 410 as an HTTP status on watch start (a proxy, or an aggregated server) re-lists too, instead
/// of retrying the same RV forever (kube-rs issue #1042).
#[tokio::test(start_paused = true)]
async fn gone_as_http_status_on_watch_start_should_relist() {
    let (mut w, mut server) = start(config().resume_from(Some("3".into())));
    let (_, err) = tokio::join!(
        async { server.next_watch("3").await.status(410, "Expired") },
        next(&mut w)
    );
    assert!(err.unwrap_err().is_gone());
    let script = async {
        server
            .next_list()
            .await
            .json(200, pod_list(vec![], "50", None));
        server.next_watch("50").await.stream()
    };
    let consume = async {
        assert!(matches!(next(&mut w).await, Ok(Event::Init)));
        assert!(matches!(next(&mut w).await, Ok(Event::InitDone)));
        // The first connection of a stream reports how it started, whatever failed before.
        assert!(matches!(
            next(&mut w).await,
            Ok(Event::Connected {
                reason: Reason::Resume,
                ..
            })
        ));
    };
    let (_tx, ()) = tokio::join!(script, consume);
}

/// An expired continue token (410 on page 2) restarts the list from page 1 with a fresh Init.
#[tokio::test(start_paused = true)]
async fn gone_on_list_continue_should_restart_the_list() {
    let (mut w, mut server) = start(config());
    let script = async {
        server.next_list().await.json(
            200,
            pod_list(vec![pod("a", "1"), pod("b", "2")], "", Some("tok")),
        );
        let page2 = server.next_list().await;
        assert_eq!(page2.query("continue").as_deref(), Some("tok"));
        page2.status(410, "Expired");
        let again = server.next_list().await;
        assert_eq!(again.query("continue"), None);
        again.json(200, pod_list(vec![pod("a", "1")], "9", None));
        server.next_watch("9").await.stream()
    };
    let consume = async {
        let mut seen = vec![];
        loop {
            let item = next(&mut w).await;
            let stop = matches!(item, Ok(Event::Connected { .. }));
            seen.push(match item {
                Ok(Event::Init) => "init".to_string(),
                Ok(Event::InitDone) => "done".to_string(),
                Ok(Event::Connected { .. }) => "connected".to_string(),
                Ok(e) => name(&e).unwrap(),
                Err(e) => e.reason().to_string(),
            });
            if stop {
                break;
            }
        }
        assert_eq!(
            seen,
            ["init", "a", "b", "gone", "init", "a", "done", "connected"]
        );
    };
    let (_tx, ()) = tokio::join!(script, consume);
}

/// 5xx and 429 on the watch request back off and retry the same RV: no LIST.
#[tokio::test(start_paused = true)]
async fn server_errors_should_back_off_without_relisting() {
    let (mut w, mut server) = start(config().resume_from(Some("8".into())));
    let script = async {
        let mut times = vec![];
        for (code, reason) in [
            (503, "ServiceUnavailable"),
            (429, "TooManyRequests"),
            (500, "InternalError"),
        ] {
            let call = server.next_watch("8").await;
            times.push(Instant::now());
            call.status(code, reason);
        }
        let call = server.next_watch("8").await;
        times.push(Instant::now());
        (call.stream(), times)
    };
    let consume = async {
        let mut reasons = vec![];
        for _ in 0..3 {
            let err = next(&mut w).await.unwrap_err();
            assert!(!err.is_fatal());
            reasons.push(err.reason());
        }
        assert_eq!(
            reasons,
            [Reason::Http5xx, Reason::TooManyRequests, Reason::Http5xx]
        );
        assert!(matches!(
            next(&mut w).await,
            Ok(Event::Connected {
                reason: Reason::Resume,
                ..
            })
        ));
    };
    let ((_tx, times), ()) = tokio::join!(script, consume);
    // Each retry waited within its full-jitter envelope (200, 400, 800 ms).
    for (i, pair) in times.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        assert!(
            gap <= Duration::from_millis(200 << i),
            "retry {i} waited {gap:?}"
        );
    }
}

/// Connection refused (API server down) backs off and retries.
#[tokio::test(start_paused = true)]
async fn refused_should_back_off_and_retry() {
    let (mut w, mut server) = start(config().resume_from(Some("8".into())));
    let (_, err) = tokio::join!(
        async { server.next_watch("8").await.refuse() },
        next(&mut w)
    );
    let err = err.unwrap_err();
    assert_eq!(err.reason().as_str(), "refused", "{err}");
    let (_tx, event) = tokio::join!(
        async { server.next_watch("8").await.stream() },
        next(&mut w)
    );
    assert!(
        matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::Resume,
                ..
            })
        ),
        "{event:?}"
    );
}

/// 403 on LIST is fatal: yielded with is_fatal() and the stream ends.
#[tokio::test(start_paused = true)]
async fn forbidden_should_be_fatal_and_end_the_stream() {
    let (mut w, mut server) = start(config());
    assert!(matches!(next(&mut w).await, Ok(Event::Init)));
    let (_, err) = tokio::join!(
        async { server.next_list().await.status(403, "Forbidden") },
        next(&mut w)
    );
    let err = err.unwrap_err();
    assert!(err.is_fatal(), "{err}");
    assert_eq!(err.reason().as_str(), "forbidden");
    assert!(
        w.next().await.is_none(),
        "the stream ends after a fatal error"
    );
}

/// 404 on the watch (namespace missing) is fatal too.
#[tokio::test(start_paused = true)]
async fn missing_namespace_should_be_fatal() {
    let (mut w, mut server) = start(config().resume_from(Some("8".into())));
    let (_, err) = tokio::join!(
        async { server.next_watch("8").await.status(404, "NotFound") },
        next(&mut w)
    );
    let err = err.unwrap_err();
    assert!(err.is_fatal());
    assert_eq!(err.reason().as_str(), "not_found");
    assert!(w.next().await.is_none());
}

/// resume_from watches from the stored RV without listing first.
#[tokio::test(start_paused = true)]
async fn resume_from_should_watch_without_listing() {
    let (mut w, mut server) = start(config().resume_from(Some("42".into())));
    let (tx, event) = tokio::join!(
        async { server.next_watch("42").await.stream() },
        next(&mut w)
    );
    assert!(
        matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::Resume,
                ..
            })
        ),
        "{event:?}"
    );
    send_line(&tx, added("x", "43"));
    let item = next(&mut w).await.unwrap();
    assert_eq!(name(&item).as_deref(), Some("x"));
}

/// A stalled LIST page times out at the client timeout and the same page is asked again.
#[tokio::test(start_paused = true)]
async fn list_stall_should_time_out_and_retry_the_same_page() {
    let (mut w, mut server) = start(config());
    assert!(matches!(next(&mut w).await, Ok(Event::Init)));
    let t0 = Instant::now();
    let (stalled, err) = tokio::join!(server.next_list(), next(&mut w));
    let err = err.unwrap_err();
    assert!(
        matches!(
            err,
            WatchError::ClientTimeout {
                phase: super::Phase::List,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(t0.elapsed(), CLIENT);
    drop(stalled);
    let (again, item) = tokio::join!(
        async {
            let c = server.next_list().await;
            c.json(200, pod_list(vec![pod("a", "1")], "5", None));
        },
        next(&mut w)
    );
    let () = again;
    assert_eq!(name(&item.unwrap()).as_deref(), Some("a"));
}

/// A watch request whose headers never come times out at the client timeout.
#[tokio::test(start_paused = true)]
async fn watch_start_stall_should_time_out() {
    let (mut w, mut server) = start(config().resume_from(Some("8".into())));
    let t0 = Instant::now();
    let (stalled, err) = tokio::join!(server.next_watch("8"), next(&mut w));
    let err = err.unwrap_err();
    assert!(
        matches!(
            err,
            WatchError::ClientTimeout {
                phase: super::Phase::WatchStart,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(t0.elapsed(), CLIENT);
    drop(stalled);
    let (_tx, event) = tokio::join!(
        async { server.next_watch("8").await.stream() },
        next(&mut w)
    );
    assert!(
        matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::Resume,
                ..
            })
        ),
        "{event:?}"
    );
}

/// A connection reset mid-stream (an error frame) resumes from the last RV with no LIST.
#[tokio::test(start_paused = true)]
async fn reset_mid_stream_should_resume_from_last_rv() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(&tx, added("b", "11"));
    assert!(next(&mut w).await.is_ok());
    tx.unbounded_send(Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "reset",
    )))
    .unwrap();
    let err = next(&mut w).await.unwrap_err();
    assert_eq!(err.reason().as_str(), "reset", "{err}");
    let (_tx, event) = tokio::join!(
        async { server.next_watch("11").await.stream() },
        next(&mut w)
    );
    assert!(
        matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::Reset,
                ..
            })
        ),
        "{event:?}"
    );
}

/// A stream that ends early (before the server timeout) is a reset: backoff, resume, no LIST.
#[tokio::test(start_paused = true)]
async fn early_end_should_resume_after_backoff() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(&tx, added("b", "11"));
    assert!(next(&mut w).await.is_ok());
    drop(tx);
    let (_tx, event) = tokio::join!(
        async { server.next_watch("11").await.stream() },
        next(&mut w)
    );
    assert!(
        matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::Reset,
                ..
            })
        ),
        "{event:?}"
    );
}

/// Quiet periods (client timeouts on an open stream) reconnect at once, every time: they must not
/// push the backoff up, or a quiet watch would fall behind the server's watch history.
#[tokio::test(start_paused = true)]
async fn quiet_stalls_should_not_grow_the_backoff() {
    let (mut w, mut server) = start(config());
    let mut tx = list_then_watch(&mut w, &mut server).await;
    for _ in 0..6 {
        let connected_at = Instant::now();
        let err = next(&mut w).await.unwrap_err();
        assert_eq!(err.reason().as_str(), "client_timeout");
        assert_eq!(connected_at.elapsed(), CLIENT);
        let (new_tx, event) = tokio::join!(
            async {
                let call = server.next_watch("10").await;
                assert_eq!(
                    connected_at.elapsed(),
                    CLIENT,
                    "no backoff after a quiet period"
                );
                call.stream()
            },
            next(&mut w)
        );
        assert!(matches!(
            event,
            Ok(Event::Connected {
                reason: Reason::ClientTimeout,
                ..
            })
        ));
        drop(std::mem::replace(&mut tx, new_tx));
    }
}

/// Retry-After on a 429 watch answer is honoured (capped at the backoff cap).
#[tokio::test(start_paused = true)]
async fn retry_after_should_delay_the_next_watch() {
    let (mut w, mut server) = start(config().resume_from(Some("8".into())));
    let t0 = Instant::now();
    let script = async {
        server.next_watch("8").await.json(
            429,
            json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":1}}),
        );
        let call = server.next_watch("8").await;
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_secs(1), "{waited:?}");
        assert!(waited <= Duration::from_secs(2), "{waited:?}");
        call.stream()
    };
    let consume = async {
        assert_eq!(
            next(&mut w).await.unwrap_err().reason(),
            Reason::TooManyRequests
        );
        assert!(matches!(next(&mut w).await, Ok(Event::Connected { .. })));
    };
    let (_tx, ()) = tokio::join!(script, consume);
}

fn skipped(item: Result<Event<Pod>, WatchError>) -> super::super::Skipped {
    match item {
        Ok(Event::Skipped(s)) => s,
        other => panic!("expected a skipped object, got {other:?}"),
    }
}

fn send_raw(tx: &mpsc::UnboundedSender<Chunk>, bytes: &[u8]) {
    tx.unbounded_send(Ok(Frame::data(Bytes::copy_from_slice(bytes))))
        .unwrap();
}

/// The issue-27 case: an object no client decodes (a deletionTimestamp in year 10000) in a
/// MODIFIED event. kube-rs read the line as a Status with code 0 and the watch ended; now it is
/// one skipped object, the events after it arrive, and a reconnect resumes past it (from its
/// resourceVersion), not into it again.
#[tokio::test(start_paused = true)]
async fn an_undecodable_object_should_be_skipped_and_resumed_past() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    let mut bad = pod("bad", "12");
    bad["metadata"]["deletionTimestamp"] = json!("10000-01-01T00:00:00Z");
    send_line(&tx, added("b", "11"));
    send_line(&tx, json!({"type":"MODIFIED","object":bad}));
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("b"));
    let s = skipped(next(&mut w).await);
    assert_eq!(s.kind, super::super::SkipKind::Object);
    assert_eq!(s.object_name(), "default/bad");
    assert_eq!(s.uid.as_deref(), Some("uid-bad"));
    assert_eq!(s.resource_version.as_deref(), Some("12"));
    assert!(s.error.contains("deletionTimestamp"), "{}", s.error);
    drop(tx); // ends early: the resume must start after the bad event
    let (tx, event) = tokio::join!(
        async { server.next_watch("12").await.stream() },
        next(&mut w)
    );
    assert!(
        matches!(event, Ok(Event::Connected { ref resource_version, .. }) if resource_version == "12"),
        "{event:?}"
    );
    send_line(&tx, added("c", "13"));
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("c"));
}

/// A line that is not JSON (a proxy's error page, bytes that are not UTF-8) is skipped with no
/// resourceVersion to advance; the watch goes on and resumes from the last good one.
#[tokio::test(start_paused = true)]
async fn a_line_that_is_not_json_should_be_skipped_and_the_watch_go_on() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(&tx, added("b", "11"));
    send_raw(&tx, b"<html>502 Bad Gateway</html>\n\xff\xfe\n");
    send_line(&tx, added("c", "12"));
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("b"));
    for _ in 0..2 {
        let s = skipped(next(&mut w).await);
        assert_eq!(s.kind, super::super::SkipKind::NotJson, "{s}");
        assert_eq!(s.resource_version, None);
    }
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("c"));
    drop(tx);
    let (_tx, event) = tokio::join!(
        async { server.next_watch("12").await.stream() },
        next(&mut w)
    );
    assert!(matches!(event, Ok(Event::Connected { .. })), "{event:?}");
}

/// Metadata that does not decode (a name that is a number; metadata that is a string): skipped,
/// identified as far as possible, and a JSON object that is not a watch event is not read as a
/// Status with code 0 (which was fatal).
#[tokio::test(start_paused = true)]
async fn bad_metadata_and_non_events_should_be_skipped_not_fatal() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    let mut numbered = pod("x", "11");
    numbered["metadata"]["name"] = json!(7);
    send_line(&tx, json!({"type":"ADDED","object":numbered}));
    send_line(
        &tx,
        json!({"type":"DELETED","object":{"kind":"Pod","metadata":"garbled"}}),
    );
    send_line(&tx, json!({"message":"not an event"}));
    send_line(&tx, added("ok", "13"));
    let s = skipped(next(&mut w).await);
    assert_eq!((s.name, s.resource_version.as_deref()), (None, Some("11")));
    let s = skipped(next(&mut w).await);
    assert!(s.is_deletion() && s.uid.is_none(), "{s}");
    let s = skipped(next(&mut w).await);
    assert_eq!(s.kind, super::super::SkipKind::NotAnEvent);
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("ok"));
    drop(tx);
    let (_tx, event) = tokio::join!(
        async { server.next_watch("13").await.stream() },
        next(&mut w)
    );
    assert!(matches!(event, Ok(Event::Connected { .. })), "{event:?}");
}

/// A line over `max_line_bytes` is dropped as it arrives (here in pieces) and reported once; the
/// next event comes through on the same stream.
#[tokio::test(start_paused = true)]
async fn an_oversize_line_should_be_dropped_and_the_stream_go_on() {
    let (mut w, mut server) = start(config().max_line_bytes(512));
    let tx = list_then_watch(&mut w, &mut server).await;
    let mut huge = pod("huge", "11");
    huge["metadata"]["annotations"] = json!({"big": "x".repeat(2000)});
    let line = json!({"type":"ADDED","object":huge}).to_string();
    for piece in line.as_bytes().chunks(300) {
        send_raw(&tx, piece);
    }
    send_raw(&tx, b"\n");
    send_line(&tx, added("after", "12"));
    let s = skipped(next(&mut w).await);
    assert_eq!(s.kind, super::super::SkipKind::TooLong);
    assert!(s.error.contains(&format!("{} bytes", line.len())), "{s}");
    assert_eq!(name(&next(&mut w).await.unwrap()).as_deref(), Some("after"));
}

/// One bad item in a LIST page is one skipped object between the others; the page, the list and
/// the watch after it go on.
#[tokio::test(start_paused = true)]
async fn a_bad_list_item_should_be_skipped_and_the_list_complete() {
    let (mut w, mut server) = start(config());
    let mut bad = pod("bad", "2");
    bad["status"] = json!({"containerStatuses": "garbled"});
    let script = async {
        server.next_list().await.json(
            200,
            pod_list(vec![pod("a", "1"), bad, pod("c", "3")], "9", None),
        );
        server.next_watch("9").await.stream()
    };
    let consume = async {
        let mut seen = vec![];
        loop {
            let item = next(&mut w).await;
            let stop = matches!(item, Ok(Event::Connected { .. }));
            seen.push(match item {
                Ok(Event::Init) => "init".to_string(),
                Ok(Event::InitDone) => "done".to_string(),
                Ok(Event::Connected { .. }) => "connected".to_string(),
                Ok(Event::Skipped(s)) => {
                    assert!(s.is_listed() && s.uid.as_deref() == Some("uid-bad"), "{s}");
                    format!("skipped {}", s.object_name())
                }
                Ok(e) => name(&e).unwrap(),
                Err(e) => panic!("unexpected error {e}"),
            });
            if stop {
                break;
            }
        }
        assert_eq!(
            seen,
            ["init", "a", "skipped default/bad", "c", "done", "connected"]
        );
    };
    let (_tx, ()) = tokio::join!(script, consume);
}

/// A LIST answer that is not a list at all fails the page (not fatal): it is asked again.
#[tokio::test(start_paused = true)]
async fn a_list_answer_that_does_not_decode_should_retry_the_page() {
    let (mut w, mut server) = start(config());
    assert!(matches!(next(&mut w).await, Ok(Event::Init)));
    let (_, err) = tokio::join!(
        async {
            server
                .next_list()
                .await
                .json(200, json!({"metadata":{"resourceVersion": 5}}))
        },
        next(&mut w)
    );
    let err = err.unwrap_err();
    assert!(!err.is_fatal(), "{err}");
    assert_eq!(err.reason(), Reason::Decode);
    let (_, item) = tokio::join!(
        async {
            server
                .next_list()
                .await
                .json(200, pod_list(vec![pod("a", "1")], "5", None))
        },
        next(&mut w)
    );
    assert_eq!(name(&item.unwrap()).as_deref(), Some("a"));
}

/// A real ERROR event keeps its meaning: 500 resumes after a backoff, 403 ends the watch.
#[tokio::test(start_paused = true)]
async fn error_events_should_keep_their_status_semantics() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(
        &tx,
        json!({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd","reason":"InternalError","code":500}}),
    );
    let err = next(&mut w).await.unwrap_err();
    assert!(!err.is_fatal() && err.reason() == Reason::Http5xx, "{err}");
    let (tx, event) = tokio::join!(
        async { server.next_watch("10").await.stream() },
        next(&mut w)
    );
    assert!(matches!(event, Ok(Event::Connected { .. })), "{event:?}");
    send_line(
        &tx,
        json!({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"no","reason":"Forbidden","code":403}}),
    );
    let err = next(&mut w).await.unwrap_err();
    assert!(err.is_fatal(), "{err}");
    assert!(w.next().await.is_none());
}

/// The sim's `deletion_timestamp` malform case: `deletionTimestamp: "not-a-time"` in an ADDED
/// event and a DELETED one. Both are skipped with their identity; the DELETED one says the object
/// is gone; the watch resumes after the last of them.
#[tokio::test(start_paused = true)]
async fn a_deletion_timestamp_that_is_not_a_time_should_be_skipped_in_any_event() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    let mut bad = pod("bad", "11");
    bad["metadata"]["deletionTimestamp"] = json!("not-a-time");
    send_line(&tx, json!({"type":"ADDED","object":bad.clone()}));
    bad["metadata"]["resourceVersion"] = json!("12");
    send_line(&tx, json!({"type":"DELETED","object":bad}));
    let s = skipped(next(&mut w).await);
    assert_eq!(s.source, super::super::SkippedIn::Added);
    assert!(
        s.error.starts_with("metadata.deletionTimestamp: ") && !s.error.contains("not-a-time"),
        "{}",
        s.error
    );
    let s = skipped(next(&mut w).await);
    assert!(
        s.is_deletion() && s.uid.as_deref() == Some("uid-bad"),
        "{s}"
    );
    drop(tx);
    let (_tx, event) = tokio::join!(
        async { server.next_watch("12").await.stream() },
        next(&mut w)
    );
    assert!(matches!(event, Ok(Event::Connected { .. })), "{event:?}");
}

/// An event type the client does not know (a newer server's): skipped, and its object's
/// resourceVersion is still a position in the stream to resume after.
#[tokio::test(start_paused = true)]
async fn an_unknown_event_type_should_be_skipped_and_resumed_past() {
    let (mut w, mut server) = start(config());
    let tx = list_then_watch(&mut w, &mut server).await;
    send_line(&tx, json!({"type":"RENAMED","object":pod("x","14")}));
    let s = skipped(next(&mut w).await);
    assert_eq!(s.kind, super::super::SkipKind::NotAnEvent);
    assert_eq!(s.resource_version.as_deref(), Some("14"));
    assert!(s.error.contains("unknown event type"), "{s}");
    drop(tx);
    let (_tx, event) = tokio::join!(
        async { server.next_watch("14").await.stream() },
        next(&mut w)
    );
    assert!(matches!(event, Ok(Event::Connected { .. })), "{event:?}");
}
