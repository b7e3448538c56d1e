//! The faults the demo injects through the sim: a create storm and log resets for the whole
//! demo, and one kind of watch trouble per round.

use std::time::Duration;

use podline_sim::{FaultAction, FaultPlan, FaultRule, FaultVerb, Sim};

use super::schedule::Round;

/// Faults on every create for the whole demo: quota-style 409 Conflicts (30%), 429 with
/// Retry-After (5%), and resets of log streams (10%).
pub fn create_faults(no_faults: bool) -> FaultPlan {
    let mut plan = FaultPlan::default();
    if no_faults {
        return plan;
    }
    plan.rules.push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods")
            .probability(0.3),
    );
    plan.rules.push(
        FaultRule::new(FaultAction::Status {
            code: 429,
            reason: None,
            message: None,
            retry_after: Some(1),
        })
        .verb(FaultVerb::Create)
        .resource("pods")
        .probability(0.05),
    );
    plan.rules.push(
        FaultRule::new(FaultAction::Reset {
            after_bytes: None,
            after_events: Some(1),
        })
        .verb(FaultVerb::Log)
        .probability(0.1),
    );
    plan
}

/// The watch fault of a launching round (none for the others), printed as it is injected.
pub async fn inject_round_fault(sim: &Sim, kind: Round) {
    let faults = sim.faults();
    match kind {
        Round::Freeze => {
            println!(
                "fault:    the recorder's connection freezes (a frozen proxy: HTTP/2 PING notices it)"
            );
            faults.push(
                recorder_watch(FaultAction::Freeze {
                    after_ms: Some(300),
                })
                .times(1),
            );
        }
        Round::Resets => {
            println!("fault:    watch streams reset mid-chunk, twice");
            faults.push(
                recorder_watch(FaultAction::Reset {
                    after_bytes: None,
                    after_events: Some(20),
                })
                .times(2),
            );
        }
        Round::Restart => {
            println!(
                "fault:    API server restart (2 s down); its watch history is compacted during the outage"
            );
            let restarting = {
                let sim = sim.clone();
                tokio::spawn(async move { sim.restart(Duration::from_secs(2)).await })
            };
            // The kubelet keeps working while the API is down, so history moves on; compacting
            // it now makes the recorder's resume point too old: 410 Expired, re-list, reconcile.
            tokio::time::sleep(Duration::from_secs(1)).await;
            sim.compact();
            let _ = restarting.await;
        }
        Round::EndEarly => {
            println!(
                "fault:    watch ends early (like a server timeout) and LISTs answer 503 once"
            );
            faults.push(recorder_watch(FaultAction::EndEarly { after_events: 10 }).times(3));
            faults.push(
                FaultRule::new(FaultAction::status(503))
                    .verb(FaultVerb::List)
                    .resource("pods")
                    .times(1),
            );
        }
        Round::Plain | Round::KillLauncher | Round::RecorderOutage => {}
    }
}

/// A rule on the recorder's watch only: the all-namespaces pod watch (the launcher's own
/// per-pod watches are namespaced and not matched).
fn recorder_watch(action: FaultAction) -> FaultRule {
    FaultRule::new(action)
        .verb(FaultVerb::Watch)
        .resource("pods")
        .namespace("")
}
