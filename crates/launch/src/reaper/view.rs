//! What the reaper reads of a Lease and of a pod: which Leases are podline's launchers' (the
//! only ones it may delete) and which pods such a Lease's launcher made (the only ones it may
//! delete with it).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;

use crate::liveness::{
    KEEP_FOR_RETRY_ANNOTATION, LAUNCHER_LABEL, LEASE_NAME_PREFIX, MAX_KEEP_FOR_RETRY,
    MAX_LEASE_DURATION, ON_FINISH_ANNOTATION,
};

/// What the reaper needs to know of one launcher Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// Its namespace.
    pub namespace: String,
    /// Its name (the value of [`LAUNCHER_LABEL`] on its pods).
    pub name: String,
    /// Its `uid`: the pods its launcher made carry an `ownerReference` to it.
    pub uid: String,
    /// Its `resourceVersion`: any write (a renewal) changes it.
    pub resource_version: String,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// How long past its expiry the Lease (and so its pods) is kept for a retry of the task to
    /// reattach ([`KEEP_FOR_RETRY_ANNOTATION`]; zero without it).
    pub keep_for_retry: Duration,
}

impl LeaseView {
    /// The view of a listed Lease if podline's launcher made it ([`crate::Liveness`]): named
    /// `podline-launcher-…`, labelled [`LAUNCHER_LABEL`] with its own name, with a uid, a
    /// `leaseDurationSeconds` from 1 s to [`MAX_LEASE_DURATION`], a `holderIdentity` and a
    /// `renewTime` (present, as the launcher always writes them; the time itself is never read),
    /// and, if annotated [`KEEP_FOR_RETRY_ANNOTATION`], whole seconds up to
    /// [`MAX_KEEP_FOR_RETRY`] there. Any other Lease carrying the label (someone else's, or hand-made) is none of the
    /// reaper's business: `None`.
    pub fn of_launcher(lease: &Lease) -> Option<Self> {
        let meta = &lease.metadata;
        let name = meta.name.as_deref()?;
        let labelled = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(LAUNCHER_LABEL))
            .is_some_and(|value| value == name);
        if !name.starts_with(LEASE_NAME_PREFIX) || !labelled {
            return None;
        }
        let spec = lease.spec.as_ref()?;
        spec.holder_identity.as_ref()?;
        spec.renew_time.as_ref()?;
        let seconds = spec.lease_duration_seconds?;
        let duration = Duration::from_secs(u64::try_from(seconds).ok()?);
        if duration.is_zero() || duration > MAX_LEASE_DURATION {
            return None;
        }
        let keep_for_retry = match meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(KEEP_FOR_RETRY_ANNOTATION))
        {
            None => Duration::ZERO,
            Some(text) => Some(Duration::from_secs(text.parse::<u64>().ok()?))
                .filter(|keep| *keep <= MAX_KEEP_FOR_RETRY)?,
        };
        Some(Self {
            namespace: meta.namespace.clone()?,
            name: name.to_owned(),
            uid: meta.uid.clone().filter(|u| !u.is_empty())?,
            resource_version: meta.resource_version.clone()?,
            duration,
            keep_for_retry,
        })
    }

    /// `namespace/name`, as reports name it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// What the reaper does with one pod labelled with a dead launcher's Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodVerdict {
    /// Made by that launcher and owned by its Lease: deleted.
    Delete,
    /// Its task keeps it whatever happens ([`ON_FINISH_ANNOTATION`]` = keep`): left alone.
    Kept,
    /// Not owned by this Lease (someone else's pod with the label, a pod another launcher
    /// took over, or one already being deleted): left alone.
    NotOurs,
}

