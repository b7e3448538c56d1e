//! podline's pod finalizer: put on a pod so that the API server keeps the deleted pod (in
//! Terminating, with its final state) until a recorder has committed that state, then taken off.
//!
//! Kubernetes' Job controller does the same with `batch.kubernetes.io/job-tracking`: a pod cannot
//! disappear before its controller has counted it. Both helpers are careful writes:
//!
//! - [`add`] adds [`RECORD_FINALIZER`] only when it is absent and never to a pod being deleted
//!   (kube-apiserver refuses new finalizers on an object with a deletionTimestamp). The JSON patch
//!   tests the pod's uid (a pod re-created under the same name is another pod) and the finalizer
//!   list it read (or, when the pod has none, its resourceVersion), so a concurrent change makes the
//!   patch fail (422) and the pod is read again instead of a list being overwritten.
//! - [`remove`] takes the finalizer off with a JSON patch that tests the uid and the array
//!   element before removing it, so it never removes another entry that moved into its place; a
//!   failed test re-reads the pod and tries again. A pod that is gone (404, or another uid under
//!   the name) counts as done.
//!
//! Transient failures (5xx, 429, timeouts, connection errors) are returned, classified by
//! [`crate::retry::classify`] through [`FinalizerError::disposition`], for the caller to retry on
//! its own schedule: the recorder retries removals in the background, `gc` in its pass.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::ObjectMeta;
use serde_json::{Value, json};

use crate::retry::{Disposition, Reason, classify};

/// The finalizer podline's recorder owns: a pod carrying it is not removed from the API until the
/// recorder has committed its final state and taken the finalizer off. An unsharded recorder
/// holds pods with it, and the launcher, asked to hold its pod, puts it on at create (a launcher cannot know
/// which shard will record the pod); a sharded recorder takes it off the pods of its own scope
/// together with its own [`shard_finalizer`].
pub const RECORD_FINALIZER: &str = "podline.io/record";

/// What a sharded recorder's finalizer starts with: `podline.io/record-<shard>` (see
/// [`shard_finalizer`]), so a human reading a pod sees whose it is, and the
/// uninstall clean-up recognises every recorder's ([`is_recorder_finalizer`]).
pub const SHARD_FINALIZER_PREFIX: &str = "podline.io/record-";

/// The longest shard name: a finalizer is a qualified name whose part after the `/` has at most
/// 63 characters (apimachinery's `IsQualifiedName`), and `record-` takes 7 of them.
pub const MAX_SHARD_NAME: usize = 56;

/// A shard name that cannot name a finalizer (or the shard's Lease).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid shard name {name:?}: {problem} (expected 1 to 56 lowercase letters, digits and \
     '-', starting and ending with a letter or digit, e.g. team-a)"
)]
pub struct ShardNameError {
    /// The name given.
    pub name: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Checks a shard name: a DNS label (RFC 1123) of at most [`MAX_SHARD_NAME`] characters, so that
/// both `podline.io/record-<shard>` (a qualified name) and a Lease named after it are valid.
pub fn check_shard_name(shard: &str) -> Result<(), ShardNameError> {
    let problem = if shard.is_empty() {
        Some("it is empty")
    } else if shard.len() > MAX_SHARD_NAME {
        Some("it is longer than 56 characters")
    } else if !shard
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("it has a character other than a lowercase letter, a digit or '-'")
    } else if shard.starts_with('-') || shard.ends_with('-') {
        Some("it starts or ends with '-'")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(ShardNameError {
            name: shard.to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

/// The finalizer of the recorder shard `shard`: `podline.io/record-<shard>`. Each shard holds
/// the pods it records with its own, so no shard's start-up sweep can release another's pods.
pub fn shard_finalizer(shard: &str) -> Result<String, ShardNameError> {
    check_shard_name(shard)?;
    Ok(format!("{SHARD_FINALIZER_PREFIX}{shard}"))
}

/// Whether `finalizer` is one of podline's SQL recorders' ([`RECORD_FINALIZER`] or a
/// [`shard_finalizer`]): what the uninstall clean-up removes (with KFP mode's).
pub fn is_recorder_finalizer(finalizer: &str) -> bool {
    finalizer == RECORD_FINALIZER
        || finalizer
            .strip_prefix(SHARD_FINALIZER_PREFIX)
            .is_some_and(|shard| check_shard_name(shard).is_ok())
}

/// How many times a patch whose test failed (the pod changed meanwhile) is re-read and tried
/// again before the helper gives up with [`FinalizerError::Contended`].
const MAX_ATTEMPTS: u32 = 5;

/// Whether `meta` lists `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .iter()
        .flatten()
        .any(|f| f.as_str() == finalizer)
}

/// What [`add`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The finalizer was added.
    Added,
    /// The pod already carried it: nothing was written.
    Present,
    /// The pod is being deleted (deletionTimestamp set): no finalizer may be added any more.
    BeingDeleted,
    /// The pod is gone (404, or the name now belongs to another pod).
    Gone,
}

/// What [`remove`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// The finalizer was removed.
    Removed,
    /// The pod did not carry it: nothing was written.
    Absent,
    /// The pod is gone (404, or the name now belongs to another pod): nothing left to release.
    Gone,
}

/// Which write failed, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// [`add`].
    Add,
    /// [`remove`].
    Remove,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Add => "add",
            Operation::Remove => "remove",
        })
    }
}

