//! Shared helpers of the sim tests.

use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use podline_sim::{Sim, SimConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

/// A plain-HTTP sim without kubelet (pods stay as the test writes them).
pub async fn sim_without_kubelet() -> Sim {
    podline_testkit::start_sim(config()).await
}

/// Plain HTTP, no kubelet.
pub fn config() -> SimConfig {
    SimConfig::default().tls(false).kubelet_enabled(false)
}

/// A minimal valid pod.
pub fn pod(name: &str) -> Pod {
    pod_json(name, serde_json::json!({"app": "demo"}))
}

/// A minimal valid pod with these labels.
pub fn pod_json(name: &str, labels: Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
    }))
    .expect("valid pod json")
}

/// A response seen in-process: status, content type, body.
pub struct Raw {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Raw {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Sends a request to the sim's router in-process (with the bearer token unless `token` is
/// None).
pub async fn raw_with(
    sim: &Sim,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: &str,
    token: Option<&str>,
) -> Raw {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let req = req.body(Body::from(body.to_owned())).expect("request");
    let response = sim.router().oneshot(req).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    Raw {
        status,
        headers,
        body,
    }
}

/// [`raw_with`] with the sim's token.
pub async fn raw(
    sim: &Sim,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: &str,
) -> Raw {
    let token = sim.token().to_owned();
    raw_with(sim, method, path, content_type, body, Some(&token)).await
}

/// How a raw socket read of a response ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// The chunked body ended with its terminating chunk.
    CleanEnd,
    /// The connection closed (FIN) before the body was complete.
    Eof,
    /// The connection was reset.
    Reset,
    /// Nothing more arrived within the read timeout (connection still open).
    Silent,
}

/// GETs `path` over a raw TCP connection (HTTP/1.1) and reads until the body ends, the
/// connection breaks, or `quiet` passes without a byte. Returns the bytes read and how it ended.
pub async fn tcp_get(sim: &Sim, path: &str, quiet: Duration) -> (String, Ending) {
    let mut stream = tokio::net::TcpStream::connect(sim.addr())
        .await
        .expect("connect");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\n\r\n",
        sim.token()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let ending = loop {
        match tokio::time::timeout(quiet, stream.read(&mut buf)).await {
            Err(_) => break Ending::Silent,
            Ok(Ok(0)) => break Ending::Eof,
            Ok(Ok(n)) => {
                data.extend_from_slice(&buf[..n]);
                if data.ends_with(b"\r\n0\r\n\r\n") {
                    break Ending::CleanEnd;
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => break Ending::Reset,
            Ok(Err(e)) => panic!("read failed: {e}"),
        }
    };
    (String::from_utf8_lossy(&data).into_owned(), ending)
}

/// Creates pods directly in the store-facing API (fast setup).
pub async fn create_pods(pods: &kube::Api<Pod>, names: &[&str]) {
    for name in names {
        pods.create(&Default::default(), &pod(name))
            .await
            .expect("create");
    }
}
