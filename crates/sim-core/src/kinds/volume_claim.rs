//! PersistentVolumeClaims (`v1`) as kube-apiserver 1.32 admits them, with the
//! DefaultStorageClass admission.
//!
//! Why it exists: real pod specs mount claims (`persistentVolumeClaim` volumes); the sim's
//! scheduler keeps a pod whose claim is missing or unbound Pending, and its kubelet mounts a
//! bound claim's directory in exec mode.
//!
//! - Defaults (pkg/apis/core/v1/defaults.go): `spec.volumeMode` `Filesystem`, `status.phase`
//!   `Pending`.
//! - `ValidatePersistentVolumeClaimSpec` (pkg/apis/core/validation/validation.go): at least one
//!   access mode, each one of `ReadOnlyMany`, `ReadWriteMany`, `ReadWriteOnce`,
//!   `ReadWriteOncePod`; `spec.resources[storage]` is required and greater than zero;
//!   `volumeMode` is `Block` or `Filesystem`; a `storageClassName` is a DNS subdomain.
//! - `ValidatePersistentVolumeClaimUpdate`: the spec may not change after creation except
//!   `resources.requests` of a bound claim; the message ends with a diff of the specs, as
//!   kube's (go-cmp's report, approximated: see `spec_diff`). A write of the main resource keeps the status and a
//!   status write keeps the spec (pkg/registry/core/persistentvolumeclaim/strategy.go).
//! - The DefaultStorageClass admission (plugin/pkg/admission/storage/storageclass/setdefault):
//!   a claim that names no class gets the default class's name, if there is a default class.
//!
//! - The StorageObjectInUseProtection admission adds the `kubernetes.io/pvc-protection`
//!   finalizer; `crate::controllers::claim_protection` removes it from a deleted claim no pod
//!   uses. Binding is the job of `crate::controllers::volume_binder`.

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ApiKind;
use super::storage_class;
use crate::cluster::{Cluster, Kind, Table};
use crate::part::Part;
use crate::quantity::Quantity;
use crate::status::ApiError;
use crate::validation::{Causes, is_dns1123_subdomain, validate_meta};

/// The access modes kube accepts, in the order its messages list them.
const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// The finalizer the StorageObjectInUseProtection admission adds to every claim.
pub const PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// The first sentence of the detail of a refused spec change.
pub const SPEC_IMMUTABLE: &str = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

impl Kind for PersistentVolumeClaim {
    const KIND: &'static str = "PersistentVolumeClaim";
    const LIST_KIND: &'static str = "PersistentVolumeClaimList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "persistentvolumeclaims";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ApiKind for PersistentVolumeClaim {
    const GROUP: &'static str = "";
    const HAS_STATUS: bool = true;
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.volume_claim_table()
    }
    fn admit_against(&mut self, cluster: &Cluster) -> Result<(), ApiError> {
        let spec = self.spec.get_or_insert_with(Default::default);
        if spec.storage_class_name.is_none()
            && let Some(class) = storage_class::default_class(cluster)
        {
            spec.storage_class_name = Some(class);
        }
        Ok(())
    }
    fn admit_create(&mut self) -> Causes {
        self.spec
            .get_or_insert_with(Default::default)
            .volume_mode
            .get_or_insert_with(|| "Filesystem".to_owned());
        // The StorageObjectInUseProtection admission
        // (plugin/pkg/admission/storageobjectinuseprotection): the pvc-protection controller
        // removes it once the deleted claim is unused.
        let finalizers = self.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == PROTECTION_FINALIZER) {
            finalizers.push(PROTECTION_FINALIZER.to_owned());
        }
        // A create sets no status of its own: the phase starts Pending.
        self.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".to_owned()),
            ..PersistentVolumeClaimStatus::default()
        });
        validate(self)
    }
    fn admit_update(&mut self, old: &Self, part: Part) -> Causes {
        match part {
            Part::Main => self.status.clone_from(&old.status),
            Part::Status => self.spec.clone_from(&old.spec),
        }
        if let Some(spec) = self.spec.as_mut() {
            spec.volume_mode
                .get_or_insert_with(|| "Filesystem".to_owned());
        }
        let mut causes = validate(self);
        let bound = old.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let mut new_spec = self.spec.clone().unwrap_or_default();
        let old_spec = old.spec.clone().unwrap_or_default();
        if bound {
            // Only the requests may change (expansion).
            new_spec.resources = old_spec.resources.clone();
            new_spec.volume_attributes_class_name = old_spec.volume_attributes_class_name.clone();
        }
        // An update may fill in a class a claim had none of (the beta annotation's successor).
        if old_spec.storage_class_name.is_none() {
            new_spec.storage_class_name = None;
        }
        if new_spec != old_spec {
            let diff = spec_diff(&old_spec, &new_spec);
            causes.forbidden("spec", &format!("{SPEC_IMMUTABLE}\n{diff}"));
        }
        causes
    }
}

