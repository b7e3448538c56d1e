//! Exec credential plugins (a kubeconfig user's `exec:`, e.g. `aws eks get-token`,
//! `gke-gcloud-auth-plugin`, `kubelogin`), run by podline instead of by kube.
//!
//! Why not kube's: kube 5 runs the plugin with a blocking `Command::output()` and no bound, so
//! a plugin that hangs hangs `podline run` silently and for ever (at client construction, on an
//! async worker thread); and its error for a failing plugin prints the plugin's whole stdout and
//! stderr (`auth exec command ... failed with status 1: Output { stdout: [...] }`), its parse
//! error the lines around the error: both quote the credential the plugin prints. Here:
//!
//! - every run of the plugin is bounded ([`ExecPlugin::timeout`]); one that does not answer in
//!   time is killed and named (`the exec credential plugin aws did not answer within 60s`);
//! - no message holds the plugin's output or its arguments and env (which may carry secrets):
//!   it names the command, the exit status and what was wrong with the answer (position and
//!   kind, see [`crate::parse_error`]). The plugin's stderr is passed through to podline's, as
//!   kubectl does, because that is where plugins explain themselves ("run aws sso login");
//! - a token with an `expirationTimestamp` is refreshed by running the plugin again, bounded the
//!   same way, a minute before it expires (kube's margin), by the layer in [`ExecTokenLayer`];
//!   a client certificate and key are handed to the TLS configuration once, as kube does.
//!
//! The protocol is client-go's (<https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins>):
//! `KUBERNETES_EXEC_INFO` holds an `ExecCredential` with `spec.interactive` (and
//! `spec.cluster` when `provideClusterInfo`), the plugin prints an `ExecCredential` whose
//! `status` has a `token` or `clientCertificateData` and `clientKeyData`.

use std::io::IsTerminal as _;
use std::process::Stdio;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderValue, Request, header::AUTHORIZATION};
use jiff::Timestamp;
use kube::config::{ExecConfig, ExecInteractiveMode};
use tokio::io::AsyncReadExt as _;

/// How much of a plugin's stdout is read: an ExecCredential is a few KiB.
const MAX_OUTPUT: u64 = 1024 * 1024;

/// How long before its `expirationTimestamp` a token is refreshed (kube's margin).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Why an exec credential plugin gave no credential. No variant holds any of the plugin's
/// output, arguments or environment (see the module doc).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The plugin could not be started (not installed, not executable).
    #[error("the exec credential plugin {command} could not be started: {error}{}", hint(.install_hint))]
    Start {
        /// The kubeconfig's `command`.
        command: String,
        /// Why.
        error: std::io::Error,
        /// The kubeconfig's `installHint`, as kubectl prints it.
        install_hint: Option<String>,
    },
    /// The plugin did not exit within the bound; it was killed.
    #[error(
        "the exec credential plugin {command} did not answer within {timeout:?}; it was stopped (a plugin that waits for a login or a prompt cannot be answered here)"
    )]
    Timeout {
        /// The kubeconfig's `command`.
        command: String,
        /// The bound it broke.
        timeout: Duration,
    },
    /// The plugin exited unsuccessfully.
    #[error(
        "the exec credential plugin {command} failed ({status}); its output is not shown, as it may hold credentials (its stderr, if any, is above)"
    )]
    Failed {
        /// The kubeconfig's `command`.
        command: String,
        /// How it exited.
        status: std::process::ExitStatus,
    },
    /// The plugin printed something that is not an ExecCredential.
    #[error(
        "the exec credential plugin {command} printed no valid ExecCredential ({what}); its output is not shown, as it may hold credentials"
    )]
    Answer {
        /// The kubeconfig's `command`.
        command: String,
        /// What was wrong (position and kind, no text of the answer).
        what: String,
    },
    /// Reading the plugin's output failed.
    #[error("cannot read the answer of the exec credential plugin {command}: {error}")]
    Read {
        /// The kubeconfig's `command`.
        command: String,
        /// Why.
        error: std::io::Error,
    },
    /// `interactiveMode: Always` without a terminal on stdin (client-go refuses it too).
    #[error(
        "the exec credential plugin {command} needs a terminal (interactiveMode: Always), but standard input is not one"
    )]
    NeedsTerminal {
        /// The kubeconfig's `command`.
        command: String,
    },
    /// The kubeconfig's `exec:` names no command.
    #[error("the kubeconfig's exec credential plugin names no command")]
    NoCommand,
    /// `provideClusterInfo: true`, but kube gave no cluster to pass.
    #[error(
        "the exec credential plugin {command} asks for the cluster (provideClusterInfo), but the kubeconfig's cluster could not be read"
    )]
    NoClusterInfo {
        /// The kubeconfig's `command`.
        command: String,
    },
}

