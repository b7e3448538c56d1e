//! A bare HTTP/2 client speaking frames over plain TCP (prior knowledge), so the tests see what
//! the sim puts on the wire: SETTINGS values, RST_STREAM of one stream, GOAWAY and its code.
//! Requests are HPACK-encoded as literals without indexing (no table, no Huffman); response
//! headers are not decoded (frame types and stream ids are what the tests check).

use std::time::Duration;

use bytes::BytesMut;
use podline_sim::Sim;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// DATA frame type.
pub const DATA: u8 = 0x0;
/// HEADERS frame type.
pub const HEADERS: u8 = 0x1;
/// RST_STREAM frame type.
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS frame type.
pub const SETTINGS: u8 = 0x4;
/// PING frame type.
pub const PING: u8 = 0x6;
/// GOAWAY frame type.
pub const GOAWAY: u8 = 0x7;
/// WINDOW_UPDATE frame type.
pub const WINDOW_UPDATE: u8 = 0x8;

/// END_STREAM (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// Error code NO_ERROR (GOAWAY of a graceful close).
pub const NO_ERROR: u32 = 0x0;
/// Error code INTERNAL_ERROR.
pub const INTERNAL_ERROR: u32 = 0x2;
/// Error code CANCEL.
pub const CANCEL: u32 = 0x8;

/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// SETTINGS_INITIAL_WINDOW_SIZE.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// SETTINGS_MAX_FRAME_SIZE.
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// One frame as read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().expect("4 bytes"))
    }

    /// The last stream id of a GOAWAY frame.
    pub fn last_stream_id(&self) -> u32 {
        u32::from_be_bytes(self.payload[..4].try_into().expect("4 bytes")) & 0x7fff_ffff
    }

    /// The increment of a WINDOW_UPDATE frame.
    pub fn window_increment(&self) -> u32 {
        u32::from_be_bytes(self.payload[..4].try_into().expect("4 bytes")) & 0x7fff_ffff
    }

    /// The (identifier, value) pairs of a SETTINGS frame.
    pub fn settings(&self) -> Vec<(u16, u32)> {
        self.payload
            .chunks_exact(6)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                )
            })
            .collect()
    }

    /// Whether this frame ends its stream.
    pub fn ends_stream(&self) -> bool {
        matches!(self.kind, DATA | HEADERS) && self.flags & END_STREAM != 0
    }
}

/// One HTTP/2 connection to a plain-HTTP sim.
pub struct RawH2 {
    tcp: TcpStream,
    /// Bytes read and not yet parsed into frames (so reading is cancel-safe).
    buf: BytesMut,
    token: String,
    authority: String,
    /// Answer the server's PINGs (a real client does; hyper's graceful GOAWAY waits for it).
    pub answer_pings: bool,
}

impl RawH2 {
    /// Connects, sends the preface and SETTINGS (large windows, so no flow control is needed).
    pub async fn connect(sim: &Sim) -> Self {
        let tcp = TcpStream::connect(sim.addr()).await.expect("connect");
        let mut conn = Self {
            tcp,
            buf: BytesMut::new(),
            token: sim.token().to_owned(),
            authority: sim.addr().to_string(),
            answer_pings: true,
        };
        conn.write_raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
        let mut settings = Vec::new();
        settings.extend_from_slice(&SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes());
        settings.extend_from_slice(&(1u32 << 30).to_be_bytes());
        conn.write_frame(SETTINGS, 0, 0, &settings).await;
        conn.write_frame(WINDOW_UPDATE, 0, 0, &((1u32 << 30) - 65_535).to_be_bytes())
            .await;
        conn
    }

    async fn write_raw(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.expect("write");
    }

