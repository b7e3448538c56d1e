//! The Kubernetes release the sim answers like, in one place: `/version`, the OpenAPI
//! documents' `info.version` and the simulated node's kubelet version all say it. Public for
//! the API (`/version`, OpenAPI) in podline-sim; the kubelet here reads it too.

/// The Kubernetes version the sim reports (`major`, `minor`): the kube-apiserver release it
/// answers like.
pub const KUBE_VERSION: (&str, &str) = ("1", "32");

/// The `gitVersion` the sim reports. The sim's name is semver build metadata (as in k3s's
/// `v1.32.4+k3s1`), not a pre-release tag, so a client comparing versions (`>= 1.32.0`) sees
/// 1.32.4 itself.
pub const GIT_VERSION: &str = "v1.32.4+podline-sim";

/// The Go release kube-apiserver 1.32.4 was built with (`/version`'s `goVersion`).
pub const GO_VERSION: &str = "go1.23.8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_version_is_the_reported_version() {
        let prefix = format!("v{}.{}.", KUBE_VERSION.0, KUBE_VERSION.1);
        assert!(GIT_VERSION.starts_with(&prefix), "{GIT_VERSION}");
    }
}
