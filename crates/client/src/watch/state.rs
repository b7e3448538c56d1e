//! The watch as an explicit state machine: one private [`State`] enum and one [`step`] function.
//!
//! Each call of `step` takes the state by value, waits for at most one request or stream item
//! (each bounded by the client timeout), and returns the item to yield plus the next state. So
//! "what happens on a 410 mid-watch" is one match arm, and the stream is just an unfold over
//! `(Ctx, State)`.

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::time::{Instant, timeout};
use tokio_util::codec::FramedRead;
use tokio_util::compat::FuturesAsyncReadCompatExt;

use super::config::WatchConfig;
use super::decode::{Line, Page, decode_frame, decode_page};
use super::error::{Phase, WatchError, reason_of, reason_of_status};
use super::event::Event;
use super::lines::LineCodec;
use super::skipped::SkippedIn;
use crate::backoff::{FullJitter, ResetAfterHealthy};
use crate::reason::Reason;
use crate::transport::ResponseVersion;

/// A stream end this close to the server timeout counts as the server's clean end.
const SERVER_END_SLACK: Duration = Duration::from_secs(1);
/// Over HTTP/2 a silent stream is a quiet watch (PING watches the connection), so only a gap
/// longer than the server timeout plus this margin means the stream itself is stuck.
const STUCK_STREAM_MARGIN: Duration = Duration::from_secs(5);

/// Where the watch is. Each variant holds only what its phase needs.
enum State<K> {
    /// Nothing listed yet, or the last resourceVersion expired (410): next, emit `Init` and list
    /// from the first page.
    Empty,
    /// Listing: fetch the page after `continue_token` (the first if `None`). A failed page is
    /// retried after a backoff; a 410 (continue token expired) goes back to `Empty`.
    Listing { continue_token: Option<String> },
    /// Not watching: start a watch from `resource_version` (after the list, after any broken or
    /// ended watch, or from `resume_from`). A 410 goes to `Empty`; other failures retry here.
    Resume { resource_version: String },
    /// A watch stream is open; `resource_version` is the last one seen (event or bookmark).
    /// A gap of `idle` without an item ends it: the client timeout over HTTP/1.1 (silence may be
    /// a dead connection), the server timeout plus a margin over HTTP/2 (silence is a quiet
    /// watch; a dead connection fails the stream through PING instead).
    Watching {
        resource_version: String,
        started: Instant,
        idle: Duration,
        stream: BoxStream<'static, kube::Result<Line<K>>>,
    },
    /// A fatal error was yielded: the stream ends.
    Done,
}

/// What persists across states: the API handle, the config, the backoff and the items queued for
/// the consumer (the objects of a LIST page).
struct Ctx<K: Clone> {
    api: Api<K>,
    config: WatchConfig,
    backoff: ResetAfterHealthy<FullJitter>,
    /// Sleep this long before the next request (set by a failure, cleared when slept).
    delay: Option<Duration>,
    /// Why the last healthy watch ended (the first cause, if several failures followed), reported
    /// with the next `Connected`.
    ended_because: Option<Reason>,
    pending: VecDeque<Event<K>>,
    /// An event or bookmark arrived since the last failure: the next failure starts the backoff
    /// from the beginning (reset lazily, so a busy stream costs nothing per event).
    saw_progress: bool,
}

impl<K: Clone> Ctx<K> {
    /// Records a failure: the next request waits one backoff step.
    fn fail(&mut self, reason: Reason) {
        self.fail_after(reason, None);
    }

    /// Records a failure; the server's Retry-After (capped at the backoff cap) lengthens the delay.
    fn fail_after(&mut self, reason: Reason, retry_after: Option<Duration>) {
        if std::mem::take(&mut self.saw_progress) {
            self.backoff.reset();
        }
        let cap = self.config.backoff.cap();
        let mut delay = self.backoff.next().unwrap_or(cap);
        if let Some(after) = retry_after {
            delay = delay.max(after.min(cap));
        }
        tracing::debug!(
            reason = reason.as_str(),
            delay_ms = delay.as_millis() as u64,
            "watch: backing off"
        );
        self.delay = Some(delay);
        self.note_end(reason);
    }

    fn note_end(&mut self, reason: Reason) {
        self.ended_because.get_or_insert(reason);
    }

    async fn sleep_backoff(&mut self) {
        if let Some(delay) = self.delay.take() {
            tokio::time::sleep(delay).await;
        }
    }

    fn client_timeout(&self) -> Duration {
        self.config.timeouts.client
    }
}

