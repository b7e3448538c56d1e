//! The first dial, once: while a client has no live connection, concurrent requests do not each
//! dial the server. One of them dials (the leader); the others wait for it and, when its
//! connection speaks HTTP/2, share it.
//!
//! Why: hyper's pool (hyper-util's legacy client) shares one connection per server only once it
//! knows the connection is HTTP/2. With ALPN choosing the protocol it cannot know that before a
//! connection is up, so every concurrent request without a pooled connection starts a TLS
//! handshake of its own; the first to finish becomes the shared connection and the others are
//! thrown away (8 concurrent first requests opened 8 TLS connections, 50 opened 50). Its
//! `http2_only` mode dials once (a lock per server) but then speaks HTTP/2 to a server that only
//! offers HTTP/1.1, and retries the waiters one dial after another when a dial fails. So the
//! connector does the single flight itself:
//!
//! - a connect while no flight is on, or after the last one ended, leads a new flight: it dials
//!   ([`crate::dial`]: bounded attempts) and its result decides for the waiters;
//! - `h2`: the connection goes to hyper, which pools it and hands it to every waiting request;
//!   their connects end without dialling once their request is handed a connection
//!   ([`assigned`]), or dial again (a new flight) if the connection closed before any request
//!   got it;
//! - HTTP/1.1 (ALPN, or plain `http://`): each waiter dials its own connection, as HTTP/1.1
//!   needs one per concurrent request, and later connects dial at once (no flight) until a dial
//!   says `h2` again;
//! - the dial's budget ran out (new connections hang): every waiter fails as a timeout, within
//!   its own budget;
//! - any other failure (refused, reset, a rejected certificate), or the leader's request
//!   dropped mid-dial: the waiters go again, one dials and the others wait, so a server that
//!   comes back gets one connection, not one per request.
//!
//! Each waiter is bounded by its own dial budget, counted from its connect: whatever it waited
//! for, and the dial it may then lead, end within the bound a dial of its own had. A new flight
//! starts whenever the pool has no live connection (after a restart, a connection PING closed,
//! one the server told to go away), and costs no request of its own: the first real request is
//! the one that dials.

mod assigned;
mod stage;
mod stream;

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::Uri;
use hyper_util::client::legacy::connect::Connection;
use tokio::time::Instant;
use tower::{BoxError, Service};

use crate::dial::{BoundedConnect, abandoned};
pub(crate) use assigned::NoteAssigned;
use assigned::Ticket;
use stage::{End, Flight, Stage};
pub(crate) use stream::FlightStream;

/// A connector whose first dial is shared (see the module doc); clones share their flights.
#[derive(Clone)]
pub(crate) struct SingleFlight<C> {
    dial: BoundedConnect<C>,
    shared: Arc<Mutex<Flights>>,
}

/// The flights of one client.
#[derive(Debug, Default)]
struct Flights {
    /// The latest flight (joinable or over).
    current: Option<Arc<Flight>>,
    /// Whether the last dial that came up spoke HTTP/1.1: then connects dial at once.
    http1: bool,
}

/// What a connect does.
enum Role {
    /// Dial, no flight (the server speaks HTTP/1.1).
    Direct,
    /// Dial for this new flight.
    Lead(Arc<Flight>),
    /// Wait for this flight; `late`: its connection was already pooled.
    Join { flight: Arc<Flight>, late: bool },
}

/// What a wait for a flight came to.
#[derive(Debug, PartialEq, Eq)]
enum Waited {
    /// The request was handed a connection (or ended): this connect is not needed.
    Settled,
    /// The connect's budget is spent.
    TimedOut,
    /// The server speaks HTTP/1.1: dial.
    Direct,
    /// The flight is over without a connection for this request: go again.
    Again,
}

