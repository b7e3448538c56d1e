//! The fault middleware: decides per request (from a [`FaultHandle`]) and acts the
//! way a client would observe a real failure: a Status answer, a delay, a stream that stalls or
//! ends early, a TCP reset in the middle of a chunk, a create that commits while its connection
//! drops, a connection that freezes (a frozen proxy), or watch events carrying an object the
//! client cannot decode. The per-stream forms reset one HTTP/2 stream instead of the connection:
//! mid-body by failing the response body, before any header by marking the response with
//! [`ResetStream`] for the server to refuse (both make hyper send RST_STREAM).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame};

use super::handle::FaultHandle;
use super::plan::{FaultAction, MalformField, glob_match};
use super::transport::{Connection, ResetStream};
use crate::api::RequestInfo;
use crate::api::exec_fault::{ExecFault, ExecFaultKind};
use crate::status::{ApiError, ErrorResponse};
use crate::verb::Verb;

/// Bytes sent when a reset fires between events: the connection is cut in the middle of them,
/// so the client sees the start of an event and then a reset.
const CUT_FILLER: &[u8] = b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"";

/// Pause between the last full frame and a reset (see [`BodyState::BeforeCut`]).
const CUT_DELAY: Duration = Duration::from_millis(100);

/// Middleware applying the sim's fault rules, those of `faults`.
pub async fn fault_layer(State(faults): State<FaultHandle>, req: Request, next: Next) -> Response {
    let Some(info) = req.extensions().get::<RequestInfo>().cloned() else {
        return next.run(req).await;
    };
    let (latency_ms, action) = faults.decide(&info);
    if latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(latency_ms)).await;
    }
    let Some(action) = action else {
        return next.run(req).await;
    };
    tracing::debug!(verb = %info.verb, resource = %info.resource_path(), name = %info.name, ?action, "injecting fault");
    let ctl = req.extensions().get::<Arc<dyn Connection>>().cloned();
    let http2 = req.version() == http::Version::HTTP_2;
    let lines = info.subresource == "log";
    if matches!(info.subresource.as_str(), "exec" | "attach")
        && let Some(fault) = exec_fault(&action, ctl.clone())
    {
        // The session's frames are not the response body: the handler applies the fault.
        let mut req = req;
        req.extensions_mut().insert(fault);
        return next.run(req).await;
    }
    let streaming = info.verb == Verb::Watch
        || (info.subresource == "log" && crate::api::query_flag(req.uri().query(), "follow"));
    match action {
        FaultAction::Status {
            code,
            reason,
            message,
            retry_after,
        } => {
            let mut err = if code == 422 {
                injected_invalid(&info)
            } else {
                ApiError::for_code(code)
            };
            if let Some(reason) = reason {
                err.reason = reason;
            }
            if let Some(message) = message {
                err.message = message;
            }
            if let Some(secs) = retry_after.or((code == 429).then_some(1)) {
                err.retry_after = Some(secs);
                let details = err.details.get_or_insert_with(Box::default);
                details.retry_after_seconds = Some(secs as i32);
            }
            err.into_response()
        }
        FaultAction::Latency { .. } => next.run(req).await,
        FaultAction::Stall { after_events } => {
            if streaming {
                wrap(
                    next.run(req).await,
                    Mode::Stall { after_events },
                    ctl,
                    lines,
                )
            } else {
                std::future::pending::<Response>().await
            }
        }
        FaultAction::Reset {
            after_bytes,
            after_events,
        } => wrap(
            next.run(req).await,
            Mode::reset(after_bytes, after_events, false),
            ctl,
            lines,
        ),
        // Over HTTP/1.1 the request's connection is all there is to reset.
        FaultAction::ResetStream {
            after_bytes,
            after_events,
        } => wrap(
            next.run(req).await,
            Mode::reset(after_bytes, after_events, http2),
            ctl,
            lines,
        ),
        FaultAction::EndEarly { after_events } => wrap(
            next.run(req).await,
            Mode::EndEarly { after_events },
            ctl,
            lines,
        ),
        FaultAction::Freeze { after_ms } => match (ctl, after_ms) {
            (Some(ctl), None | Some(0)) => {
                ctl.freeze();
                std::future::pending::<Response>().await
            }
            (Some(ctl), Some(ms)) => {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    ctl.freeze();
                });
                next.run(req).await
            }
            // In-process requests have no connection to freeze.
            (None, _) => {
                ApiError::internal("freeze: the request has no connection").into_response()
            }
        },
        FaultAction::Malform { name, field } if info.verb == Verb::Watch => wrap(
            next.run(req).await,
            Mode::Malform { name, field },
            ctl,
            lines,
        ),
        FaultAction::Malform { name, field }
            if matches!(info.verb, Verb::List | Verb::Get) && info.subresource.is_empty() =>
        {
            malform_response(next.run(req).await, &name, field).await
        }
        FaultAction::Malform { .. } => next.run(req).await,
        FaultAction::CommitThenDrop => {
            let _committed = next.run(req).await;
            match ctl {
                Some(ctl) => {
                    ctl.kill();
                    std::future::pending::<Response>().await
                }
                // In-process requests have no connection to drop.
                None => ApiError::internal("commit_then_drop: the connection was dropped")
                    .into_response(),
            }
        }
        FaultAction::CommitThenResetStream => {
            // The committed answer keeps its status and extensions for the audit layer; the
            // server resets its stream instead of sending it (see `ResetStream`).
            let mut committed = next.run(req).await;
            match ctl {
                Some(_) => {
                    committed.extensions_mut().insert(ResetStream);
                    committed
                }
                None => ApiError::internal("commit_then_reset_stream: the stream was reset")
                    .into_response(),
            }
        }
    }
}

