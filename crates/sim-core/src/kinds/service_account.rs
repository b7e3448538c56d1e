//! ServiceAccounts (`v1`) as kube-apiserver 1.32 admits them: `ValidateServiceAccount` checks
//! the metadata only (a DNS subdomain name; pkg/apis/core/validation/validation.go), and
//! pkg/registry/core/serviceaccount/strategy.go adds nothing on create or update.
//!
//! Why it exists: pod specs name a `serviceAccountName` (`default` when they do not), and
//! `kubectl get sa` is how a user checks one exists. The `default` ServiceAccount of every
//! namespace is made by the controller in `crate::controllers::service_account`, as
//! kube-controller-manager's serviceaccount-controller makes it.
//!
//! The ServiceAccount admission of pods is here too, as kube-apiserver 1.32's
//! plugin/pkg/admission/serviceaccount/admission.go has it (read upstream, not copied), on pod
//! create only:
//! - a mirror pod (annotation `kubernetes.io/config.mirror`) is left as it is, but may name no
//!   service account, reference no Secret and project no service account token (403);
//! - otherwise `serviceAccountName` defaults to `default`, and an account that does not exist is
//!   403 `pods "NAME" is forbidden: error looking up service account NS/SA: serviceaccount "SA"
//!   not found`. kube-apiserver looks `default` up 10 times, 100-200 ms apart, because the
//!   controller may not have made it yet; the sim's lookup of a missing `default` in an active
//!   namespace makes it at once (what the controller would have done meanwhile);
//! - unless `automountServiceAccountToken` is false on the pod (which wins) or else on the
//!   account, the `kube-api-access-XXXXX` projected volume (token, `kube-root-ca.crt`'s
//!   `ca.crt`, the namespace) is added, and mounted read-only at
//!   `/var/run/secrets/kubernetes.io/serviceaccount` in every init container and container that
//!   has no mount at that path (a volume named `kube-api-access-*` already there is reused);
//! - a pod without `imagePullSecrets` gets the account's.

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath,
    ObjectFieldSelector, Pod, PodSpec, ProjectedVolumeSource, ServiceAccount,
    ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, StatusDetails};

use super::ApiKind;
use crate::cluster::{Cluster, Kind, Table, Write, now_time};
use crate::status::ApiError;

/// The account a pod without `serviceAccountName` runs as.
pub const DEFAULT_ACCOUNT: &str = "default";

/// The prefix of the token volume's name (`ServiceAccountVolumeName`).
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// Where the token volume is mounted (`DefaultAPITokenMountPath`).
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The token's lifetime in the projected volume (`WarnOnlyBoundTokenExpirationSeconds`).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// The annotation that makes a pod a mirror pod (`MirrorPodAnnotationKey`).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

impl Kind for ServiceAccount {
    const KIND: &'static str = "ServiceAccount";
    const LIST_KIND: &'static str = "ServiceAccountList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "serviceaccounts";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ApiKind for ServiceAccount {
    const GROUP: &'static str = "";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.service_account_table()
    }
}

/// Makes the `default` ServiceAccount of `namespace` unless it exists, or the namespace is gone
/// or being deleted (the serviceaccount controller's write). Returns whether it made one.
pub fn make_default(cluster: &Cluster, namespace: &str) -> bool {
    let active = cluster
        .namespace_table()
        .get("", namespace)
        .is_some_and(|ns| {
            let ns = ns.decode();
            ns.metadata.deletion_timestamp.is_none()
                && ns.status.and_then(|s| s.phase).as_deref() != Some("Terminating")
        });
    if !active {
        return false;
    }
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT_ACCOUNT.to_owned()),
            namespace: Some(namespace.to_owned()),
            uid: Some(uuid::Uuid::new_v4().to_string()),
            creation_timestamp: Some(now_time()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    cluster
        .service_account_table()
        .write(
            (namespace.to_owned(), DEFAULT_ACCOUNT.to_owned()),
            |current| match current {
                Some(_) => Err(()),
                None => Ok((Write::Create(account), ())),
            },
            |_, _| {},
        )
        .is_ok()
}

/// The name an admission plugin's refusal gives an object being created: its name, else its
/// `generateName` (no name is generated before admission), else `Unknown`
/// (`extractResourceName` in k8s.io/apiserver/pkg/admission/errors.go).
fn admission_name(meta: &ObjectMeta) -> String {
    [meta.name.as_deref(), meta.generate_name.as_deref()]
        .into_iter()
        .flatten()
        .find(|n| !n.is_empty())
        .unwrap_or("Unknown")
        .to_owned()
}