/// Whether the reaper deletes `pod`, labelled with the Lease `lease` of a dead launcher: only
/// a pod that Lease owns (an `ownerReference` to its uid, as the launcher sets at the create)
/// and not already being deleted.
pub fn judge_pod(pod: &Pod, lease: &LeaseView) -> PodVerdict {
    let meta = &pod.metadata;
    let keep = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(ON_FINISH_ANNOTATION))
        .is_some_and(|v| v == "keep");
    if keep {
        return PodVerdict::Kept;
    }
    let owned = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Lease" && o.uid == lease.uid);
    if owned && meta.deletion_timestamp.is_none() {
        PodVerdict::Delete
    } else {
        PodVerdict::NotOurs
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
    use std::collections::BTreeMap;

    fn lease(name: &str, label: Option<&str>, seconds: Option<i32>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                resource_version: Some("7".into()),
                labels: label.map(|v| BTreeMap::from([(LAUNCHER_LABEL.to_owned(), v.to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                lease_duration_seconds: seconds,
                holder_identity: Some("host/1".into()),
                renew_time: Some(MicroTime(jiff::Timestamp::UNIX_EPOCH)),
                ..LeaseSpec::default()
            }),
        }
    }

    fn keep(name: &str, seconds: &str) -> Lease {
        let mut l = lease(name, Some(name), Some(10));
        l.metadata.annotations = Some(BTreeMap::from([(
            KEEP_FOR_RETRY_ANNOTATION.to_owned(),
            seconds.to_owned(),
        )]));
        l
    }

    /// Only Leases shaped as podline's launcher makes them are the reaper's.
    #[test]
    fn only_podline_launcher_leases_should_be_viewed() {
        let ours = "podline-launcher-abc";
        let view = LeaseView::of_launcher(&lease(ours, Some(ours), Some(10))).unwrap();
        assert_eq!(view.duration, Duration::from_secs(10));
        assert_eq!(view.keep_for_retry, Duration::ZERO);
        let kept = LeaseView::of_launcher(&keep(ours, "300")).unwrap();
        assert_eq!(kept.keep_for_retry, Duration::from_secs(300));
        assert_eq!(view.key(), "ns/podline-launcher-abc");
        for (what, l) in [
            (
                "another name",
                lease("someone-else", Some("someone-else"), Some(10)),
            ),
            (
                "a label naming another Lease",
                lease(ours, Some("x"), Some(10)),
            ),
            ("no label", lease(ours, None, Some(10))),
            ("no duration", lease(ours, Some(ours), None)),
            ("a zero duration", lease(ours, Some(ours), Some(0))),
            ("a negative duration", lease(ours, Some(ours), Some(-5))),
            (
                "a duration over podline's bound",
                lease(ours, Some(ours), Some(3601)),
            ),
            ("no renewTime", {
                let mut l = lease(ours, Some(ours), Some(10));
                l.spec.as_mut().unwrap().renew_time = None;
                l
            }),
            ("no holderIdentity", {
                let mut l = lease(ours, Some(ours), Some(10));
                l.spec.as_mut().unwrap().holder_identity = None;
                l
            }),
            ("a keep-for-retry that is not seconds", keep(ours, "5m")),
            ("a keep-for-retry over podline's bound", keep(ours, "86401")),
            ("a negative keep-for-retry", keep(ours, "-1")),
        ] {
            assert_eq!(LeaseView::of_launcher(&l), None, "{what}");
        }
    }

    /// Only pods the Lease owns are deleted; kept ones and foreign ones are left alone.
    #[test]
    fn only_pods_the_lease_owns_should_be_deleted() {
        let ours = "podline-launcher-abc";
        let view = LeaseView::of_launcher(&lease(ours, Some(ours), Some(10))).unwrap();
        let pod = |uid: Option<&str>, keep: bool| Pod {
            metadata: ObjectMeta {
                owner_references: uid.map(|uid| {
                    vec![OwnerReference {
                        api_version: "coordination.k8s.io/v1".into(),
                        kind: "Lease".into(),
                        name: ours.into(),
                        uid: uid.into(),
                        ..OwnerReference::default()
                    }]
                }),
                annotations: keep.then(|| {
                    BTreeMap::from([(ON_FINISH_ANNOTATION.to_owned(), "keep".to_owned())])
                }),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        assert_eq!(
            judge_pod(&pod(Some("u-1"), false), &view),
            PodVerdict::Delete
        );
        assert_eq!(judge_pod(&pod(None, true), &view), PodVerdict::Kept);
        assert_eq!(judge_pod(&pod(None, false), &view), PodVerdict::NotOurs);
        assert_eq!(
            judge_pod(&pod(Some("u-other"), false), &view),
            PodVerdict::NotOurs
        );
        let mut deleting = pod(Some("u-1"), false);
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_eq!(judge_pod(&deleting, &view), PodVerdict::NotOurs);
    }
}
