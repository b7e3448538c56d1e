//! The server loop: serves [`crate::app::router`] on a listener the caller bound, until
//! shutdown. The only module that touches the network.

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::router;
use crate::state::UiConfig;

/// Serves the UI on `listener` until `shutdown` is cancelled. Open event streams end at
/// shutdown too.
pub async fn serve(
    listener: TcpListener,
    config: UiConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    // The address it listens on is a name it serves (an unspecified one, 0.0.0.0, is not a
    // name anyone browses to; a routable one is).
    let local = listener.local_addr()?;
    let listen_name = match local.ip() {
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    let app = router(config.allow_hosts([listen_name]));
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
