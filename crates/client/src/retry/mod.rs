//! What to do about a failed Kubernetes call ([`classify`]), kept apart from how to retry it
//! ([`RetryPolicy`] and [`retry`]).
//!
//! Classification is a pure function of the error, so its table can be tested on its own and
//! reused by the watch, the launcher and the recorder. Retrying is backon driven by
//! [`FullJitter`](crate::backoff::FullJitter), bounded by attempts and by a deadline that counts
//! response time, honouring the server's Retry-After (capped) and logging every retry as one line.
//!
//! | HTTP status / error | [`Disposition`] | reason label |
//! |---|---|---|
//! | 409, reason `AlreadyExists` | `AlreadyExists` | – |
//! | 409, any other reason (e.g. `Conflict` from quota admission) | `Retry` | `conflict` |
//! | 429 | `Retry` (+ Retry-After) | `too_many_requests` |
//! | 500, 502, 503, 504 | `Retry` (+ Retry-After if given) | `server_error` |
//! | 408, client-side timeouts | `Retry` | `timeout` |
//! | connection refused / reset, TLS handshake I/O, truncated body | `Retry` | `transport` |
//! | 400, 401, 403, 404, 405, 410, 415, 422 | `Fatal` | `bad_request`, `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`, `gone`, `unsupported_media_type`, `invalid` |
//! | the server's TLS certificate is rejected, an `http://` URL names a TLS server or an `https://` URL a plain-HTTP one | `Fatal` | `tls` |
//! | any other status, undecodable bodies, bad config | `Fatal` | `client_error`, `server_error`, `unexpected_status`, `decode`, `config`, `auth` |
//!
//! 410 is fatal here because a *unary* call cannot fix it by repeating itself; the watch handles
//! 410 itself (by re-listing) and never asks this table about it.
//!
//! Retry-After: kube 5 turns an error response into `Error::Api(Status)` and drops the HTTP
//! headers, so only `details.retryAfterSeconds` in the body survives. [`crate::connect`] installs a
//! layer that copies a `Retry-After` header into that field when the body lacks it, so both forms
//! reach [`classify`].
//!
//! One job per file: `disposition` is the table ([`classify`], [`Disposition`]), `cause` finds
//! what is behind a transport error in its cause chain, `policy` is [`RetryPolicy`] (how long to
//! wait, how often, until when) and `run` the loop ([`retry`], [`retry_counted`]). The backoff
//! itself is [`crate::backoff`].

mod cause;
mod disposition;
mod policy;
mod run;
#[cfg(test)]
mod test_support;

pub(crate) use cause::any_cause;
pub use disposition::{Classify, Disposition, classify, classify_status, status_code};
pub use policy::RetryPolicy;
pub use run::{Retried, retry, retry_counted};

pub use crate::reason::Reason;
