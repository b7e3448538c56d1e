//! The state every handler shares: what the UI serves from and how it behaves.
//!
//! Depends only on the store and on [`crate::host`] (to normalise allowed names); the
//! handlers ([`crate::api`], [`crate::live`], [`crate::pages`]) and the router
//! ([`crate::app`]) depend on it, never the other way round.

use std::sync::Arc;
use std::time::Duration;

use podline_store::StoreRead;

use crate::host::host_name;

/// What the UI serves from and how often live pages look for changes.
#[derive(Clone)]
pub struct UiConfig {
    /// The store to read (open it with `podline_store::open_read_only`).
    pub store: Arc<dyn StoreRead>,
    /// How often the event stream asks the store what changed (default 1 s).
    pub poll: Duration,
    /// Host names served besides the loopback names (`localhost`, `127.0.0.1`, `[::1]`) and
    /// the listen address: every other `Host` is refused, so a web page whose name an attacker
    /// re-points at this server (DNS rebinding) cannot read it. Any port.
    pub allowed_hosts: Vec<String>,
    /// Appended to the refusal text: how the operator allows another name.
    pub host_hint: Option<String>,
}

impl UiConfig {
    /// Defaults for `store`.
    pub fn new(store: Arc<dyn StoreRead>) -> Self {
        Self {
            store,
            poll: Duration::from_secs(1),
            allowed_hosts: Vec::new(),
            host_hint: None,
        }
    }

    /// Serves these host names too (any port); see [`UiConfig::allowed_hosts`].
    #[must_use]
    pub fn allow_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.allowed_hosts.extend(
            hosts
                .into_iter()
                .map(|host| host_name(&host).to_ascii_lowercase()),
        );
        self
    }

    /// Sets [`UiConfig::host_hint`].
    #[must_use]
    pub fn host_hint(mut self, hint: impl Into<String>) -> Self {
        self.host_hint = Some(hint.into());
        self
    }

    /// Sets the change poll interval.
    #[must_use]
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
}

/// The state handlers share.
pub(crate) type State = axum::extract::State<UiConfig>;
