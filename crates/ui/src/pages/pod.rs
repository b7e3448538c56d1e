//! `/pods/{uid}`: one pod: phase transitions, containers (exit codes, reasons, image
//! digests), labels, annotations, owner and node.

use std::collections::BTreeMap;

use axum::extract::Path;
use axum::response::Html;
use jiff::Timestamp;
use maud::{Markup, html};

use super::chrome::{Nav, PageError, layout, run_href, time};
use super::svg;
use crate::load::load_pod;
use crate::state::State;
use crate::timeline::{Timeline, human};

/// `GET /pods/{uid}`.
pub(crate) async fn page(state: State, Path(uid): Path<String>) -> Result<Html<String>, PageError> {
    let mark = state.store.changes(None, 0).await?.mark;
    let pod = load_pod(state.store.as_ref(), &uid).await?;
    let failure = podline_store::classify_failure(&pod);
    let timeline = Timeline::build(std::slice::from_ref(&pod), Timestamp::now());
    let start = pod
        .created_at
        .or_else(|| pod.transitions.first().map(|t| t.at));
    let offset = |at: Timestamp| {
        start.map_or_else(String::new, |s| format!("+{}", human(at.duration_since(s))))
    };
    // Within one second (Kubernetes times' precision), in lifecycle order.
    let events = pod.lifecycle_events();
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let main = html! {
        h1 { "Pod " span.pod-name { (pod.name) } }
        @if let Some(failure) = &failure {
            p.failure-box {
                strong.failure-reason { (failure.reason) }
                @if let Some(container) = &failure.container { " in container " code { (container) } }
                @if let Some(detail) = &failure.detail { ": " span.failure-detail { (detail) } }
            }
        }
        div.chart { (svg::timeline(&timeline)) }
        table.facts {
            tr { th { "Namespace" } td { (pod.namespace) } }
            tr { th { "UID" } td { code { (pod.uid) } } }
            tr { th { "Run" } td { @match &pod.run {
                Some(run) => a href=(run_href(&pod.namespace, run)) { (run) },
                None => "-",
            } } }
            tr { th { "Phase" } td.phase { (dash(&pod.phase)) @if let Some(reason) = &pod.reason { " (" (reason) ")" } } }
            @if let Some(message) = &pod.message { tr { th { "Message" } td { (message) } } }
            tr { th { "Owner" } td { (dash(&pod.owner)) } }
            tr { th { "Node" } td { (dash(&pod.node)) } }
            tr { th { "Created" } td { (time(pod.created_at)) } }
            tr { th { "Finished" } td { (time(pod.finished_at)) } }
            tr { th { "Recorded" } td { (time(Some(pod.recorded_at))) ", last updated " (time(Some(pod.updated_at))) } }
        }
        h2 { "Phase transitions" }
        table #transitions {
            thead { tr { th { "Time" } th.num { "Offset" } th { "What" } } }
            tbody { @for (at, what) in &events {
                tr { td { (time(Some(*at))) } td.num { (offset(*at)) } td { (what) } }
            } }
        }
        h2 { "Containers" }
        table #containers {
            thead { tr {
                th { "Name" } th { "Image" } th { "Image digest" } th { "State" } th { "Reason" }
                th.num { "Exit code" } th.num { "Restarts" } th { "Message" }
            } }
            tbody { @for c in &pod.containers {
                tr {
                    td { (c.name) } td { (c.image) } td { code { (dash(&c.image_id)) } }
                    td { (c.state.map_or("-", |s| s.as_str())) }
                    td.reason { (dash(&c.reason)) }
                    td.num.exit-code { (c.exit_code.map_or_else(|| "-".to_owned(), |e| e.to_string())) }
                    td.num { (c.restarts) }
                    td { (dash(&c.message)) }
                }
            } }
        }
        h2 { "Labels" }
        (map_table("labels", &pod.labels))
        h2 { "Annotations" }
        (map_table("annotations", &pod.annotations))
    };
    Ok(layout(&format!("Pod {}", pod.name), Nav::None, mark, main))
}

fn map_table(id: &str, map: &BTreeMap<String, String>) -> Markup {
    html! {
        @if map.is_empty() {
            p.empty { "none" }
        } @else {
            table.map id=(id) {
                @for (key, value) in map {
                    tr { th { (key) } td { (value) } }
                }
            }
        }
    }
}
