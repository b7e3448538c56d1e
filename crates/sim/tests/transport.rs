//! The sim's transport as a client sees it on the wire: per-stream faults over HTTP/2 and
//! HTTP/1.1, and the HTTP/2 connection settings kube-apiserver's Go server uses.
#![allow(clippy::unwrap_used)]

mod transport {
    mod per_stream;
    pub mod raw_h2;
}