fn hint(install_hint: &Option<String>) -> String {
    install_hint
        .as_deref()
        .map(|h| format!("\n{}", h.trim_end()))
        .unwrap_or_default()
}

/// A credential a plugin answered with.
pub(crate) enum Credential {
    /// A bearer token, and when it expires (`None`: it does not).
    Token {
        header: HeaderValue,
        expires: Option<Timestamp>,
    },
    /// A client certificate and key (PEM), for the TLS configuration.
    Certificate { certificate: String, key: String },
}

/// One kubeconfig user's exec plugin, with the bound on each of its runs.
#[derive(Clone)]
pub(crate) struct ExecPlugin {
    config: ExecConfig,
    timeout: Duration,
}

impl ExecPlugin {
    /// Takes the exec plugin out of `auth_info` when kube would use it (no `auth-provider`,
    /// username/password, token or token file, which win over `exec` in kube and client-go), so
    /// kube never runs it; `None` when it has none or another credential wins.
    pub(crate) fn take(auth_info: &mut kube::config::AuthInfo, timeout: Duration) -> Option<Self> {
        let other_wins = auth_info.auth_provider.is_some()
            || (auth_info.username.is_some() && auth_info.password.is_some())
            || auth_info.token.is_some()
            || auth_info.token_file.is_some();
        if other_wins {
            return None;
        }
        let config = auth_info.exec.take()?;
        Some(Self { config, timeout })
    }

    /// The command as the kubeconfig names it (never its arguments: they may hold secrets).
    fn command(&self) -> String {
        self.config.command.clone().unwrap_or_default()
    }

