//! What is behind an error, found in its cause chain: a rejected certificate, a protocol
//! mismatch, a timeout. The chain is walked through `io::Error` wrappers and the causes a
//! [`TransportFailure`] names, which `source()` alone would skip.

use crate::transport::{FailureKind, TransportFailure};

/// Calls `found` on every error in the cause chain, including the error wrapped inside an
/// `io::Error` (whose `source()` skips it) and the cause a [`TransportFailure`] describes in its
/// message instead of returning it from `source()`.
pub(crate) fn any_cause(
    err: &(dyn std::error::Error + 'static),
    found: &dyn Fn(&(dyn std::error::Error + 'static)) -> bool,
) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if found(e) {
            return true;
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            && any_cause(inner, found)
        {
            return true;
        }
        if let Some(cause) = e
            .downcast_ref::<TransportFailure>()
            .and_then(TransportFailure::cause)
            && any_cause(cause, found)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Whether TLS rejected the server's certificate: no retry fixes that (wrong CA, wrong name).
pub(super) fn is_bad_certificate(err: &(dyn std::error::Error + 'static)) -> bool {
    any_cause(err, &|e| {
        matches!(
            e.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_))
        )
    })
}

/// Whether an `http://` URL reached a TLS server, or an `https://` URL a plain-HTTP one: no
/// retry fixes that either.
pub(super) fn speaks_tls(err: &(dyn std::error::Error + 'static)) -> bool {
    any_cause(err, &|e| {
        e.downcast_ref::<TransportFailure>().is_some_and(|f| {
            matches!(
                f.kind(),
                FailureKind::SpeaksTls | FailureKind::SpeaksPlainHttp
            )
        })
    })
}

/// Whether a timeout (ours, tower's, hyper-timeout's or the OS's) is somewhere in the cause chain.
pub(super) fn is_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    any_cause(err, &|e| {
        e.is::<tokio::time::error::Elapsed>()
            || e.is::<tower::timeout::error::Elapsed>()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
    })
}
