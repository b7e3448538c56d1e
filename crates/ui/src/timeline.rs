//! A run's timeline as data: one [`Bar`] per pod, split into pending / pulling / running
//! [`Segment`]s from the times the recorder stored. Pure, so the SVG page and the JSON API
//! draw the same thing and tests can check it without a browser.
//!
//! Where each segment comes from:
//! - **pending**: created (`creationTimestamp`) until scheduled (`PodScheduled` true);
//! - **pulling**: scheduled until the first container started (image pull and container
//!   creation; a pod whose image never pulls stays here until it ends or is deleted);
//! - **running**: first container start until the pod finished (or was deleted, or now).

use jiff::{SignedDuration, Timestamp};
use podline_phase::Phase;
use podline_store::{ContainerState, PodRecord};
use serde::Serialize;

/// What part of a pod's life a segment shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentKind {
    /// Waiting to be scheduled.
    Pending,
    /// Scheduled; pulling the image and creating containers.
    Pulling,
    /// Containers running.
    Running,
}

impl SegmentKind {
    /// Lowercase name (CSS class, JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentKind::Pending => "pending",
            SegmentKind::Pulling => "pulling",
            SegmentKind::Running => "running",
        }
    }
}

/// How a pod ended (or where it is), which colours its bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Phase `Succeeded`.
    Succeeded,
    /// Phase `Failed`.
    Failed,
    /// Deleted before it finished (e.g. its image never pulled and the launcher gave up), or
    /// vanished while the recorder was not watching.
    Lost,
    /// Still running.
    Running,
    /// Still pending.
    Pending,
}

impl Outcome {
    /// Lowercase name (CSS class, JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Lost => "lost",
            Outcome::Running => "running",
            Outcome::Pending => "pending",
        }
    }

    /// What a pod's phase and deletion say about it.
    pub fn of(pod: &PodRecord) -> Self {
        match pod.phase.as_deref().and_then(Phase::parse) {
            Some(Phase::Succeeded) => Outcome::Succeeded,
            Some(Phase::Failed) => Outcome::Failed,
            _ if pod.deleted_at.is_some() => Outcome::Lost,
            Some(Phase::Running) => Outcome::Running,
            _ => Outcome::Pending,
        }
    }
}

/// One stretch of a pod's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// Which stretch.
    pub kind: SegmentKind,
    /// When it began.
    pub start: Timestamp,
    /// When it ended (now, for a pod still in it).
    pub end: Timestamp,
}

/// One pod's row in the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    /// Pod uid (links to the pod page).
    pub uid: String,
    /// Pod name.
    pub name: String,
    /// Latest phase.
    pub phase: Option<String>,
    /// How it ended, for the colour.
    pub outcome: Outcome,
    /// Why it failed, if it did (see `podline_store::classify_failure`).
    pub failure: Option<String>,
    /// Exit codes of its terminated containers, in spec order.
    pub exit_codes: Vec<i32>,
    /// Where the bar begins (creation).
    pub start: Timestamp,
    /// Where the bar ends.
    pub end: Timestamp,
    /// Its stretches, in time order, none empty.
    pub segments: Vec<Segment>,
}

/// A whole run's timeline: bars in creation order and the time span they cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// Earliest bar start (`None` with no bars).
    pub start: Option<Timestamp>,
    /// Latest bar end.
    pub end: Option<Timestamp>,
    /// One bar per pod, earliest created first.
    pub bars: Vec<Bar>,
}

impl Timeline {
    /// Builds the timeline of `pods`; pods still in progress extend to `now`.
    pub fn build(pods: &[PodRecord], now: Timestamp) -> Self {
        let mut bars: Vec<Bar> = pods.iter().map(|pod| bar(pod, now)).collect();
        bars.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.name.cmp(&b.name)));
        Timeline {
            start: bars.iter().map(|b| b.start).min(),
            end: bars.iter().map(|b| b.end).max(),
            bars,
        }
    }

    /// How long the run spans (zero with no bars).
    pub fn span(&self) -> SignedDuration {
        match (self.start, self.end) {
            (Some(start), Some(end)) => end.duration_since(start),
            _ => SignedDuration::ZERO,
        }
    }
}