/// The exec/attach form of a stream fault (see `crate::api::exec_fault`); None for the others, which
/// act on exec requests as on any request.
fn exec_fault(action: &FaultAction, ctl: Option<Arc<dyn Connection>>) -> Option<ExecFault> {
    let (kind, frames, bytes) = match *action {
        FaultAction::Stall { after_events } => (ExecFaultKind::Stall, Some(after_events), None),
        FaultAction::EndEarly { after_events } => {
            (ExecFaultKind::EndEarly, Some(after_events), None)
        }
        FaultAction::Reset {
            after_bytes,
            after_events,
        }
        | FaultAction::ResetStream {
            after_bytes,
            after_events,
        } => (ExecFaultKind::Reset, after_events, after_bytes),
        _ => return None,
    };
    let cut = ctl.map(|ctl| -> crate::api::exec_fault::Cut { Arc::new(move || ctl.kill()) });
    Some(ExecFault::new(kind, frames, bytes, cut))
}

/// Garbles `object` per `field` if its name matches `glob`; says whether it did.
fn garble(object: &mut serde_json::Value, glob: &str, field: MalformField) -> bool {
    let matches = object
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|name| glob_match(glob, name));
    if !matches {
        return false;
    }
    match field {
        MalformField::Status => {
            object["status"] = serde_json::json!({
                "phase": "Running",
                "containerStatuses": "garbled by the sim's malform fault",
            });
        }
        MalformField::DeletionTimestamp => {
            object["metadata"]["deletionTimestamp"] = serde_json::json!("not-a-time");
        }
    }
    true
}

/// A LIST or GET answer with its object (or each of its items) whose name matches `glob`
/// garbled per `field`. Only JSON answers are rewritten (a Table's rows or a protobuf body pass
/// unchanged), and only successful ones.
async fn malform_response(response: Response, glob: &str, field: MalformField) -> Response {
    let json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !response.status().is_success() || !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(err) => return ApiError::internal(format!("malform: {err}")).into_response(),
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let garbled = match value.get_mut("items").and_then(|i| i.as_array_mut()) {
        Some(items) => items
            .iter_mut()
            .fold(false, |any, item| garble(item, glob, field) | any),
        None => garble(&mut value, glob, field),
    };
    if !garbled {
        return Response::from_parts(parts, Body::from(bytes));
    }
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let body = serde_json::to_vec(&value).unwrap_or_else(|_| bytes.to_vec());
    Response::from_parts(parts, Body::from(body))
}

