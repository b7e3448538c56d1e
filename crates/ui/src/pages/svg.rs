//! The timeline as SVG: one row per pod, a name on the left, segments on a shared time axis.
//! Hovering a bar shows its details (an SVG `<title>`); clicking it opens the pod page.

use jiff::{SignedDuration, Timestamp};
use maud::{Markup, html};

use super::chrome::{pod_href, time};
use crate::timeline::{Bar, Timeline, human};

const LABEL_WIDTH: f64 = 240.0;
const CHART_WIDTH: f64 = 860.0;
const REASON_WIDTH: f64 = 140.0;
const ROW_HEIGHT: f64 = 20.0;
const BAR_HEIGHT: f64 = 14.0;
const AXIS_HEIGHT: f64 = 26.0;
/// Narrowest drawn segment, so a 5 ms pending stretch is still visible.
const MIN_SEGMENT_WIDTH: f64 = 1.5;

/// Tick steps the axis chooses from, in milliseconds.
const TICK_STEPS_MS: &[i64] = &[
    100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000,
    900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
];

/// Renders `timeline` (nothing but a note when it has no bars).
pub(crate) fn timeline(timeline: &Timeline) -> Markup {
    let (Some(start), Some(_)) = (timeline.start, timeline.end) else {
        return html! { p.empty { "No pods recorded for this run yet." } };
    };
    let span_ms = timeline.span().as_millis().max(1) as f64;
    let x = |t: Timestamp| {
        LABEL_WIDTH + CHART_WIDTH * (t.duration_since(start).as_millis() as f64 / span_ms)
    };
    let width = LABEL_WIDTH + CHART_WIDTH + REASON_WIDTH;
    let height = AXIS_HEIGHT + ROW_HEIGHT * timeline.bars.len() as f64 + 6.0;
    let step = TICK_STEPS_MS
        .iter()
        .copied()
        .find(|step| span_ms / *step as f64 <= 10.0)
        .unwrap_or(86_400_000);
    let ticks = (0..)
        .map(|i| i * step)
        .take_while(|ms| (*ms as f64) <= span_ms)
        .collect::<Vec<i64>>();
    html! {
        svg #timeline.timeline xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {width} {height}")) width=(width) height=(height)
            data-bars=(timeline.bars.len()) {
            g.axis {
                @for ms in &ticks {
                    @let tx = LABEL_WIDTH + CHART_WIDTH * (*ms as f64 / span_ms);
                    line x1=(tx) y1=(AXIS_HEIGHT - 6.0) x2=(tx) y2=(height) {}
                    text x=(tx) y=(AXIS_HEIGHT - 10.0) text-anchor="middle" {
                        "+" (human(SignedDuration::from_millis(*ms)))
                    }
                }
            }
            @for (i, bar) in timeline.bars.iter().enumerate() {
                @let y = AXIS_HEIGHT + ROW_HEIGHT * i as f64;
                (row(bar, y, &x))
            }
        }
    }
}

fn row(bar: &Bar, y: f64, x: &impl Fn(Timestamp) -> f64) -> Markup {
    let bar_y = y + (ROW_HEIGHT - BAR_HEIGHT) / 2.0;
    let end_x = x(bar.end).max(x(bar.start) + MIN_SEGMENT_WIDTH);
    html! {
        g class=(format!("bar {}", bar.outcome.as_str())) data-uid=(bar.uid) data-name=(bar.name)
            data-outcome=(bar.outcome.as_str()) data-failure=[bar.failure.as_deref()] {
            title { (details(bar)) }
            a href=(pod_href(&bar.uid)) {
                rect.row x="0" y=(y) width=(LABEL_WIDTH + CHART_WIDTH + REASON_WIDTH) height=(ROW_HEIGHT) {}
                text.name x=(LABEL_WIDTH - 8.0) y=(y + ROW_HEIGHT - 6.0) text-anchor="end" { (bar.name) }
                @for segment in &bar.segments {
                    @let sx = x(segment.start);
                    @let sw = (x(segment.end) - sx).max(MIN_SEGMENT_WIDTH);
                    rect class=(format!("seg {}", segment.kind.as_str())) x=(sx) y=(bar_y)
                        width=(sw) height=(BAR_HEIGHT) rx="2" {}
                }
                @if bar.segments.is_empty() {
                    rect.seg.pending x=(x(bar.start)) y=(bar_y) width=(MIN_SEGMENT_WIDTH) height=(BAR_HEIGHT) {}
                }
                @if let Some(failure) = &bar.failure {
                    text.reason x=(end_x + 6.0) y=(y + ROW_HEIGHT - 6.0) { (failure) }
                }
            }
        }
    }
}

/// The hover text of a bar: name, phase and failure, each segment's length, exit codes.
pub(crate) fn details(bar: &Bar) -> String {
    let mut lines = vec![bar.name.clone()];
    let mut phase = format!("phase: {}", bar.phase.as_deref().unwrap_or("-"));
    if let Some(failure) = &bar.failure {
        phase.push_str(&format!(" ({failure})"));
    }
    lines.push(phase);
    for segment in &bar.segments {
        lines.push(format!(
            "{}: {}",
            segment.kind.as_str(),
            human(segment.end.duration_since(segment.start))
        ));
    }
    if !bar.exit_codes.is_empty() {
        let codes: Vec<String> = bar.exit_codes.iter().map(i32::to_string).collect();
        lines.push(format!("exit code: {}", codes.join(", ")));
    }
    lines.push(format!("created: {}", time(Some(bar.start))));
    lines.join("\n")
}
