//! A launcher's proof of life: a `coordination.k8s.io/v1` Lease per namespace it launches in,
//! renewed every period, that owns the launcher's pods.
//!
//! Why: a `kill -9` of `podline run` (or the loss of its host) runs no cleanup, so without this
//! its pods would run on with nobody watching (Airflow's orphan-pod problem). With it, every pod
//! carries the label [`LAUNCHER_LABEL`]`=<lease name>` and an `ownerReference` to the Lease; a
//! reaper ([`crate::reaper`]) deletes a Lease that stopped being renewed, and the cluster's
//! garbage collector then deletes the pods it owns (the reaper also deletes the labelled pods
//! itself, for clusters whose collector is slow).
//!
//! The rules, chosen so that a kept pod is never collected:
//! - a pod of a task kept whatever happens ([`OnFinish::Keep`](crate::OnFinish::Keep)) gets the
//!   label and the [`ON_FINISH_ANNOTATION`] annotation but no `ownerReference`: neither the
//!   reaper nor the collector touches it;
//! - a pod the launcher decides to keep at the end (`delete-succeeded` after a failure) loses its
//!   `ownerReference` before the Lease goes ([`crate::Launcher`]'s clean-up);
//! - a task that will be retried (its launcher's [`LivenessConfig::with_keep_for_retry`]) has
//!   its Lease annotated [`KEEP_FOR_RETRY_ANNOTATION`]: the reaper deletes that Lease, and so its
//!   pods, only that long after it expired, so the retry can reattach to the pod; the retry's
//!   launcher then moves the pod to its own Lease, and the old one's reaping no longer touches it;
//! - on a clean exit the launcher deletes its Lease ([`Liveness::release`]) after its own
//!   clean-up, with background propagation: a pod whose delete failed is collected.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use podline_client::retry::{self, RetryPolicy};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{LaunchError, SpecError};

/// The label on a launcher's pods (and on its Leases) naming its Lease: how the reaper finds
/// the pods of a launcher that died.
pub const LAUNCHER_LABEL: &str = "podline.io/launcher";

/// The annotation a pod of a task kept whatever happens ([`OnFinish::Keep`](crate::OnFinish::Keep))
/// carries: the reaper leaves it alone.
pub const ON_FINISH_ANNOTATION: &str = "podline.io/on-finish";

/// Default Lease duration: how long a launcher may go without renewing before it counts as dead.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(10);

/// Default renewal period.
pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(3);

/// Longest Lease duration accepted (an hour: a longer one would let orphans live that long).
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(3600);

/// The annotation on a launcher's Lease saying how long, in whole seconds, its pods must
/// survive the launcher's death before a reaper deletes them: the time a retry of the task
/// (e.g. Airflow's next try, after its retry delay) needs to come and reattach to the pod. The
/// reaper counts it on its own clock, after the Lease expired ([`crate::reaper::Tracker`]).
pub const KEEP_FOR_RETRY_ANNOTATION: &str = "podline.io/keep-for-retry";

/// Longest keep-for-retry accepted (a day, Airflow's cap on a retry delay): a pod of a dead
/// launcher whose retry never comes lives at most this long past its Lease's expiry.
pub const MAX_KEEP_FOR_RETRY: Duration = Duration::from_secs(24 * 3600);

/// How long the Lease lives and how often it is renewed, checked against each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessConfig {
    duration: Duration,
    renew_every: Duration,
    keep_for_retry: Duration,
}

impl Default for LivenessConfig {
    fn default() -> Self {
        Self {
            duration: DEFAULT_LEASE_DURATION,
            renew_every: DEFAULT_RENEW_EVERY,
            keep_for_retry: Duration::ZERO,
        }
    }
}

