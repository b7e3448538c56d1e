//! What the fault layer asks of the transport: [`Connection`], the request's connection (the
//! server puts it into each request's extensions as an `Arc<dyn Connection>`; in-process
//! requests have none), and [`ResetStream`], the mark on a response the server must not send.

/// The connection a request rides on, as the faults that kill, cut or freeze it see it.
pub trait Connection: Send + Sync {
    /// Drops the connection now (RST), whatever is in flight.
    fn kill(&self);
    /// Arms a cut: the next write is truncated, then the connection is reset.
    fn cut_next_write(&self);
    /// Freezes the connection: from now on it neither reads nor writes, and stays open.
    fn freeze(&self);
}

/// Marks a response that must not be sent: its request's stream is reset instead (a response
/// lost after the write committed). Set by the fault layer, acted on by the server.
#[derive(Debug, Clone, Copy)]
pub struct ResetStream;
