//! The release ticket: a pod whose finalizer may come off once the store committed the batch it
//! rides in, and why. The queue carries tickets behind observations and the finalizer worker
//! carries them out, so the ticket is defined apart from both (neither depends on the other
//! through it).

use kube::core::ObjectMeta;

/// Why a pod is released; also the `reason` label of the removal metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReleaseReason {
    /// Being deleted in a terminal phase.
    Terminal,
    /// Being deleted without ever being bound to a node.
    NeverRan,
    /// Being deleted with grace period 0 (the kubelet's final delete, or a forced one).
    Stopped,
    /// Being deleted past its grace period plus the margin without a final state (safety valve).
    Overdue,
    /// Outside the recorder's scope (its selector does not match): it will not be recorded.
    OutOfScope,
}

impl ReleaseReason {
    /// The stable metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::Terminal => "terminal",
            ReleaseReason::NeverRan => "never_ran",
            ReleaseReason::Stopped => "stopped",
            ReleaseReason::Overdue => "overdue",
            ReleaseReason::OutOfScope => "out_of_scope",
        }
    }
}

/// A pod whose finalizer is to be removed, and why.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    /// The pod as last seen: namespace, name, uid, finalizer list, resourceVersion.
    pub meta: ObjectMeta,
    /// Why it is released (the metric label).
    pub reason: ReleaseReason,
}

impl Ticket {
    /// A ticket for the pod `meta` describes, keeping only what the removal needs.
    pub fn new(meta: &ObjectMeta, reason: ReleaseReason) -> Self {
        Self {
            meta: slim(meta),
            reason,
        }
    }

    /// The pod's uid (the key of every per-pod map), empty if it has none.
    pub fn uid(&self) -> &str {
        self.meta.uid.as_deref().unwrap_or_default()
    }
}

/// The identity, finalizers and version of a pod: what an add or a removal patch needs.
pub(crate) fn slim(meta: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        finalizers: meta.finalizers.clone(),
        deletion_timestamp: meta.deletion_timestamp.clone(),
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// The finalizer worker decides a grace-0 release ([`ReleaseReason::Stopped`]) from the
    /// slim metadata alone: without `deletionGracePeriodSeconds` such a pod would wait for the
    /// safety valve.
    #[test]
    fn slim_keeps_what_a_release_decision_and_a_patch_need_and_nothing_else() {
        let full = ObjectMeta {
            namespace: Some("ns".to_owned()),
            name: Some("p".to_owned()),
            uid: Some("u".to_owned()),
            resource_version: Some("7".to_owned()),
            finalizers: Some(vec!["podline.io/record".to_owned()]),
            deletion_timestamp: Some(Time(jiff::Timestamp::UNIX_EPOCH)),
            deletion_grace_period_seconds: Some(0),
            labels: Some([("a".to_owned(), "b".to_owned())].into()),
            annotations: Some([("big".to_owned(), "x".repeat(1000))].into()),
            generate_name: Some("p-".to_owned()),
            ..ObjectMeta::default()
        };
        let kept = slim(&full);
        assert_eq!(kept.deletion_grace_period_seconds, Some(0));
        assert_eq!(kept.deletion_timestamp, full.deletion_timestamp);
        assert_eq!(kept.finalizers, full.finalizers);
        assert_eq!(
            (
                kept.namespace.as_deref(),
                kept.name.as_deref(),
                kept.uid.as_deref()
            ),
            (Some("ns"), Some("p"), Some("u"))
        );
        assert_eq!(kept.resource_version.as_deref(), Some("7"));
        assert!(
            kept.labels.is_none() && kept.annotations.is_none() && kept.generate_name.is_none()
        );
        assert_eq!(Ticket::new(&full, ReleaseReason::Stopped).uid(), "u");
    }
}
