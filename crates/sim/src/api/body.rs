//! Request bodies: read within the sim's [`super::BodyLimits`] (413 over the cap, 504 past the
//! read timeout), with their media type.

use axum::extract::Request;
use bytes::Bytes;
use http::header;

use super::state::AppState;
use crate::status::ApiError;

/// A parsed body: JSON (or YAML) of the request.
pub struct JsonBody {
    /// The raw bytes.
    pub bytes: Bytes,
    /// The media type (without parameters).
    pub media_type: String,
}

/// Reads a request body within the sim's [`super::BodyLimits`], like kube-apiserver's
/// `limitedReadBody`: over the cap is 413 `Request entity too large: limit is N` (at once, unread,
/// when the Content-Length announces it), and a body still incomplete after the read timeout is
/// the 504 the real server's request timeout answers.
pub(crate) async fn read_raw_body(state: &AppState, req: Request) -> Result<JsonBody, ApiError> {
    use http_body_util::BodyExt;
    let limits = state.body_limits();
    let too_large = || {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {}", limits.max_bytes),
        )
    };
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limits.max_bytes as u64) {
        return Err(too_large());
    }
    let media_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let mut body = req.into_body();
    let read = async {
        let mut out = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::bad_request(format!("unable to read the request body: {e}"))
            })?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > limits.max_bytes {
                    return Err(too_large());
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(out.freeze())
    };
    let bytes = tokio::time::timeout(limits.read_timeout, read)
        .await
        .map_err(|_| {
            // kube-apiserver's request-timeout filter: `NewTimeoutError(..., 0)`, empty details.
            let mut err = ApiError::new(
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
            );
            err.details = Some(Box::default());
            err
        })??;
    Ok(JsonBody { bytes, media_type })
}
