//! The request side of the single flight: each request carries a [`Ticket`], settled as soon as
//! hyper hands it a connection (or it ends), so that a connect it started while waiting for
//! another request's dial knows it is no longer needed.
//!
//! Why it is needed: when hyper's pool hands a request the shared HTTP/2 connection, the
//! connect that request started keeps running in the background (hyper spawns it, to pool what
//! it brings). A waiting connect must then end without dialling, but it cannot see the pool. It
//! learns it from the ticket of the request that started it, found through a task-local set
//! while hyper polls the request (hyper calls the connector from inside that poll). The same
//! hand-over also tells a flight that its connection reached the pool (the connection's tag).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use http::{Request, Response};
use hyper_util::client::legacy::connect::{Connected, capture_connection};
use tokio::sync::watch;
use tower::Service;

use super::stage::FlightTag;

tokio::task_local! {
    /// The ticket of the request hyper is working on in this task.
    static TICKET: Arc<Ticket>;
}

/// Whether a request still needs a connection: settled once hyper handed it one, or the
/// request ended (answered, failed or dropped).
#[derive(Debug)]
pub(super) struct Ticket(watch::Sender<bool>);

impl Ticket {
    fn new() -> Arc<Self> {
        Arc::new(Self(watch::Sender::new(false)))
    }

    /// Follows whether the request is settled.
    pub(super) fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }

    fn settle(&self) {
        self.0.send_replace(true);
    }
}

/// The ticket of the request whose connect is being started (`None` outside this layer).
pub(super) fn current() -> Option<Arc<Ticket>> {
    TICKET.try_with(Arc::clone).ok()
}

/// The layer that gives each request its [`Ticket`] (see the module doc); it sits right above
/// hyper's client.
#[derive(Debug, Clone)]
pub(crate) struct NoteAssigned<S>(pub(crate) S);

impl<S, B, R> Service<Request<B>> for NoteAssigned<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let mut capture = capture_connection(&mut req);
        let ticket = Ticket::new();
        let response = TICKET.scope(ticket.clone(), self.0.call(req));
        Box::pin(async move {
            let _settle = SettleOnDrop(ticket.clone());
            let handed = async {
                // The `Ref` it returns is dropped at once (it must not live across an await).
                let _ = capture.wait_for_connection_metadata().await;
                if let Some(connected) = capture.connection_metadata().as_ref() {
                    note_pooled(connected);
                }
                ticket.settle();
                std::future::pending::<Infallible>().await
            };
            match futures::future::select(std::pin::pin!(response), std::pin::pin!(handed)).await {
                Either::Left((result, _)) => result,
                Either::Right((never, _)) => match never {},
            }
        })
    }
}

/// Tells the flight that dialled `connected` (if one did) that its connection is in the pool.
pub(super) fn note_pooled(connected: &Connected) {
    let mut extras = http::Extensions::new();
    connected.get_extras(&mut extras);
    if let Some(tag) = extras.get::<FlightTag>() {
        tag.pooled();
    }
}

/// Settles the ticket when the request ends, however it ends.
struct SettleOnDrop(Arc<Ticket>);

impl Drop for SettleOnDrop {
    fn drop(&mut self) {
        self.0.settle();
    }
}

/// Runs `fut` as if a request with a fresh ticket were being worked on; returns the ticket
/// (for unit tests of the connector, which have no hyper client above it).
#[cfg(test)]
pub(super) fn with_ticket<F: std::future::Future>(
    fut: F,
) -> (Arc<Ticket>, impl std::future::Future<Output = F::Output>) {
    let ticket = Ticket::new();
    (ticket.clone(), TICKET.scope(ticket, fut))
}

#[cfg(test)]
impl Ticket {
    /// Settles the ticket as hyper's hand-over would.
    pub(super) fn settle_for_test(&self) {
        self.settle();
    }
}