/// The bar of one pod.
pub fn bar(pod: &PodRecord, now: Timestamp) -> Bar {
    let phase_at = |phase: Phase| {
        pod.transitions
            .iter()
            .find(|t| t.phase == phase.as_str())
            .map(|t| t.at)
    };
    let start = pod
        .created_at
        .or_else(|| pod.transitions.first().map(|t| t.at))
        .unwrap_or(pod.recorded_at);
    let outcome = Outcome::of(pod);
    let end = match outcome {
        Outcome::Succeeded | Outcome::Failed => pod
            .finished_at
            .or_else(|| phase_at(Phase::Succeeded))
            .or_else(|| phase_at(Phase::Failed))
            .or(pod.deleted_at)
            .unwrap_or(pod.updated_at),
        Outcome::Lost => pod.deleted_at.unwrap_or(pod.updated_at),
        Outcome::Running | Outcome::Pending => now,
    }
    .max(start);
    // The first container start, not `status.startTime` (which a real kubelet sets before
    // pulling images).
    let started = pod
        .containers
        .iter()
        .filter_map(|c| c.started_at)
        .min()
        .or_else(|| phase_at(Phase::Running))
        .or(pod.started_at)
        .map(|t| t.clamp(start, end));
    let scheduled = pod
        .scheduled_at
        .map(|t| t.clamp(start, started.unwrap_or(end)));

    // Kubernetes times have whole seconds. The furthest stage the pod reached always gets a
    // segment (drawn at the minimum width when it is shorter than a second), so a pod that ran
    // shows that it ran whichever second boundaries its life crossed; earlier stages are drawn
    // when they lasted.
    let mut stages = vec![(
        SegmentKind::Pending,
        start,
        scheduled.or(started).unwrap_or(end),
    )];
    if let Some(scheduled) = scheduled {
        stages.push((SegmentKind::Pulling, scheduled, started.unwrap_or(end)));
    }
    if let Some(started) = started {
        stages.push((SegmentKind::Running, started, end));
    }
    let last = stages.len() - 1;
    let segments: Vec<Segment> = stages
        .into_iter()
        .enumerate()
        .filter(|(i, (_, from, to))| *i == last || to > from)
        .map(|(_, (kind, start, end))| Segment { kind, start, end })
        .collect();
    Bar {
        uid: pod.uid.clone(),
        name: pod.name.clone(),
        phase: pod.phase.clone(),
        outcome,
        failure: podline_store::classify_failure(pod).map(|f| f.reason),
        exit_codes: pod
            .containers
            .iter()
            .filter(|c| c.state == Some(ContainerState::Terminated))
            .filter_map(|c| c.exit_code)
            .collect(),
        start,
        end,
        segments,
    }
}