/// Rewrites the watch events (one JSON document per line) of `data` whose object name matches
/// `glob` per `field` (see [`garble`]); other lines pass unchanged.
fn malform_events(data: &Bytes, glob: &str, field: MalformField) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 64);
    for line in data.split_inclusive(|b| *b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let garbled = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|mut event| {
                if !garble(event.get_mut("object")?, glob, field) {
                    return None;
                }
                serde_json::to_vec(&event).ok()
            });
        match garbled {
            Some(json) => {
                out.extend_from_slice(&json);
                if line.ends_with(b"\n") {
                    out.push(b'\n');
                }
            }
            None => out.extend_from_slice(line),
        }
    }
    Bytes::from(out)
}

/// An injected 422 shaped like a validation failure of the request's object: `<Kind> "<name>"
/// is invalid: <field>: Invalid value: ...`, with the field in `details.causes`.
fn injected_invalid(info: &RequestInfo) -> ApiError {
    let kind = match info.resource.as_str() {
        "pods" => "Pod".to_owned(),
        "namespaces" => "Namespace".to_owned(),
        "leases" => "Lease".to_owned(),
        "events" => "Event".to_owned(),
        other => {
            let singular = other.strip_suffix('s').unwrap_or(other);
            let mut chars = singular.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect())
                .unwrap_or_default()
        }
    };
    let value = "sim.podline.io/injected";
    let cause = k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause {
        field: Some("metadata.annotations".to_owned()),
        message: Some(format!(
            "Invalid value: \"{value}\": rejected by the sim's fault plan"
        )),
        reason: Some("FieldValueInvalid".to_owned()),
    };
    ApiError::invalid(&info.group, &kind, &info.name, vec![cause])
}

fn wrap(response: Response, mode: Mode, ctl: Option<Arc<dyn Connection>>, lines: bool) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(FaultBody {
            inner: body,
            mode,
            ctl,
            events: 0,
            bytes: 0,
            lines,
            state: BodyState::Passing,
        }),
    )
}

#[derive(Debug, Clone)]
enum Mode {
    Stall {
        after_events: u64,
    },
    Reset {
        after_bytes: Option<u64>,
        after_events: Option<u64>,
        /// Reset the HTTP/2 stream (fail the body) instead of cutting the connection.
        stream_only: bool,
    },
    EndEarly {
        after_events: u64,
    },
    Malform {
        name: String,
        field: MalformField,
    },
}

impl Mode {
    /// A reset after `after_bytes` bytes or `after_events` events (neither: at once).
    fn reset(after_bytes: Option<u64>, after_events: Option<u64>, stream_only: bool) -> Self {
        Mode::Reset {
            after_bytes,
            after_events: if after_bytes.is_none() {
                Some(after_events.unwrap_or(0))
            } else {
                after_events
            },
            stream_only,
        }
    }
}

enum BodyState {
    /// Forwarding frames, counting events and bytes.
    Passing,
    /// The next poll arms the cut and sends these bytes (of which about half reach the wire).
    CutWith(Bytes),
    /// Waiting a moment before the cut, so the client has read what was sent (a reset makes the
    /// peer's kernel discard unread data).
    BeforeCut(Pin<Box<tokio::time::Sleep>>, Bytes),
    /// Nothing more is ever sent; the connection stays open (or is being reset).
    Stalled,
    /// The partial chunk was sent; once this pause lets it reach the client, the body fails
    /// and hyper resets the stream (RST_STREAM), leaving the connection up.
    BeforeStreamReset(Pin<Box<tokio::time::Sleep>>),
    /// Ended cleanly.
    Done,
}

/// A response body that misbehaves per [`Mode`]. Each data frame of a watch is one event; for a
/// log stream each line is one.
struct FaultBody {
    inner: Body,
    mode: Mode,
    ctl: Option<Arc<dyn Connection>>,
    events: u64,
    bytes: u64,
    /// A log stream: `events` counts lines (a frame may hold many, or part of one), so
    /// `after_events: N` acts after the N-th line whoever the writer chunked it.
    lines: bool,
    state: BodyState,
}

fn reset_error() -> axum::Error {
    axum::Error::new(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "reset by the sim's fault plan",
    ))
}

