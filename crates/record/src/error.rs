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