/// A short human duration: `850ms`, `4.2s`, `3m05s`, `2h10m`.
pub fn human(d: SignedDuration) -> String {
    let ms = d.as_millis().max(0);
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        let s = ms / 1000;
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = ms / 60_000;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use podline_store::{ContainerObservation, PhaseTransition};

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + secs).unwrap()
    }

    fn pod(phase: &str) -> PodRecord {
        PodRecord {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            resource_version: 1,
            run: Some("r".into()),
            labels: Default::default(),
            annotations: Default::default(),
            owner: None,
            node: None,
            phase: Some(phase.into()),
            reason: None,
            message: None,
            created_at: Some(t(0)),
            scheduled_at: Some(t(1)),
            started_at: Some(t(1)),
            finished_at: None,
            deletion_requested_at: None,
            deleted_at: None,
            final_state_observed: true,
            recorded_at: t(0),
            updated_at: t(0),
            containers: vec![ContainerObservation {
                name: "main".into(),
                image: "busybox".into(),
                started_at: Some(t(3)),
                ..Default::default()
            }],
            transitions: vec![PhaseTransition::new("Pending", t(0))],
        }
    }

    fn kinds(bar: &Bar) -> Vec<(SegmentKind, i64, i64)> {
        bar.segments
            .iter()
            .map(|s| {
                (
                    s.kind,
                    s.start.duration_since(t(0)).as_secs(),
                    s.end.duration_since(t(0)).as_secs(),
                )
            })
            .collect()
    }

    #[test]
    fn a_finished_pod_should_have_pending_pulling_and_running_segments() {
        let mut p = pod("Succeeded");
        p.finished_at = Some(t(10));
        let b = bar(&p, t(100));
        assert_eq!(b.outcome, Outcome::Succeeded);
        assert_eq!(
            kinds(&b),
            [
                (SegmentKind::Pending, 0, 1),
                (SegmentKind::Pulling, 1, 3),
                (SegmentKind::Running, 3, 10)
            ],
            "the container start, not status.startTime, ends pulling"
        );
    }

    #[test]
    fn a_pod_that_lived_within_one_second_should_still_have_its_furthest_segment() {
        let mut p = pod("Failed");
        for field in [&mut p.scheduled_at, &mut p.started_at, &mut p.finished_at] {
            *field = Some(t(0));
        }
        p.containers[0].started_at = Some(t(0));
        let b = bar(&p, t(100));
        assert_eq!(kinds(&b), [(SegmentKind::Running, 0, 0)]);
    }

    #[test]
    fn a_pod_that_ran_within_one_second_after_a_long_pending_should_still_show_running() {
        // Created at 0, scheduled and started at 1, finished within second 1: the pending
        // stretch alone must not hide that the pod ran.
        let mut p = pod("Succeeded");
        p.scheduled_at = Some(t(1));
        p.started_at = Some(t(1));
        p.containers[0].started_at = Some(t(1));
        p.finished_at = Some(t(1));
        let b = bar(&p, t(100));
        assert_eq!(
            kinds(&b),
            [(SegmentKind::Pending, 0, 1), (SegmentKind::Running, 1, 1)]
        );
    }

    #[test]
    fn a_pod_in_progress_should_extend_to_now() {
        let b = bar(&pod("Running"), t(7));
        assert_eq!(b.outcome, Outcome::Running);
        assert_eq!(kinds(&b).last(), Some(&(SegmentKind::Running, 3, 7)));
    }

    #[test]
    fn a_pod_whose_image_never_pulled_should_end_pulling_at_its_deletion() {
        let mut p = pod("Pending");
        p.started_at = None;
        p.containers[0].started_at = None;
        p.deleted_at = Some(t(5));
        let b = bar(&p, t(100));
        assert_eq!(b.outcome, Outcome::Lost);
        assert_eq!(
            kinds(&b),
            [(SegmentKind::Pending, 0, 1), (SegmentKind::Pulling, 1, 5)]
        );
    }

    #[test]
    fn bars_should_be_in_creation_order_and_span_the_run() {
        let mut a = pod("Succeeded");
        a.name = "late".into();
        a.created_at = Some(t(5));
        a.finished_at = Some(t(20));
        let mut b = pod("Failed");
        b.finished_at = Some(t(4));
        let timeline = Timeline::build(&[a, b], t(100));
        let names: Vec<&str> = timeline.bars.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["p", "late"]);
        assert_eq!(timeline.span(), SignedDuration::from_secs(20));
        assert_eq!(timeline.bars[0].outcome, Outcome::Failed);
    }

    #[test]
    fn durations_should_read_naturally() {
        assert_eq!(human(SignedDuration::from_millis(850)), "850ms");
        assert_eq!(human(SignedDuration::from_millis(4_250)), "4.2s");
        assert_eq!(human(SignedDuration::from_secs(185)), "3m05s");
        assert_eq!(human(SignedDuration::from_secs(7_800)), "2h10m");
    }
}