/// Why a finalizer could not be added or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizerError {
    /// The pod's metadata names no namespace or no name, so there is nothing to patch.
    #[error("cannot {operation} finalizer {finalizer}: the pod has no namespace or name")]
    Unnamed {
        /// The write that was asked for.
        operation: Operation,
        /// The finalizer.
        finalizer: String,
    },
    /// The API server refused or failed a read or a patch.
    #[error("cannot {operation} finalizer {finalizer} on pod {namespace}/{name}")]
    Api {
        /// The write that was asked for.
        operation: Operation,
        /// The finalizer.
        finalizer: String,
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The API error (classify it with [`FinalizerError::disposition`]).
        #[source]
        source: Box<kube::Error>,
    },
    /// The pod changed between each read and patch, five times in a row.
    #[error(
        "cannot {operation} finalizer {finalizer} on pod {namespace}/{name}: it changed during each of {attempts} attempts"
    )]
    Contended {
        /// The write that was asked for.
        operation: Operation,
        /// The finalizer.
        finalizer: String,
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// How many patches were tried.
        attempts: u32,
    },
}

impl FinalizerError {
    /// What a caller should do about it, by the client's retry classification: API errors as
    /// [`classify`] says, contention is a retryable conflict, an unnamed pod is fatal.
    pub fn disposition(&self) -> Disposition {
        match self {
            FinalizerError::Api { source, .. } => classify(source),
            FinalizerError::Contended { .. } => Disposition::Retry {
                reason: Reason::Conflict,
                retry_after: None,
            },
            FinalizerError::Unnamed { .. } => Disposition::Fatal {
                reason: Reason::BadRequest,
            },
        }
    }

    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.disposition().is_retryable()
    }
}

/// So [`retry`](crate::retry::retry) can repeat a whole [`add`] or [`remove`].
impl crate::retry::Classify for FinalizerError {
    fn disposition(&self) -> Disposition {
        FinalizerError::disposition(self)
    }
    fn status_code(&self) -> Option<u16> {
        match self {
            FinalizerError::Api { source, .. } => crate::retry::status_code(source),
            _ => None,
        }
    }
}

/// The pod a helper works on: where it is, and which incarnation (uid) it meant.
struct Target<'a> {
    api: Api<Pod>,
    namespace: &'a str,
    name: &'a str,
    uid: Option<&'a str>,
    finalizer: &'a str,
    operation: Operation,
}

