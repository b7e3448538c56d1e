//! Exactly-once log lines across stream reconnects (pure logic, no IO).
//!
//! podline reads logs with `timestamps=true`, so every line arrives as `<RFC3339Nano> <text>`.
//! When a stream breaks or stalls, it reopens with `sinceTime` = the last printed timestamp
//! **floored to the second** (the API only takes seconds, and kube rounds to the nearest one,
//! which could skip lines). The new stream therefore replays some lines already printed.
//! [`Dedup`] drops exactly those:
//!
//! - while replaying, a line older than the last printed timestamp was printed before: drop;
//! - a line with exactly the last printed timestamp is dropped only if it matches, in order,
//!   the lines printed with that timestamp (several lines can share one);
//! - the first line that is neither ends the replay: it and everything after it are new.
//!
//! Outside a replay every line is printed as is, so out-of-order timestamps inside one stream
//! never lose lines.

use std::collections::VecDeque;

use jiff::Timestamp;

/// Splits `<timestamp> <text>` into its parts. `None` when the line has no valid timestamp
/// prefix (then the caller prints it unchanged).
pub fn split_timestamp(line: &[u8]) -> Option<(Timestamp, &[u8])> {
    let space = line.iter().position(|&b| b == b' ')?;
    let ts = std::str::from_utf8(&line[..space]).ok()?.parse().ok()?;
    Some((ts, &line[space + 1..]))
}

/// Tracks what was printed so a resumed stream prints each line once.
#[derive(Debug, Default)]
pub struct Dedup {
    /// Timestamp of the last printed line.
    last: Option<Timestamp>,
    /// Texts printed with exactly `last`, in order.
    at_last: Vec<Vec<u8>>,
    /// During a replay: texts at `last` still expected before new lines begin.
    expect: VecDeque<Vec<u8>>,
    replaying: bool,
}

impl Dedup {
    /// A tracker that has printed nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the next stream should start: the last printed timestamp floored to the second
    /// (`None`: from the beginning).
    pub fn resume_from(&self) -> Option<Timestamp> {
        let last = self.last?;
        Timestamp::from_second(last.as_second()).ok()
    }

    /// Call when a new stream opens: what arrives next may repeat printed lines.
    pub fn begin_stream(&mut self) {
        self.replaying = self.last.is_some();
        self.expect = self.at_last.iter().cloned().collect();
    }

    /// Decides whether a line (timestamp, text) is new; records it if so.
    pub fn accept(&mut self, ts: Timestamp, text: &[u8]) -> bool {
        if self.replaying {
            match self.last {
                Some(last) if ts < last => return false,
                Some(last)
                    if ts == last && self.expect.front().is_some_and(|e| e.as_slice() == text) =>
                {
                    self.expect.pop_front();
                    return false;
                }
                _ => {}
            }
            self.replaying = false;
            self.expect.clear();
        }
        if self.last == Some(ts) {
            self.at_last.push(text.to_vec());
        } else {
            self.last = Some(ts);
            self.at_last.clear();
            self.at_last.push(text.to_vec());
        }
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// Feeds a stream of (ts, text) and returns what was printed.
    fn feed(d: &mut Dedup, lines: &[(&str, &str)]) -> Vec<String> {
        d.begin_stream();
        lines
            .iter()
            .filter(|(t, x)| d.accept(ts(t), x.as_bytes()))
            .map(|(_, x)| x.to_string())
            .collect()
    }

    #[test]
    fn split_should_parse_rfc3339nano_prefix() {
        let (t, text) = split_timestamp(b"2026-01-02T03:04:05.123456789Z hello world").unwrap();
        assert_eq!(t, ts("2026-01-02T03:04:05.123456789Z"));
        assert_eq!(text, b"hello world");
        let (_, empty) = split_timestamp(b"2026-01-02T03:04:05Z ").unwrap();
        assert_eq!(empty, b"");
        assert!(split_timestamp(b"no timestamp here").is_none());
    }

    #[test]
    fn resume_point_should_be_floored_to_the_second() {
        let mut d = Dedup::new();
        assert_eq!(d.resume_from(), None);
        feed(&mut d, &[("2026-01-01T00:00:05.900Z", "a")]);
        assert_eq!(d.resume_from(), Some(ts("2026-01-01T00:00:05Z")));
    }

    #[test]
    fn replayed_lines_should_be_dropped_and_new_ones_kept() {
        let mut d = Dedup::new();
        let first = feed(
            &mut d,
            &[
                ("2026-01-01T00:00:04.5Z", "a"),
                ("2026-01-01T00:00:05.1Z", "b"),
                ("2026-01-01T00:00:05.2Z", "c"),
            ],
        );
        assert_eq!(first, ["a", "b", "c"]);
        // Resumed from 00:00:05: b and c come again, then d.
        let second = feed(
            &mut d,
            &[
                ("2026-01-01T00:00:05.1Z", "b"),
                ("2026-01-01T00:00:05.2Z", "c"),
                ("2026-01-01T00:00:05.3Z", "d"),
            ],
        );
        assert_eq!(second, ["d"]);
    }

    #[test]
    fn lines_sharing_a_timestamp_should_be_counted_not_collapsed() {
        let t = "2026-01-01T00:00:05Z";
        let mut d = Dedup::new();
        // Two identical lines and one other, all in the same second, stream breaks after 2.
        assert_eq!(feed(&mut d, &[(t, "x"), (t, "x")]), ["x", "x"]);
        // Replay delivers x, x, then the third line "x" (new!) and "y".
        assert_eq!(
            feed(&mut d, &[(t, "x"), (t, "x"), (t, "x"), (t, "y")]),
            ["x", "y"]
        );
        // Another replay: everything at t again, then nothing new.
        assert_eq!(
            feed(&mut d, &[(t, "x"), (t, "x"), (t, "x"), (t, "y")]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn out_of_order_lines_in_one_stream_should_all_print() {
        let mut d = Dedup::new();
        let out = feed(
            &mut d,
            &[
                ("2026-01-01T00:00:05Z", "a"),
                ("2026-01-01T00:00:04Z", "b"),
                ("2026-01-01T00:00:06Z", "c"),
            ],
        );
        assert_eq!(out, ["a", "b", "c"]);
    }

    #[test]
    fn empty_replay_should_not_lose_the_next_line() {
        let mut d = Dedup::new();
        feed(&mut d, &[("2026-01-01T00:00:05Z", "a")]);
        assert_eq!(feed(&mut d, &[]), Vec::<String>::new());
        assert_eq!(feed(&mut d, &[("2026-01-01T00:00:07Z", "b")]), ["b"]);
    }
}
