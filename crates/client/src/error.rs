//! Error types of the client core (the watch has its own, in `watch::error`).

use std::time::Duration;

/// A backoff configuration that cannot work, rejected by
/// [`FullJitter::try_new`](crate::backoff::FullJitter::try_new) instead of being silently clamped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBackoff {
    /// A zero base would make every envelope zero: a busy loop.
    #[error("backoff base must be greater than zero")]
    ZeroBase,
    /// The cap bounds every delay, so it cannot be below the first one.
    #[error("backoff cap ({cap:?}) must be at least the base ({base:?})")]
    CapBelowBase {
        /// The configured base.
        base: Duration,
        /// The configured cap.
        cap: Duration,
    },
    /// A factor below 1 would shrink delays; NaN or infinity make no envelope at all.
    #[error("backoff factor must be a finite number >= 1, got {0}")]
    Factor(f64),
}

/// Formats an error and its causes on one line (`top: cause: root`), each cause once.
///
/// Why it exists: many errors in the stack (kube's, and formerly podline's own) print their
/// source in `Display` *and* return it from `source()`, so the usual chain printers (`{:#}` of
/// anyhow, a `source()` walk) repeat the same cause two to four times. A cause whose text is
/// already part of what was printed adds nothing and is skipped.
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut cause = self.0.source();
        f.write_str(&once_each(
            self.0.to_string(),
            std::iter::from_fn(|| {
                let next = cause?;
                cause = next.source();
                Some(next.to_string())
            }),
        ))
    }
}

impl std::fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Joins `top` and the texts of its causes with `": "`, leaving out every cause whose text is
/// empty or already contained in what was joined so far. Public for the binary, whose errors are
/// `anyhow` chains: `once_each(err.to_string(), err.chain().skip(1).map(|e| e.to_string()))`.
pub fn once_each(top: String, causes: impl IntoIterator<Item = String>) -> String {
    let mut out = top;
    for text in causes {
        let text = text.trim();
        if text.is_empty() || out.contains(text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source in its message and returns it from `source()`.
    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner: {0}")]
    struct Inner(#[source] std::io::Error);

    #[test]
    fn chain_should_print_each_cause_once() {
        let err = Outer(Inner(std::io::Error::other("disk on fire")));
        assert_eq!(Chain(&err).to_string(), "outer: inner: disk on fire");
        let quiet = std::io::Error::other(InvalidBackoff::ZeroBase);
        assert_eq!(
            Chain(&quiet).to_string(),
            "backoff base must be greater than zero"
        );
    }

    #[test]
    fn once_each_should_add_only_new_causes() {
        let joined = once_each(
            "cannot watch pods".into(),
            [
                "LIST failed: refused".into(),
                "refused".into(),
                String::new(),
                "closed".into(),
            ],
        );
        assert_eq!(joined, "cannot watch pods: LIST failed: refused: closed");
    }
}