impl LivenessConfig {
    /// A Lease of `duration` (whole seconds, 1 s to [`MAX_LEASE_DURATION`]: it is sent as
    /// `leaseDurationSeconds`) renewed every `renew_every` (100 ms to half the duration, so that
    /// one lost renewal does not expire it).
    pub fn new(duration: Duration, renew_every: Duration) -> Result<Self, SpecError> {
        if duration.subsec_nanos() != 0 || duration < Duration::from_secs(1) {
            return Err(SpecError::OutOfRange {
                flag: "lease duration",
                message: format!(
                    "{duration:?} is invalid (expected whole seconds from 1 to {})",
                    MAX_LEASE_DURATION.as_secs()
                ),
            });
        }
        if duration > MAX_LEASE_DURATION {
            return Err(SpecError::OutOfRange {
                flag: "lease duration",
                message: format!(
                    "{duration:?} is too long (at most {}s)",
                    MAX_LEASE_DURATION.as_secs()
                ),
            });
        }
        if renew_every < Duration::from_millis(100) || renew_every > duration / 2 {
            return Err(SpecError::OutOfRange {
                flag: "lease renewal period",
                message: format!(
                    "{renew_every:?} is invalid (expected from 100ms to half the lease duration, {:?})",
                    duration / 2
                ),
            });
        }
        Ok(Self {
            duration,
            renew_every,
            keep_for_retry: Duration::ZERO,
        })
    }

    /// This configuration, with the launcher's pods kept `keep` past its Lease's expiry (whole
    /// seconds, 0 to [`MAX_KEEP_FOR_RETRY`]; 0: reaped at expiry), for a retry of the task to
    /// reattach to them. Written on the Lease as [`KEEP_FOR_RETRY_ANNOTATION`].
    pub fn with_keep_for_retry(self, keep: Duration) -> Result<Self, SpecError> {
        if keep.subsec_nanos() != 0 || keep > MAX_KEEP_FOR_RETRY {
            return Err(SpecError::OutOfRange {
                flag: "keep for retry",
                message: format!(
                    "{keep:?} is invalid (expected whole seconds from 0 to {})",
                    MAX_KEEP_FOR_RETRY.as_secs()
                ),
            });
        }
        Ok(Self {
            keep_for_retry: keep,
            ..self
        })
    }

    /// How long the pods outlive the Lease's expiry for a retry (zero: not at all).
    pub fn keep_for_retry(&self) -> Duration {
        self.keep_for_retry
    }

    /// The Lease duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The renewal period.
    pub fn renew_every(&self) -> Duration {
        self.renew_every
    }

