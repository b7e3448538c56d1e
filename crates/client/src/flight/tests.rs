//! The single flight against a scripted connector, in paused time. hyper's part (pooling the
//! connection, handing it to the waiting requests) is played by the tests: `note_pooled` on the
//! leader's connection, then settling the waiters' tickets.

use std::sync::atomic::{AtomicU32, Ordering};

use hyper_util::client::legacy::connect::Connected;
use tokio::task::JoinHandle;
use tokio::time::Duration;

use super::assigned::{note_pooled, with_ticket};
use super::*;
use crate::dial::DialLimits;

const DELAY: Duration = Duration::from_millis(100);
const ATTEMPT: Duration = Duration::from_secs(1);
const BUDGET: Duration = Duration::from_secs(5);

/// What the scripted server does with a connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// After [`DELAY`], a connection that negotiated `h2`.
    Http2,
    /// After [`DELAY`], an HTTP/1.1 connection.
    Http1,
    /// After [`DELAY`], connection refused.
    Refuse,
    /// Never answers.
    Hang,
}

/// A connection: only its protocol matters here.
#[derive(Debug)]
struct Io {
    http2: bool,
}

impl Connection for Io {
    fn connected(&self) -> Connected {
        let connected = Connected::new();
        if self.http2 {
            connected.negotiated_h2()
        } else {
            connected
        }
    }
}

#[derive(Clone)]
struct Scripted {
    server: Arc<Mutex<Server>>,
    calls: Arc<AtomicU32>,
    in_flight: Arc<AtomicU32>,
    max_in_flight: Arc<AtomicU32>,
}

impl Service<Uri> for Scripted {
    type Response = Io;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, Result<Io, std::io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let server = *self.server.lock().unwrap();
        let in_flight = self.in_flight.clone();
        Box::pin(async move {
            struct Done(Arc<AtomicU32>);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let _done = Done(in_flight);
            if server == Server::Hang {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(DELAY).await;
            match server {
                Server::Http2 => Ok(Io { http2: true }),
                Server::Http1 => Ok(Io { http2: false }),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "refused",
                )),
            }
        })
    }
}

struct Harness {
    connector: SingleFlight<Scripted>,
    scripted: Scripted,
}

type Connect = JoinHandle<Result<FlightStream<Io>, BoxError>>;

impl Harness {
    fn new(server: Server) -> Self {
        let scripted = Scripted {
            server: Arc::new(Mutex::new(server)),
            calls: Arc::default(),
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
        };
        let limits = DialLimits {
            attempt: ATTEMPT,
            budget: BUDGET,
        };
        Self {
            connector: SingleFlight::new(BoundedConnect::new(
                scripted.clone(),
                limits,
                "https://sim",
            )),
            scripted,
        }
    }

    /// A connect on behalf of a new request (with its ticket), as hyper starts one.
    fn connect(&self) -> (Arc<Ticket>, Connect) {
        let mut connector = self.connector.clone();
        let (ticket, fut) =
            with_ticket(async move { connector.call(Uri::from_static("https://sim")).await });
        (ticket, tokio::spawn(fut))
    }

    fn connects(&self, n: usize) -> Vec<(Arc<Ticket>, Connect)> {
        (0..n).map(|_| self.connect()).collect()
    }

    fn calls(&self) -> u32 {
        self.scripted.calls.load(Ordering::SeqCst)
    }

    fn serve(&self, server: Server) {
        *self.scripted.server.lock().unwrap() = server;
    }
}

/// Lets every task run until the clock has moved `by`.
async fn run_for(by: Duration) {
    tokio::time::sleep(by).await;
}

fn finished(connects: &[(Arc<Ticket>, Connect)]) -> usize {
    connects.iter().filter(|(_, c)| c.is_finished()).count()
}

