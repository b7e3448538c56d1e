//! podline's Kubernetes client core: retry policy, full-jitter backoff, bounded timeouts and a
//! watch that never hangs.
//!
//! The launcher (`podline run`) and the recorder (`podline record`) share this crate, so both
//! retry the same errors the same way and both survive the same faults.
//!
//! It depends on no other podline crate (the sim and testkit only in its tests) and knows
//! nothing of a command line: it names no flag or environment variable of podline's. Settings
//! come in as values or text, and errors say which setting was wrong ([`timeouts::Setting`]) for
//! the binary to name.
//!
//! - [`backoff`]: full-jitter exponential backoff ([`backoff::FullJitter`]), usable by backon,
//!   plus [`backoff::ResetAfterHealthy`] for long-running loops.
//! - [`retry`]: [`retry::classify`] says whether an error is worth retrying (a pure table), and
//!   [`retry::retry`] retries a call with a bounded, logged [`retry::RetryPolicy`].
//! - [`timeouts`]: [`timeouts::WatchTimeouts`] (server 1800 s / client 60 s) and the strict
//!   duration grammar, with errors that say which [`timeouts::Setting`] was wrong; the program
//!   reading the settings names them its own way (this crate names no flag or variable).
//! - [`connect`]: [`connect::connect`] finds the cluster like kubectl (an explicit kubeconfig,
//!   `KUBECONFIG`, `~/.kube/config`, in-cluster; a context, a namespace) and builds a client with
//!   timeouts, TLS verification and without kube's hidden retries.
//! - [`transport`]: the HTTP stack under that client: HTTP/2 (ALPN) with PING health checks,
//!   every request and watch of a process multiplexed on one connection (concurrent requests
//!   without one share the first's dial), HTTP/1.1 where the server offers no h2. [`ping`]: the PING interval and timeout (5 s + 10 s by default), parsed
//!   like the timeouts. [`proxy`]: the kubeconfig's `proxy-url` (`http://` CONNECT tunnels and
//!   `socks5://`).
//! - [`parse_error`]: a parse error of a user's file (kubeconfig, pod template, tasks file, an
//!   exec plugin's answer) told by position and kind, never quoting the file's credentials.
//! - [`finalizer`]: podline's pod finalizer ([`finalizer::RECORD_FINALIZER`]) and the careful
//!   patches that add it (never to a pod being deleted) and remove it (testing the entry first).
//! - [`list`]: LIST outside the watch, page by page with `continue` ([`list::Pages`]), each
//!   item decoded on its own: an object that does not decode is logged, counted and skipped,
//!   never the failure of its page.
//! - [`watch`]: [`watch::watch`] is LIST+WATCH that resumes from the last resourceVersion, bounds
//!   every wait by the client timeout, re-lists only on 410, and yields errors as items.
//!
//! # Faults and what the watch does
//!
//! | fault | what the watch sees | what it does | item(s) yielded |
//! |---|---|---|---|
//! | server ends the watch at `timeoutSeconds` | clean end of body, at the timeout | re-watch from last RV at once, no LIST, no backoff | `Connected { reason: "server_timeout" }` |
//! | connection frozen (frozen proxy, dropped NAT entry), HTTP/2 | an unanswered PING: within interval + timeout (15 s by default) the connection is closed and the stream fails | back off (one small step), re-watch from last RV on a new connection | `Err(StreamFailed{..})` or none, `Connected { reason: .. }` |
//! | connection silent (stall, frozen proxy), HTTP/1.1 | nothing within the client timeout | drop it, re-watch from last RV at once (a quiet cluster is silent too; a failed re-watch backs off) | `Err(ClientTimeout { phase: Stream })`, `Connected { reason: "client_timeout" }` |
//! | quiet watch, HTTP/2 | PINGs answered, no events | nothing: silence on a live HTTP/2 connection is a quiet cluster, not a fault (only a gap longer than the server timeout + 5 s ends the stream) | none |
//! | reset mid-chunk / ended early | body ends (or errors) before the timeout | back off (restarting from the smallest step if events arrived since the last failure), re-watch from last RV | `Err(StreamFailed{reset})` or none, `Connected { reason: "reset" }` |
//! | 5xx / 429 on the watch request | HTTP error status | back off (at least Retry-After, capped), re-watch from last RV | `Err(WatchStartFailed{http_5xx / too_many_requests})` |
//! | API server down / restarting | connection refused | back off, retry the same step | `Err(..{refused})` |
//! | watch request hangs before headers | nothing within the client timeout (a frozen HTTP/2 connection: the failed PING, sooner) | back off, retry | `Err(ClientTimeout { phase: WatchStart })` / `Err(WatchStartFailed)` |
//! | LIST page hangs or fails (5xx) | timeout / error status (a frozen HTTP/2 connection: the failed PING) | back off, retry the same page | `Err(ClientTimeout { phase: List })` / `Err(ListFailed)` |
//! | 410 in-stream ERROR, 410 on watch start, 410 on LIST continue | Status 410 | re-list | `Err(..{gone})`, `Init`, `InitApply`..., `InitDone` |
//! | `resume_from` RV too old (after a restart) | 410 | re-list | as above |
//! | 401 / 403 / 404 / 400 / 422, a rejected TLS certificate, or the wrong scheme (`http://` to a TLS server, `https://` to a plain one) | HTTP error status / TLS error | stop | `Err(e)` with `e.is_fatal()`, then the stream ends |
//! | a watch line or LIST item that does not decode: not JSON (or not UTF-8), JSON but not a watch event (no or an unknown `type`), an object the watched type can't read (e.g. `deletionTimestamp: "not-a-time"`), a line over `max_line_bytes` | one line or item; the rest of the body decodes | skip it and go on; the resume point moves past its resourceVersion when readable (an unknown type's too); a real ERROR event (a Status) keeps the rows above | `Skipped` (namespace, name, uid, resourceVersion when readable; the failing field path, no values) |
//!
//! Every row is covered by a unit test of the step function in paused time
//! (`watch::state::tests`); the sim's faults exercise them over real sockets in `tests/` (the
//! HTTP/2 rows, with the sim's `freeze` fault, in `tests/sim/http2.rs`).
//!
//! # Example
//!
//! ```no_run
//! use podline_client::retry::{retry, RetryPolicy};
//! # async fn demo(api: kube::Api<k8s_openapi::api::core::v1::Pod>, pod: k8s_openapi::api::core::v1::Pod) -> Result<(), kube::Error> {
//! let policy = RetryPolicy::default();
//! let params = kube::api::PostParams::default();
//! let created = retry(&policy, "create pod", || api.create(&params, &pod)).await?;
//! # Ok(()) }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod backoff;
pub mod connect;
pub mod dial;
pub mod error;
pub(crate) mod exec_plugin;
pub mod finalizer;
mod flight;
pub mod list;
pub mod parse_error;
pub mod ping;
pub mod proxy;
pub mod reason;
pub mod retry;
pub mod timeouts;
pub mod transport;
pub mod watch;

pub use error::InvalidBackoff;
