//! StorageClasses (`storage.k8s.io/v1`, cluster-scoped) as kube-apiserver 1.32 admits them, and
//! the default class the sim starts with.
//!
//! Why it exists: PersistentVolumeClaims name a class (or get the default one), and the sim binds
//! a claim only through a class it knows, as a cluster's provisioner does.
//!
//! - Defaults (pkg/apis/storage/v1/defaults.go `SetDefaults_StorageClass`): `reclaimPolicy`
//!   `Delete`, `volumeBindingMode` `Immediate`.
//! - `ValidateStorageClass` (pkg/apis/storage/validation/validation.go): `provisioner` is
//!   required; `reclaimPolicy` is `Delete` or `Retain` (`Recycle` is refused for classes);
//!   `volumeBindingMode` is `Immediate` or `WaitForFirstConsumer`. `ValidateStorageClassUpdate`:
//!   `parameters`, `provisioner`, `reclaimPolicy` and `volumeBindingMode` cannot change.
//! - The default class: like kind's `standard` class (a local-path provisioner,
//!   `rancher.io/local-path`) marked with `storageclass.kubernetes.io/is-default-class: "true"`,
//!   but with `volumeBindingMode: Immediate` (kind's is `WaitForFirstConsumer`) so that a claim
//!   is bound as soon as it is made (see `crate::controllers::volume_binder`).

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ApiKind;
use crate::cluster::{Cluster, Kind, Table, Write, now_time};
use crate::part::Part;
use crate::validation::{Causes, validate_meta};

/// The annotation that marks a default class (`storageutil.IsDefaultAnnotation`,
/// pkg/apis/storage/util/helpers.go).
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The name of the default class the sim starts with (kind's).
pub const DEFAULT_CLASS: &str = "standard";

/// The provisioner the default class names (kind's local-path provisioner).
pub const DEFAULT_PROVISIONER: &str = "rancher.io/local-path";

/// The binding mode that binds claims as soon as they exist.
pub const IMMEDIATE: &str = "Immediate";

impl Kind for StorageClass {
    const KIND: &'static str = "StorageClass";
    const LIST_KIND: &'static str = "StorageClassList";
    const API_VERSION: &'static str = "storage.k8s.io/v1";
    const RESOURCE: &'static str = "storageclasses";
    const NAMESPACED: bool = false;
    const FIELDS: &'static [&'static str] = &["metadata.name"];
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        (field == "metadata.name").then(|| self.metadata.name.clone().unwrap_or_default())
    }
}

impl ApiKind for StorageClass {
    const GROUP: &'static str = "storage.k8s.io";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.storage_class_table()
    }
    fn admit_create(&mut self) -> Causes {
        set_defaults(self);
        validate(self)
    }
    fn admit_update(&mut self, old: &Self, _part: Part) -> Causes {
        set_defaults(self);
        let mut causes = validate(self);
        // ValidateStorageClassUpdate's wording.
        if self.parameters != old.parameters {
            causes.forbidden("parameters", "updates to parameters are forbidden.");
        }
        if self.provisioner != old.provisioner {
            causes.forbidden("provisioner", "updates to provisioner are forbidden.");
        }
        if self.reclaim_policy != old.reclaim_policy {
            causes.forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden.");
        }
        if self.volume_binding_mode != old.volume_binding_mode {
            causes.forbidden("volumeBindingMode", "field is immutable");
        }
        causes
    }
}

fn set_defaults(class: &mut StorageClass) {
    class
        .reclaim_policy
        .get_or_insert_with(|| "Delete".to_owned());
    class
        .volume_binding_mode
        .get_or_insert_with(|| IMMEDIATE.to_owned());
}

fn validate(class: &StorageClass) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &class.metadata);
    if class.provisioner.is_empty() {
        causes.required("provisioner", "");
    }
    if let Some(policy) = class.reclaim_policy.as_deref()
        && !matches!(policy, "Delete" | "Retain")
    {
        causes.unsupported("reclaimPolicy", policy, &["Delete", "Retain"]);
    }
    if let Some(mode) = class.volume_binding_mode.as_deref()
        && !matches!(mode, "Immediate" | "WaitForFirstConsumer")
    {
        causes.unsupported(
            "volumeBindingMode",
            mode,
            &["Immediate", "WaitForFirstConsumer"],
        );
    }
    causes
}

/// Whether `class` is marked default (the annotation's value is exactly `true`).
pub fn is_default(class: &StorageClass) -> bool {
    class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The default class's name, as the DefaultStorageClass admission picks it
/// (plugin/pkg/admission/storage/storageclass/setdefault, `util.GetDefaultClass`): of several
/// default classes, the newest (then the first by name).
pub fn default_class(cluster: &Cluster) -> Option<String> {
    let (classes, _) = cluster.storage_class_table().snapshot(None, None);
    classes
        .iter()
        .map(|stored| stored.decode())
        .filter(is_default)
        .max_by(|a, b| {
            let created = |c: &StorageClass| c.metadata.creation_timestamp.clone().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        })
        .and_then(|c| c.metadata.name)
}

/// Makes the default class `standard` unless a class of that name exists (what kind installs).
pub fn ensure_default_class(cluster: &Cluster) {
    let class = StorageClass {
        metadata: ObjectMeta {
            name: Some(DEFAULT_CLASS.to_owned()),
            uid: Some(uuid::Uuid::new_v4().to_string()),
            creation_timestamp: Some(now_time()),
            annotations: Some([(DEFAULT_CLASS_ANNOTATION.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        provisioner: DEFAULT_PROVISIONER.to_owned(),
        reclaim_policy: Some("Delete".to_owned()),
        volume_binding_mode: Some(IMMEDIATE.to_owned()),
        ..StorageClass::default()
    };
    let _ = cluster.storage_class_table().write(
        (String::new(), DEFAULT_CLASS.to_owned()),
        |current| match current {
            Some(_) => Err(()),
            None => Ok((Write::Create(class), ())),
        },
        |_, _| {},
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn messages(causes: &Causes) -> Vec<String> {
        causes.0.iter().map(crate::status::cause_line).collect()
    }

    #[test]
    fn a_class_is_defaulted_and_validated_as_kube_does() {
        let mut class = StorageClass {
            metadata: ObjectMeta {
                name: Some("fast".to_owned()),
                ..ObjectMeta::default()
            },
            ..StorageClass::default()
        };
        assert_eq!(
            messages(&class.admit_create()),
            ["provisioner: Required value"]
        );
        assert_eq!(class.reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(class.volume_binding_mode.as_deref(), Some("Immediate"));
        class.provisioner = "x".to_owned();
        class.reclaim_policy = Some("Recycle".to_owned());
        assert_eq!(
            messages(&class.admit_create()),
            [
                "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""
            ]
        );
    }

    #[tokio::test]
    async fn the_sim_starts_with_one_default_class() {
        let cluster = Cluster::new(crate::cluster::HistoryLimits {
            window: std::time::Duration::from_secs(60),
            max_events: 1000,
        });
        assert_eq!(default_class(&cluster), None);
        ensure_default_class(&cluster);
        assert_eq!(default_class(&cluster).as_deref(), Some(DEFAULT_CLASS));
    }
}