impl<'a> Target<'a> {
    fn new(
        client: &kube::Client,
        meta: &'a ObjectMeta,
        finalizer: &'a str,
        operation: Operation,
    ) -> Result<Self, FinalizerError> {
        let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref())
        else {
            return Err(FinalizerError::Unnamed {
                operation,
                finalizer: finalizer.to_owned(),
            });
        };
        Ok(Self {
            api: Api::namespaced(client.clone(), namespace),
            namespace,
            name,
            uid: meta.uid.as_deref(),
            finalizer,
            operation,
        })
    }

    fn api_error(&self, source: kube::Error) -> FinalizerError {
        FinalizerError::Api {
            operation: self.operation,
            finalizer: self.finalizer.to_owned(),
            namespace: self.namespace.to_owned(),
            name: self.name.to_owned(),
            source: Box::new(source),
        }
    }

    fn contended(&self, attempts: u32) -> FinalizerError {
        FinalizerError::Contended {
            operation: self.operation,
            finalizer: self.finalizer.to_owned(),
            namespace: self.namespace.to_owned(),
            name: self.name.to_owned(),
            attempts,
        }
    }

    /// Whether `meta` is another pod than the one we were given (re-created under the name).
    fn is_other_pod(&self, meta: &ObjectMeta) -> bool {
        self.uid.is_some() && meta.uid.as_deref() != self.uid
    }

    /// Reads the pod again; `None` when it is gone.
    async fn reread(&self) -> Result<Option<ObjectMeta>, FinalizerError> {
        match self.api.get_metadata_opt(self.name).await {
            Ok(Some(pod)) if !self.is_other_pod(&pod.metadata) => Ok(Some(pod.metadata)),
            Ok(_) => Ok(None),
            Err(e) => Err(self.api_error(e)),
        }
    }

    /// Sends a JSON patch: applied, stale (its test failed or the write conflicted: 422, 409),
    /// or gone (404).
    async fn patch(&self, ops: Vec<Value>) -> Result<Patched, FinalizerError> {
        // The variant's type (kube's own json-patch) is inferred: no second copy of that crate.
        let patch = match serde_json::from_value(Value::Array(ops)) {
            Ok(patch) => Patch::Json::<()>(patch),
            // Not reached: the operations are built from literal shapes above.
            Err(e) => return Err(self.api_error(kube::Error::SerdeError(e))),
        };
        match self
            .api
            .patch(self.name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => Ok(Patched::Applied),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Patched::Gone),
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => {
                Ok(Patched::Stale)
            }
            Err(e) => Err(self.api_error(e)),
        }
    }

    /// The test that the document is still the pod we mean (absent when we know no uid).
    fn uid_test(&self) -> Option<Value> {
        self.uid
            .map(|uid| json!({ "op": "test", "path": "/metadata/uid", "value": uid }))
    }
}

/// What one patch did.
enum Patched {
    Applied,
    /// Its test failed or it conflicted: the pod changed since it was read.
    Stale,
    Gone,
}

