//! The one vocabulary for why a Kubernetes call failed or a watch ended.
//!
//! [`crate::retry::classify`] labels every failed call with a [`Reason`], and the watch reports the
//! same type in [`crate::watch::WatchError::reason`] and [`crate::watch::Event::Connected`], so a
//! consumer matches on variants instead of comparing strings. [`Reason::as_str`] is the stable
//! snake_case label used in metrics and logs; it never changes for an existing variant.

/// Why a call failed or a watch ended: a typed metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The stream's first connection (not a reconnect).
    Initial,
    /// The stream's first connection, resumed from a stored resourceVersion (not a reconnect).
    Resume,
    /// The server ended the watch at `timeoutSeconds`: routine.
    ServerTimeout,
    /// Nothing arrived within the client timeout (watch), or a client-side timeout (unary call).
    ClientTimeout,
    /// An open watch stream was cut (connection reset, truncated chunk).
    Reset,
    /// The connection was refused.
    Refused,
    /// Any other transport failure (DNS, reset before a response, TLS handshake I/O...).
    Transport,
    /// A 5xx answer to a watch or LIST (unary calls say [`Reason::ServerError`]).
    Http5xx,
    /// 429: the server asked us to slow down.
    TooManyRequests,
    /// 410 Gone/Expired: the resourceVersion is too old.
    Gone,
    /// A LIST answered without a resourceVersion.
    NoResourceVersion,
    /// 409 other than `AlreadyExists` (e.g. quota admission's `Conflict`).
    Conflict,
    /// 409 `AlreadyExists`.
    AlreadyExists,
    /// 500, 502, 503, 504 to a unary call, or another 5xx that is not retried.
    ServerError,
    /// 408 or a client-side timeout of a unary call.
    Timeout,
    /// 400.
    BadRequest,
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 415.
    UnsupportedMediaType,
    /// 422.
    Invalid,
    /// Any other 4xx.
    ClientError,
    /// A status outside 4xx/5xx.
    UnexpectedStatus,
    /// TLS refused the server's certificate, or one side does not speak TLS.
    Tls,
    /// An undecodable body.
    Decode,
    /// The client could not authenticate (exec plugin, token file...).
    Auth,
    /// Anything else the client reports (bad configuration, request building...).
    Config,
}

impl Reason {
    /// The stable metric label (`server_timeout`, `http_5xx`, `forbidden`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Initial => "initial",
            Reason::Resume => "resume",
            Reason::ServerTimeout => "server_timeout",
            Reason::ClientTimeout => "client_timeout",
            Reason::Reset => "reset",
            Reason::Refused => "refused",
            Reason::Transport => "transport",
            Reason::Http5xx => "http_5xx",
            Reason::TooManyRequests => "too_many_requests",
            Reason::Gone => "gone",
            Reason::NoResourceVersion => "no_resource_version",
            Reason::Conflict => "conflict",
            Reason::AlreadyExists => "already_exists",
            Reason::ServerError => "server_error",
            Reason::Timeout => "timeout",
            Reason::BadRequest => "bad_request",
            Reason::Unauthorized => "unauthorized",
            Reason::Forbidden => "forbidden",
            Reason::NotFound => "not_found",
            Reason::MethodNotAllowed => "method_not_allowed",
            Reason::UnsupportedMediaType => "unsupported_media_type",
            Reason::Invalid => "invalid",
            Reason::ClientError => "client_error",
            Reason::UnexpectedStatus => "unexpected_status",
            Reason::Tls => "tls",
            Reason::Decode => "decode",
            Reason::Auth => "auth",
            Reason::Config => "config",
        }
    }

    /// True for the first `Connected` of a stream ([`Reason::Initial`], [`Reason::Resume`]),
    /// which is not a reconnect and must not be counted as one.
    pub fn is_first_connect(self) -> bool {
        matches!(self, Reason::Initial | Reason::Resume)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_should_be_snake_case_and_distinct() {
        let all = [
            Reason::Initial,
            Reason::Resume,
            Reason::ServerTimeout,
            Reason::ClientTimeout,
            Reason::Reset,
            Reason::Refused,
            Reason::Transport,
            Reason::Http5xx,
            Reason::TooManyRequests,
            Reason::Gone,
            Reason::NoResourceVersion,
            Reason::Conflict,
            Reason::AlreadyExists,
            Reason::ServerError,
            Reason::Timeout,
            Reason::BadRequest,
            Reason::Unauthorized,
            Reason::Forbidden,
            Reason::NotFound,
            Reason::MethodNotAllowed,
            Reason::UnsupportedMediaType,
            Reason::Invalid,
            Reason::ClientError,
            Reason::UnexpectedStatus,
            Reason::Tls,
            Reason::Decode,
            Reason::Auth,
            Reason::Config,
        ];
        let labels: std::collections::HashSet<_> = all.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), all.len());
        for l in labels {
            assert!(
                l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            );
        }
        assert!(Reason::Initial.is_first_connect() && Reason::Resume.is_first_connect());
        assert!(!Reason::Gone.is_first_connect());
    }
}
