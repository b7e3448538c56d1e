//! Connecting to the cluster, with the binary's words for what the client crate reports
//! without naming a flag: where `--kubeconfig` and `--context` come in.

use podline_client::connect::{
    ConfigSource, ConnectError, ConnectOptions, Connected, KubeconfigText,
};
use podline_client::error::Chain;

/// [`podline_client::connect::connect`], with errors that name the flags a user can pass.
pub async fn connect(options: &ConnectOptions) -> anyhow::Result<Connected> {
    podline_client::connect::connect(options)
        .await
        .map_err(told)
}

/// The client's error as the command line tells it: the errors about finding the
/// configuration name `--kubeconfig` and `--context`; every other one is passed on as it is.
fn told(err: ConnectError) -> anyhow::Error {
    match &err {
        ConnectError::Kubeconfig {
            source_name: ConfigSource::Flag(path),
            error,
        } => anyhow::anyhow!(
            "cannot use kubeconfig from --kubeconfig {}: {}",
            path.display(),
            KubeconfigText(error)
        ),
        ConnectError::ContextWithoutKubeconfig(context) => anyhow::anyhow!(
            "--context {context} was given, but no kubeconfig was found (--kubeconfig, KUBECONFIG, ~/.kube/config)"
        ),
        ConnectError::NoConfig(error) => anyhow::anyhow!(
            "no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod ({})",
            Chain(error)
        ),
        _ => err.into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use podline_client::connect::{Lookup, load_config};

    #[tokio::test]
    async fn configuration_errors_should_name_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.kubeconfig");
        let lookup = Lookup {
            flag: Some(missing.clone()),
            ..Lookup::default()
        };
        let err = told(load_config(&lookup, None).await.unwrap_err()).to_string();
        assert!(
            err.starts_with(&format!(
                "cannot use kubeconfig from --kubeconfig {}: ",
                missing.display()
            )),
            "{err}"
        );
        let nowhere = Lookup::default();
        let err = told(load_config(&nowhere, Some("prod")).await.unwrap_err()).to_string();
        assert_eq!(
            err,
            "--context prod was given, but no kubeconfig was found (--kubeconfig, KUBECONFIG, ~/.kube/config)"
        );
    }
}
