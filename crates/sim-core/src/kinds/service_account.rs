//! ServiceAccounts (`v1`) as kube-apiserver 1.32 admits them: `ValidateServiceAccount` checks
//! the metadata only (a DNS subdomain name; pkg/apis/core/validation/validation.go), and
//! pkg/registry/core/serviceaccount/strategy.go adds nothing on create or update.
//!
//! Why it exists: pod specs name a `serviceAccountName` (`default` when they do not), and
//! `kubectl get sa` is how a user checks one exists. The `default` ServiceAccount of every
//! namespace is made by the controller in `crate::controllers::service_account`, as
//! kube-controller-manager's serviceaccount-controller makes it.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ApiKind;
use crate::cluster::{Cluster, Kind, Table};

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
