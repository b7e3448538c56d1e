//! The connection a dial returns, unchanged, plus what its flight must learn: that it is the
//! flight's (a tag in its `Connected` extras) and when it closes (it is dropped).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};

use super::stage::{Flight, FlightTag};

/// A dialled connection; `flight` is set when it is the HTTP/2 connection a flight dialled.
pub(crate) struct FlightStream<T> {
    io: T,
    flight: Option<Arc<Flight>>,
}

impl<T> FlightStream<T> {
    /// Wraps `io`, the connection `flight` (if any) dialled.
    pub(super) fn new(io: T, flight: Option<Arc<Flight>>) -> Self {
        Self { io, flight }
    }
}

impl<T> Drop for FlightStream<T> {
    fn drop(&mut self) {
        // hyper drops a connection when it ends, or when its handshake failed.
        if let Some(flight) = &self.flight {
            flight.closed();
        }
    }
}

impl<T: Connection> Connection for FlightStream<T> {
    fn connected(&self) -> Connected {
        let connected = self.io.connected();
        match &self.flight {
            Some(flight) => connected.extra(FlightTag::new(flight)),
            None => connected,
        }
    }
}

impl<T: Read + Unpin> Read for FlightStream<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for FlightStream<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}
