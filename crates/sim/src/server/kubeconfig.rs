//! Renders the kubeconfig that points kubectl and kube-rs at a sim.

use base64::Engine;

/// Name of the cluster, user and context in the kubeconfig.
pub const CONTEXT: &str = "podline-sim";

/// A kubeconfig for `server` (trusting `ca_pem` if set) with bearer `token`.
pub fn render(server: &str, ca_pem: Option<&str>, token: &str) -> String {
    let ca = ca_pem
        .map(|pem| {
            format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(pem)
            )
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT}\n  cluster:\n    server: {server}\n{ca}contexts:\n- name: {CONTEXT}\n  context:\n    cluster: {CONTEXT}\n    user: {CONTEXT}\n    namespace: default\ncurrent-context: {CONTEXT}\nusers:\n- name: {CONTEXT}\n  user:\n    token: {token}\npreferences: {{}}\n"
    )
}
