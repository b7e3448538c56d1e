//! `/failures`: failed pods grouped by reason (OOMKilled, ImagePull, Error exit codes,
//! Evicted, DeadlineExceeded, ...), largest group first.

use axum::extract::Query;
use axum::response::Html;
use maud::html;

use super::chrome::{Nav, PageError, layout, pod_href, run_href, time};
use crate::params::FailureQuery;
use crate::state::State;

/// `GET /failures`.
pub(crate) async fn page(
    state: State,
    Query(query): Query<FailureQuery>,
) -> Result<Html<String>, PageError> {
    let mark = state.store.changes(None, 0).await?.mark;
    let groups = state.store.failures(&query.filter()).await?;
    let total: usize = groups.iter().map(|g| g.pods.len()).sum();
    let main = html! {
        h1 { "Failures" }
        form.filters method="get" action="/failures" {
            label { "Namespace " input name="namespace" value=[query.namespace.as_deref()] placeholder="all"; }
            label { "Run " input name="run" value=[query.run.as_deref()] placeholder="all"; }
            button type="submit" { "Filter" }
        }
        @if groups.is_empty() {
            p.empty { "No failed pods." }
        } @else {
            p.summary { (total) " failed pods in " (groups.len()) " groups." }
            nav.groups { @for group in &groups {
                a href=(format!("#{}", anchor(&group.reason))) { (group.reason) " (" (group.pods.len()) ")" }
            } }
        }
        @for group in &groups {
            section.failure-group id=(anchor(&group.reason)) data-reason=(group.reason) data-count=(group.pods.len()) {
                h2 { span.reason { (group.reason) } " " span.count { "(" (group.pods.len()) ")" } }
                table {
                    thead { tr {
                        th { "Pod" } th { "Namespace" } th { "Run" } th { "Container" }
                        th.num { "Exit code" } th { "Detail" } th { "When" }
                    } }
                    tbody { @for pod in &group.pods {
                        tr.failed-pod data-uid=(pod.uid) {
                            td { a href=(pod_href(&pod.uid)) { (pod.name) } }
                            td { (pod.namespace) }
                            td { @if let Some(run) = &pod.run { a href=(run_href(&pod.namespace, run)) { (run) } } }
                            td { (pod.failure.container.as_deref().unwrap_or("-")) }
                            td.num { (pod.failure.exit_code.map_or_else(|| "-".to_owned(), |c| c.to_string())) }
                            td.detail { (pod.failure.detail.as_deref().unwrap_or("")) }
                            td { (time(pod.at)) }
                        }
                    } }
                }
            }
        }
    };
    Ok(layout("Failures", Nav::Failures, mark, main))
}

/// An id for a group's section: letters and digits kept, the rest dashes.
fn anchor(reason: &str) -> String {
    let slug: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("reason-{slug}")
}
