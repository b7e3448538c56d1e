//! A pod's volumes as the kubelet's volume manager sets them up: whether each can be mounted
//! (`mount_error`), and, in exec mode, their contents on the local disk (`materialize`) and
//! where each container sees them (`container_mounts`).
//!
//! As a kubelet does (pkg/volume/secret, configmap, projected, downwardapi, emptydir; read
//! upstream, not copied): a `secret` or `configMap` volume whose object is missing, and is not
//! `optional`, fails its SetUp with the API's NotFound text; so does one whose `items` name a key
//! the object lacks (`configmap references non-existent config key: KEY`, `secret references
//! non-existent secret key: KEY`). The kubelet reports `MountVolume.SetUp failed for volume
//! "NAME" : ERROR` as a `FailedMount` event and keeps the pod's containers in
//! `ContainerCreating` until the object exists. Every file is written with its content at once
//! (the real kubelet's atomic writer keeps `..data` symlinks; refreshing a changed object is not
//! done). `emptyDir` is a directory of the pod, shared by its containers; `persistentVolumeClaim`
//! is a directory of the bound volume (`pvc-<uid>`), kept for the sim's life like kind's
//! local-path volumes; `hostPath` is the host's path. Other volume types get an empty directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, Volume};

use super::refs::{self, Objects};

/// The `MountVolume.SetUp` failure of `volume`, as its FailedMount event words it.
fn setup_failed(volume: &str, error: &str) -> String {
    format!("MountVolume.SetUp failed for volume {volume:?} : {error}")
}

/// The files one volume holds: relative path -> (content, mode).
type Files = BTreeMap<String, Vec<u8>>;

/// The first volume of `pod` that cannot be set up, as its FailedMount message.
pub(crate) fn mount_error(objects: &dyn Objects, pod: &Pod) -> Option<String> {
    volume_files(objects, pod, "").err()
}

/// Whether the pod has a volume whose contents come from other objects.
pub(crate) fn has_references(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.secret.is_some() || v.config_map.is_some() || v.projected.is_some())
}

/// The files of every volume that has files (secret, configMap, downwardAPI, projected), or
/// the first volume's SetUp failure.
fn volume_files(
    objects: &dyn Objects,
    pod: &Pod,
    pod_ip: &str,
) -> Result<Vec<(String, Files)>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let files = files_of(objects, namespace, pod, volume, pod_ip)
            .map_err(|e| setup_failed(&volume.name, &e))?;
        if let Some(files) = files {
            out.push((volume.name.clone(), files));
        }
    }
    Ok(out)
}

fn files_of(
    objects: &dyn Objects,
    namespace: &str,
    pod: &Pod,
    volume: &Volume,
    pod_ip: &str,
) -> Result<Option<Files>, String> {
    let mut files = Files::new();
    if let Some(s) = &volume.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        secret_files(
            objects,
            namespace,
            &name,
            s.items.as_deref(),
            s.optional,
            &mut files,
        )?;
    } else if let Some(c) = &volume.config_map {
        config_map_files(
            objects,
            namespace,
            &c.name,
            c.items.as_deref(),
            c.optional,
            &mut files,
        )?;
    } else if let Some(d) = &volume.downward_api {
        for item in d.items.iter().flatten() {
            files.insert(
                item.path.clone(),
                downward_value(pod, item, pod_ip)?.into_bytes(),
            );
        }
    } else if let Some(p) = &volume.projected {
        for source in p.sources.iter().flatten() {
            if let Some(s) = &source.secret {
                secret_files(
                    objects,
                    namespace,
                    &s.name,
                    s.items.as_deref(),
                    s.optional,
                    &mut files,
                )?;
            } else if let Some(c) = &source.config_map {
                config_map_files(
                    objects,
                    namespace,
                    &c.name,
                    c.items.as_deref(),
                    c.optional,
                    &mut files,
                )?;
            } else if let Some(d) = &source.downward_api {
                for item in d.items.iter().flatten() {
                    files.insert(
                        item.path.clone(),
                        downward_value(pod, item, pod_ip)?.into_bytes(),
                    );
                }
            } else if let Some(t) = &source.service_account_token {
                // No token issuer in the sim: a placeholder where the token would be.
                files.insert(t.path.clone(), b"sim-service-account-token".to_vec());
            }
        }
    } else {
        return Ok(None);
    }
    Ok(Some(files))
}

