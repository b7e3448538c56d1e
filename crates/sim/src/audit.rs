//! The sim's audit stream: one entry per resource request, like kube-apiserver's audit log.
//!
//! Why: on a real cluster the audit log's `requestReceivedTimestamp` and `stageTimestamp` tell
//! the API server's own time on a request apart from the client's. The launch benchmark needs
//! exactly that to measure what podline adds to a pod's time to running without counting the
//! time a create spent queueing inside the API server. The stream costs nothing while nobody
//! subscribes.

use std::sync::Arc;

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::verb::Verb;

/// How many entries a slow subscriber may fall behind before it misses some (and is told so by
/// [`broadcast::error::RecvError::Lagged`]).
const CAPACITY: usize = 16_384;

/// One answered resource request.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    /// The request's verb (`create`, `get`, `list`, `watch`, `update`, `patch`, `delete` or
    /// `deletecollection`; [`Verb::as_str`] spells it).
    pub verb: Verb,
    /// The resource as fault rules name it (`pods`, `pods/log`).
    pub resource: String,
    /// The namespace ("" for cluster-scoped and all-namespace requests).
    pub namespace: String,
    /// The object's name: from the path, or for a create the name it was stored under (so a
    /// `generateName` create shows the generated name). "" for collections.
    pub name: String,
    /// The HTTP status answered.
    pub code: u16,
    /// When the API received the request: after the bearer-token check, before faults and the
    /// handler (the audit log's `requestReceivedTimestamp`).
    pub received: Instant,
    /// When the response's headers were ready (the audit stage `ResponseStarted`; for a
    /// non-streaming request also its end).
    pub answered: Instant,
}

/// The name a create stored its object under, which a handler attaches to its response so the
/// audit entry can name the object (the request path has no name for a create).
#[derive(Debug, Clone)]
pub(crate) struct StoredName(pub(crate) String);

/// The publishing side, shared by the API's middleware and [`crate::Sim::audit`].
#[derive(Debug, Clone)]
pub struct Audit {
    tx: broadcast::Sender<Arc<AuditEntry>>,
}

impl Default for Audit {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl Audit {
    /// Entries for every request answered from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<AuditEntry>> {
        self.tx.subscribe()
    }

    /// Whether anyone listens (so that the middleware builds no entry for nobody).
    pub(crate) fn is_watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Sends `entry` to every subscriber.
    pub(crate) fn publish(&self, entry: AuditEntry) {
        // No subscriber left is not an error: the entry is simply nobody's.
        let _ = self.tx.send(Arc::new(entry));
    }
}