/// A 403 Forbidden of a pod admission plugin (`admission.NewForbidden`):
/// `pods "NAME" is forbidden: WHY`.
pub(crate) fn pod_forbidden(meta: &ObjectMeta, why: &str) -> ApiError {
    let name = admission_name(meta);
    let mut err = ApiError::new(
        403,
        "Forbidden",
        format!("pods \"{name}\" is forbidden: {why}"),
    );
    err.details = Some(Box::new(StatusDetails {
        name: Some(name),
        kind: Some("pods".to_owned()),
        ..StatusDetails::default()
    }));
    err
}

/// The ServiceAccount admission of a pod being created (see the module docs).
pub(crate) fn admit_pod_service_account(cluster: &Cluster, pod: &mut Pod) -> Result<(), ApiError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    // The v1 -> internal conversion: the deprecated `serviceAccount` names the account when
    // `serviceAccountName` does not.
    if spec
        .service_account_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        spec.service_account_name = spec.service_account.clone().filter(|n| !n.is_empty());
    }
    if mirror {
        return validate_mirror(spec).map_err(|why| pod_forbidden(&pod.metadata, why));
    }
    let name = spec
        .service_account_name
        .get_or_insert_with(|| DEFAULT_ACCOUNT.to_owned())
        .clone();
    let lookup = || cluster.service_account_table().get(&namespace, &name);
    let found = lookup().or_else(|| {
        (name == DEFAULT_ACCOUNT && make_default(cluster, &namespace))
            .then(lookup)
            .flatten()
    });
    let Some(account) = found.map(|stored| stored.decode()) else {
        return Err(pod_forbidden(
            &pod.metadata,
            &format!(
                "error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"
            ),
        ));
    };
    let automount = spec
        .automount_service_account_token
        .or(account.automount_service_account_token)
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty)
        && let Some(secrets) = account.image_pull_secrets.filter(|s| !s.is_empty())
    {
        spec.image_pull_secrets = Some(secrets);
    }
    Ok(())
}

/// What a mirror pod may not reference (the plugin's `Validate`).
fn validate_mirror(spec: &PodSpec) -> Result<(), &'static str> {
    if spec
        .service_account_name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
    {
        return Err("a mirror pod may not reference service accounts");
    }
    let volumes = spec.volumes.iter().flatten();
    let projections = || {
        volumes
            .clone()
            .filter_map(|v| v.projected.as_ref())
            .flat_map(|p| p.sources.iter().flatten())
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let secrets = spec
        .image_pull_secrets
        .as_ref()
        .is_some_and(|s| !s.is_empty())
        || volumes.clone().any(|v| v.secret.is_some())
        || projections().any(|p| p.secret.is_some())
        || containers.clone().any(|c| {
            c.env.iter().flatten().any(|e| {
                e.value_from
                    .as_ref()
                    .is_some_and(|f| f.secret_key_ref.is_some())
            }) || c.env_from.iter().flatten().any(|f| f.secret_ref.is_some())
        });
    if secrets {
        return Err("a mirror pod may not reference secrets");
    }
    if projections().any(|p| p.service_account_token.is_some()) {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    Ok(())
}

/// A name for the token volume: the prefix and five characters of `SimpleNameGenerator`'s
/// alphabet.
fn token_volume_name() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("{TOKEN_VOLUME_PREFIX}{suffix}")
}

/// The plugin's `mountServiceAccountToken`: the volume mount in every container without a
/// mount at the token path, and the volume if one of them needs it.
fn mount_token(spec: &mut PodSpec) {
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with(TOKEN_VOLUME_PREFIX))
        .map(|v| v.name.clone());
    let volume_name = existing.clone().unwrap_or_else(token_volume_name);
    let mut needed = false;
    for c in spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
    {
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        if mounts.iter().any(|m| m.mount_path == TOKEN_MOUNT_PATH) {
            continue;
        }
        mounts.push(VolumeMount {
            name: volume_name.clone(),
            read_only: Some(true),
            mount_path: TOKEN_MOUNT_PATH.to_owned(),
            ..VolumeMount::default()
        });
        needed = true;
    }
    if existing.is_none() && needed {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: volume_name,
            projected: Some(token_volume_source()),
            ..Volume::default()
        });
    }
}