/// A field of `core.PersistentVolumeClaimSpec` as go-cmp prints it (types elided, as go-cmp
/// does inside a struct whose type names them).
fn go_value(spec: &PersistentVolumeClaimSpec, field: &str) -> String {
    let ptr = |s: &Option<String>| s.as_ref().map_or("nil".to_owned(), |s| format!("&{s:?}"));
    let opaque = |present: bool| if present { "&{...}" } else { "nil" }.to_owned();
    match field {
        "AccessModes" => spec
            .access_modes
            .as_ref()
            .map_or("nil".to_owned(), |modes| {
                let quoted: Vec<String> = modes.iter().map(|m| format!("{m:?}")).collect();
                format!("{{{}}}", quoted.join(", "))
            }),
        "Selector" => opaque(spec.selector.is_some()),
        "Resources" => "{...}".to_owned(),
        "VolumeName" => format!("{:?}", spec.volume_name.as_deref().unwrap_or_default()),
        "StorageClassName" => ptr(&spec.storage_class_name),
        "VolumeMode" => ptr(&spec.volume_mode),
        "DataSource" => opaque(spec.data_source.is_some()),
        "DataSourceRef" => opaque(spec.data_source_ref.is_some()),
        _ => ptr(&spec.volume_attributes_class_name),
    }
}

/// Whether `field` differs between the two specs.
fn field_differs(
    old: &PersistentVolumeClaimSpec,
    new: &PersistentVolumeClaimSpec,
    field: &str,
) -> bool {
    match field {
        "AccessModes" => old.access_modes != new.access_modes,
        "Selector" => old.selector != new.selector,
        "Resources" => old.resources != new.resources,
        "VolumeName" => {
            old.volume_name.as_deref().unwrap_or_default()
                != new.volume_name.as_deref().unwrap_or_default()
        }
        "StorageClassName" => old.storage_class_name != new.storage_class_name,
        "VolumeMode" => old.volume_mode != new.volume_mode,
        "DataSource" => old.data_source != new.data_source,
        "DataSourceRef" => old.data_source_ref != new.data_source_ref,
        _ => old.volume_attributes_class_name != new.volume_attributes_class_name,
    }
}

/// The fields of `core.PersistentVolumeClaimSpec`, in Go's order.
const SPEC_FIELDS: [&str; 9] = [
    "AccessModes",
    "Selector",
    "Resources",
    "VolumeName",
    "StorageClassName",
    "VolumeMode",
    "DataSource",
    "DataSourceRef",
    "VolumeAttributesClassName",
];

/// The diff kube appends to a refused spec change (`cmp.Diff(old, new)` of the internal
/// specs, go-cmp's report): a `-` and a `+` line per changed field, the identical fields
/// counted on one line. go-cmp's own report also shows some identical fields around the
/// changes, aligns the values, and randomly uses U+00A0 for some spaces (so no client parses it).
fn spec_diff(old: &PersistentVolumeClaimSpec, new: &PersistentVolumeClaimSpec) -> String {
    let mut out = String::from("  core.PersistentVolumeClaimSpec{\n");
    let mut identical = 0;
    for field in SPEC_FIELDS {
        if field == "AccessModes"
            && let (Some(was), Some(now)) = (&old.access_modes, &new.access_modes)
            && was != now
        {
            // go-cmp diffs a slice element by element, with the slice's type.
            out.push_str("  \tAccessModes: []core.PersistentVolumeAccessMode{\n");
            for (sign, modes, other) in [("-", was, now), ("+", now, was)] {
                for mode in modes.iter().filter(|m| !other.contains(m)) {
                    out.push_str(&format!("{sign} \t\t{mode:?},\n"));
                }
            }
            out.push_str("  \t},\n");
        } else if field_differs(old, new, field) {
            out.push_str(&format!("- \t{field}: {},\n", go_value(old, field)));
            out.push_str(&format!("+ \t{field}: {},\n", go_value(new, field)));
        } else {
            identical += 1;
        }
    }
    if identical > 0 {
        out.push_str(&format!("  \t... // {identical} identical fields\n"));
    }
    out.push_str("  }\n");
    out
}

