//! `/`: the runs, newest first, with their counts and filters (namespace, status, time).

use axum::extract::Query;
use axum::response::Html;
use maud::html;

use super::chrome::{Nav, PageError, layout, query_value, run_href, time};
use crate::load::list_runs;
use crate::params::RunQuery;
use crate::state::State;

/// `GET /`.
pub(crate) async fn page(
    state: State,
    Query(query): Query<RunQuery>,
) -> Result<Html<String>, PageError> {
    let mark = state.store.changes(None, 0).await?.mark;
    let runs = list_runs(state.store.as_ref(), &query).await?;
    let selected = |status: &str| query.status.as_deref() == Some(status);
    let main = html! {
        h1 { "Runs" }
        form.filters method="get" action="/" {
            label { "Namespace " input name="namespace" value=[query.namespace.as_deref()] placeholder="all"; }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for status in ["running", "failed", "succeeded"] {
                        option value=(status) selected[selected(status)] { (status) }
                    }
                }
            }
            label { "Created since " input name="since" value=[query.since.as_deref()] placeholder="2h or 2026-01-01T00:00:00Z"; }
            label { "until " input name="until" value=[query.until.as_deref()] placeholder="now"; }
            button type="submit" { "Filter" }
        }
        @if runs.is_empty() {
            p.empty { "No runs match. Pods are grouped into runs by their run label; record some with "
                code { "podline record" } " or " code { "podline demo" } "." }
        } @else {
            table #runs.runs {
                thead { tr {
                    th { "Run" } th { "Namespace" } th { "Status" } th.num { "Pods" }
                    th.num { "Succeeded" } th.num { "Failed" } th.num { "Running" }
                    th { "First created" } th { "Last finished" } th {}
                } }
                tbody {
                    @for run in &runs {
                        tr.run data-run=(run.summary.run) data-status=(run.status.as_str()) {
                            td { a href=(run_href(&run.summary.namespace, &run.summary.run)) { (run.summary.run) } }
                            td { (run.summary.namespace) }
                            td { span class=(format!("badge {}", run.status.as_str())) { (run.status.as_str()) } }
                            td.num.pods { (run.summary.pods) }
                            td.num.succeeded { (run.succeeded) }
                            td.num.failed { (run.failed) }
                            td.num.active { (run.summary.active) }
                            td { (time(run.summary.first_created_at)) }
                            td { (time(run.summary.last_finished_at)) }
                            td { @if run.failed > 0 {
                                a href=(format!("/failures?namespace={}&run={}",
                                    query_value(&run.summary.namespace), query_value(&run.summary.run))) { "failures" }
                            } }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Runs", Nav::Runs, mark, main))
}