/// Adds `finalizer` to the pod `meta` describes, unless it carries it already or is being
/// deleted. `meta` is the caller's latest copy (the first attempt trusts it; a failed test reads
/// the pod again).
pub async fn add(
    client: &kube::Client,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<Added, FinalizerError> {
    let target = Target::new(client, meta, finalizer, Operation::Add)?;
    let mut current = meta.clone();
    for attempt in 1..=MAX_ATTEMPTS {
        if has_finalizer(&current, finalizer) {
            return Ok(Added::Present);
        }
        if current.deletion_timestamp.is_some() {
            return Ok(Added::BeingDeleted);
        }
        let mut ops: Vec<Value> = target.uid_test().into_iter().collect();
        match current.finalizers.as_ref() {
            Some(list) => {
                ops.push(json!({ "op": "test", "path": "/metadata/finalizers", "value": list }));
                ops.push(
                    json!({ "op": "add", "path": "/metadata/finalizers/-", "value": finalizer }),
                );
            }
            None => {
                // No list to test: guard the whole object instead (a list added meanwhile
                // changed the resourceVersion), then create the list.
                if let Some(rv) = current.resource_version.as_deref() {
                    ops.push(
                        json!({ "op": "test", "path": "/metadata/resourceVersion", "value": rv }),
                    );
                }
                ops.push(
                    json!({ "op": "add", "path": "/metadata/finalizers", "value": [finalizer] }),
                );
            }
        }
        match target.patch(ops).await? {
            Patched::Applied => return Ok(Added::Added),
            Patched::Gone => return Ok(Added::Gone),
            Patched::Stale => {
                tracing::debug!(
                    namespace = target.namespace,
                    pod = target.name,
                    attempt,
                    "finalizer add raced a change; reading the pod again"
                );
                match target.reread().await? {
                    Some(meta) => current = meta,
                    None => return Ok(Added::Gone),
                }
            }
        }
    }
    Err(target.contended(MAX_ATTEMPTS))
}

/// Removes `finalizer` from the pod `meta` describes. `meta` is the caller's latest copy (the
/// first attempt trusts its finalizer list; a failed test reads the pod again). A pod that is
/// gone, or whose name now belongs to another uid, is [`Removed::Gone`].
pub async fn remove(
    client: &kube::Client,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<Removed, FinalizerError> {
    let target = Target::new(client, meta, finalizer, Operation::Remove)?;
    let mut current = meta.clone();
    for attempt in 1..=MAX_ATTEMPTS {
        let Some(index) = current
            .finalizers
            .iter()
            .flatten()
            .position(|f| f.as_str() == finalizer)
        else {
            return Ok(Removed::Absent);
        };
        let path = format!("/metadata/finalizers/{index}");
        let mut ops: Vec<Value> = target.uid_test().into_iter().collect();
        ops.push(json!({ "op": "test", "path": path, "value": finalizer }));
        ops.push(json!({ "op": "remove", "path": path }));
        match target.patch(ops).await? {
            Patched::Applied => return Ok(Removed::Removed),
            Patched::Gone => return Ok(Removed::Gone),
            Patched::Stale => {
                tracing::debug!(
                    namespace = target.namespace,
                    pod = target.name,
                    attempt,
                    "finalizer removal raced a change; reading the pod again"
                );
                match target.reread().await? {
                    Some(meta) => current = meta,
                    None => return Ok(Removed::Gone),
                }
            }
        }
    }
    Err(target.contended(MAX_ATTEMPTS))
}

/// What [`release_all`] did: the sweep that takes podline's finalizers off every pod in a scope
/// (the binary's garbage collection, on uninstall), reported by the binary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReleaseReport {
    /// Pods listed (those whose metadata did not decode included).
    pub pods: usize,
    /// Pods a finalizer was removed from.
    pub released: usize,
    /// Pods one could not be removed from, or whose metadata did not decode
    /// (`namespace/name: error`).
    pub failed: Vec<String>,
}

/// Finalizer removals [`release_all`] has in flight at once.
const RELEASE_CONCURRENCY: usize = 16;
/// Attempts per finalizer removal for transient errors in [`release_all`].
const RELEASE_ATTEMPTS: u32 = 5;

/// Lists the pods' metadata in `namespace` (all namespaces if `None`; paged, item by item, a pod
/// whose metadata does not decode is reported and the rest released) and removes from each pod
/// every finalizer `is_ours` accepts, up to 16 pods at once, each removal retried on transient
/// errors (5 attempts of `policy`). Here, not in the binary, so the list-and-release loop is
/// beside the removal it repeats. Err only if the LIST itself failed (after `policy`'s retries).
pub async fn release_all(
    client: &kube::Client,
    namespace: Option<&str>,
    is_ours: &(dyn Fn(&str) -> bool + Sync),
    policy: &crate::retry::RetryPolicy,
) -> Result<ReleaseReport, kube::Error> {
    use futures::StreamExt as _;

    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let listed = crate::list::Pages::metadata(&api, kube::api::ListParams::default().limit(500))
        .all(policy, "list pods")
        .await?;
    let mut report = ReleaseReport {
        pods: listed.items.len() + listed.skipped.len(),
        ..ReleaseReport::default()
    };
    report.failed.extend(listed.skipped.iter().map(|skipped| {
        format!(
            "{}: its metadata does not decode ({}); any finalizer on it is left",
            skipped.object_name(),
            skipped.error
        )
    }));
    let carrying: Vec<_> = listed
        .items
        .into_iter()
        .map(|p| p.metadata)
        .filter(|m| m.finalizers.iter().flatten().any(|f| is_ours(f)))
        .collect();
    let release_policy = policy.clone().with_max_attempts(RELEASE_ATTEMPTS);
    let results: Vec<(String, Result<Removed, String>)> = futures::stream::iter(carrying)
        .map(|meta| {
            let policy = &release_policy;
            async move {
                let who = format!(
                    "{}/{}",
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default()
                );
                let result = release_ours(client, policy, meta, is_ours).await;
                (who, result)
            }
        })
        .buffer_unordered(RELEASE_CONCURRENCY)
        .collect()
        .await;
    for (who, result) in results {
        match result {
            Ok(Removed::Removed) => report.released += 1,
            Ok(Removed::Absent | Removed::Gone) => {}
            Err(err) => report.failed.push(format!("{who}: {err}")),
        }
    }
    Ok(report)
}

/// Removes each finalizer `is_ours` accepts that the pod `meta` describes carries, retrying
/// transient errors: [`Removed::Removed`] if any was removed, [`Removed::Gone`] if the pod went
/// first.
async fn release_ours(
    client: &kube::Client,
    policy: &crate::retry::RetryPolicy,
    mut meta: ObjectMeta,
    is_ours: &(dyn Fn(&str) -> bool + Sync),
) -> Result<Removed, String> {
    let ours: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| is_ours(f))
        .cloned()
        .collect();
    let mut outcome = Removed::Absent;
    for finalizer in &ours {
        let removed = crate::retry::retry(policy, "remove finalizer", || {
            remove(client, &meta, finalizer)
        })
        .await
        .map_err(|err| crate::error::Chain(&err).to_string())?;
        match removed {
            Removed::Gone => return Ok(Removed::Gone),
            Removed::Removed => outcome = Removed::Removed,
            Removed::Absent => {}
        }
        // The next removal's index test must see this one's result: drop it locally.
        if let Some(list) = meta.finalizers.as_mut() {
            list.retain(|f| f != finalizer);
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    //! Against the sim (kubelet off: pods stay unscheduled, so a delete is immediate unless a
    //! finalizer holds the pod).
    use super::*;
    use kube::api::{DeleteParams, PostParams};
    use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim};
    use podline_testkit::{podline_client, start_sim, test_config};

    const OTHER: &str = "example.com/other";

    /// A shard's finalizer is a qualified name as apimachinery's `IsQualifiedName` requires
    /// (`validation.ValidateFinalizerName`): a DNS-subdomain prefix, `/`, and a name part of at
    /// most 63 characters that starts and ends with an alphanumeric; names that could not be
    /// one (or a Lease name) are refused with what was wrong.
    #[test]
    fn shard_names_make_qualified_finalizers_and_bad_ones_are_refused() {
        assert_eq!(shard_finalizer("a").unwrap(), "podline.io/record-a");
        let longest = "x".repeat(MAX_SHARD_NAME);
        let name = shard_finalizer(&longest).unwrap();
        let (prefix, part) = name.split_once('/').unwrap();
        assert_eq!((prefix, part.len()), ("podline.io", 63));
        for (bad, problem) in [
            ("", "empty"),
            ("Team-A", "character"),
            ("team_a", "character"),
            ("team.a", "character"),
            ("-a", "starts or ends"),
            ("a-", "starts or ends"),
        ] {
            let err = shard_finalizer(bad).unwrap_err();
            assert!(err.to_string().contains(problem), "{bad:?}: {err}");
            assert!(err.to_string().contains("e.g. team-a"), "{err}");
        }
        let too_long = "x".repeat(MAX_SHARD_NAME + 1);
        assert!(shard_finalizer(&too_long).is_err());
    }

    #[test]
    fn every_recorder_finalizer_is_recognised_and_nothing_else() {
        assert!(is_recorder_finalizer(RECORD_FINALIZER));
        assert!(is_recorder_finalizer("podline.io/record-team-a"));
        for other in [
            "podline.io/kfp-writer",
            "podline.io/record-",
            "podline.io/recorder",
            "podline.io/record-Team",
            "example.com/record-a",
            OTHER,
        ] {
            assert!(!is_recorder_finalizer(other), "{other}");
        }
    }

    async fn sim() -> (Sim, kube::Client, Api<Pod>) {
        let sim = start_sim(test_config().kubelet_enabled(false)).await;
        let client = podline_client(&sim).await;
        let pods = Api::namespaced(client.clone(), "default");
        (sim, client, pods)
    }

    async fn create(pods: &Api<Pod>, name: &str, finalizers: &[&str]) -> Pod {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": name, "finalizers": finalizers },
            "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
        }))
        .unwrap();
        let mut pod = pods.create(&PostParams::default(), &pod).await.unwrap();
        if finalizers.is_empty() {
            pod.metadata.finalizers = None;
        }
        pod
    }

    async fn finalizers(pods: &Api<Pod>, name: &str) -> Option<Vec<String>> {
        pods.get_opt(name)
            .await
            .unwrap()
            .map(|p| p.metadata.finalizers.unwrap_or_default())
    }

    #[tokio::test]
    async fn add_should_create_the_list_once_and_keep_other_finalizers() {
        let (sim, client, pods) = sim().await;
        let bare = create(&pods, "bare", &[]).await;
        assert_eq!(bare.metadata.finalizers, None);
        assert_eq!(
            add(&client, &bare.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Added::Added
        );
        assert_eq!(finalizers(&pods, "bare").await.unwrap(), [RECORD_FINALIZER]);
        // The stale copy (no list) fails its resourceVersion test; the re-read finds ours.
        assert_eq!(
            add(&client, &bare.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Added::Present
        );
        assert_eq!(finalizers(&pods, "bare").await.unwrap(), [RECORD_FINALIZER]);

        let other = create(&pods, "other", &[OTHER]).await;
        assert_eq!(
            add(&client, &other.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Added::Added
        );
        assert_eq!(
            finalizers(&pods, "other").await.unwrap(),
            [OTHER, RECORD_FINALIZER]
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn add_should_not_overwrite_a_list_that_changed_since_it_was_read() {
        let (sim, client, pods) = sim().await;
        let stale = create(&pods, "p", &[]).await;
        // Someone else adds a finalizer after our read.
        let fresh = pods.get("p").await.unwrap();
        assert_eq!(
            add(&client, &fresh.metadata, OTHER).await.unwrap(),
            Added::Added
        );
        assert_eq!(
            add(&client, &stale.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Added::Added
        );
        assert_eq!(
            finalizers(&pods, "p").await.unwrap(),
            [OTHER, RECORD_FINALIZER]
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn add_should_never_touch_a_pod_being_deleted() {
        let (sim, client, pods) = sim().await;
        let held = create(&pods, "held", &[OTHER]).await;
        pods.delete("held", &DeleteParams::default()).await.unwrap();
        let deleting = pods.get("held").await.unwrap();
        assert!(deleting.metadata.deletion_timestamp.is_some());

        sim.reset_counts();
        assert_eq!(
            add(&client, &deleting.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Added::BeingDeleted
        );
        assert_eq!(sim.counts().get("patch", "pods"), 0, "no request at all");

        // A copy from before the delete: the server refuses the new finalizer, the re-read
        // shows the deletion.
        assert_eq!(
            add(&client, &held.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Added::BeingDeleted
        );
        assert_eq!(finalizers(&pods, "held").await.unwrap(), [OTHER]);
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn remove_should_release_a_terminating_pod_and_only_our_entry() {
        let (sim, client, pods) = sim().await;
        let pod = create(&pods, "t", &[OTHER, RECORD_FINALIZER]).await;
        pods.delete("t", &DeleteParams::default()).await.unwrap();
        assert!(
            finalizers(&pods, "t").await.is_some(),
            "held in Terminating"
        );

        assert_eq!(
            remove(&client, &pod.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Removed
        );
        assert_eq!(finalizers(&pods, "t").await.unwrap(), [OTHER]);
        // The copy still lists ours at index 1: the test fails, the re-read finds it absent.
        assert_eq!(
            remove(&client, &pod.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Absent
        );

        // Ours as the last finalizer: removing it lets the deletion finish.
        let last = create(&pods, "last", &[RECORD_FINALIZER]).await;
        pods.delete("last", &DeleteParams::default()).await.unwrap();
        assert!(finalizers(&pods, "last").await.is_some());
        assert_eq!(
            remove(&client, &last.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Removed
        );
        assert_eq!(finalizers(&pods, "last").await, None, "deleted");
        assert_eq!(
            remove(&client, &last.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Gone
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn remove_should_not_remove_the_entry_that_moved_into_our_index() {
        let (sim, client, pods) = sim().await;
        let stale = create(&pods, "m", &[RECORD_FINALIZER, OTHER]).await;
        // Meanwhile our entry moves to index 1 and another takes index 0.
        let mut fresh = pods.get("m").await.unwrap();
        fresh.metadata.finalizers = Some(vec!["a.example/x".into(), RECORD_FINALIZER.into()]);
        pods.replace("m", &PostParams::default(), &fresh)
            .await
            .unwrap();

        assert_eq!(
            remove(&client, &stale.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Removed
        );
        assert_eq!(finalizers(&pods, "m").await.unwrap(), ["a.example/x"]);
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn a_pod_recreated_under_the_name_should_count_as_gone() {
        let (sim, client, pods) = sim().await;
        let old = create(&pods, "r", &[]).await;
        pods.delete("r", &DeleteParams::default()).await.unwrap();
        create(&pods, "r", &[RECORD_FINALIZER]).await;

        assert_eq!(
            remove(&client, &old.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Absent,
            "our copy of the old pod lists no finalizer: nothing sent"
        );
        let mut claimed = old.metadata.clone();
        claimed.finalizers = Some(vec![RECORD_FINALIZER.into()]);
        assert_eq!(
            remove(&client, &claimed, RECORD_FINALIZER).await.unwrap(),
            Removed::Gone
        );
        assert_eq!(
            add(&client, &old.metadata, OTHER).await.unwrap(),
            Added::Gone
        );
        assert_eq!(
            finalizers(&pods, "r").await.unwrap(),
            [RECORD_FINALIZER],
            "the new pod is untouched"
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn server_errors_should_be_returned_classified() {
        let (sim, client, pods) = sim().await;
        let pod = create(&pods, "e", &[RECORD_FINALIZER]).await;
        sim.faults().push(
            FaultRule::new(FaultAction::status(503))
                .verb(FaultVerb::Patch)
                .resource("pods")
                .times(1),
        );
        let err = remove(&client, &pod.metadata, RECORD_FINALIZER)
            .await
            .unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        assert_eq!(err.disposition().reason(), Reason::ServerError);
        assert!(err.to_string().contains("default/e"), "{err}");
        // The retry succeeds.
        assert_eq!(
            remove(&client, &pod.metadata, RECORD_FINALIZER)
                .await
                .unwrap(),
            Removed::Removed
        );

        sim.faults().push(
            FaultRule::new(FaultAction::status(403))
                .verb(FaultVerb::Patch)
                .resource("pods")
                .times(1),
        );
        let released = pods.get("e").await.unwrap();
        let err = add(&client, &released.metadata, RECORD_FINALIZER)
            .await
            .unwrap_err();
        assert!(err.disposition().is_fatal(), "{err:?}");

        let unnamed = ObjectMeta::default();
        let err = add(&client, &unnamed, RECORD_FINALIZER).await.unwrap_err();
        assert!(matches!(err, FinalizerError::Unnamed { .. }), "{err:?}");
        sim.shutdown().await;
    }

    #[test]
    fn has_finalizer_should_handle_a_missing_list() {
        let mut meta = ObjectMeta::default();
        assert!(!has_finalizer(&meta, RECORD_FINALIZER));
        meta.finalizers = Some(vec![OTHER.into(), RECORD_FINALIZER.into()]);
        assert!(has_finalizer(&meta, RECORD_FINALIZER));
    }
}