fn validate(claim: &PersistentVolumeClaim) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &claim.metadata);
    let spec = claim.spec.clone().unwrap_or_default();
    let modes = spec.access_modes.unwrap_or_default();
    if modes.is_empty() {
        causes.required("spec.accessModes", "at least 1 access mode is required");
    }
    for mode in &modes {
        if !ACCESS_MODES.contains(&mode.as_str()) {
            causes.unsupported("spec.accessModes", mode, &ACCESS_MODES);
        }
    }
    let storage = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"));
    match storage {
        None => causes.required("spec.resources[storage]", ""),
        Some(q) => {
            if Quantity::parse(&q.0).is_none_or(|q| q.nanos <= 0) {
                causes.invalid(
                    "spec.resources[storage]",
                    &format!("{:?}", q.0),
                    "must be greater than zero",
                );
            }
        }
    }
    if let Some(mode) = spec.volume_mode.as_deref()
        && !matches!(mode, "Block" | "Filesystem")
    {
        causes.unsupported("spec.volumeMode", mode, &["Block", "Filesystem"]);
    }
    if let Some(class) = spec.storage_class_name.as_deref()
        && !class.is_empty()
        && !is_dns1123_subdomain(class)
    {
        causes.invalid(
            "spec.storageClassName",
            &format!("{class:?}"),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        );
    }
    causes
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    fn claim(modes: &[&str], storage: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".to_owned()),
                namespace: Some("default".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes.iter().map(|m| (*m).to_owned()).collect()),
                resources: Some(VolumeResourceRequirements {
                    requests: storage.map(|s| [("storage".to_owned(), Q(s.to_owned()))].into()),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            status: None,
        }
    }

    fn messages(causes: &Causes) -> Vec<String> {
        causes.0.iter().map(crate::status::cause_line).collect()
    }

    #[test]
    fn a_claim_is_defaulted_and_validated_as_kube_does() {
        let mut ok = claim(&["ReadWriteOnce"], Some("1Gi"));
        assert!(ok.admit_create().is_empty());
        assert_eq!(
            ok.spec.as_ref().unwrap().volume_mode.as_deref(),
            Some("Filesystem")
        );
        assert_eq!(
            ok.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
        let mut bad = claim(&[], None);
        assert_eq!(
            messages(&bad.admit_create()),
            [
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Required value",
            ]
        );
        let mut odd = claim(&["ReadWriteSometimes"], Some("0"));
        assert_eq!(
            messages(&odd.admit_create()),
            [
                "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
            ]
        );
    }

    #[test]
    fn only_a_bound_claims_requests_may_change() {
        let mut old = claim(&["ReadWriteOnce"], Some("1Gi"));
        old.admit_create();
        let mut grown = claim(&["ReadWriteOnce"], Some("2Gi"));
        assert_eq!(
            messages(&grown.admit_update(&old, Part::Main)),
            [format!(
                "spec: Forbidden: {SPEC_IMMUTABLE}\n  core.PersistentVolumeClaimSpec{{\n- \tResources: {{...}},\n+ \tResources: {{...}},\n  \t... // 8 identical fields\n  }}\n"
            )]
        );
        old.status.as_mut().unwrap().phase = Some("Bound".to_owned());
        let mut grown = claim(&["ReadWriteOnce"], Some("2Gi"));
        assert!(grown.admit_update(&old, Part::Main).is_empty());
        let mut remoded = claim(&["ReadWriteMany"], Some("1Gi"));
        let causes = remoded.admit_update(&old, Part::Main);
        assert_eq!(causes.0.len(), 1);
        assert!(
            messages(&causes)[0].contains(
                "\n  \tAccessModes: []core.PersistentVolumeAccessMode{\n- \t\t\"ReadWriteOnce\",\n+ \t\t\"ReadWriteMany\",\n  \t},\n"
            ),
            "{:?}",
            messages(&causes)
        );
    }
}
