//! Connection tracking: every accepted TCP connection has a [`ConnCtl`] (in each request's
//! extensions) through which the sim can kill it (restart, commit-then-drop), cut it in the
//! middle of the next write (reset faults) or freeze it (freeze faults). Killed connections close
//! with an RST (zero linger), the way a crashed server or a proxy reset looks to the client. A
//! frozen connection stays open but neither reads nor writes another byte, the way a frozen
//! proxy or a dropped NAT entry looks: the client's kernel still accepts its writes for a while,
//! and nothing ever comes back. Over HTTP/2 every request on the connection freezes with it.
//!
//! A connection also counts its open streams (requests not yet fully answered, a watch until it
//! ends), so the server can tell an idle HTTP/2 connection from a busy one ([`ConnCtl::idle_for`]).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fault::Connection;

/// The origin of the nanosecond stamps connections keep (0 there means "not yet").
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Control of one connection.
#[derive(Debug, Default)]
pub struct ConnCtl {
    killed: CancellationToken,
    cut_next_write: AtomicBool,
    frozen: AtomicBool,
    /// Requests whose headers arrived on this connection.
    requests: AtomicU64,
    /// When the first byte arrived since the server started waiting for a request's headers
    /// (nanoseconds after [`EPOCH`], plus one; 0: none yet).
    first_read: AtomicU64,
    /// A request arrived over HTTP/2.
    http2: AtomicBool,
    /// Streams open now: requests whose response is not yet fully sent (or dropped).
    open_streams: AtomicU64,
    /// Streams opened since the connection started.
    opened_streams: AtomicU64,
    /// Woken whenever a stream opens or closes.
    stream_change: Notify,
}

impl ConnCtl {
    /// Drops the connection now (RST), whatever is in flight.
    pub fn kill(&self) {
        self.killed.cancel();
    }

    /// Whether the connection was killed.
    pub fn is_killed(&self) -> bool {
        self.killed.is_cancelled()
    }

    /// Resolves when the connection is killed.
    pub async fn killed(&self) {
        self.killed.cancelled().await;
    }

    /// Arms a cut: the next write on the socket is truncated (about half of it is sent), then
    /// the connection is reset, so the client sees a broken chunk, not a clean end.
    pub fn cut_next_write(&self) {
        self.cut_next_write.store(true, Ordering::SeqCst);
    }

    /// Freezes the connection at the TCP level: from now on nothing is read from or written to
    /// the socket, and it is not closed (until the sim restarts or shuts down).
    pub fn freeze(&self) {
        if !self.frozen.swap(true, Ordering::SeqCst) {
            tracing::debug!("sim: connection frozen");
        }
    }

