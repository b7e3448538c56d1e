//! The sim's transport as a client sees it on the wire: per-stream faults over HTTP/2 and
//! HTTP/1.1, the HTTP/2 settings kube-apiserver's Go server announces, and its idle timeout.
#![allow(clippy::unwrap_used)]

mod transport {
    mod idle;
    mod per_stream;
    pub mod raw_h2;
}