/// Splits off the connect that finished (the leader); the others are still waiting.
async fn leader(
    connects: Vec<(Arc<Ticket>, Connect)>,
) -> (FlightStream<Io>, Vec<(Arc<Ticket>, Connect)>) {
    let (done, waiting): (Vec<_>, Vec<_>) =
        connects.into_iter().partition(|(_, c)| c.is_finished());
    assert_eq!(done.len(), 1, "one connect came back: the leader's");
    let (_, handle) = done.into_iter().next().unwrap();
    (handle.await.unwrap().unwrap(), waiting)
}

fn assert_settled(result: Result<FlightStream<Io>, BoxError>) {
    let err = result.err().expect("a waiter got a connection of its own");
    assert!(err.to_string().contains("not dialled"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn concurrent_connects_should_dial_once_and_share_the_http2_connection() {
    let h = Harness::new(Server::Http2);
    let connects = h.connects(8);
    run_for(DELAY * 3).await;
    assert_eq!(h.calls(), 1, "one dial for eight requests");
    let (conn, waiting) = leader(connects).await;
    assert!(conn.connected().is_negotiated_h2());
    // hyper pools the connection and hands it to every waiting request.
    note_pooled(&conn.connected());
    for (ticket, _) in &waiting {
        ticket.settle_for_test();
    }
    for (_, connect) in waiting {
        assert_settled(connect.await.unwrap());
    }
    assert_eq!(h.calls(), 1, "the waiters never dialled");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_handed_another_connection_should_end_without_dialling() {
    let h = Harness::new(Server::Hang);
    let (_, _leader) = h.connect();
    let (ticket, waiter) = h.connect();
    run_for(DELAY).await;
    ticket.settle_for_test();
    assert_settled(waiter.await.unwrap());
    assert_eq!(h.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn over_http1_each_waiter_should_dial_its_own_and_later_connects_should_not_wait() {
    let h = Harness::new(Server::Http1);
    let started = Instant::now();
    let connects = h.connects(8);
    for (_, connect) in connects {
        let conn = connect.await.unwrap().unwrap();
        assert!(!conn.connected().is_negotiated_h2());
    }
    assert_eq!(
        h.calls(),
        8,
        "one connection per concurrent HTTP/1.1 request"
    );
    assert!(started.elapsed() <= DELAY * 2, "{:?}", started.elapsed());
    assert_eq!(
        h.scripted.max_in_flight.load(Ordering::SeqCst),
        7,
        "the waiters dialled at once, together"
    );
    // Known HTTP/1.1: no flight, no wait.
    let connects = h.connects(4);
    run_for(DELAY / 2).await;
    assert_eq!(h.calls(), 12);
    for (_, connect) in connects {
        connect.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn when_new_connections_hang_every_waiter_should_fail_within_its_own_budget() {
    let h = Harness::new(Server::Hang);
    let started = Instant::now();
    let connects = h.connects(8);
    for (_, connect) in connects {
        let err = connect.await.unwrap().err().unwrap();
        let io = err.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{io}");
    }
    let took = started.elapsed();
    assert!(took <= BUDGET, "{took:?}");
    let calls = h.calls();
    assert!(
        (3..=5).contains(&calls),
        "{calls} attempts: one dialer's, not eight"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_dial_should_give_each_waiter_its_own_answer_one_dial_at_a_time() {
    let h = Harness::new(Server::Refuse);
    let connects = h.connects(8);
    for (_, connect) in connects {
        let err = connect.await.unwrap().err().unwrap();
        let io = err.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    }
    assert_eq!(h.calls(), 8);
    assert_eq!(h.scripted.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn after_a_refused_dial_a_server_back_should_get_one_connection() {
    let h = Harness::new(Server::Refuse);
    let (_, first) = h.connect();
    let connects = h.connects(7);
    assert!(first.await.unwrap().is_err());
    let refused = h.calls();
    h.serve(Server::Http2);
    run_for(DELAY * 3).await;
    // A waiter may have dialled into the refusal meanwhile (and got that answer); then one dial
    // for all the others.
    assert_eq!(h.calls(), refused + 1, "one dial once the server was back");
    let mut outcomes = (0, 0, 0);
    for (ticket, connect) in connects {
        if !connect.is_finished() {
            ticket.settle_for_test();
        }
        match connect.await.unwrap() {
            Ok(conn) => {
                note_pooled(&conn.connected());
                outcomes.0 += 1;
            }
            Err(err) if err.to_string().contains("not dialled") => outcomes.1 += 1,
            Err(_) => outcomes.2 += 1,
        }
    }
    assert_eq!(outcomes.0, 1, "{outcomes:?}");
    assert_eq!(outcomes.2 as u32, refused - 1, "{outcomes:?}");
}

#[tokio::test(start_paused = true)]
async fn a_leader_dropped_mid_dial_should_leave_the_dial_to_a_waiter() {
    let h = Harness::new(Server::Http2);
    let (_, first) = h.connect();
    let (_, second) = h.connect();
    run_for(DELAY / 2).await;
    first.abort();
    let conn = second.await.unwrap().unwrap();
    assert!(conn.connected().is_negotiated_h2());
    assert_eq!(h.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_connection_closed_before_any_request_got_it_should_be_dialled_again() {
    let h = Harness::new(Server::Http2);
    let connects = h.connects(3);
    run_for(DELAY * 3).await;
    let (conn, waiting) = leader(connects).await;
    // The HTTP/2 handshake failed: hyper drops the connection, its waiters' checkouts fail.
    drop(conn);
    run_for(DELAY * 3).await;
    assert_eq!(h.calls(), 2, "one new dial for the two waiters");
    let (conn, waiting) = leader(waiting).await;
    note_pooled(&conn.connected());
    for (ticket, connect) in waiting {
        ticket.settle_for_test();
        assert_settled(connect.await.unwrap());
    }
}

#[tokio::test(start_paused = true)]
async fn a_late_connect_should_wait_for_its_hand_over_and_dial_only_if_it_never_comes() {
    let h = Harness::new(Server::Http2);
    let (_, first) = h.connect();
    let conn = first.await.unwrap().unwrap();
    note_pooled(&conn.connected());
    // Its checkout was sent the connection as it entered the pool.
    let (ticket, late) = h.connect();
    run_for(DELAY).await;
    ticket.settle_for_test();
    assert_settled(late.await.unwrap());
    assert_eq!(h.calls(), 1);
    // The pool has no connection for this one (say it was told to go away): it dials, once
    // the late-join window has passed.
    let started = Instant::now();
    let (_, unserved) = h.connect();
    let conn2 = unserved.await.unwrap().unwrap();
    assert!(conn2.connected().is_negotiated_h2());
    assert_eq!(h.calls(), 2);
    assert!(started.elapsed() <= stage::LATE_JOIN + DELAY);
    drop(conn);
}

#[tokio::test(start_paused = true)]
async fn once_the_pooled_connection_closed_a_connect_should_dial_at_once() {
    let h = Harness::new(Server::Http2);
    let (_, first) = h.connect();
    let conn = first.await.unwrap().unwrap();
    note_pooled(&conn.connected());
    drop(conn);
    let started = Instant::now();
    let connects = h.connects(4);
    run_for(DELAY * 2).await;
    assert_eq!(h.calls(), 2, "one new flight for the four");
    assert_eq!(finished(&connects), 1);
    let (conn, _waiting) = leader(connects).await;
    assert!(conn.connected().is_negotiated_h2());
    assert!(started.elapsed() < stage::LATE_JOIN);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_without_a_ticket_should_leave_the_pooled_connection_to_hyper() {
    let h = Harness::new(Server::Http2);
    let (_, first) = h.connect();
    let mut connector = h.connector.clone();
    let untracked =
        tokio::spawn(async move { connector.call(Uri::from_static("https://s")).await });
    let conn = first.await.unwrap().unwrap();
    note_pooled(&conn.connected());
    assert_settled(untracked.await.unwrap());
    assert_eq!(h.calls(), 1);
}
