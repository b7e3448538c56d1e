//! Errors the sim's library surface can return (starting the server, parsing a fault plan).

use std::net::SocketAddr;

/// Why the sim could not start or could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The listening socket could not be bound (port taken, no permission...).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address we tried to bind.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Generating the self-signed CA or the serving certificate failed.
    #[error("cannot generate the sim's TLS certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the generated certificate or key.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// A fault plan (file, HTTP body) could not be parsed.
    #[error("invalid fault plan: {0}")]
    FaultPlan(String),
    /// Another I/O failure (for example writing a kubeconfig).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
