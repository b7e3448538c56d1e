//! `/runs/{namespace}/{run}`: one run's timeline, one bar per pod.

use axum::extract::Path;
use axum::response::Html;
use maud::html;

use super::chrome::{Nav, PageError, layout, query_value, time};
use super::svg;
use crate::load::{MAX_RUN_PODS, load_run};
use crate::state::State;
use crate::timeline::human;

/// `GET /runs/{namespace}/{run}`.
pub(crate) async fn page(
    state: State,
    Path((namespace, run)): Path<(String, String)>,
) -> Result<Html<String>, PageError> {
    let mark = state.store.changes(None, 0).await?.mark;
    let detail = load_run(state.store.as_ref(), &namespace, &run).await?;
    let summary = &detail.run.summary;
    let main = html! {
        h1 { "Run " span.run-name { (summary.run) } }
        p.summary {
            span class=(format!("badge {}", detail.run.status.as_str())) { (detail.run.status.as_str()) }
            " namespace " strong { (summary.namespace) }
            " · " strong.pods { (summary.pods) } " pods: "
            span.succeeded { (detail.run.succeeded) " succeeded" } ", "
            span.failed { (detail.run.failed) " failed" } ", "
            span.active { (summary.active) " in progress" }
            " · created " (time(summary.first_created_at))
            " · spans " (human(detail.timeline.span()))
            @if detail.run.failed > 0 {
                " · " a href=(format!("/failures?namespace={}&run={}", query_value(&summary.namespace), query_value(&summary.run))) { "failures" }
            }
        }
        @if summary.pods > u64::from(MAX_RUN_PODS) {
            p.note { "Showing the newest " (MAX_RUN_PODS) " pods of " (summary.pods) "." }
        }
        ul.legend {
            li { span.key.pending {} "pending (waiting to be scheduled)" }
            li { span.key.pulling {} "pulling (image pull, container creation)" }
            li { span.key.running.succeeded {} "running, succeeded" }
            li { span.key.running.failed {} "running, failed" }
            li { span.key.running.inprogress {} "running now" }
            li { span.key.lost {} "deleted before it finished" }
        }
        div.chart { (svg::timeline(&detail.timeline)) }
    };
    Ok(layout(&format!("Run {run}"), Nav::Runs, mark, main))
}