fn downward_value(
    pod: &Pod,
    item: &k8s_openapi::api::core::v1::DownwardAPIVolumeFile,
    pod_ip: &str,
) -> Result<String, String> {
    if let Some(f) = &item.field_ref {
        refs::pod_field(pod, f, pod_ip)
    } else if let Some(r) = &item.resource_field_ref {
        refs::resource_field(pod, None, r)
    } else {
        Ok(String::new())
    }
}

/// Selects `items` (or every key) of `data` into `files`; a missing key is an error unless
/// `optional`.
fn pick(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    optional: bool,
    what: &str,
    files: &mut Files,
) -> Result<(), String> {
    match items {
        None => files.extend(data),
        Some(items) => {
            for item in items {
                match data.get(&item.key) {
                    Some(v) => {
                        files.insert(item.path.clone(), v.clone());
                    }
                    None if optional => {}
                    None => {
                        return Err(format!(
                            "{what} references non-existent {}: {}",
                            if what == "secret" {
                                "secret key"
                            } else {
                                "config key"
                            },
                            item.key
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

fn secret_files(
    objects: &dyn Objects,
    namespace: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    files: &mut Files,
) -> Result<(), String> {
    let optional = optional == Some(true);
    match objects.secret(namespace, name) {
        Some(secret) => pick(refs::secret_data(&secret), items, optional, "secret", files),
        None if optional => Ok(()),
        None => Err(refs::secret_not_found(name)),
    }
}

fn config_map_files(
    objects: &dyn Objects,
    namespace: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    files: &mut Files,
) -> Result<(), String> {
    let optional = optional == Some(true);
    match objects.config_map(namespace, name) {
        Some(cm) => {
            let mut data: BTreeMap<String, Vec<u8>> = cm
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            data.extend(
                cm.binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0)),
            );
            pick(data, items, optional, "configmap", files)
        }
        None if optional => Ok(()),
        None => Err(refs::config_map_not_found(name)),
    }
}

/// Where the sim keeps exec-mode volumes: one directory per sim process under the system's
/// temporary directory, readable by its user only (secret volumes are written there).
pub fn volume_root() -> PathBuf {
    std::env::temp_dir().join(format!("podline-sim-{}", std::process::id()))
}

/// The directory of a pod's volumes.
pub(crate) fn pod_dir(uid: &str) -> PathBuf {
    volume_root().join("pods").join(uid)
}

/// The local directory that backs `volume` of the pod `uid` (for a claim: its bound volume's).
fn volume_dir(pod: &Pod, volume: &Volume) -> PathBuf {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    if let Some(host) = &volume.host_path {
        return PathBuf::from(&host.path);
    }
    if let Some(claim) = &volume.persistent_volume_claim {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        return volume_root()
            .join("claims")
            .join(namespace)
            .join(&claim.claim_name);
    }
    pod_dir(uid).join("volumes").join(&volume.name)
}

/// Writes every volume of `pod` to the local disk (directories, and the files of secret,
/// configMap, downwardAPI and projected volumes). Err: the first SetUp failure.
pub(crate) fn materialize(objects: &dyn Objects, pod: &Pod, pod_ip: &str) -> Result<(), String> {
    let with_files = volume_files(objects, pod, pod_ip)?;
    // Secret contents go below: only this user may enter the root.
    let root = volume_root();
    if !root.exists() {
        use std::os::unix::fs::DirBuilderExt as _;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root);
    }
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if volume.host_path.is_some() {
            continue;
        }
        let dir = volume_dir(pod, volume);
        std::fs::create_dir_all(&dir)
            .map_err(|e| setup_failed(&volume.name, &format!("mkdir {}: {e}", dir.display())))?;
        if let Some((_, files)) = with_files.iter().find(|(name, _)| *name == volume.name) {
            for (path, content) in files {
                let file = safe_join(&dir, path)
                    .ok_or_else(|| setup_failed(&volume.name, &format!("invalid path {path:?}")))?;
                if let Some(parent) = file.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                std::fs::write(&file, content).map_err(|e| {
                    setup_failed(&volume.name, &format!("write {}: {e}", file.display()))
                })?;
            }
        }
    }
    Ok(())
}

/// `base/rel` when `rel` is relative and has no `..` (as validation demands of volume paths
/// and subPaths); None otherwise.
fn safe_join(base: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    let ok = rel.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    ok.then(|| base.join(rel))
}

/// One mount of a container: a local path shown at `target` inside the container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The local file or directory.
    pub source: PathBuf,
    /// Where the container sees it (its `mountPath`).
    pub target: PathBuf,
    /// Mounted read-only (`readOnly`, and every secret, configMap, downwardAPI and projected
    /// volume, as the kubelet mounts them).
    pub read_only: bool,
}

/// The mounts of `container` (by its `volumeMounts`, `subPath` included), in order.
pub(crate) fn container_mounts(pod: &Pod, container: &Container) -> Vec<Mount> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let volumes: Vec<&Volume> = volumes.collect();
    let mut out = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let Some(volume) = volumes.iter().find(|v| v.name == m.name) else {
            continue;
        };
        let mut source = volume_dir(pod, volume);
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            match safe_join(&source, sub) {
                Some(path) => source = path,
                None => continue,
            }
        }
        let read_only_kind = volume.secret.is_some()
            || volume.config_map.is_some()
            || volume.downward_api.is_some()
            || volume.projected.is_some();
        out.push(Mount {
            source,
            target: PathBuf::from(&m.mount_path),
            read_only: m.read_only == Some(true) || read_only_kind,
        });
    }
    out
}