impl FaultBody {
    fn cut(&mut self, bytes: Bytes) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.state = BodyState::Stalled;
        let stream_only = matches!(
            self.mode,
            Mode::Reset {
                stream_only: true,
                ..
            }
        );
        match &self.ctl {
            Some(_) if stream_only => {
                // Like a cut connection: about half of the bytes reach the client, then the
                // stream is reset.
                let part = (bytes.len() / 2).max(1).min(bytes.len());
                self.state = BodyState::BeforeStreamReset(Box::pin(tokio::time::sleep(CUT_DELAY)));
                Poll::Ready(Some(Ok(Frame::data(bytes.slice(..part)))))
            }
            Some(ctl) => {
                ctl.cut_next_write();
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            // In-process: there is no socket to cut; fail the body instead.
            None => Poll::Ready(Some(Err(reset_error()))),
        }
    }
}

impl HttpBody for FaultBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        loop {
            match std::mem::replace(&mut this.state, BodyState::Passing) {
                BodyState::Stalled => {
                    this.state = BodyState::Stalled;
                    return Poll::Pending;
                }
                BodyState::BeforeStreamReset(mut sleep) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        this.state = BodyState::BeforeStreamReset(sleep);
                        return Poll::Pending;
                    }
                    this.state = BodyState::Done;
                    return Poll::Ready(Some(Err(reset_error())));
                }
                BodyState::Done => {
                    this.state = BodyState::Done;
                    return Poll::Ready(None);
                }
                BodyState::CutWith(bytes) => {
                    this.state =
                        BodyState::BeforeCut(Box::pin(tokio::time::sleep(CUT_DELAY)), bytes);
                    continue;
                }
                BodyState::BeforeCut(mut sleep, bytes) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        this.state = BodyState::BeforeCut(sleep, bytes);
                        return Poll::Pending;
                    }
                    return this.cut(bytes);
                }
                BodyState::Passing => {}
            }
            match &this.mode {
                Mode::EndEarly { after_events } if this.events >= *after_events => {
                    this.state = BodyState::Done;
                    continue;
                }
                Mode::Stall { after_events } if this.events >= *after_events => {
                    this.state = BodyState::Stalled;
                    continue;
                }
                Mode::Reset {
                    after_events: Some(n),
                    ..
                } if this.events >= *n => {
                    this.state = BodyState::CutWith(Bytes::from_static(CUT_FILLER));
                    continue;
                }
                _ => {}
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                other => return other,
            };
            let Some(data) = frame.data_ref().cloned() else {
                return Poll::Ready(Some(Ok(frame)));
            };
            if this.lines {
                let limit = match &this.mode {
                    Mode::Stall { after_events }
                    | Mode::EndEarly { after_events }
                    | Mode::Reset {
                        after_events: Some(after_events),
                        ..
                    } => Some(*after_events),
                    _ => None,
                };
                let newlines: Vec<usize> = data
                    .iter()
                    .enumerate()
                    .filter_map(|(i, b)| (*b == b'\n').then_some(i))
                    .collect();
                let remaining = limit.map(|n| n.saturating_sub(this.events));
                match remaining {
                    Some(left) if (newlines.len() as u64) >= left && left > 0 => {
                        // Send up to the limit's line; what follows is cut or never sent.
                        let end = newlines[(left - 1) as usize] + 1;
                        this.events += left;
                        this.bytes += end as u64;
                        let (head, tail) = (data.slice(..end), data.slice(end..));
                        if matches!(this.mode, Mode::Reset { .. }) {
                            let tail = if tail.is_empty() {
                                Bytes::from_static(b"a line cut by the sim")
                            } else {
                                tail
                            };
                            this.state = BodyState::CutWith(tail);
                        }
                        return Poll::Ready(Some(Ok(Frame::data(head))));
                    }
                    _ => this.events += newlines.len() as u64,
                }
            } else {
                this.events += 1;
            }
            if let Mode::Malform { name, field } = &this.mode {
                return Poll::Ready(Some(Ok(Frame::data(malform_events(&data, name, *field)))));
            }
            let before = this.bytes;
            this.bytes += data.len() as u64;
            if let Mode::Reset {
                after_bytes: Some(limit),
                ..
            } = this.mode
                && this.bytes > limit
            {
                let keep = (limit.saturating_sub(before)) as usize;
                let (head, tail) = (data.slice(..keep), data.slice(keep..));
                if head.is_empty() {
                    return this.cut(tail);
                }
                this.state = BodyState::CutWith(tail);
                return Poll::Ready(Some(Ok(Frame::data(head))));
            }
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
    }
}