    /// Runs the plugin once, bounded by the timeout, and reads its credential.
    pub(crate) async fn run(&self) -> Result<Credential, ExecError> {
        let command = self.command();
        let Some(program) = &self.config.command else {
            return Err(ExecError::NoCommand);
        };
        let mut cmd = tokio::process::Command::new(program);
        if let Some(args) = &self.config.args {
            cmd.args(args);
        }
        for entry in self.config.env.iter().flatten() {
            if let (Some(name), Some(value)) = (entry.get("name"), entry.get("value")) {
                cmd.env(name, value);
            }
        }
        let mode = self.config.interactive_mode.as_ref();
        let terminal = std::io::stdin().is_terminal();
        if mode == Some(&ExecInteractiveMode::Always) && !terminal {
            return Err(ExecError::NeedsTerminal { command });
        }
        let interactive = terminal && mode != Some(&ExecInteractiveMode::Never);
        cmd.stdin(if interactive {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut spec = serde_json::json!({ "interactive": interactive });
        if self.config.provide_cluster_info {
            let Some(cluster) = &self.config.cluster else {
                return Err(ExecError::NoClusterInfo { command });
            };
            spec["cluster"] = serde_json::to_value(cluster).unwrap_or_default();
        }
        let info = serde_json::json!({
            "apiVersion": self.config.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        });
        cmd.env("KUBERNETES_EXEC_INFO", info.to_string());
        for name in self.config.drop_env.iter().flatten() {
            cmd.env_remove(name);
        }
        // Dropped on the timeout below: the plugin is killed, not left behind.
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|error| ExecError::Start {
            command: command.clone(),
            error,
            install_hint: self.config.install_hint.clone(),
        })?;
        let answer = async {
            let mut stdout = Vec::new();
            if let Some(out) = child.stdout.take() {
                out.take(MAX_OUTPUT).read_to_end(&mut stdout).await?;
            }
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((status, stdout))
        };
        let (status, stdout) = match tokio::time::timeout(self.timeout, answer).await {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => return Err(ExecError::Read { command, error }),
            Err(_) => {
                tracing::warn!(%command, timeout = ?self.timeout, "exec credential plugin timed out; stopping it");
                return Err(ExecError::Timeout {
                    command,
                    timeout: self.timeout,
                });
            }
        };
        if !status.success() {
            return Err(ExecError::Failed { command, status });
        }
        read_answer(&command, &stdout)
    }
}

/// The plugin's answer, read as YAML (JSON is YAML; client-go's decoder accepts both).
fn read_answer(command: &str, stdout: &[u8]) -> Result<Credential, ExecError> {
    let answer = |what: String| ExecError::Answer {
        command: command.to_owned(),
        what,
    };
    #[derive(serde::Deserialize)]
    struct Answer {
        status: Option<Status>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        expiration_timestamp: Option<String>,
        token: Option<String>,
        client_certificate_data: Option<String>,
        client_key_data: Option<String>,
    }
    let text = std::str::from_utf8(stdout).map_err(|_| answer("not UTF-8 text".into()))?;
    let parsed: Answer =
        serde_saphyr::from_str(text).map_err(|err| answer(crate::parse_error::yaml(&err)))?;
    let Some(status) = parsed.status else {
        return Err(answer("it has no status".into()));
    };
    let expires = status
        .expiration_timestamp
        .as_deref()
        .map(|ts| {
            ts.parse::<Timestamp>()
                .map_err(|_| answer("status.expirationTimestamp is not an RFC 3339 time".into()))
        })
        .transpose()?;
    if let (Some(certificate), Some(key)) = (status.client_certificate_data, status.client_key_data)
    {
        return Ok(Credential::Certificate { certificate, key });
    }
    let Some(token) = status.token.filter(|t| !t.is_empty()) else {
        return Err(answer(
            "its status has neither a token nor clientCertificateData and clientKeyData".into(),
        ));
    };
    let mut header = HeaderValue::try_from(format!("Bearer {token}"))
        .map_err(|_| answer("status.token holds characters not allowed in a header".into()))?;
    header.set_sensitive(true);
    Ok(Credential::Token { header, expires })
}

/// The current token of a plugin, refreshed when it is about to expire.
struct TokenSource {
    plugin: ExecPlugin,
    current: tokio::sync::Mutex<(HeaderValue, Option<Timestamp>)>,
}

impl TokenSource {
    /// The `Authorization` header to send: the current token, or a new one from the plugin if
    /// it expires within [`REFRESH_MARGIN`].
    async fn header(&self) -> Result<HeaderValue, ExecError> {
        let mut current = self.current.lock().await;
        // Expired or within the margin (a time past jiff's range counts as expired).
        let stale = current.1.is_some_and(|expires| {
            Timestamp::now()
                .checked_add(REFRESH_MARGIN)
                .is_ok_and(|soon| soon >= expires)
        });
        if stale {
            match self.plugin.run().await? {
                Credential::Token { header, expires } => *current = (header, expires),
                Credential::Certificate { .. } => {
                    return Err(ExecError::Answer {
                        command: self.plugin.command(),
                        what: "it answered a token first, then a client certificate".into(),
                    });
                }
            }
        }
        Ok(current.0.clone())
    }
}

/// The auth layer for a plugin's token (in place of kube's): adds `Authorization: Bearer` to
/// every request, refreshing the token through the plugin (bounded) before it expires.
#[derive(Clone)]
pub(crate) struct ExecTokenLayer {
    source: Arc<TokenSource>,
}

impl ExecTokenLayer {
    /// The layer for `plugin`, starting from the token it answered first.
    pub(crate) fn new(plugin: ExecPlugin, header: HeaderValue, expires: Option<Timestamp>) -> Self {
        Self {
            source: Arc::new(TokenSource {
                plugin,
                current: tokio::sync::Mutex::new((header, expires)),
            }),
        }
    }
}

impl<S> tower::Layer<S> for ExecTokenLayer {
    type Service = ExecToken<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ExecToken {
            inner,
            source: self.source.clone(),
        }
    }
}

/// The service of [`ExecTokenLayer`].
#[derive(Clone)]
pub(crate) struct ExecToken<S> {
    inner: S,
    source: Arc<TokenSource>,
}

