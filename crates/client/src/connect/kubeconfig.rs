//! Finding and loading the configuration the way kubectl does (an explicit file, `KUBECONFIG`,
//! `~/.kube/config`, in-cluster), with the context's cluster, CA and proxy.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::error::ConnectError;
use super::source::ConfigSource;
use crate::transport::TransportError;

/// Where to look, injected so tests need not touch the process environment.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    /// An explicit kubeconfig file (the program's choice), which wins.
    pub flag: Option<PathBuf>,
    /// The `KUBECONFIG` variable.
    pub kubeconfig_env: Option<OsString>,
    /// `$HOME` (for `~/.kube/config`).
    pub home: Option<PathBuf>,
}

impl Lookup {
    /// The real process environment, plus the explicit file. An empty path or variable counts as
    /// unset, as in kubectl.
    pub fn from_env(flag: Option<PathBuf>) -> Self {
        Self {
            flag: flag.filter(|path| !path.as_os_str().is_empty()),
            kubeconfig_env: std::env::var_os("KUBECONFIG"),
            home: std::env::home_dir(),
        }
    }
}

/// A configuration and where it (and its CA certificates) came from.
pub(super) struct Loaded {
    pub(super) config: kube::Config,
    pub(super) source: ConfigSource,
    /// Where the trusted CA certificates come from, for TLS error messages.
    pub(super) ca: String,
}

/// Finds and loads the configuration (kubectl's order) without building a client.
pub async fn load_config(
    lookup: &Lookup,
    context: Option<&str>,
) -> Result<(kube::Config, ConfigSource), ConnectError> {
    let loaded = load(lookup, context).await?;
    Ok((loaded.config, loaded.source))
}

/// [`load_config`], plus where the CA certificates came from.
pub(super) async fn load(lookup: &Lookup, context: Option<&str>) -> Result<Loaded, ConnectError> {
    let found = find_kubeconfig(lookup)?;
    match found {
        Some((kubeconfig, source)) => {
            let (config, ca) = config_from_kubeconfig(kubeconfig, context, &source).await?;
            Ok(Loaded { config, source, ca })
        }
        None => {
            if let Some(ctx) = context {
                return Err(ConnectError::ContextWithoutKubeconfig(ctx.to_string()));
            }
            let mut config = kube::Config::incluster().map_err(ConnectError::NoConfig)?;
            config.proxy_url = proxy_from_environment(&config.cluster_url)?;
            Ok(Loaded {
                config,
                source: ConfigSource::InCluster,
                ca: format!("the service account's CA file {IN_CLUSTER_CA}"),
            })
        }
    }
}

/// Where a pod's service account CA is mounted (kube reads it from there for in-cluster).
const IN_CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// Reads the kubeconfig chosen by `lookup`, or `None` when there is none (use in-cluster).
fn find_kubeconfig(lookup: &Lookup) -> Result<Option<(Kubeconfig, ConfigSource)>, ConnectError> {
    let read = |path: &Path, source: &ConfigSource| {
        Kubeconfig::read_from(path).map_err(|error| ConnectError::Kubeconfig {
            source_name: source.clone(),
            error,
        })
    };
    if let Some(path) = &lookup.flag {
        let source = ConfigSource::Flag(path.clone());
        return read(path, &source).map(|k| Some((k, source)));
    }
    if let Some(value) = &lookup.kubeconfig_env {
        let paths: Vec<PathBuf> = std::env::split_paths(value)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            let source = ConfigSource::Env(value.clone());
            let mut merged = Kubeconfig::default();
            for path in &paths {
                let next = read(path, &source)?;
                merged = merged
                    .merge(next)
                    .map_err(|error| ConnectError::Kubeconfig {
                        source_name: source.clone(),
                        error,
                    })?;
            }
            return Ok(Some((merged, source)));
        }
    }
    if let Some(home) = &lookup.home {
        let path = home.join(".kube").join("config");
        if path.exists() {
            let source = ConfigSource::Home(path.clone());
            return read(&path, &source).map(|k| Some((k, source)));
        }
    }
    Ok(None)
}

/// The client configuration for `context` of `kubeconfig`, and a description of where its CA
/// certificates come from.
pub(super) async fn config_from_kubeconfig(
    kubeconfig: Kubeconfig,
    context: Option<&str>,
    source: &ConfigSource,
) -> Result<(kube::Config, String), ConnectError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let explicit_proxy = names_a_proxy(&kubeconfig, context);
    let ca = describe_ca(&kubeconfig, context, source);
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|error| ConnectError::Kubeconfig {
            source_name: source.clone(),
            error,
        })?;
    if !explicit_proxy {
        config.proxy_url = proxy_from_environment(&config.cluster_url)?;
    }
    Ok((config, ca))
}

/// The kubeconfig's cluster for `context` (default: the current context), with its name.
fn selected_cluster<'k>(
    kubeconfig: &'k Kubeconfig,
    context: Option<&str>,
) -> Option<(&'k str, &'k kube::config::Cluster)> {
    let context = context.or(kubeconfig.current_context.as_deref())?;
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|named| named.name == context)
        .and_then(|named| named.context.as_ref())
        .map(|context| context.cluster.as_str())?;
    kubeconfig
        .clusters
        .iter()
        .find(|named| named.name == cluster)
        .and_then(|named| Some((named.name.as_str(), named.cluster.as_ref()?)))
}

