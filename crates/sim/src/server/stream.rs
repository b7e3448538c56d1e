//! One request's answer on its connection: what the server does with a response the fault layer
//! marked [`ResetStream`]. Over HTTP/2 the service fails, so hyper resets that stream alone
//! (RST_STREAM with INTERNAL_ERROR, before any header) and the connection's other streams go on.
//! Over HTTP/1.1, where the request has its connection to itself, the connection is dropped.
//!
//! Every answer sent carries its stream's [`StreamGuard`] in its body ([`GuardedBody`]), so the
//! connection counts the stream open until the body is done or dropped: a watch keeps an HTTP/2
//! connection busy for as long as it runs.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};

use super::conn::{ConnCtl, StreamGuard};
use crate::fault::ResetStream;

/// The service error that makes hyper reset one HTTP/2 stream.
#[derive(Debug, thiserror::Error)]
#[error("the sim's fault plan reset this stream")]
pub(super) struct StreamReset;

/// The answer to send for `response`, holding `stream` until it is sent, or the error that
/// resets its stream (see the module docs).
pub(super) fn answer(
    response: Response,
    version: http::Version,
    ctl: &ConnCtl,
    stream: StreamGuard,
) -> Result<http::Response<GuardedBody>, StreamReset> {
    if response.extensions().get::<ResetStream>().is_none() {
        return Ok(response.map(|inner| GuardedBody {
            inner,
            _stream: stream,
        }));
    }
    if version != http::Version::HTTP_2 {
        ctl.kill();
    }
    Err(StreamReset)
}

/// A response body that keeps its stream counted open until hyper is done with it.
pub(super) struct GuardedBody {
    inner: Body,
    _stream: StreamGuard,
}

impl HttpBody for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
