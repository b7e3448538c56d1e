//! Errors of the MLMD client and of the KFP writer.

use std::path::PathBuf;

/// A failed MLMD call, or a client that could not be built.
///
/// Why typed: the writer decides between "retry forever with backoff"
/// (MLMD down or busy), "re-read" (AlreadyExists after a race or a restart)
/// and "give up on this pod, keep the stream going" (bad data).
#[derive(Debug, thiserror::Error)]
pub enum MlmdError {
    /// The server answered the RPC with a non-OK gRPC status.
    #[error("MLMD {method} failed: {code:?}: {message}")]
    Rpc {
        /// The RPC name, e.g. `PutExecution`.
        method: &'static str,
        /// The gRPC status code.
        code: tonic::Code,
        /// The server's message (MLMD's, e.g. a unique-constraint violation).
        message: String,
    },
    /// The endpoint URL could not be parsed.
    #[error("invalid MLMD endpoint {url:?}: {source}")]
    InvalidEndpoint {
        /// The URL as given.
        url: String,
        /// Why tonic rejected it.
        #[source]
        source: tonic::transport::Error,
    },
    /// The CA certificate file for TLS could not be read.
    #[error("cannot read the MLMD CA certificate {path:?} (CA_CERT_PATH): {source}")]
    CaCert {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A response lacked a field MLMD always sets (an incompatible server).
    #[error("MLMD {method} response has no {field}")]
    MissingField {
        /// The RPC name.
        method: &'static str,
        /// The field that was expected.
        field: &'static str,
    },
}

impl MlmdError {
    /// The gRPC code, when the server answered.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            MlmdError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when waiting and retrying can fix it: the server is down, busy,
    /// timed out or aborted a transaction (SQLite/MySQL lock contention).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code(),
            Some(
                tonic::Code::Unavailable
                    | tonic::Code::DeadlineExceeded
                    | tonic::Code::Aborted
                    | tonic::Code::Cancelled
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::Unknown
            )
        )
    }

    /// True when a unique constraint said the object exists already: re-read it.
    pub fn is_already_exists(&self) -> bool {
        self.code() == Some(tonic::Code::AlreadyExists)
    }

    /// True when the object looked up does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(tonic::Code::NotFound)
    }
}
