//! The one shutdown-signal handler every subcommand uses: waits for SIGINT (Ctrl-C) or SIGTERM
//! (what Kubernetes sends) and says which arrived, so a subcommand that reports interruption can
//! exit 130 or 143 as a shell would (`run`, through the launcher's `CancelReason`); `record`,
//! `ui` and `sim` exit 0 after a clean shutdown.

use tokio_util::sync::CancellationToken;

/// The signal that asked podline to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT, i.e. Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// The signal's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// SIGINT and SIGTERM handlers, installed when this is made rather than when first awaited:
/// from then on neither signal can kill the process with its default action, and one that
/// arrives before [`Listener::wait`] is polled is kept, not lost. `run` makes one before
/// anything else, so a SIGTERM at any stage (before connecting too) ends it the same way.
pub struct Listener {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Listener {
    /// Installs the handlers; one that cannot be installed is logged once and never fires (the
    /// other still does). Needs a Tokio runtime.
    #[cfg(unix)]
    pub fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let install = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(installed) => Some(installed),
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for {name}");
                None
            }
        };
        Listener {
            interrupt: install(SignalKind::interrupt(), "SIGINT"),
            terminate: install(SignalKind::terminate(), "SIGTERM"),
        }
    }

    /// Installs the Ctrl-C handler when first awaited (no SIGTERM here).
    #[cfg(not(unix))]
    pub fn install() -> Self {
        Listener {}
    }

    /// Waits for SIGINT or SIGTERM and returns which came first.
    #[cfg(unix)]
    pub async fn wait(self) -> Signal {
        async fn next(signal: Option<tokio::signal::unix::Signal>) {
            if let Some(mut signal) = signal
                && signal.recv().await.is_some()
            {
                return;
            }
            std::future::pending::<()>().await;
        }
        tokio::select! {
            () = next(self.interrupt) => Signal::Interrupt,
            () = next(self.terminate) => Signal::Terminate,
        }
    }

    /// Waits for Ctrl-C.
    #[cfg(not(unix))]
    pub async fn wait(self) -> Signal {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        Signal::Interrupt
    }
}

/// Waits for SIGINT or SIGTERM and returns which came first (handlers installed on first poll;
/// see [`Listener`] to install them earlier).
pub async fn shutdown() -> Signal {
    Listener::install().wait().await
}

/// Cancels `token` when SIGINT or SIGTERM arrives (spawn it), and returns the signal.
pub async fn cancel_on_signal(token: CancellationToken) -> Signal {
    let signal = shutdown().await;
    tracing::info!(signal = signal.name(), "signal received: stopping");
    token.cancel();
    signal
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process sends itself SIGTERM: the handler must report it as Terminate.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_sigterm_should_be_reported_as_terminate() {
        // Installed first, so a SIGTERM sent before the handler under test listens is caught by
        // tokio (and retried below) instead of killing the test process.
        let _installed = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        let token = CancellationToken::new();
        let waiter = tokio::spawn(cancel_on_signal(token.clone()));
        // The spawned task may not listen yet: resend until the token is cancelled.
        let pid = std::process::id().to_string();
        for _ in 0..200 {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status();
            if tokio::time::timeout(std::time::Duration::from_millis(50), token.cancelled())
                .await
                .is_ok()
            {
                break;
            }
        }
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .expect("SIGTERM was never reported");
        assert_eq!(got.expect("the handler task panicked"), Signal::Terminate);
    }
}