    fn duration_seconds(&self) -> i32 {
        // Bounded by MAX_LEASE_DURATION (3600) in `new`.
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// A launcher's Leases (one per namespace it launched in, created on first use), renewed in the
/// background until [`Liveness::release`]. Shared by every task of one `podline run`.
pub struct Liveness {
    client: kube::Client,
    name: String,
    identity: String,
    config: LivenessConfig,
    calls: RetryPolicy,
    /// Policy of the Lease's create (and the read after a 409): the pod create's, since no pod
    /// is created without it (issue 27: every call before the create gets its budget).
    create: RetryPolicy,
    /// Namespace -> the reference to the Lease there.
    leases: Arc<Mutex<BTreeMap<String, OwnerReference>>>,
    stop: CancellationToken,
    renewer: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Liveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Liveness")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Appended to the server's message when it refuses the Lease's create with 403.
const RBAC_HINT: &str = " (podline run needs create, get, patch and delete on \
    leases.coordination.k8s.io in the task's namespace: see deploy/README.md)";

/// How every launcher Lease's name starts: the reaper reaps no Lease without it.
pub const LEASE_NAME_PREFIX: &str = "podline-launcher-";

/// The Lease name of the launcher with this id: `podline-launcher-<id>` (the id is hex, so the
/// name is a valid object name; cut to 63 characters so it is a valid label value too).
pub fn lease_name(launch_id: &str) -> String {
    let mut name = format!("{LEASE_NAME_PREFIX}{launch_id}");
    name.truncate(63);
    name
}

impl Liveness {
    /// Starts the renewal loop; Leases are created by [`Liveness::owner_in`] on `create` (the
    /// pod create's policy), and deleted on `calls`. `identity` becomes the Lease's
    /// `holderIdentity` (who holds it: host and process, for people reading it).
    pub fn start(
        client: kube::Client,
        launch_id: &str,
        identity: impl Into<String>,
        config: LivenessConfig,
        calls: RetryPolicy,
        create: RetryPolicy,
    ) -> Arc<Self> {
        let live = Arc::new(Self {
            client,
            name: lease_name(launch_id),
            identity: identity.into(),
            config,
            calls,
            create,
            leases: Arc::default(),
            stop: CancellationToken::new(),
            renewer: std::sync::Mutex::new(None),
        });
        let task = tokio::spawn(renew_loop(
            live.client.clone(),
            live.name.clone(),
            live.identity.clone(),
            config,
            live.leases.clone(),
            live.stop.clone(),
        ));
        if let Ok(mut slot) = live.renewer.lock() {
            *slot = Some(task);
        }
        live
    }

    /// The Lease name (the value of [`LAUNCHER_LABEL`] on the pods).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration in use.
    pub fn config(&self) -> LivenessConfig {
        self.config
    }

    /// The `ownerReference` to this launcher's Lease in `namespace`, creating the Lease first if
    /// this is the first pod there. An error here fails the task before its pod is created: a
    /// pod without a living owner would not be protected.
    pub async fn owner_in(&self, namespace: &str) -> Result<OwnerReference, LaunchError> {
        let mut leases = self.leases.lock().await;
        if let Some(owner) = leases.get(namespace) {
            return Ok(owner.clone());
        }
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([(
                    LAUNCHER_LABEL.to_owned(),
                    self.name.clone(),
                )])),
                annotations: (!self.config.keep_for_retry.is_zero()).then(|| {
                    BTreeMap::from([(
                        KEEP_FOR_RETRY_ANNOTATION.to_owned(),
                        self.config.keep_for_retry.as_secs().to_string(),
                    )])
                }),
                ..ObjectMeta::default()
            },
            spec: Some(spec(&self.identity, self.config, jiff::Timestamp::now())),
        };
        let post = PostParams::default();
        let created = retry::retry(&self.create, "create the launcher's Lease", || {
            api.create(&post, &lease)
        })
        .await;
        let created = match created {
            Ok(created) => created,
            // A retried create that went through the first time: take the Lease as it is.
            Err(err) if retry::status_code(&err) == Some(409) => {
                retry::retry(&self.create, "read the launcher's Lease", || {
                    api.get(&self.name)
                })
                .await
                .map_err(|source| LaunchError::Api {
                    action: "reading the launcher's Lease",
                    source,
                })?
            }
            // Refused (a missing namespace, no RBAC on leases, 422): as a refused pod create
            // would be (exit 3, the server's message, which names the Lease); a 403 also says
            // which rights the launcher needs (that hint belongs to 403s only).
            Err(kube::Error::Api(status)) if status.code == 403 => {
                let mut refused = crate::create::rejected(kube::Error::Api(status));
                if let LaunchError::CreateRejected { message, .. } = &mut refused {
                    message.push_str(RBAC_HINT);
                }
                return Err(refused);
            }
            Err(err @ kube::Error::Api(_)) => return Err(crate::create::rejected(err)),
            Err(source) => {
                return Err(LaunchError::Api {
                    action: "creating the launcher's Lease",
                    source,
                });
            }
        };
        let owner = OwnerReference {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            name: self.name.clone(),
            uid: created.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(false),
            controller: Some(false),
        };
        tracing::debug!(lease = %self.name, namespace, "launcher Lease created");
        leases.insert(namespace.to_owned(), owner.clone());
        Ok(owner)
    }

    /// Whether this launcher's Lease in `namespace` expired or vanished: it made one there, and
    /// the Lease is gone (404) or is another object of the same name (another uid). A reaper
    /// deletes the Lease before the pods, so once the pods are deleted this is already true.
    /// `None` when this launcher has no Lease there or the API could not tell.
    pub async fn lost_in(&self, namespace: &str) -> Option<String> {
        let uid = self.leases.lock().await.get(namespace)?.uid.clone();
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        let found = retry::retry(&self.calls, "read the launcher's Lease", || {
            api.get_opt(&self.name)
        })
        .await
        .ok()?;
        let lost = found.is_none_or(|lease| lease.metadata.uid.as_deref() != Some(uid.as_str()));
        lost.then(|| format!("{namespace}/{}", self.name))
    }