impl<S, B> tower::Service<Request<B>> for ExecToken<S>
where
    S: tower::Service<Request<B>, Error = tower::BoxError> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The clone that was polled ready goes with the request (tower's rule for a service
        // used after an await).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let source = self.source.clone();
        Box::pin(async move {
            let header = source.header().await?;
            request.headers_mut().insert(AUTHORIZATION, header);
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKER: &str = "Zq9PluginToken";

    fn plugin(script: &str, timeout: Duration) -> (tempfile::TempDir, ExecPlugin) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin");
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = ExecConfig {
            api_version: Some("client.authentication.k8s.io/v1".into()),
            command: Some(path.display().to_string()),
            args: Some(vec![format!("--secret-arg={MARKER}")]),
            interactive_mode: Some(ExecInteractiveMode::Never),
            ..ExecConfig::default()
        };
        (dir, ExecPlugin { config, timeout })
    }

    async fn error_of(script: &str) -> String {
        let (_dir, plugin) = plugin(script, Duration::from_secs(10));
        let Err(err) = plugin.run().await else {
            panic!("{script}: the plugin gave a credential");
        };
        let told = err.to_string();
        assert!(!told.contains(MARKER), "{script}: {told}");
        assert!(told.contains("plugin"), "{told}");
        told
    }

    #[tokio::test]
    async fn a_failing_or_garbled_plugin_should_be_named_without_its_output() {
        let told = error_of(&format!(
            r#"echo '{{"status": {{"token": "{MARKER}"}}}}'; exit 3"#
        ))
        .await;
        assert!(told.contains("exit status: 3"), "{told}");
        // A bare token, as some plugins print: not an ExecCredential, and not quoted.
        let told = error_of(&format!("echo {MARKER}")).await;
        assert!(told.contains("no valid ExecCredential"), "{told}");
        let told = error_of(&format!("printf '{{\"status\": {{\"token\": \"{MARKER}\"'")).await;
        assert!(told.contains("line 1"), "{told}");
        let told = error_of(&format!(
            r#"echo '{{"status": {{"token": ["{MARKER}"]}}}}'"#
        ))
        .await;
        assert!(told.contains("line 1 column 22: expected string"), "{told}");
        let told = error_of(&format!(
            r#"echo '{{"status": {{"token": "{MARKER}", "expirationTimestamp": "{MARKER}"}}}}'"#
        ))
        .await;
        assert!(told.contains("expirationTimestamp"), "{told}");
    }

    #[tokio::test]
    async fn a_hanging_plugin_should_be_stopped_at_its_bound_and_named() {
        let (_dir, plugin) = plugin("exec sleep 600", Duration::from_millis(300));
        let started = std::time::Instant::now();
        let Err(err) = plugin.run().await else {
            panic!("a hanging plugin gave a credential");
        };
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let told = err.to_string();
        assert!(matches!(err, ExecError::Timeout { .. }), "{told}");
        assert!(told.contains("plugin") && told.contains("300ms"), "{told}");
        assert!(!told.contains(MARKER), "{told}");
    }

    #[tokio::test]
    async fn a_token_should_be_read_and_refreshed_before_it_expires() {
        let (_dir, plugin) = plugin(
            r#"n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0.count"
echo "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t$n\",\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"}}""#,
            Duration::from_secs(10),
        );
        let Credential::Token { header, expires } = plugin.run().await.unwrap() else {
            panic!("not a token");
        };
        assert_eq!(header, "Bearer t1");
        assert!(header.is_sensitive());
        let layer = ExecTokenLayer::new(plugin, header, expires);
        // Expired long ago: every request runs the plugin again.
        assert_eq!(layer.source.header().await.unwrap(), "Bearer t2");
        assert_eq!(layer.source.header().await.unwrap(), "Bearer t3");
    }

    #[tokio::test]
    async fn a_token_without_expiry_should_be_kept() {
        let (_dir, plugin) = plugin(
            r#"echo '{"status":{"token":"fixed"}}'"#,
            Duration::from_secs(10),
        );
        let Credential::Token { header, expires } = plugin.run().await.unwrap() else {
            panic!("not a token");
        };
        assert!(expires.is_none());
        let layer = ExecTokenLayer::new(plugin, header, expires);
        assert_eq!(layer.source.header().await.unwrap(), "Bearer fixed");
    }
}
