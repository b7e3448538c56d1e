//! [`ApiKind`]: how the generic resource handlers reach each kind's table and its admission
//! rules (defaults and validation on create, what an update may change), and its impls for the
//! kinds without a unit of their own.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, NamespaceStatus, Node};

use crate::cluster::{Cluster, Committed, Kind, Stored, Table, WorkflowTaskResult, Write};
use crate::part::Part;
use crate::validation::{Causes, validate_meta};

/// A kind served by the generic handlers.
pub trait ApiKind: Kind {
    /// API group ("" for core).
    const GROUP: &'static str;
    /// Whether the kind has a `status` subresource.
    const HAS_STATUS: bool = false;
    /// Whether the kind is a custom resource: those keep `metadata.generation` (pods, leases,
    /// namespaces and events do not in 1.32) and their LIST items carry `apiVersion`/`kind`
    /// (built-in kinds' items do not).
    const CUSTOM_RESOURCE: bool = false;

    /// The kind's table.
    fn table(cluster: &Cluster) -> &Table<Self>;

    /// Commits a write (pods go through the path that feeds the kubelet and ground truth).
    fn commit<T, E>(
        cluster: &Cluster,
        namespace: &str,
        name: &str,
        decide: impl FnOnce(Option<&Stored<Self>>) -> Result<(Write<Self>, T), E>,
    ) -> Result<Committed<Self, T>, E> {
        Self::table(cluster).write((namespace.to_owned(), name.to_owned()), decide, |_, _| {})
    }

    /// Admission that reads other objects (kube-apiserver's admission plugins, e.g. Priority),
    /// run on a create before [`ApiKind::admit_create`]; an Err refuses the create as it is.
    fn admit_against(&mut self, cluster: &Cluster) -> Result<(), crate::status::ApiError> {
        let _ = cluster;
        Ok(())
    }

    /// Defaults and validates a new object (metadata is already filled in).
    fn admit_create(&mut self) -> Causes {
        let mut causes = Causes::default();
        validate_meta(&mut causes, self.meta());
        causes
    }

    /// Adjusts an update of `old` into `self` for `part` (e.g. keeps the old status on a main
    /// resource write) and validates it.
    fn admit_update(&mut self, old: &Self, part: Part) -> Causes {
        let _ = (old, part);
        let mut causes = Causes::default();
        validate_meta(&mut causes, self.meta());
        causes
    }
}

/// What a write to one part of a kind with a status subresource may not change: a
/// main-resource write keeps the old status, a status write keeps the old spec (kube-apiserver's
/// strategies for namespaces and nodes).
fn keep_the_other_part<Spec: Clone, Status: Clone>(
    part: Part,
    new: (&mut Option<Spec>, &mut Option<Status>),
    old: (&Option<Spec>, &Option<Status>),
) {
    match part {
        Part::Main => new.1.clone_from(old.1),
        Part::Status => new.0.clone_from(old.0),
    }
}

impl ApiKind for Namespace {
    const GROUP: &'static str = "";
    const HAS_STATUS: bool = true;
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.namespace_table()
    }
    fn admit_create(&mut self) -> Causes {
        let mut causes = Causes::default();
        validate_meta(&mut causes, self.meta());
        if let Some(name) = self.metadata.name.as_deref()
            && !crate::validation::is_dns1123_label(name)
            && causes.is_empty()
        {
            causes.invalid(
                "metadata.name",
                &format!("{name:?}"),
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            );
        }
        let name = self.metadata.name.clone().unwrap_or_default();
        self.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("kubernetes.io/metadata.name".to_owned(), name);
        self.spec
            .get_or_insert_with(Default::default)
            .finalizers
            .get_or_insert_with(|| vec!["kubernetes".to_owned()]);
        self.status = Some(NamespaceStatus {
            phase: Some("Active".to_owned()),
            ..NamespaceStatus::default()
        });
        causes
    }
    fn admit_update(&mut self, old: &Self, part: Part) -> Causes {
        keep_the_other_part(
            part,
            (&mut self.spec, &mut self.status),
            (&old.spec, &old.status),
        );
        let mut causes = Causes::default();
        validate_meta(&mut causes, self.meta());
        causes
    }
}

/// Nodes: the simulated kubelet registers its own; anyone may add, update or delete others,
/// as on a cluster (no kubelet runs their pods). A main-resource write keeps the status and a
/// status write keeps the spec, as kube-apiserver's node strategy does.
impl ApiKind for Node {
    const GROUP: &'static str = "";
    const HAS_STATUS: bool = true;
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.node_table()
    }
    fn admit_update(&mut self, old: &Self, part: Part) -> Causes {
        keep_the_other_part(
            part,
            (&mut self.spec, &mut self.status),
            (&old.spec, &old.status),
        );
        let mut causes = Causes::default();
        validate_meta(&mut causes, self.meta());
        causes
    }
}

impl ApiKind for Event {
    const GROUP: &'static str = "";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.event_table()
    }
}

impl ApiKind for Lease {
    const GROUP: &'static str = "coordination.k8s.io";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.lease_table()
    }
    fn admit_create(&mut self) -> Causes {
        crate::validation::validate_lease(self)
    }
    fn admit_update(&mut self, _old: &Self, _part: Part) -> Causes {
        crate::validation::validate_lease(self)
    }
}

impl ApiKind for WorkflowTaskResult {
    const GROUP: &'static str = "argoproj.io";
    const CUSTOM_RESOURCE: bool = true;
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.workflow_task_result_table()
    }
    fn admit_create(&mut self) -> Causes {
        if self.0.api_version.is_empty() {
            self.0.api_version = Self::API_VERSION.to_owned();
        }
        if self.0.kind.is_empty() {
            self.0.kind = Self::KIND.to_owned();
        }
        let mut causes = Causes::default();
        validate_meta(&mut causes, self.meta());
        causes
    }
}
