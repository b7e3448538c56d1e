//! One first dial and what became of it, shared by the request that dials (the leader) and the
//! requests that wait for it.

use std::sync::{Arc, Weak};

use tokio::sync::watch;
use tokio::time::{Duration, Instant};

/// How long after its connection was first handed to a request a flight still takes in a
/// request that calls the connector. Why: a request whose pool checkout began just before the
/// connection entered the pool has been sent the connection, but may call the connector a moment
/// later (hyper asks the pool and the connector in one go); it must not open a second
/// connection. A call later than this means the pool has no live connection (it closed, was
/// told to go away, or sat idle past the pool's idle timeout) and starts a new flight. One
/// scheduling round is enough; a quarter second is generous and delays nothing else.
pub(super) const LATE_JOIN: Duration = Duration::from_millis(250);

/// Where a flight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// The leader is dialling (TCP, proxy, TLS; with its retries, see [`crate::dial`]).
    Dialing,
    /// The dial came up with ALPN `h2` and went to hyper, which handshakes HTTP/2 and puts the
    /// connection in its pool, sending it to every request waiting there.
    Handed,
    /// A request was handed the connection at this instant: it is in the pool.
    Pooled(Instant),
    /// The flight is over.
    Ended(End),
}

/// How a flight ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The server speaks HTTP/1.1 (ALPN said so, or plain `http://`): one connection per
    /// concurrent request, so each waiter dials its own.
    Http1,
    /// The dial's budget ran out without a connection. The waiters came later, so theirs is as
    /// good as spent: they fail the same way rather than start the same wait over.
    TimedOut,
    /// The dial failed at once (refused, reset, a rejected certificate...), its request
    /// stopped it, or its connection closed before any request got it: the waiters go again,
    /// one of them dialling and the others waiting for it, so each gets an answer of its own.
    Retry,
    /// The pooled connection closed.
    Closed,
}

/// One flight: its stage, watched by the requests that wait for it.
#[derive(Debug)]
pub(super) struct Flight {
    stage: watch::Sender<Stage>,
}

impl Flight {
    /// A flight whose leader starts dialling now.
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            stage: watch::Sender::new(Stage::Dialing),
        })
    }

    /// Where the flight is.
    pub(super) fn stage(&self) -> Stage {
        *self.stage.borrow()
    }

    /// Follows the stage.
    pub(super) fn subscribe(&self) -> watch::Receiver<Stage> {
        self.stage.subscribe()
    }

    /// Whether a request calling the connector at `now` waits for this flight: `Some(late)`,
    /// `late` when the connection is already pooled (see [`LATE_JOIN`]); `None`: it is over.
    pub(super) fn join(&self, now: Instant) -> Option<bool> {
        match self.stage() {
            Stage::Dialing | Stage::Handed => Some(false),
            Stage::Pooled(at) => (now < at + LATE_JOIN).then_some(true),
            Stage::Ended(_) => None,
        }
    }

    /// The dial came up with `h2` and is handed to hyper.
    pub(super) fn handed(&self) {
        self.advance(|stage| (*stage == Stage::Dialing).then_some(Stage::Handed));
    }

    /// The dial ended without an HTTP/2 connection (or never ended: its request dropped it).
    pub(super) fn end(&self, end: End) {
        self.advance(|stage| (*stage == Stage::Dialing).then_some(Stage::Ended(end)));
    }

    /// A request was handed the connection (so it is in the pool).
    fn pooled(&self) {
        self.advance(|stage| (*stage == Stage::Handed).then(|| Stage::Pooled(Instant::now())));
    }

    /// The connection closed: before a request got it, the waiters go again.
    pub(super) fn closed(&self) {
        self.advance(|stage| match stage {
            Stage::Handed => Some(Stage::Ended(End::Retry)),
            Stage::Pooled(_) => Some(Stage::Ended(End::Closed)),
            _ => None,
        });
    }

    fn advance(&self, next: impl FnOnce(&Stage) -> Option<Stage>) {
        self.stage.send_if_modified(|stage| match next(stage) {
            Some(new) => {
                *stage = new;
                true
            }
            None => false,
        });
    }
}

/// Names the flight that dialled a connection, in the connection's `Connected` extras: hyper
/// hands them to every request the connection serves, so the request layer
/// ([`super::assigned`]) can tell the flight its connection reached the pool.
#[derive(Debug, Clone)]
pub(super) struct FlightTag(Weak<Flight>);

impl FlightTag {
    /// The tag of `flight`'s connection.
    pub(super) fn new(flight: &Arc<Flight>) -> Self {
        Self(Arc::downgrade(flight))
    }

    /// A request was handed the tagged connection.
    pub(super) fn pooled(&self) {
        if let Some(flight) = self.0.upgrade() {
            flight.pooled();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_flight_should_be_joinable_until_shortly_after_its_connection_is_pooled() {
        let flight = Flight::new();
        assert_eq!(flight.join(Instant::now()), Some(false));
        flight.handed();
        assert_eq!(flight.join(Instant::now()), Some(false));
        FlightTag::new(&flight).pooled();
        assert_eq!(flight.join(Instant::now()), Some(true), "a late request");
        tokio::time::advance(LATE_JOIN).await;
        assert_eq!(flight.join(Instant::now()), None);
        flight.closed();
        assert_eq!(flight.stage(), Stage::Ended(End::Closed));
    }

    #[test]
    fn a_connection_closed_before_any_request_got_it_should_send_the_waiters_again() {
        let flight = Flight::new();
        flight.handed();
        flight.closed();
        assert_eq!(flight.stage(), Stage::Ended(End::Retry));
        assert_eq!(flight.join(Instant::now()), None);
    }

    #[test]
    fn only_a_dialling_flight_should_end_and_an_ended_one_should_stay_ended() {
        let flight = Flight::new();
        flight.end(End::Http1);
        flight.end(End::Retry);
        flight.handed();
        assert_eq!(flight.stage(), Stage::Ended(End::Http1));
        let handed = Flight::new();
        handed.handed();
        handed.end(End::Retry);
        assert_eq!(
            handed.stage(),
            Stage::Handed,
            "a dropped leader after the hand-over"
        );
    }
}