/// The projected volume source of the token (`TokenVolumeSource`).
pub fn token_volume_source() -> ProjectedVolumeSource {
    ProjectedVolumeSource {
        default_mode: Some(0o644),
        sources: Some(vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".to_owned(),
                    expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                    audience: None,
                }),
                ..VolumeProjection::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: "kube-root-ca.crt".to_owned(),
                    items: Some(vec![KeyToPath {
                        key: "ca.crt".to_owned(),
                        path: "ca.crt".to_owned(),
                        mode: None,
                    }]),
                    optional: None,
                }),
                ..VolumeProjection::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".to_owned(),
                        field_ref: Some(ObjectFieldSelector {
                            api_version: Some("v1".to_owned()),
                            field_path: "metadata.namespace".to_owned(),
                        }),
                        ..DownwardAPIVolumeFile::default()
                    }]),
                }),
                ..VolumeProjection::default()
            },
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::HistoryLimits;
    use k8s_openapi::api::core::v1::{Container, PodSpec, SecretVolumeSource};

    fn cluster() -> Cluster {
        Cluster::new(HistoryLimits {
            window: std::time::Duration::from_secs(60),
            max_events: 100,
        })
    }

    fn pod(annotations: &[(&str, &str)], spec: PodSpec) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".to_owned()),
                namespace: Some("default".to_owned()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    fn containers() -> Vec<Container> {
        vec![Container {
            name: "main".to_owned(),
            ..Container::default()
        }]
    }

    #[test]
    fn a_missing_default_account_is_made_and_the_token_mounted() {
        let cluster = cluster();
        assert!(
            cluster
                .service_account_table()
                .get("default", "default")
                .is_none()
        );
        let mut p = pod(
            &[],
            PodSpec {
                containers: containers(),
                ..PodSpec::default()
            },
        );
        admit_pod_service_account(&cluster, &mut p).expect("admitted");
        let spec = p.spec.expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some(DEFAULT_ACCOUNT));
        let volumes = spec.volumes.expect("volumes");
        assert!(volumes[0].name.starts_with(TOKEN_VOLUME_PREFIX));
        assert_eq!(volumes[0].projected, Some(token_volume_source()));
        let mounts = spec.containers[0].volume_mounts.clone().expect("mounts");
        assert_eq!(mounts[0].name, volumes[0].name);
        assert_eq!(mounts[0].mount_path, TOKEN_MOUNT_PATH);
        assert_eq!(mounts[0].read_only, Some(true));
    }

    #[test]
    fn mirror_pods_are_left_alone_but_may_not_reference_accounts_or_secrets() {
        let cluster = cluster();
        let mirror = [(MIRROR_ANNOTATION, "x")];
        let mut plain = pod(
            &mirror,
            PodSpec {
                containers: containers(),
                ..PodSpec::default()
            },
        );
        admit_pod_service_account(&cluster, &mut plain).expect("admitted");
        let spec = plain.spec.expect("spec");
        assert_eq!(spec.service_account_name, None);
        assert_eq!(spec.volumes, None);
        let mut named = pod(
            &mirror,
            PodSpec {
                containers: containers(),
                service_account_name: Some("robot".to_owned()),
                ..PodSpec::default()
            },
        );
        let err = admit_pod_service_account(&cluster, &mut named).expect_err("403");
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: a mirror pod may not reference service accounts"
        );
        let mut secret = pod(
            &mirror,
            PodSpec {
                containers: containers(),
                volumes: Some(vec![Volume {
                    name: "s".to_owned(),
                    secret: Some(SecretVolumeSource::default()),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            },
        );
        let err = admit_pod_service_account(&cluster, &mut secret).expect_err("403");
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: a mirror pod may not reference secrets"
        );
    }

    #[test]
    fn a_refusal_names_the_pod_by_its_generate_name_before_a_name_is_generated() {
        let meta = ObjectMeta {
            generate_name: Some("gen-".to_owned()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            pod_forbidden(&meta, "why").message,
            "pods \"gen-\" is forbidden: why"
        );
        assert_eq!(
            pod_forbidden(&ObjectMeta::default(), "why").message,
            "pods \"Unknown\" is forbidden: why"
        );
    }
}
