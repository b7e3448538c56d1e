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

/// The Go release kube-apiserver 1.32.4 was built with (`/version`'s `goVersion`): 1.32 patch
/// releases are built with go1.23.x up to v1.32.9 and go1.24.x from v1.32.10
/// (CHANGELOG/CHANGELOG-1.32.md), so this changes series with [`GIT_VERSION`].
pub const GO_VERSION: &str = "go1.23.8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_version_is_the_reported_version() {
        let prefix = format!("v{}.{}.", KUBE_VERSION.0, KUBE_VERSION.1);
        assert!(GIT_VERSION.starts_with(&prefix), "{GIT_VERSION}");
    }

    #[test]
    fn the_go_version_is_the_one_of_the_claimed_patch_release() {
        let patch: u32 = GIT_VERSION["v1.32.".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a patch release");
        let series = if patch >= 10 { "go1.24." } else { "go1.23." };
        assert!(
            GO_VERSION.starts_with(series),
            "{GIT_VERSION}: {GO_VERSION}"
        );
    }
}