/// The stream behind [`super::watch`].
pub(super) fn run<K>(
    api: Api<K>,
    config: WatchConfig,
) -> impl Stream<Item = Result<Event<K>, WatchError>> + Send
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (state, first) = match config.resume_from.clone() {
        Some(resource_version) => (State::Resume { resource_version }, Reason::Resume),
        None => (State::Empty, Reason::Initial),
    };
    let ctx = Ctx {
        backoff: ResetAfterHealthy::new(config.backoff.clone(), config.healthy_after),
        api,
        config,
        delay: None,
        ended_because: Some(first),
        pending: VecDeque::new(),
        saw_progress: false,
    };
    futures::stream::unfold((ctx, state), |(mut ctx, state)| async move {
        if matches!(state, State::Done) {
            return None;
        }
        let (item, next) = step(&mut ctx, state).await;
        Some((item, (ctx, next)))
    })
}

/// Advances the watch until there is one item to yield.
async fn step<K>(ctx: &mut Ctx<K>, mut state: State<K>) -> (Result<Event<K>, WatchError>, State<K>)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    loop {
        if let Some(event) = ctx.pending.pop_front() {
            return (Ok(event), state);
        }
        state = match state {
            State::Empty => {
                return (
                    Ok(Event::Init),
                    State::Listing {
                        continue_token: None,
                    },
                );
            }
            State::Listing { continue_token } => {
                ctx.sleep_backoff().await;
                let lp = list_params(&ctx.config, continue_token.as_deref());
                match timeout(ctx.client_timeout(), list_page(&ctx.api, &lp)).await {
                    Err(_elapsed) => {
                        ctx.fail(Reason::ClientTimeout);
                        let err = WatchError::ClientTimeout {
                            phase: Phase::List,
                            timeout: ctx.client_timeout(),
                        };
                        return (Err(err), State::Listing { continue_token });
                    }
                    Ok(Err(error)) => {
                        let reason = reason_of(&error);
                        let err = WatchError::ListFailed { reason, error };
                        return failed(ctx, err, State::Listing { continue_token });
                    }
                    Ok(Ok(page)) => {
                        ctx.pending
                            .extend(page.items.into_iter().map(|item| match item {
                                Ok(obj) => Event::InitApply(obj),
                                Err(skipped) => {
                                    tracing::debug!(%skipped, "watch: LIST item skipped");
                                    Event::Skipped(*skipped)
                                }
                            }));
                        let next_token = page.metadata.continue_.filter(|c| !c.is_empty());
                        let rv = page.metadata.resource_version.filter(|rv| !rv.is_empty());
                        match (next_token, rv) {
                            (Some(token), _) => State::Listing {
                                continue_token: Some(token),
                            },
                            (None, Some(resource_version)) => {
                                ctx.pending.push_back(Event::InitDone);
                                State::Resume { resource_version }
                            }
                            (None, None) => {
                                ctx.pending.clear();
                                ctx.fail(Reason::NoResourceVersion);
                                return (Err(WatchError::NoResourceVersion), State::Empty);
                            }
                        }
                    }
                }
            }
            State::Resume { resource_version } => {
                ctx.sleep_backoff().await;
                let wp = watch_params(&ctx.config);
                let opened =
                    open_watch(&ctx.api, &wp, &resource_version, ctx.config.max_line_bytes);
                match timeout(ctx.client_timeout(), opened).await {
                    Err(_elapsed) => {
                        ctx.fail(Reason::ClientTimeout);
                        let err = WatchError::ClientTimeout {
                            phase: Phase::WatchStart,
                            timeout: ctx.client_timeout(),
                        };
                        return (Err(err), State::Resume { resource_version });
                    }
                    Ok(Err(error)) => {
                        let reason = reason_of(&error);
                        let err = WatchError::WatchStartFailed { reason, error };
                        return failed(ctx, err, State::Resume { resource_version });
                    }
                    Ok(Ok((stream, multiplexed))) => {
                        let reason = ctx.ended_because.take().unwrap_or(Reason::Initial);
                        if !reason.is_first_connect() {
                            tracing::info!(
                                reason = reason.as_str(),
                                resource_version,
                                "watch resumed"
                            );
                        }
                        let event = Event::Connected {
                            reason,
                            resource_version: resource_version.clone(),
                        };
                        let idle = if multiplexed {
                            ctx.config.timeouts.server + STUCK_STREAM_MARGIN
                        } else {
                            ctx.client_timeout()
                        };
                        return (
                            Ok(event),
                            State::Watching {
                                resource_version,
                                started: Instant::now(),
                                idle,
                                stream: stream.boxed(),
                            },
                        );
                    }
                }
            }
            State::Watching {
                mut resource_version,
                started,
                idle,
                mut stream,
            } => match timeout(idle, stream.next()).await {
                Err(_elapsed) => {
                    // A quiet cluster sends nothing for minutes, so this is routine: reconnect at
                    // once (a dead server then fails the reconnect, and that backs off). Backing
                    // off here would let quiet periods push the delay towards the cap and past
                    // the server's ~75 s of watch history.
                    ctx.note_end(Reason::ClientTimeout);
                    let err = WatchError::ClientTimeout {
                        phase: Phase::Stream,
                        timeout: idle,
                    };
                    return (Err(err), State::Resume { resource_version });
                }
                Ok(None) => {
                    let lived = started.elapsed();
                    let server = ctx.config.timeouts.server;
                    // (The second test keeps a tiny server timeout from turning an immediately
                    // closing server into a busy loop.)
                    if lived + SERVER_END_SLACK >= server && lived >= server / 2 {
                        // The routine end at timeoutSeconds: re-watch at once.
                        ctx.note_end(Reason::ServerTimeout);
                    } else {
                        // Ended early: a proxy reset, a dropped connection. Back off so a
                        // server that closes at once is not hammered.
                        ctx.fail(Reason::Reset);
                    }
                    State::Resume { resource_version }
                }
                Ok(Some(Ok(Line::Nothing))) => State::Watching {
                    resource_version,
                    started,
                    idle,
                    stream,
                },
                Ok(Some(Ok(Line::Skipped(skipped)))) => {
                    // Resume after it, never into it again: the next reconnect (or a consumer
                    // that persists this resourceVersion) starts past the bad event. Any event
                    // but ERROR carries an object of the watched collection whose
                    // resourceVersion is a position in it (an unknown type too); an ERROR's
                    // object is a Status, not a position.
                    ctx.saw_progress = true;
                    if skipped.source != SkippedIn::Error {
                        advance(&mut resource_version, skipped.resource_version.clone());
                    }
                    tracing::debug!(%skipped, "watch: line skipped");
                    return (
                        Ok(Event::Skipped(skipped)),
                        State::Watching {
                            resource_version,
                            started,
                            idle,
                            stream,
                        },
                    );
                }
                Ok(Some(Ok(Line::Event(event)))) => {
                    ctx.saw_progress = true;
                    let item = match event {
                        WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                            advance(&mut resource_version, obj.resource_version());
                            Event::Apply(obj)
                        }
                        WatchEvent::Deleted(obj) => {
                            advance(&mut resource_version, obj.resource_version());
                            Event::Delete(obj)
                        }
                        WatchEvent::Bookmark(bookmark) => {
                            advance(
                                &mut resource_version,
                                Some(bookmark.metadata.resource_version),
                            );
                            Event::Bookmark(resource_version.clone())
                        }
                        WatchEvent::Error(status) => {
                            return stream_status(ctx, status, resource_version);
                        }
                    };
                    return (
                        Ok(item),
                        State::Watching {
                            resource_version,
                            started,
                            idle,
                            stream,
                        },
                    );
                }
                Ok(Some(Err(error))) => {
                    let reason = reason_of(&error);
                    ctx.fail(reason);
                    let err = WatchError::StreamFailed { reason, error };
                    tracing::debug!(error = %err, "watch stream broke");
                    return (Err(err), State::Resume { resource_version });
                }
            },
            // `run` never steps a finished watch; if it did, stay finished and say why.
            State::Done => return (Err(WatchError::NoResourceVersion), State::Done),
        };
    }
}