    /// Stops renewing and deletes the Leases (background propagation: what the launcher's own
    /// clean-up left behind and still owns is collected). Called on a clean exit, after every
    /// task's clean-up. Errors are logged: an undeleted Lease expires and is reaped.
    pub async fn release(&self) {
        self.stop.cancel();
        let task = self.renewer.lock().ok().and_then(|mut slot| slot.take());
        if let Some(task) = task {
            let _ = task.await;
        }
        let leases = std::mem::take(&mut *self.leases.lock().await);
        for namespace in leases.keys() {
            let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
            let params = DeleteParams::background();
            let deleted = retry::retry(&self.calls, "delete the launcher's Lease", || {
                api.delete(&self.name, &params)
            })
            .await;
            match deleted {
                Ok(_) => tracing::debug!(lease = %self.name, namespace, "launcher Lease deleted"),
                Err(err) if retry::status_code(&err) == Some(404) => {}
                Err(err) => tracing::warn!(lease = %self.name, namespace, error = %err,
                    "could not delete the launcher's Lease; a reaper will once it expires"),
            }
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // Without a release (a panic unwinding past it), renewal stops: the Lease expires and
        // the reaper collects the pods.
        self.stop.cancel();
    }
}

/// The Lease's spec at `now`.
fn spec(identity: &str, config: LivenessConfig, now: jiff::Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(config.duration_seconds()),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..LeaseSpec::default()
    }
}

/// Renews every Lease once a period (a merge patch of `renewTime`) until stopped. A failed
/// renewal is logged and retried next period; a Lease that was deleted (404: reaped after the
/// launcher lost the API server for longer than its duration) is not recreated, since its pods
/// are being collected.
async fn renew_loop(
    client: kube::Client,
    name: String,
    identity: String,
    config: LivenessConfig,
    leases: Arc<Mutex<BTreeMap<String, OwnerReference>>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(config.renew_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let namespaces: Vec<String> = leases.lock().await.keys().cloned().collect();
        for namespace in namespaces {
            let api: Api<Lease> = Api::namespaced(client.clone(), &namespace);
            let patch = serde_json::json!({
                "spec": {
                    "holderIdentity": identity,
                    "renewTime": MicroTime(jiff::Timestamp::now()),
                }
            });
            let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
            let renewed = tokio::select! {
                r = tokio::time::timeout(config.renew_every, api.patch(&name, &params, &patch)) => r,
                () = stop.cancelled() => return,
            };
            match renewed {
                Ok(Ok(_)) => tracing::trace!(lease = %name, namespace, "launcher Lease renewed"),
                Ok(Err(err)) if retry::status_code(&err) == Some(404) => {
                    tracing::error!(lease = %name, namespace,
                        "the launcher's Lease is gone (reaped?): its pods are being deleted");
                }
                Ok(Err(err)) => {
                    tracing::warn!(lease = %name, namespace, error = %err, "could not renew the launcher's Lease")
                }
                Err(_) => {
                    tracing::warn!(lease = %name, namespace, "renewing the launcher's Lease timed out")
                }
            }
        }
    }
}

/// Who holds a liveness Lease, for people reading it: `ROLE/HOST/PID` (e.g. `podline-run/...`
/// or `podline-triggerer/...`). One spelling for every kind of holder, so `kubectl get lease`
/// tells which process on which host owns a pod.
pub fn holder_identity(role: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "unknown-host".to_owned()
    } else {
        host
    };
    format!("{role}/{host}/{}", std::process::id())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_should_be_bounded_and_consistent() {
        let ok = LivenessConfig::new(Duration::from_secs(10), Duration::from_secs(3)).unwrap();
        assert_eq!(ok, LivenessConfig::default());
        for (d, r, named) in [
            (0, 100, "lease duration"),
            (3601, 1000, "lease duration"),
            (10, 6000, "renewal"),
            (10, 50, "renewal"),
        ] {
            let err = LivenessConfig::new(Duration::from_secs(d), Duration::from_millis(r))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{d} {r}: {err}");
        }
        assert!(
            LivenessConfig::new(Duration::from_millis(1500), Duration::from_millis(500)).is_err()
        );
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(ok.with_keep_for_retry(day).unwrap().keep_for_retry(), day);
        assert_eq!(ok.keep_for_retry(), Duration::ZERO);
        for bad in [day + Duration::from_secs(1), Duration::from_millis(1500)] {
            let err = ok.with_keep_for_retry(bad).unwrap_err().to_string();
            assert!(err.contains("keep for retry"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_lease_name_should_be_a_valid_label_value() {
        assert_eq!(lease_name("abc123"), "podline-launcher-abc123");
        assert_eq!(lease_name(&"a".repeat(100)).len(), 63);
    }
}