impl<C> SingleFlight<C> {
    /// Wraps the bounded dial of a client's connections.
    pub(crate) fn new(dial: BoundedConnect<C>) -> Self {
        Self {
            dial,
            shared: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Flights> {
        // A panic while holding this lock leaves a consistent value (each update is one store).
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn role(&self) -> Role {
        let mut flights = self.lock();
        if flights.http1 {
            return Role::Direct;
        }
        if let Some(flight) = &flights.current
            && let Some(late) = flight.join(Instant::now())
        {
            return Role::Join {
                flight: flight.clone(),
                late,
            };
        }
        let flight = Flight::new();
        flights.current = Some(flight.clone());
        Role::Lead(flight)
    }

    /// Notes the protocol of a connection that came up; whether it is HTTP/2.
    fn note_protocol<T: Connection>(&self, io: &T) -> bool {
        let http2 = io.connected().is_negotiated_h2();
        self.lock().http1 = !http2;
        http2
    }
}

impl<C> Service<Uri> for SingleFlight<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = FlightStream<C::Response>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Each call dials with its own clone of the inner connector.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // hyper calls the connector while it works on the request: its ticket is current now.
        let ticket = assigned::current();
        let this = self.clone();
        Box::pin(async move { this.connect(uri, ticket).await })
    }
}

impl<C> SingleFlight<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    async fn connect(
        self,
        uri: Uri,
        ticket: Option<Arc<Ticket>>,
    ) -> Result<FlightStream<C::Response>, BoxError> {
        let arrived = Instant::now();
        let limits = self.dial.limits();
        let deadline = arrived + limits.budget;
        loop {
            match self.role() {
                Role::Direct => return self.dial_direct(uri, arrived).await,
                Role::Lead(flight) => return self.lead(flight, uri, arrived).await,
                Role::Join { flight, late } => {
                    match wait(&flight, late, ticket.as_deref(), deadline).await {
                        Waited::Settled => return Err(settled()),
                        Waited::TimedOut => return Err(abandoned(limits.attempt)),
                        Waited::Direct => return self.dial_direct(uri, arrived).await,
                        Waited::Again => {}
                    }
                }
            }
        }
    }

    async fn dial_direct(
        self,
        uri: Uri,
        arrived: Instant,
    ) -> Result<FlightStream<C::Response>, BoxError> {
        let io = self.dial.clone().dial_since(uri, arrived).await?;
        self.note_protocol(&io);
        Ok(FlightStream::new(io, None))
    }

    async fn lead(
        self,
        flight: Arc<Flight>,
        uri: Uri,
        arrived: Instant,
    ) -> Result<FlightStream<C::Response>, BoxError> {
        // If this connect is dropped mid-dial (its request gave up), the waiters go again.
        let _dropped = EndOnDrop(flight.clone());
        let io = match self.dial.clone().dial_since(uri, arrived).await {
            Ok(io) => io,
            Err(err) => {
                flight.end(if is_timeout(&err) {
                    End::TimedOut
                } else {
                    End::Retry
                });
                return Err(err);
            }
        };
        if self.note_protocol(&io) {
            flight.handed();
            Ok(FlightStream::new(io, Some(flight)))
        } else {
            flight.end(End::Http1);
            Ok(FlightStream::new(io, None))
        }
    }
}

/// Waits for `flight` on behalf of a connect whose request has `ticket`, until `deadline`.
async fn wait(flight: &Flight, late: bool, ticket: Option<&Ticket>, deadline: Instant) -> Waited {
    let mut stage = flight.subscribe();
    let mut settled = ticket.map(Ticket::subscribe);
    loop {
        if settled.as_ref().is_some_and(|s| *s.borrow()) {
            return Waited::Settled;
        }
        let now = Instant::now();
        if now >= deadline {
            return Waited::TimedOut;
        }
        let mut until = deadline;
        let current = *stage.borrow_and_update();
        match current {
            Stage::Dialing | Stage::Handed => {}
            Stage::Ended(End::Http1) => return Waited::Direct,
            Stage::Ended(End::TimedOut) => return Waited::TimedOut,
            Stage::Ended(End::Retry) => return Waited::Again,
            // A late request whose checkout was sent the connection is handed it within one
            // scheduling round; past that, the pool has no connection for it.
            Stage::Pooled(at) if late => {
                let give_up = at + stage::LATE_JOIN;
                if now >= give_up {
                    return Waited::Again;
                }
                until = until.min(give_up);
            }
            Stage::Ended(End::Closed) if late => return Waited::Again,
            // Joined before the connection was pooled: the pool sent it to this request's
            // checkout. Wait for the hand-over; without a ticket, yield once so hyper's own
            // poll of the checkout (which comes first) takes it.
            Stage::Pooled(_) | Stage::Ended(End::Closed) => {
                if settled.is_none() {
                    tokio::task::yield_now().await;
                    return Waited::Settled;
                }
            }
        }
        let handed = async {
            match settled.as_mut() {
                Some(s) => {
                    let _ = s.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stage.changed() => {}
            () = handed => {}
            () = tokio::time::sleep_until(until) => {}
        }
    }
}

/// The error of a connect whose request was handed another connection: nobody awaits it
/// (hyper runs it in the background and drops what it returns).
fn settled() -> BoxError {
    Box::new(std::io::Error::other(
        "not dialled: the request was handed the connection another request opened",
    ))
}

/// Whether a dial failed because its budget ran out (see [`crate::dial::abandoned`]).
fn is_timeout(err: &BoxError) -> bool {
    err.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
}

/// Ends a flight whose leader stopped dialling (no-op once the dial has ended).
struct EndOnDrop(Arc<Flight>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end(End::Retry);
    }
}

#[cfg(test)]
mod tests;