/// Whether the kubeconfig's cluster for `context` (default: the current context) sets
/// `proxy-url`, which then wins over the environment, as in kubectl.
fn names_a_proxy(kubeconfig: &Kubeconfig, context: Option<&str>) -> bool {
    selected_cluster(kubeconfig, context)
        .and_then(|(_, cluster)| cluster.proxy_url.as_deref())
        .is_some_and(|url| !url.is_empty())
}

/// Where the CA certificates of the cluster for `context` come from, as a TLS error names it:
/// the kubeconfig's `certificate-authority-data` (which wins, as in kube), its
/// `certificate-authority` file, or the system's roots when it names none.
fn describe_ca(kubeconfig: &Kubeconfig, context: Option<&str>, source: &ConfigSource) -> String {
    match selected_cluster(kubeconfig, context) {
        Some((name, cluster)) if cluster.certificate_authority_data.is_some() => {
            format!("the certificate-authority-data of cluster {name:?} in {source}")
        }
        Some((name, cluster)) => match &cluster.certificate_authority {
            Some(path) => {
                format!("the certificate-authority file {path} (cluster {name:?} in {source})")
            }
            None => format!(
                "the system's trusted root certificates (cluster {name:?} in {source} names no certificate-authority)"
            ),
        },
        None => format!("the CA certificates of {source}"),
    }
}

/// The proxy the environment names for `cluster_url` (see [`crate::proxy::from_environment`]).
/// kube's own choice is replaced: it reads `HTTPS_PROXY` but not `HTTP_PROXY`, and without its
/// proxy features it ignores `NO_PROXY`, which would send a local cluster (or the sim) through a
/// corporate proxy.
fn proxy_from_environment(cluster_url: &http::Uri) -> Result<Option<http::Uri>, ConnectError> {
    crate::proxy::from_environment(cluster_url)
        .map_err(|err| ConnectError::Transport(TransportError::Proxy(err)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG_A: &str = r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: { server: "http://127.0.0.1:1" }
- name: b
  cluster: { server: "https://127.0.0.1:2", insecure-skip-tls-verify: true }
contexts:
- name: a
  context: { cluster: a, user: u, namespace: team-a }
- name: b
  context: { cluster: b, user: u }
users:
- name: u
  user: { token: "secret-token" }
"#;

    const KUBECONFIG_C: &str = r#"
apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: { server: "http://127.0.0.1:3" }
contexts:
- name: c
  context: { cluster: c, user: u, namespace: team-c }
users:
- name: u
  user: { token: "other" }
"#;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn explicit_kubeconfig_should_win_and_give_the_context_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KUBECONFIG_A);
        let c = write(dir.path(), "c", KUBECONFIG_C);
        let lookup = Lookup {
            flag: Some(a.clone()),
            kubeconfig_env: Some(c.into_os_string()),
            home: None,
        };
        let (config, source) = load_config(&lookup, None).await.unwrap();
        assert_eq!(source, ConfigSource::Flag(a));
        assert_eq!(config.default_namespace, "team-a");
        assert_eq!(config.cluster_url, "http://127.0.0.1:1/");
        assert!(!config.accept_invalid_certs);
    }

    #[tokio::test]
    async fn context_should_select_cluster_and_default_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KUBECONFIG_A);
        let lookup = Lookup {
            flag: Some(a),
            ..Default::default()
        };
        let (config, _) = load_config(&lookup, Some("b")).await.unwrap();
        assert_eq!(config.default_namespace, "default");
        assert!(
            config.accept_invalid_certs,
            "insecure only when the kubeconfig says so"
        );
        let err = load_config(&lookup, Some("nope")).await.unwrap_err();
        assert!(matches!(err, ConnectError::Kubeconfig { .. }), "{err}");
    }

    #[tokio::test]
    async fn kubeconfig_env_list_should_merge_first_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KUBECONFIG_A);
        let c = write(dir.path(), "c", KUBECONFIG_C);
        let list = std::env::join_paths([c, a]).unwrap();
        let lookup = Lookup {
            flag: None,
            kubeconfig_env: Some(list.clone()),
            home: None,
        };
        let (config, source) = load_config(&lookup, None).await.unwrap();
        assert_eq!(source, ConfigSource::Env(list.clone()));
        assert_eq!(
            config.default_namespace, "team-c",
            "first file's current-context"
        );
        // Contexts of the second file are reachable too.
        let (config, _) = load_config(&lookup, Some("a")).await.unwrap();
        assert_eq!(config.default_namespace, "team-a");
    }

    #[tokio::test]
    async fn home_config_should_be_used_last_and_missing_files_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".kube")).unwrap();
        write(&dir.path().join(".kube"), "config", KUBECONFIG_C);
        let lookup = Lookup {
            home: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let (config, source) = load_config(&lookup, None).await.unwrap();
        assert!(matches!(source, ConfigSource::Home(_)));
        assert_eq!(config.default_namespace, "team-c");

        let lookup = Lookup {
            flag: Some(dir.path().join("missing")),
            ..Default::default()
        };
        let err = load_config(&lookup, None).await.unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
