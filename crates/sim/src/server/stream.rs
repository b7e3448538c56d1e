//! One request's answer on its connection: what the server does with a response the fault layer
//! marked [`ResetStream`]. Over HTTP/2 the service fails, so hyper resets that stream alone
//! (RST_STREAM with INTERNAL_ERROR, before any header) and the connection's other streams go on.
//! Over HTTP/1.1, where the request has its connection to itself, the connection is dropped.

use axum::response::Response;

use super::ConnCtl;

/// Marks a response that must not be sent: its request's stream is reset instead (a response
/// lost after the write committed). Set by the fault layer, acted on by the server.
#[derive(Debug, Clone, Copy)]
pub struct ResetStream;

/// The service error that makes hyper reset one HTTP/2 stream.
#[derive(Debug, thiserror::Error)]
#[error("the sim's fault plan reset this stream")]
pub(super) struct StreamReset;

/// The answer to send for `response`, or the error that resets its stream (see the module docs).
pub(super) fn answer(
    response: Response,
    version: http::Version,
    ctl: &ConnCtl,
) -> Result<Response, StreamReset> {
    if response.extensions().get::<ResetStream>().is_none() {
        return Ok(response);
    }
    if version != http::Version::HTTP_2 {
        ctl.kill();
    }
    Err(StreamReset)
}