/// Removes a pod's own volume directories (not its claims').
pub(crate) fn remove_pod_dir(uid: &str) {
    let dir = pod_dir(uid);
    if dir.exists() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The scheduler's FailedScheduling message for a pod whose claims keep it off every node, as
/// kube-scheduler's VolumeBinding plugin refuses it in PreFilter
/// (pkg/scheduler/framework/plugins/volumebinding/volume_binding.go: the lister's NotFound
/// `persistentvolumeclaim "NAME" not found`, or `pod has unbound immediate
/// PersistentVolumeClaims`) in the FitError wording of pkg/scheduler/framework/types.go.
pub(crate) fn claim_refusal(cluster: &crate::cluster::Cluster, pod: &Pod) -> Option<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut unbound = false;
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(claim) = &volume.persistent_volume_claim else {
            continue;
        };
        let why = match cluster
            .volume_claim_table()
            .get(namespace, &claim.claim_name)
        {
            None => format!("persistentvolumeclaim {:?} not found", claim.claim_name),
            Some(stored) => {
                let claim = stored.decode();
                if claim.metadata.deletion_timestamp.is_some() {
                    format!(
                        "persistentvolumeclaim {:?} is being deleted",
                        claim.metadata.name.unwrap_or_default()
                    )
                } else {
                    if claim.status.and_then(|s| s.phase).as_deref() != Some("Bound") {
                        unbound = true;
                    }
                    continue;
                }
            }
        };
        return Some(fit_error(&why));
    }
    unbound.then(|| fit_error("pod has unbound immediate PersistentVolumeClaims"))
}

/// kube-scheduler's FitError for one node refused in PreFilter, preemption not helping.
fn fit_error(why: &str) -> String {
    format!(
        "0/1 nodes are available: {why}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
}