/// Fetches one LIST page like `Api::list`, but decodes its items one by one ([`decode_page`]):
/// one bad item is one [`Event::Skipped`], not a failed page. (kube's `Client::request` would also
/// log the whole answer at warn when it does not decode: every pod's spec, env values included.)
async fn list_page<K>(api: &Api<K>, lp: &ListParams) -> kube::Result<Page<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let mut req = kube::core::Request::new(api.resource_url())
        .list(lp)
        .map_err(kube::Error::BuildRequest)?;
    req.extensions_mut().insert("list");
    let text = api.clone().into_client().request_text(req).await?;
    decode_page(&text).map_err(kube::Error::SerdeError)
}

/// Starts a watch like `Api::watch`, and says whether the answer came over HTTP/2 (through
/// podline's transport, which fills in the [`ResponseVersion`]).
///
/// The body is framed and decoded here ([`LineCodec`], [`decode_frame`]) rather than by kube's
/// `Client::request_events`, which turns any line that is not a `WatchEvent<K>` into an API error
/// with code 0 (an undecodable object would then stop the watch, and every restart would resume
/// into it again).
async fn open_watch<K>(
    api: &Api<K>,
    wp: &WatchParams,
    resource_version: &str,
    max_line: usize,
) -> kube::Result<(impl Stream<Item = kube::Result<Line<K>>> + use<K>, bool)>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let mut req = kube::core::Request::new(api.resource_url())
        .watch(wp, resource_version)
        .map_err(kube::Error::BuildRequest)?;
    // As kube-rs does for watches: a gzipped watch is one gzip member per event, which its
    // decompression layer reads only the first of.
    req.headers_mut()
        .entry(http::header::ACCEPT_ENCODING)
        .or_insert(http::HeaderValue::from_static("identity"));
    let version = ResponseVersion::default();
    req.extensions_mut().insert("watch");
    req.extensions_mut().insert(version.clone());
    let body = api.clone().into_client().request_stream(req).await?;
    let frames = FramedRead::new(body.compat(), LineCodec::new(max_line))
        .map_ok(move |frame| decode_frame::<K>(frame, max_line))
        .take_while(|item| std::future::ready(!matches!(item, Err(e) if ends_cleanly(e))))
        .map_err(kube::Error::ReadEvents);
    Ok((frames, version.is_http2()))
}

