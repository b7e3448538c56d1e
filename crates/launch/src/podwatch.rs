//! One watch per launched pod (field selector `metadata.name=<pod>`), published as the latest
//! [`PodState`] on a `tokio::sync::watch` channel.
//!
//! Awaiting start, following logs and awaiting completion all read this one channel, so a task
//! costs one watch connection instead of a polling loop per stage. The watch re-lists and
//! resumes by itself (with backoff) when the connection breaks; only a pod that is really gone
//! (deleted, or missing after a re-list) is reported as [`PodState::gone`].

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::watch::{self, Event, WatchConfig};
use tracing::Instrument;

/// The latest knowledge about the pod.
#[derive(Debug, Clone, Default)]
pub struct PodState {
    /// The newest version seen (None until the first event).
    pub pod: Option<Pod>,
    /// The pod was deleted or is no longer listed.
    pub gone: bool,
    /// Watch errors so far (each retried with backoff); for the report only.
    pub errors: u32,
    /// The watch failed with an error no retry can fix (e.g. 403): the run cannot follow the
    /// pod any more.
    pub fatal: Option<String>,
}

/// Starts watching `name` in the background. The task ends when the receiver is dropped or
/// the pod is gone.
pub fn spawn(api: Api<Pod>, name: &str) -> tokio::sync::watch::Receiver<PodState> {
    let (tx, rx) = tokio::sync::watch::channel(PodState::default());
    let cfg = WatchConfig::default().fields(&format!("metadata.name={name}"));
    let pod_name = name.to_owned();
    let span = tracing::debug_span!("pod_watch", pod = %pod_name);
    tokio::spawn(
        async move {
            let mut stream = std::pin::pin!(watch::watch(api, cfg));
            let mut listed = false;
            loop {
                let next = tokio::select! {
                    next = stream.next() => next,
                    () = tx.closed() => return,
                };
                let Some(item) = next else { return };
                match item {
                    Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                        if pod.metadata.name.as_deref() == Some(pod_name.as_str()) {
                            listed = true;
                            tx.send_modify(|s| s.pod = Some(pod));
                        }
                    }
                    Ok(Event::Init) => listed = false,
                    Ok(Event::InitDone) => {
                        let seen_before = tx.borrow().pod.is_some();
                        if !listed && seen_before {
                            tx.send_modify(|s| s.gone = true);
                            return;
                        }
                    }
                    Ok(Event::Delete(pod)) => {
                        tx.send_modify(|s| {
                            s.pod = Some(pod);
                            s.gone = true;
                        });
                        return;
                    }
                    Ok(Event::Bookmark(_) | Event::Connected { .. }) => {}
                    Err(err) if err.is_fatal() => {
                        tracing::warn!(error = %err, "pod watch failed for good");
                        tx.send_modify(|s| s.fatal = Some(err.to_string()));
                        return;
                    }
                    Err(err) => {
                        tracing::debug!(error = %err, reason = err.reason(), "pod watch interrupted; resuming");
                        tx.send_modify(|s| s.errors += 1);
                    }
                }
            }
        }
        .instrument(span),
    );
    rx
}
