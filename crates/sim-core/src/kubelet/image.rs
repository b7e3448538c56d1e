//! Images as a container runtime reports them: normalized references, digests, ids, and the
//! exact pull error messages users see from containerd.

use std::time::Duration;

/// A deterministic 64-hex-digit digest of `parts` (not cryptographic: only looks like sha256).
pub(crate) fn hex64(parts: &[&str]) -> String {
    let mut out = String::with_capacity(64);
    for seed in 0u64..4 {
        // FNV-1a, seeded per quarter so the four words differ.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for part in parts {
            for b in part.bytes().chain(std::iter::once(0xff)) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

/// An image reference split like containerd does: registry, repository and tag or digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImageRef {
    /// `docker.io/library/busybox` (registry + repository, no tag).
    pub(crate) repository: String,
    /// `docker.io/library/busybox:latest` (what `containerStatuses[].image` shows).
    pub(crate) full: String,
    /// True when the reference has no tag or the tag `latest` (pull policy defaults to Always).
    pub(crate) latest: bool,
}

impl ImageRef {
    /// Normalizes `image` (`busybox` -> `docker.io/library/busybox:latest`), or `None` when it
    /// is not a valid reference (the kubelet's `InvalidImageName`).
    pub(crate) fn parse(image: &str) -> Option<ImageRef> {
        if image.is_empty() || image.chars().any(char::is_whitespace) {
            return None;
        }
        let (name, digest) = match image.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (image, None),
        };
        let (name, tag) = match name.rsplit_once(':') {
            Some((n, t)) if !t.contains('/') => (n, Some(t)),
            _ => (name, None),
        };
        let mut components: Vec<&str> = name.split('/').collect();
        let registry = if components.len() > 1
            && (components[0].contains('.')
                || components[0].contains(':')
                || components[0] == "localhost")
        {
            components.remove(0)
        } else {
            "docker.io"
        };
        if registry == "docker.io" && components.len() == 1 {
            components.insert(0, "library");
        }
        let valid_component = |c: &&str| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if !components.iter().all(valid_component) {
            return None;
        }
        if let Some(tag) = tag {
            let ok = !tag.is_empty()
                && tag.len() <= 128
                && tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return None;
            }
        }
        if digest.is_some_and(|d| !d.starts_with("sha256:") || d.len() != 71) {
            return None;
        }
        let repository = format!("{registry}/{}", components.join("/"));
        let full = match (tag, digest) {
            (_, Some(digest)) => format!("{repository}@{digest}"),
            (Some(tag), None) => format!("{repository}:{tag}"),
            (None, None) => format!("{repository}:latest"),
        };
        Some(ImageRef {
            latest: digest.is_none() && tag.is_none_or(|t| t == "latest"),
            repository,
            full,
        })
    }

    /// `docker.io/library/busybox@sha256:<64 hex derived from the reference>`.
    pub(crate) fn image_id(&self) -> String {
        format!("{}@sha256:{}", self.repository, hex64(&[&self.full]))
    }

    /// A stable, plausible compressed size for the `Pulled` event.
    pub(crate) fn size_bytes(&self) -> u64 {
        let h = u64::from_str_radix(&hex64(&[&self.full, "size"])[..12], 16).unwrap_or(0);
        700_000 + h % 60_000_000
    }
}

/// `Failed to pull image "x": ...` for an image that does not exist.
pub(crate) fn not_found_message(image: &str, full: &str) -> String {
    format!(
        "Failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and \
         unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
    )
}

/// `Failed to pull image "x": ... 401 Unauthorized` for a registry that refuses anonymous pulls.
pub(crate) fn unauthorized_message(image: &str, full: &str, repository: &str) -> String {
    let scope_repo = repository
        .split_once('/')
        .map_or(repository, |(_, r)| r)
        .replace('/', "%2F");
    format!(
        "Failed to pull image \"{image}\": rpc error: code = Unknown desc = failed to pull and \
         unpack image \"{full}\": failed to resolve reference \"{full}\": failed to authorize: \
         failed to fetch anonymous token: unexpected status from GET request to \
         https://auth.docker.io/token?scope=repository%3A{scope_repo}%3Apull&service=registry.docker.io: \
         401 Unauthorized"
    )
}

/// The `InvalidImageName` message.
pub(crate) fn invalid_name_message(image: &str) -> String {
    format!(
        "Failed to apply default image tag \"{image}\": couldn't parse image name \"{image}\": \
         invalid reference format"
    )
}

/// Formats a duration the way Go's `time.Duration.String()` does for the `Pulled` event.
pub(crate) fn go_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 1.0 {
        trim_float(format!("{secs:.9}")) + "s"
    } else if d.as_micros() >= 1000 {
        trim_float(format!("{:.6}", d.as_nanos() as f64 / 1e6)) + "ms"
    } else if d.as_nanos() >= 1000 {
        trim_float(format!("{:.3}", d.as_nanos() as f64 / 1e3)) + "µs"
    } else {
        format!("{}ns", d.as_nanos())
    }
}

fn trim_float(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn short_names_should_normalize_to_docker_hub() {
        let r = ImageRef::parse("busybox").unwrap();
        assert_eq!(r.full, "docker.io/library/busybox:latest");
        assert_eq!(r.repository, "docker.io/library/busybox");
        assert!(r.latest);
        let r = ImageRef::parse("bitnami/redis:7.2").unwrap();
        assert_eq!(r.full, "docker.io/bitnami/redis:7.2");
        assert!(!r.latest);
        let r = ImageRef::parse("ghcr.io/org/app:v1").unwrap();
        assert_eq!(r.full, "ghcr.io/org/app:v1");
        let r = ImageRef::parse("localhost:5000/app").unwrap();
        assert_eq!(r.full, "localhost:5000/app:latest");
    }

    #[test]
    fn bad_references_should_be_invalid() {
        for bad in [
            "",
            "Busybox",
            "busy box",
            "busybox:",
            "a//b",
            "x@sha256:12",
            "-x",
        ] {
            assert!(ImageRef::parse(bad).is_none(), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn image_id_should_be_a_stable_sha256_shape() {
        let r = ImageRef::parse("busybox").unwrap();
        let id = r.image_id();
        assert_eq!(id, ImageRef::parse("busybox:latest").unwrap().image_id());
        let digest = id
            .strip_prefix("docker.io/library/busybox@sha256:")
            .unwrap();
        assert_eq!(digest.len(), 64);
        assert!(digest.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, ImageRef::parse("alpine").unwrap().image_id());
    }

    #[test]
    fn messages_should_look_like_containerd() {
        assert_eq!(
            not_found_message("x", "docker.io/library/x:latest"),
            "Failed to pull image \"x\": rpc error: code = NotFound desc = failed to pull and unpack image \
             \"docker.io/library/x:latest\": failed to resolve reference \"docker.io/library/x:latest\": \
             docker.io/library/x:latest: not found"
        );
        assert!(
            unauthorized_message("x", "docker.io/library/x:latest", "docker.io/library/x")
                .ends_with("401 Unauthorized")
        );
        assert!(invalid_name_message("X").contains("couldn't parse image name \"X\""));
    }

    #[test]
    fn go_durations_should_match_go_formatting() {
        assert_eq!(go_duration(Duration::from_millis(10)), "10ms");
        assert_eq!(go_duration(Duration::from_micros(10_500)), "10.5ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(2)), "2s");
    }
}
