//! Why a run was cancelled: the signal, typed, so the exit code and the error's words come from
//! one match instead of comparing signal names. A leaf module: the launcher and its errors both
//! use it.

use std::fmt;

use crate::exit;

/// Why a run was cancelled; decides the exit code (130 or 143).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// SIGINT / Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl CancelReason {
    /// The process exit code of a run cancelled for this reason: [`exit::SIGINT`] (130) or
    /// [`exit::SIGTERM`] (143), as a shell reports a process killed by the signal.
    pub fn exit_code(self) -> u8 {
        match self {
            CancelReason::Interrupt => exit::SIGINT,
            CancelReason::Terminate => exit::SIGTERM,
        }
    }

    /// The signal's name, as the error messages say it.
    pub fn signal(self) -> &'static str {
        match self {
            CancelReason::Interrupt => "SIGINT",
            CancelReason::Terminate => "SIGTERM",
        }
    }
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.signal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_should_name_its_signal_and_exit_as_a_shell_would() {
        assert_eq!(CancelReason::Interrupt.to_string(), "SIGINT");
        assert_eq!(CancelReason::Terminate.to_string(), "SIGTERM");
        assert_eq!(CancelReason::Interrupt.exit_code(), 128 + 2);
        assert_eq!(CancelReason::Terminate.exit_code(), 128 + 15);
    }
}
