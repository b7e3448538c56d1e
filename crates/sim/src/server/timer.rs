//! The HTTP/1.1 header-read timer: hyper arms it whenever it waits for a request's headers,
//! which is both while a request trickles in (slowloris) and while a keep-alive connection sits
//! idle between requests. Go's server (so kube-apiserver) tells the two apart: headers get
//! `ReadHeaderTimeout` (32 s) from their first byte, an idle connection `IdleTimeout` (90 s).
//! [`HeaderTimer`] does the same by asking the connection's [`ConnCtl`] when the first byte
//! arrived since the wait began.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

use super::conn::ConnCtl;

/// The timer of one connection's HTTP/1.1 header reads (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct HeaderTimer {
    ctl: Arc<ConnCtl>,
    idle: Duration,
}

impl HeaderTimer {
    /// A timer for the connection `ctl`, closing it after `idle` without a request.
    pub(super) fn new(ctl: Arc<ConnCtl>, idle: Duration) -> Self {
        Self { ctl, idle }
    }
}

impl Timer for HeaderTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        let now = Instant::now();
        self.sleep_until(now.checked_add(duration).unwrap_or(now + self.idle))
    }

    /// hyper calls this when it starts waiting for headers, with `now + header_read_timeout`.
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let now = Instant::now();
        let header = deadline.saturating_duration_since(now);
        self.ctl.begin_header_wait();
        let idle_until = now.checked_add(self.idle).unwrap_or(deadline);
        let first_wake = tokio::time::Instant::from_std(deadline.min(idle_until));
        Box::pin(HeaderSleep {
            ctl: Arc::clone(&self.ctl),
            header,
            idle_until,
            sleep: Box::pin(tokio::time::sleep_until(first_wake)),
        })
    }
}

/// Resolves (and hyper closes the connection) when a request's headers took longer than
/// `header` from their first byte, or no byte came before `idle_until`.
struct HeaderSleep {
    ctl: Arc<ConnCtl>,
    header: Duration,
    idle_until: Instant,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl HeaderSleep {
    /// How often an idle (or frozen) connection is looked at again: the header timeout, but
    /// never so short that the timer spins.
    fn step(&self) -> Duration {
        self.header.max(Duration::from_millis(10))
    }
}

impl Future for HeaderSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            let (due, wake) = match self.ctl.first_read_since_wait() {
                // Headers started: they get `header` from their first byte, like Go's server.
                Some(first) => {
                    let due = first.checked_add(self.header).unwrap_or(self.idle_until);
                    (due, due)
                }
                // Idle so far: look again within `header`, so a late first byte still gets
                // no more than about its header timeout.
                None => (
                    self.idle_until,
                    self.idle_until
                        .min(now.checked_add(self.step()).unwrap_or(self.idle_until)),
                ),
            };
            let mut wake = wake;
            if now >= due {
                if !self.ctl.is_frozen() {
                    return Poll::Ready(());
                }
                // A frozen connection must look like a frozen proxy: it never closes on its
                // own. Look again later (it may be killed, never thawed).
                wake = now + Duration::from_secs(1);
            }
            let wake = tokio::time::Instant::from_std(wake);
            self.sleep.as_mut().reset(wake);
        }
    }
}

impl Sleep for HeaderSleep {}
