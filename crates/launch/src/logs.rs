//! Following a container's logs so that the output equals what the container wrote.
//!
//! The stream is read with `timestamps=true`. When it breaks (reset, early end) or stalls (no
//! complete line for [`LogConfig::stall_timeout`]), it is reopened with `sinceTime` and the
//! replayed lines are dropped by [`Dedup`]. A partial last line is only printed once the
//! container has terminated and the stream ended cleanly; otherwise it is read again in full
//! after the reconnect. Log trouble never fails the task: after the container terminated,
//! podline tries for at most [`LogConfig::post_termination`] and then gives up with a warning.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::AsyncBufReadExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::LogParams;
use podline_client::backoff::FullJitter;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::dedup::{Dedup, split_timestamp};
use crate::podwatch::PodState;
use crate::selection::Lifecycle;
use crate::wait::container_terminated;

/// Where log lines go. Each call receives one whole line (prefix, text and newline), so lines
/// of several containers never interleave mid-line.
pub trait LogSink: Send + Sync {
    /// Writes one line.
    fn write_line(&self, line: &[u8]);

    /// One line of `container` (`text` without its newline; `complete` is false only for a last
    /// line the container ended without a newline). The default writes `[container] ` (when
    /// `prefixed`), the text and the newline with [`LogSink::write_line`]; a sink that keeps
    /// the container apart (a wrapper's JSON stream) overrides it.
    fn container_line(&self, container: &str, prefixed: bool, text: &[u8], complete: bool) {
        let mut out = Vec::with_capacity(text.len() + container.len() + 4);
        if prefixed {
            out.extend_from_slice(b"[");
            out.extend_from_slice(container.as_bytes());
            out.extend_from_slice(b"] ");
        }
        out.extend_from_slice(text);
        if complete {
            out.push(b'\n');
        }
        self.write_line(&out);
    }

    /// A point in the run's life with the pod as it was then (`None`: not known, e.g. a pod
    /// already gone). Ignored by default; a wrapper that calls hooks at these points (Airflow's
    /// `KubernetesPodOperatorCallback`s) receives them in order.
    fn lifecycle(&self, _event: Lifecycle, _pod: Option<&Pod>) {}
}

/// Writes to the process's stdout (the CLI's sink).
#[derive(Debug, Default, Clone, Copy)]
pub struct StdoutSink;

impl LogSink for StdoutSink {
    fn write_line(&self, line: &[u8]) {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        // A closed stdout (e.g. `| head`) must not fail the task; the line is dropped.
        let _ = out.write_all(line).and_then(|()| out.flush());
    }
}

/// Collects output in memory (tests, and library users that post-process logs).
#[derive(Debug, Default)]
pub struct BufferSink(Mutex<Vec<u8>>);

impl BufferSink {
    /// Everything written so far.
    pub fn contents(&self) -> Vec<u8> {
        self.0.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

impl LogSink for BufferSink {
    fn write_line(&self, line: &[u8]) {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(line);
        }
    }
}

/// Discards logs (for many-task runs, [`crate::run_many`], which only summarise).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl LogSink for NullSink {
    fn write_line(&self, _line: &[u8]) {}
}

/// Log-following knobs.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Reconnect when no complete line arrived for this long (a silent container only costs a
    /// cheap reconnect; a stalled stream would otherwise hang forever).
    pub stall_timeout: Duration,
    /// After the container terminated, keep trying to read the rest for this long.
    pub post_termination: Duration,
    /// Backoff between reconnects.
    pub reconnect_backoff: FullJitter,
}

impl Default for LogConfig {
    fn default() -> Self {
        let reconnect_backoff =
            const { FullJitter::doubling(Duration::from_millis(50), Duration::from_secs(2)) };
        Self {
            stall_timeout: Duration::from_secs(60),
            post_termination: Duration::from_secs(60),
            reconnect_backoff,
        }
    }
}

/// How one stream ended.
enum StreamEnd {
    /// The server closed the stream cleanly.
    Eof,
    /// The stream broke or could not be opened.
    Broken(String),
    /// No complete line within the stall timeout.
    Stalled,
}

