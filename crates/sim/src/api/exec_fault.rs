//! Stream faults on `pods/exec` and `pods/attach`. Their output is not a response body but
//! WebSocket frames on the upgraded connection, so the fault layer (`crate::fault`, a layer
//! above this one) cannot wrap it: it hands the exec handler an [`ExecFault`] (a request
//! extension), and the handler passes every frame it sends through [`ExecFault::admit`].
//!
//! As on a log stream, `after_events` counts output: here the frames carrying stdout or stderr
//! data (the empty frame that opens the streams, and the error channel's Status, do not count).
//! `stall` sends nothing more and keeps the connection open until the client goes; `end_early`
//! closes the WebSocket normally without the Status (so the client never learns how the command
//! ended); `reset` and `reset_stream` cut the TCP connection (an upgraded connection carries
//! only the one stream).

use std::sync::Arc;

/// Cuts the session's TCP connection (RST), whatever is in flight.
pub type Cut = Arc<dyn Fn() + Send + Sync>;

/// What an exec fault does once its count is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecFaultKind {
    /// Send nothing more; keep the connection open.
    Stall,
    /// Close the WebSocket normally, without the Status.
    EndEarly,
    /// Cut the connection.
    Reset,
}

/// A fault for one exec or attach session (see the module docs).
#[derive(Clone)]
pub struct ExecFault {
    kind: ExecFaultKind,
    after_frames: Option<u64>,
    after_bytes: Option<u64>,
    cut: Option<Cut>,
    frames: u64,
    bytes: u64,
}

impl std::fmt::Debug for ExecFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecFault")
            .field("kind", &self.kind)
            .field("after_frames", &self.after_frames)
            .field("after_bytes", &self.after_bytes)
            .finish_non_exhaustive()
    }
}

/// What to do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it.
    Send,
    /// Send it, then act (the count is reached with it).
    SendThenAct(ExecFaultKind),
    /// Do not send it: act now.
    Act(ExecFaultKind),
}

impl ExecFault {
    /// A fault of `kind` after `after_frames` output frames or `after_bytes` output bytes
    /// (whichever comes first; neither: at once); `cut` cuts the connection (None in process).
    pub fn new(
        kind: ExecFaultKind,
        after_frames: Option<u64>,
        after_bytes: Option<u64>,
        cut: Option<Cut>,
    ) -> Self {
        let after_frames = if after_bytes.is_none() {
            Some(after_frames.unwrap_or(0))
        } else {
            after_frames
        };
        Self {
            kind,
            after_frames,
            after_bytes,
            cut,
            frames: 0,
            bytes: 0,
        }
    }

    /// The verdict on the next frame, `output` the length of its stdout/stderr payload (0 for
    /// other frames).
    pub fn admit(&mut self, output: usize) -> Verdict {
        let reached = |fault: &Self| {
            fault.after_frames.is_some_and(|n| fault.frames >= n)
                || fault.after_bytes.is_some_and(|n| fault.bytes >= n)
        };
        if reached(self) {
            return Verdict::Act(self.kind);
        }
        if output == 0 {
            return Verdict::Send;
        }
        self.frames = self.frames.saturating_add(1);
        self.bytes = self
            .bytes
            .saturating_add(u64::try_from(output).unwrap_or(u64::MAX));
        if reached(self) {
            Verdict::SendThenAct(self.kind)
        } else {
            Verdict::Send
        }
    }

    /// Cuts the connection (RST) if there is one; says whether it did.
    pub fn cut(&self) -> bool {
        match &self.cut {
            Some(cut) => {
                cut();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_frames_are_counted_and_other_frames_pass_until_the_count_is_reached() {
        let mut fault = ExecFault::new(ExecFaultKind::EndEarly, Some(2), None, None);
        assert_eq!(fault.admit(0), Verdict::Send, "the opening frame");
        assert_eq!(fault.admit(3), Verdict::Send);
        assert_eq!(
            fault.admit(3),
            Verdict::SendThenAct(ExecFaultKind::EndEarly)
        );
        assert_eq!(fault.admit(0), Verdict::Act(ExecFaultKind::EndEarly));
        let mut at_once = ExecFault::new(ExecFaultKind::Stall, None, None, None);
        assert_eq!(at_once.admit(1), Verdict::Act(ExecFaultKind::Stall));
        let mut bytes = ExecFault::new(ExecFaultKind::Reset, None, Some(4), None);
        assert_eq!(bytes.admit(3), Verdict::Send);
        assert_eq!(bytes.admit(2), Verdict::SendThenAct(ExecFaultKind::Reset));
    }
}