/// A body error that ends the stream the way a server's end does (kube-rs treats them so too):
/// a TLS close without `close_notify`, a chunked body cut at a chunk boundary, or a read
/// timeout. The state machine then tells a server timeout from an early end by the time.
fn ends_cleanly(err: &std::io::Error) -> bool {
    if err.kind() == std::io::ErrorKind::TimedOut {
        return true;
    }
    crate::retry::any_cause(err, &|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
            || e.to_string().contains("unexpected EOF during chunk")
    })
}

/// A failed LIST or watch request: fatal ends the stream, 410 re-lists, anything else retries
/// `retry` after a backoff.
fn failed<K: Clone>(
    ctx: &mut Ctx<K>,
    err: WatchError,
    retry: State<K>,
) -> (Result<Event<K>, WatchError>, State<K>) {
    if err.is_fatal() {
        tracing::warn!(reason = err.reason().as_str(), error = %err, "watch cannot continue");
        return (Err(err), State::Done);
    }
    let retry_after = err
        .status()
        .and_then(|s| s.details.as_ref())
        .map(|d| Duration::from_secs(u64::from(d.retry_after_seconds)))
        .filter(|d| !d.is_zero());
    ctx.fail_after(err.reason(), retry_after);
    tracing::debug!(error = %err, "watch request failed");
    let next = if err.is_gone() { State::Empty } else { retry };
    (Err(err), next)
}

/// An ERROR event in the stream: 410 re-lists, fatal codes end, others resume after a backoff.
fn stream_status<K: Clone>(
    ctx: &mut Ctx<K>,
    status: Box<kube::core::Status>,
    resource_version: String,
) -> (Result<Event<K>, WatchError>, State<K>) {
    let reason = reason_of_status(&status);
    let err = WatchError::StreamStatus { reason, status };
    failed(ctx, err, State::Resume { resource_version })
}

fn advance(current: &mut String, seen: Option<String>) {
    if let Some(rv) = seen.filter(|rv| !rv.is_empty()) {
        *current = rv;
    }
}

fn list_params(config: &WatchConfig, continue_token: Option<&str>) -> ListParams {
    let mut lp = ListParams::default().limit(config.page_size);
    if let Some(token) = continue_token {
        lp = lp.continue_token(token);
    }
    if let Some(labels) = &config.label_selector {
        lp = lp.labels(labels);
    }
    if let Some(fields) = &config.field_selector {
        lp = lp.fields(fields);
    }
    lp
}

fn watch_params(config: &WatchConfig) -> WatchParams {
    let mut wp = WatchParams::default().timeout(config.timeouts.server_seconds());
    if let Some(labels) = &config.label_selector {
        wp = wp.labels(labels);
    }
    if let Some(fields) = &config.field_selector {
        wp = wp.fields(fields);
    }
    wp
}

#[cfg(test)]
mod tests;