/// Follows `container` of `pod` until its logs are complete; returns the number of reconnects.
#[allow(clippy::too_many_arguments)]
pub async fn follow(
    api: Api<Pod>,
    pod: String,
    container: String,
    prefix: Option<String>,
    sink: Arc<dyn LogSink>,
    mut state: watch::Receiver<PodState>,
    cfg: LogConfig,
) -> u32 {
    let mut dedup = Dedup::new();
    let mut reconnects = 0u32;
    let mut delays = backon::BackoffBuilder::build(cfg.reconnect_backoff.clone());
    let mut terminated_at: Option<Instant> = None;
    loop {
        let (terminated, gone) = {
            let s = state.borrow_and_update();
            let t = s
                .pod
                .as_ref()
                .is_some_and(|p| container_terminated(p, &container));
            (t || s.gone, s.gone)
        };
        if terminated && terminated_at.is_none() {
            terminated_at = Some(Instant::now());
        }
        if terminated_at.is_some_and(|t| t.elapsed() > cfg.post_termination) {
            tracing::warn!(pod = %pod, container = %container, "giving up on the rest of the logs after the container finished");
            return reconnects;
        }
        let params = LogParams {
            container: Some(container.clone()),
            follow: true,
            timestamps: true,
            since_time: dedup.resume_from(),
            ..LogParams::default()
        };
        dedup.begin_stream();
        let (end, progressed) = read_stream(
            &api,
            &pod,
            &params,
            &mut dedup,
            sink.as_ref(),
            prefix.as_deref(),
            cfg.stall_timeout,
            terminated,
        )
        .await;
        match end {
            // Done when a stream opened after the container terminated ends cleanly without
            // anything new: a stream that still brought new lines may have been cut short
            // (an early end looks like a clean one), so one more read confirms the end.
            StreamEnd::Eof if terminated && !progressed => return reconnects,
            StreamEnd::Eof if terminated => {
                delays = backon::BackoffBuilder::build(cfg.reconnect_backoff.clone());
                continue;
            }
            StreamEnd::Eof => {}
            StreamEnd::Broken(why) => {
                if gone {
                    return reconnects;
                }
                reconnects += 1;
                tracing::debug!(pod = %pod, container = %container, error = %why, "log stream broke; resuming");
            }
            StreamEnd::Stalled => {
                reconnects += 1;
                tracing::debug!(pod = %pod, container = %container, "log stream stalled; resuming");
            }
        }
        if progressed {
            delays = backon::BackoffBuilder::build(cfg.reconnect_backoff.clone());
        }
        let delay = delays.next().unwrap_or(Duration::from_secs(1));
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            // A closed channel (the watch ended) must not turn this into a busy loop.
            Ok(()) = state.changed() => {}
        }
    }
}

/// Reads one stream to its end. Returns how it ended and whether any new line was printed.
#[allow(clippy::too_many_arguments)]
async fn read_stream(
    api: &Api<Pod>,
    pod: &str,
    params: &LogParams,
    dedup: &mut Dedup,
    sink: &dyn LogSink,
    prefix: Option<&str>,
    stall: Duration,
    terminated_at_open: bool,
) -> (StreamEnd, bool) {
    let opened = tokio::time::timeout(stall, api.log_stream(pod, params)).await;
    let reader = match opened {
        Err(_) => return (StreamEnd::Stalled, false),
        Ok(Err(err)) => return (StreamEnd::Broken(err.to_string()), false),
        Ok(Ok(reader)) => reader,
    };
    let mut reader = Box::pin(reader);
    let mut progressed = false;
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let read = tokio::time::timeout(stall, reader.read_until(b'\n', &mut buf)).await;
        match read {
            Err(_) => return (StreamEnd::Stalled, progressed),
            Ok(Err(err)) => return (StreamEnd::Broken(err.to_string()), progressed),
            Ok(Ok(0)) => return (StreamEnd::Eof, progressed),
            Ok(Ok(_)) => {
                let complete = buf.last() == Some(&b'\n');
                if !complete && !terminated_at_open {
                    // A partial line at the end of a stream of a running container: it will
                    // come again, whole, on the next stream.
                    return (StreamEnd::Eof, progressed);
                }
                let line = if complete {
                    &buf[..buf.len() - 1]
                } else {
                    &buf[..]
                };
                let (text, new) = match split_timestamp(line) {
                    Some((ts, text)) => (text, dedup.accept(ts, text)),
                    None => (line, true),
                };
                if new {
                    progressed = true;
                    let container = params.container.as_deref().unwrap_or_default();
                    sink.container_line(container, prefix.is_some(), text, complete);
                }
            }
        }
    }
}