    /// Whether the connection was frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Counts a request whose headers arrived.
    pub fn note_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests whose headers arrived so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Notes the HTTP version a request arrived with.
    pub(crate) fn note_version(&self, version: http::Version) {
        if version == http::Version::HTTP_2 {
            self.http2.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the connection speaks HTTP/2 (known from its first request on).
    pub(crate) fn is_http2(&self) -> bool {
        self.http2.load(Ordering::Relaxed)
    }

    /// Counts a stream open until the returned guard drops (when its response was sent, or its
    /// request was cancelled or reset).
    pub(crate) fn open_stream(self: &Arc<Self>) -> StreamGuard {
        self.open_streams.fetch_add(1, Ordering::SeqCst);
        self.opened_streams.fetch_add(1, Ordering::SeqCst);
        self.stream_change.notify_waiters();
        StreamGuard {
            ctl: Arc::clone(self),
        }
    }

    /// Resolves once the connection has had no open stream for `idle` (measured from the end
    /// of its last stream, or from now if it never had one). PINGs and other frames are not
    /// activity, as in Go's HTTP/2 server.
    pub(crate) async fn idle_for(&self, idle: std::time::Duration) {
        loop {
            let change = self.stream_change.notified();
            let mut change = std::pin::pin!(change);
            change.as_mut().enable();
            if self.open_streams.load(Ordering::SeqCst) > 0 {
                change.await;
                continue;
            }
            let opened = self.opened_streams.load(Ordering::SeqCst);
            tokio::select! {
                () = change => {}
                () = tokio::time::sleep(idle) => {
                    if self.opened_streams.load(Ordering::SeqCst) == opened
                        && self.open_streams.load(Ordering::SeqCst) == 0
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Resolves when a stream opens or closes.
    pub(crate) async fn stream_changed(&self) {
        self.stream_change.notified().await;
    }

    /// The server starts waiting for a request's headers: forget earlier reads.
    pub(crate) fn begin_header_wait(&self) {
        self.first_read.store(0, Ordering::SeqCst);
    }

    /// When the first byte arrived since [`Self::begin_header_wait`], if one did.
    pub(crate) fn first_read_since_wait(&self) -> Option<Instant> {
        match self.first_read.load(Ordering::SeqCst) {
            0 => None,
            stamp => Some(*EPOCH + std::time::Duration::from_nanos(stamp - 1)),
        }
    }

    fn note_read(&self) {
        if self.first_read.load(Ordering::Relaxed) == 0 {
            let nanos = u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
            let _ = self.first_read.compare_exchange(
                0,
                nanos.saturating_add(1),
                Ordering::SeqCst,
                Ordering::Relaxed,
            );
        }
    }
}

/// What the fault layer may do to a request's connection (it sees only this trait).
impl Connection for ConnCtl {
    fn kill(&self) {
        ConnCtl::kill(self);
    }
    fn cut_next_write(&self) {
        ConnCtl::cut_next_write(self);
    }
    fn freeze(&self) {
        ConnCtl::freeze(self);
    }
}

/// One open stream of a connection (see [`ConnCtl::open_stream`]).
#[derive(Debug)]
pub(crate) struct StreamGuard {
    ctl: Arc<ConnCtl>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.ctl.open_streams.fetch_sub(1, Ordering::SeqCst);
        self.ctl.stream_change.notify_waiters();
    }
}

/// All live connections, so a restart can drop every one; plus counts of requests by HTTP
/// version, so tests can tell which protocol a client spoke.
#[derive(Debug, Default)]
pub struct ConnRegistry {
    next: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<ConnCtl>>>,
    http1_requests: AtomicU64,
    http2_requests: AtomicU64,
    /// Until when every newly accepted connection is frozen at once (see
    /// [`ConnRegistry::freeze_all_for`]); `None`: no such window.
    freeze_new_until: Mutex<Option<Instant>>,
}

impl ConnRegistry {
    /// Registers a new connection; drop the guard when it ends.
    pub fn register(self: &Arc<Self>) -> (Arc<ConnCtl>, ConnGuard) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let ctl = Arc::new(ConnCtl::default());
        if self.freezing_new() {
            ctl.freeze();
        }
        self.lock().insert(id, ctl.clone());
        (
            ctl,
            ConnGuard {
                registry: self.clone(),
                id,
            },
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ConnCtl>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Kills every live connection.
    pub fn kill_all(&self) {
        for ctl in self.lock().values() {
            ctl.kill();
        }
    }

    /// A network freeze of `duration`: every live connection freezes now, and so does every
    /// connection accepted until `duration` has passed (the TCP handshake completes in the
    /// kernel, then nothing is ever read or written: the TLS handshake never gets an answer).
    /// Frozen connections stay frozen (like a dropped NAT entry), so a client must abandon them;
    /// connections accepted after the window are served normally.
    pub fn freeze_all_for(&self, duration: std::time::Duration) {
        *self
            .freeze_new_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now().checked_add(duration);
        for ctl in self.lock().values() {
            ctl.freeze();
        }
    }

    /// Whether a connection accepted now is frozen at once ([`ConnRegistry::freeze_all_for`]).
    pub fn freezing_new(&self) -> bool {
        self.freeze_new_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|until| Instant::now() < until)
    }

    /// Number of live connections (frozen ones included).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Number of live connections that are frozen.
    pub fn frozen(&self) -> usize {
        self.lock().values().filter(|c| c.is_frozen()).count()
    }

    /// Counts one request of this HTTP version.
    pub fn note_request(&self, version: http::Version) {
        let counter = if version == http::Version::HTTP_2 {
            &self.http2_requests
        } else {
            &self.http1_requests
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests served so far as (HTTP/1.x, HTTP/2).
    pub fn requests_by_version(&self) -> (u64, u64) {
        (
            self.http1_requests.load(Ordering::Relaxed),
            self.http2_requests.load(Ordering::Relaxed),
        )
    }

    /// Number of connections accepted since the sim started (live or not).
    pub fn accepted(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// Whether no connection is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Unregisters a connection when dropped.
#[derive(Debug)]
pub struct ConnGuard {
    registry: Arc<ConnRegistry>,
    id: u64,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

/// The TCP stream of a tracked connection: honours cuts and resets on drop when killed.
#[derive(Debug)]
pub struct TrackedIo {
    stream: TcpStream,
    ctl: Arc<ConnCtl>,
    dead: bool,
}

impl TrackedIo {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream, ctl: Arc<ConnCtl>) -> Self {
        Self {
            stream,
            ctl,
            dead: false,
        }
    }
}

fn reset_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection reset by the sim",
    )
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.dead || self.ctl.is_killed() {
            return Poll::Ready(Err(reset_error()));
        }
        if self.ctl.is_frozen() {
            // Never woken: a kill drops the whole connection task instead.
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.ctl.note_read();
        }
        result
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.dead || self.ctl.is_killed() {
            return Poll::Ready(Err(reset_error()));
        }
        if self.ctl.is_frozen() {
            return Poll::Pending;
        }
        if self.ctl.cut_next_write.swap(false, Ordering::SeqCst) {
            let part = (buf.len() / 2).max(1);
            let result = Pin::new(&mut self.stream).poll_write(cx, &buf[..part]);
            self.dead = true;
            self.ctl.kill();
            return match result {
                Poll::Ready(Ok(n)) => Poll::Ready(Ok(n)),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                // The socket is full; reset anyway (nothing of this write was sent).
                Poll::Pending => Poll::Ready(Err(reset_error())),
            };
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.dead {
            return Poll::Ready(Err(reset_error()));
        }
        if self.ctl.is_frozen() {
            return Poll::Pending;
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.dead || self.ctl.is_killed() {
            return Poll::Ready(Err(reset_error()));
        }
        if self.ctl.is_frozen() {
            return Poll::Pending;
        }
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        if self.dead || self.ctl.is_killed() {
            // Zero linger: closing sends RST instead of FIN, so the peer sees a reset.
            let _ = self.stream.set_zero_linger();
        }
    }
}
