//! The one place the client's layer stack is assembled: podline's transport under kube's auth
//! and URI layers, plus the Retry-After layer, with every timeout derived from the client timeout.

use std::time::Duration;

use super::error::ConnectError;
use super::retry_after::retry_after_into_status;
use crate::dial::DialLimits;
use crate::ping::Http2Ping;
use crate::transport::{self, TransportTimeouts};

/// Margin of the socket read timeout (and of the wait for response headers) over the client
/// timeout, so the watch's own timer (with a precise reason label) fires first.
const READ_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);
/// Upper bound on one dial (every connect attempt of one request, see [`crate::dial`]): after
/// it the request fails and its caller's retry takes over.
const MAX_DIAL_BUDGET: Duration = Duration::from_secs(30);

/// The one place podline's client stack is assembled (see the module doc): podline's transport
/// ([`crate::transport`]: HTTP/2 with `ping` health checks, or HTTP/1.1) under kube's auth and
/// URI layers, plus the Retry-After layer. kube's `RetryLayer` is not part of it.
pub fn client_from_config(
    config: kube::Config,
    client_timeout: Duration,
    ping: Http2Ping,
) -> Result<kube::Client, ConnectError> {
    let ca = if config.root_cert.is_some() {
        "the CA certificates of the configuration"
    } else {
        "the system's trusted root certificates"
    };
    client_with_ca(config, client_timeout, ping, None, ca, None, false)
}

/// [`client_from_config`], naming where the CA certificates came from (`ca`) in TLS errors,
/// with podline's auth layer for an exec plugin's token (`exec`) in place of kube's.
pub(super) fn client_with_ca(
    config: kube::Config,
    client_timeout: Duration,
    ping: Http2Ping,
    connect_timeout: Option<Duration>,
    ca: &str,
    exec: Option<super::ExecTokenLayer>,
    http1_only: bool,
) -> Result<kube::Client, ConnectError> {
    let attempt = connect_timeout.unwrap_or(ping.timeout);
    let timeouts = TransportTimeouts {
        connect: DialLimits {
            attempt,
            budget: client_timeout.min(MAX_DIAL_BUDGET).max(attempt),
        },
        io: client_timeout + READ_TIMEOUT_MARGIN,
        headers: client_timeout + READ_TIMEOUT_MARGIN,
    };
    let builder = transport::build(&config, timeouts, ping, ca, exec, http1_only)
        .map_err(ConnectError::Transport)?;
    Ok(builder
        .with_layer(&tower::layer::layer_fn(retry_after_into_status))
        .build())
}
