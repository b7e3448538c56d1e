//! The serviceaccount controller: kube-controller-manager's `serviceaccount-controller` keeps a
//! ServiceAccount named `default` in every active namespace, making it when a namespace is
//! added and again when it is deleted (pkg/controller/serviceaccount/serviceaccounts_controller.go;
//! namespaces being deleted are skipped).
//!
//! Why it exists: a pod that names no `serviceAccountName` uses `default`, and users and tools
//! (`kubectl get sa`, admission on a cluster) expect it in each namespace. Unlike the real
//! controller, [`spawn`] makes the accounts of the namespaces that exist already before it
//! returns, so the sim's initial namespaces have theirs before the API serves its first request.

use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::cluster::{ChangeKind, Cluster, WatchFrom};

/// The name of the account every namespace gets.
pub const DEFAULT: &str = crate::kinds::service_account::DEFAULT_ACCOUNT;

/// Makes the `default` ServiceAccount of `namespace` unless it exists, or the namespace is gone
/// or being deleted. Returns whether it made one.
pub fn ensure_default(cluster: &Cluster, namespace: &str) -> bool {
    crate::kinds::service_account::make_default(cluster, namespace)
}

/// Makes the accounts of the namespaces that exist now, then starts the controller, which
/// follows namespaces and ServiceAccounts. It ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster) -> JoinHandle<()> {
    // Watches "from now" never fail.
    let namespaces = cluster.namespace_table().start_watch(WatchFrom::Now);
    let accounts = cluster.service_account_table().start_watch(WatchFrom::Now);
    if let Ok(namespaces) = &namespaces {
        for stored in &namespaces.initial {
            ensure_default(cluster, &stored.decode().metadata.name.unwrap_or_default());
        }
    }
    let weak = cluster.downgrade();
    tokio::spawn(async move {
        let (Ok(namespaces), Ok(accounts)) = (namespaces, accounts) else {
            return;
        };
        let (mut ns_rx, mut sa_rx) = (namespaces.rx, accounts.rx);
        loop {
            let namespace = tokio::select! {
                got = ns_rx.recv() => match got {
                    // Index 0 of every kind's selectable fields is `metadata.name`.
                    Ok(event) if event.kind == ChangeKind::Added => {
                        Some(event.facts.field(0).to_owned())
                    }
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => {
                        let Some(cluster) = weak.upgrade() else { return };
                        resync(&cluster);
                        None
                    }
                    Err(RecvError::Closed) => return,
                },
                got = sa_rx.recv() => match got {
                    Ok(event) if event.kind == ChangeKind::Deleted
                        && event.facts.field(0) == DEFAULT =>
                    {
                        Some(event.facts.namespace().to_owned())
                    }
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => {
                        let Some(cluster) = weak.upgrade() else { return };
                        resync(&cluster);
                        None
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            let Some(cluster) = weak.upgrade() else {
                return;
            };
            if let Some(namespace) = namespace {
                ensure_default(&cluster, &namespace);
            }
        }
    })
}

/// Makes every missing account (after the controller missed events).
fn resync(cluster: &Cluster) {
    let (namespaces, _) = cluster.namespace_table().snapshot(None, None);
    for stored in namespaces {
        ensure_default(cluster, &stored.decode().metadata.name.unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{HistoryLimits, Write};
    use std::time::Duration;

    fn account_exists(cluster: &Cluster, namespace: &str) -> bool {
        cluster
            .service_account_table()
            .get(namespace, DEFAULT)
            .is_some()
    }

    async fn until(what: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !what() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn every_namespace_gets_a_default_account_and_keeps_it() {
        let cluster = Cluster::new(HistoryLimits {
            window: Duration::from_secs(60),
            max_events: 1000,
        });
        let _controller = spawn(&cluster);
        for ns in crate::cluster::INITIAL_NAMESPACES {
            assert!(account_exists(&cluster, ns), "{ns} has its account at once");
        }
        assert!(cluster.create_namespace("team-a"));
        until(|| account_exists(&cluster, "team-a")).await;
        cluster
            .service_account_table()
            .write(
                ("team-a".to_owned(), DEFAULT.to_owned()),
                |current| match current {
                    Some(stored) => Ok((Write::Delete(stored.decode()), ())),
                    None => Err(()),
                },
                |_, _| {},
            )
            .expect("deleted");
        until(|| account_exists(&cluster, "team-a")).await;
        assert!(!ensure_default(&cluster, "team-a"), "it exists already");
        assert!(!ensure_default(&cluster, "nowhere"), "no such namespace");
    }
}
