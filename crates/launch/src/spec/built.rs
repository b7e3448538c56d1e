//! A task's pod ready to be created: [`BuiltPod`].

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

/// A pod ready to be created, with the identity podline gave it.
#[derive(Clone)]
pub struct BuiltPod {
    /// The pod to POST.
    pub pod: Pod,
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The launch id label value (see [`LAUNCH_ID_LABEL`](super::LAUNCH_ID_LABEL)).
    pub launch_id: String,
    /// Name of the main container (the one whose exit code is the task's).
    pub main_container: String,
}

impl fmt::Debug for BuiltPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltPod")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("launch_id", &self.launch_id)
            .finish_non_exhaustive()
    }
}
