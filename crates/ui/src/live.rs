//! `/api/events`: a server-sent event stream that says when the store changed.
//!
//! Each client gets its own loop: every poll interval it asks the store what changed since
//! its mark (one indexed query) and, if anything did, sends a `change` event whose `id` is the
//! new mark and whose data is the [`Changes`](podline_store::Changes) JSON. A reconnecting
//! browser sends the last id back (`Last-Event-ID`), so no change is missed across a
//! reconnect; a page passes the mark it was rendered at as `?since=`.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use jiff::Timestamp;

use crate::error::{ApiError, UiError};
use crate::load::CHANGES_LIMIT;
use crate::params::{ChangeQuery, mark_text, parse_mark};
use crate::state::{State, UiConfig};

/// `GET /api/events[?since=MARK]`.
pub(crate) async fn events(
    state: State,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<ChangeQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(parse_mark)
        .transpose()?;
    let since = match resumed.or(query.since()?) {
        Some(mark) => Some(mark),
        None => {
            state
                .store
                .changes(None, 0)
                .await
                .map_err(UiError::from)?
                .mark
        }
    };
    let config = state.0.clone();
    let stream =
        futures::stream::unfold((config, since, true), |(config, mark, first)| async move {
            let event = next_event(&config, mark, first).await;
            Some((Ok(event.0), (config, event.1, false)))
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Waits for the next change after `mark` and returns its event and the new mark. The first
/// event is a `ready` event carrying the mark, so a client knows the stream is live.
async fn next_event(
    config: &UiConfig,
    mark: Option<Timestamp>,
    first: bool,
) -> (Event, Option<Timestamp>) {
    if first {
        return (
            Event::default()
                .event("ready")
                .id(mark_text(mark))
                .data(mark_text(mark)),
            mark,
        );
    }
    let mut interval = tokio::time::interval(config.poll);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let changes = match mark {
            Some(mark) => config.store.changes(Some(mark), CHANGES_LIMIT).await,
            // An empty store: anything written from now on is a change.
            None => config.store.changes(None, 0).await.map(|mut c| {
                c.truncated = c.mark.is_some();
                c
            }),
        };
        match changes {
            Ok(changes) if !changes.pods.is_empty() || changes.truncated => {
                let data = serde_json::to_string(&changes).unwrap_or_else(|_| "{}".to_owned());
                let next = changes.mark.or(mark);
                return (
                    Event::default()
                        .event("change")
                        .id(mark_text(next))
                        .data(data),
                    next,
                );
            }
            Ok(_) => {}
            Err(err) => {
                // The page keeps its last rendering; the loop retries at the next tick.
                tracing::warn!(error = %err, "ui: change poll failed");
            }
        }
    }
}