    /// Writes one frame.
    pub async fn write_frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("small frame");
        let mut frame = Vec::with_capacity(9 + payload.len());
        frame.extend_from_slice(&len.to_be_bytes()[1..]);
        frame.push(kind);
        frame.push(flags);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.write_raw(&frame).await;
    }

    /// Sends a PING (not an answer to one).
    pub async fn ping(&mut self) {
        self.write_frame(PING, 0, 0, b"podline!").await;
    }

    /// Resets one of our streams (the client gives up on it).
    pub async fn cancel(&mut self, stream: u32) {
        self.write_frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes())
            .await;
    }

    /// Opens stream `stream` with a GET of `path`.
    pub async fn get(&mut self, stream: u32, path: &str) {
        let block = self.header_block("GET", path, false);
        self.write_frame(HEADERS, END_HEADERS | END_STREAM, stream, &block)
            .await;
    }

    /// Opens stream `stream` with a POST of the JSON `body` to `path`.
    pub async fn post(&mut self, stream: u32, path: &str, body: &serde_json::Value) {
        let block = self.header_block("POST", path, true);
        self.write_frame(HEADERS, END_HEADERS, stream, &block).await;
        let body = serde_json::to_vec(body).expect("json");
        self.write_frame(DATA, END_STREAM, stream, &body).await;
    }

    fn header_block(&self, method: &str, path: &str, json: bool) -> Vec<u8> {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![
            (":method", method),
            (":scheme", "http"),
            (":path", path),
            (":authority", self.authority.as_str()),
            ("authorization", auth.as_str()),
            ("accept", "application/json"),
        ];
        if json {
            headers.push(("content-type", "application/json"));
        }
        let mut block = Vec::new();
        for (name, value) in headers {
            // Literal header field without indexing, new name (RFC 7541 6.2.2).
            block.push(0x00);
            hpack_string(&mut block, name.as_bytes());
            hpack_string(&mut block, value.as_bytes());
        }
        block
    }

    /// A whole frame from the buffer, if one is there.
    fn parse(&mut self) -> Option<Frame> {
        if self.buf.len() < 9 {
            return None;
        }
        let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
        if self.buf.len() < 9 + len {
            return None;
        }
        let head = self.buf.split_to(9);
        let payload = self.buf.split_to(len).to_vec();
        let frame = Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        };
        Some(frame)
    }

    /// The next frame, answering SETTINGS and (unless told not to) PINGs on the way; None once
    /// the server closed the connection (EOF or reset). Cancel-safe: a frame half read stays
    /// buffered for the next call.
    pub async fn next_frame(&mut self) -> Option<Frame> {
        let frame = loop {
            if let Some(frame) = self.parse() {
                break frame;
            }
            match self.tcp.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        };
        if frame.kind == SETTINGS && frame.flags & ACK == 0 {
            self.write_frame(SETTINGS, ACK, 0, &[]).await;
        }
        if frame.kind == PING && frame.flags & ACK == 0 && self.answer_pings {
            let payload = frame.payload.clone();
            self.write_frame(PING, ACK, 0, &payload).await;
        }
        Some(frame)
    }

    /// Reads frames until one satisfies `done` (returned with everything read before it);
    /// panics after `within` or at the end of the connection.
    pub async fn until(
        &mut self,
        within: Duration,
        mut done: impl FnMut(&Frame) -> bool,
    ) -> (Frame, Vec<Frame>) {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let frame = tokio::time::timeout_at(deadline, self.next_frame())
                .await
                .unwrap_or_else(|_| panic!("no such frame within {within:?}; saw {seen:?}"))
                .unwrap_or_else(|| panic!("the connection ended; saw {seen:?}"));
            if done(&frame) {
                return (frame, seen);
            }
            seen.push(frame);
        }
    }

    /// Reads frames until the response on `stream` ends; returns its DATA as text.
    pub async fn response_body(&mut self, stream: u32, within: Duration) -> String {
        let mut body = Vec::new();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let frame = tokio::time::timeout_at(deadline, self.next_frame())
                .await
                .expect("the response did not end in time")
                .expect("the connection ended");
            if frame.stream != stream {
                continue;
            }
            assert_ne!(frame.kind, RST_STREAM, "stream {stream} was reset");
            if frame.kind == DATA {
                body.extend_from_slice(&frame.payload);
            }
            if frame.ends_stream() {
                return String::from_utf8_lossy(&body).into_owned();
            }
        }
    }
}

/// An HPACK string literal, not Huffman-coded (RFC 7541 5.2), its length a 7-bit-prefix integer.
fn hpack_string(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut len = bytes.len();
    if len < 127 {
        out.push(len as u8);
    } else {
        out.push(127);
        len -= 127;
        while len >= 128 {
            out.push((len % 128) as u8 | 0x80);
            len /= 128;
        }
        out.push(len as u8);
    }
    out.extend_from_slice(bytes);
}
