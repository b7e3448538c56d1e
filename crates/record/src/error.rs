//! Errors of the recorder, one enum per phase where a caller must tell them apart.

/// A pod object that cannot be recorded: the recorder logs it by namespace/name, counts it and
/// skips it, so one bad object never stops the others.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// Without a uid the pod cannot be keyed (every stored record is keyed by uid).
    #[error("pod {namespace}/{name} has no metadata.uid; skipped")]
    MissingUid {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
    },
    /// Without a numeric resourceVersion the store cannot order updates, so it would risk moving
    /// the pod backwards.
    #[error(
        "pod {namespace}/{name} has resourceVersion {value:?}, expected a decimal number; skipped"
    )]
    BadResourceVersion {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The resourceVersion as received.
        value: String,
    },
    /// The run label is empty: no pod would ever be grouped into a run.
    #[error(
        "the run label is empty: expected a label key such as \"workflows.argoproj.io/workflow\""
    )]
    EmptyRunLabel,
}

/// A label selector (`-l`) that does not parse; startup stops with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid label selector {selector:?}: cannot parse {requirement:?}; expected comma-separated \
     requirements like \"app=web\", \"tier!=db\", \"env in (a,b)\", \"env notin (a)\", \"key\" or \"!key\""
)]
pub struct SelectorError {
    /// The whole selector as given.
    pub selector: String,
    /// The requirement that does not parse.
    pub requirement: String,
}

/// Why [`Recorder::run`](crate::Recorder::run) stopped: only what no retry can fix.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The watch failed in a way no retry can fix (401, 403, a missing namespace, a bad selector).
    /// (The watch error is printed in the message, not returned from `source()`, so a `{:#}`
    /// chain shows it once.)
    #[error("cannot watch pods: {0}")]
    Watch(podline_client::watch::WatchError),
    /// The watch stream ended although it never ends by itself (a bug in the watch).
    #[error("the pod watch ended unexpectedly")]
    WatchEnded,
    /// The store refused to answer in a way no retry can fix (bad schema, corrupt data).
    /// (Printed in the message, not returned from `source()`, as for `Watch`.)
    #[error("cannot use the store: {0}")]
    Store(podline_store::StoreError),
}
