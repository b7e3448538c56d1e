//! Framing of a watch body into lines ([`LineCodec`]), with a bound on a line's length.
//!
//! A watch body is one JSON document per line. kube-rs frames it with `LinesCodec`, which fails
//! the whole stream on a line that is not UTF-8, and whose length bound (off by default) ends the
//! stream too: a reconnect then replays the same line forever. This codec yields bytes, so a line
//! that is not UTF-8 is one skipped line, and a line longer than the bound is dropped as it
//! arrives (never buffered whole) and reported once it ends; the stream goes on after both.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

/// One framed piece of a watch body.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frame {
    /// A complete line, without its `\n` (nor a `\r` before it).
    Line(BytesMut),
    /// What followed the last `\n` when the body ended: a complete document whose newline never
    /// came, or the start of one cut by a reset.
    Tail(BytesMut),
    /// A line longer than the bound, dropped; `bytes` is how long it was.
    TooLong {
        /// The dropped line's length (without its `\n`).
        bytes: usize,
    },
}

/// Splits a byte stream into [`Frame`]s of at most `max` bytes each.
#[derive(Debug)]
pub(super) struct LineCodec {
    max: usize,
    /// Where to resume the search for `\n` in the buffer (the bytes before it hold none).
    searched: usize,
    /// Dropping an overlong line: how many bytes of it were dropped so far.
    dropping: Option<usize>,
}

impl LineCodec {
    /// A codec for lines of at most `max` bytes.
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            searched: 0,
            dropping: None,
        }
    }
}

impl Decoder for LineCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if let Some(dropped) = self.dropping {
            return Ok(match memchr::memchr(b'\n', buf) {
                Some(end) => {
                    buf.advance(end + 1);
                    self.dropping = None;
                    Some(Frame::TooLong {
                        bytes: dropped + end,
                    })
                }
                None => {
                    self.dropping = Some(dropped + buf.len());
                    buf.clear();
                    None
                }
            });
        }
        match memchr::memchr(b'\n', &buf[self.searched..]) {
            Some(offset) => {
                let end = self.searched + offset;
                self.searched = 0;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                if end > self.max {
                    return Ok(Some(Frame::TooLong { bytes: end }));
                }
                Ok(Some(Frame::Line(line)))
            }
            None if buf.len() > self.max => {
                // Drop what arrived of the line; the rest is dropped as it comes.
                self.searched = 0;
                self.dropping = Some(buf.len());
                buf.clear();
                Ok(None)
            }
            None => {
                self.searched = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.searched = 0;
        if let Some(dropped) = self.dropping.take() {
            return Ok(Some(Frame::TooLong { bytes: dropped }));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        Ok(Some(Frame::Tail(buf.split())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(codec: &mut LineCodec, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut buf = BytesMut::new();
        let mut out = vec![];
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                out.push(frame);
            }
        }
        while let Some(frame) = codec.decode_eof(&mut buf).unwrap() {
            out.push(frame);
        }
        out
    }

    fn line(s: &str) -> Frame {
        Frame::Line(BytesMut::from(s))
    }

    #[test]
    fn lines_should_be_split_across_chunks_and_keep_non_utf8_bytes() {
        let mut codec = LineCodec::new(100);
        assert_eq!(
            frames(&mut codec, &[b"{\"a\"", b":1}\n{}\r\n\xff\xfe\n", b"tail"]),
            vec![
                line("{\"a\":1}"),
                line("{}"),
                Frame::Line(BytesMut::from(&b"\xff\xfe"[..])),
                Frame::Tail(BytesMut::from("tail")),
            ]
        );
    }

    /// An overlong line is dropped as it arrives, reported once with its length, and the lines
    /// after it come through.
    #[test]
    fn an_overlong_line_should_be_dropped_and_the_next_ones_kept() {
        let mut codec = LineCodec::new(8);
        assert_eq!(
            frames(
                &mut codec,
                &[b"ok\n0123456", b"789abcdef", b"ghij\nnext\n0123456789\n"]
            ),
            vec![
                line("ok"),
                Frame::TooLong { bytes: 20 },
                line("next"),
                Frame::TooLong { bytes: 10 },
            ]
        );
        let mut codec = LineCodec::new(4);
        assert_eq!(
            frames(&mut codec, &[b"0123456789"]),
            vec![Frame::TooLong { bytes: 10 }],
            "an overlong line cut by the end of the body"
        );
    }
}
