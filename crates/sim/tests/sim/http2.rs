//! The sim speaks HTTP/2 (ALPN over TLS, prior knowledge over plain HTTP) and HTTP/1.1, can be
//! told to speak HTTP/1.1 only, and its freeze fault stops a whole connection without closing it.
//! A bare hyper client is used so the tests see exactly what was negotiated.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use super::common::{Ending, tcp_get};

type H2 = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

async fn https_sim(http1_only: bool) -> Sim {
    podline_testkit::start_sim(
        SimConfig::default()
            .kubelet_enabled(false)
            .http1_only(http1_only),
    )
    .await
}

/// A TLS connection to the sim offering `h2` and `http/1.1`; returns it and the ALPN choice.
async fn tls_connect(sim: &Sim) -> (tokio_rustls::client::TlsStream<TcpStream>, Option<Vec<u8>>) {
    let mut roots = rustls::RootCertStore::empty();
    let ca = sim.ca_pem().expect("https sim");
    let der = CertificateDer::from_pem_slice(ca.as_bytes()).expect("ca pem");
    roots.add(der).expect("ca");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("tls versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(sim.addr()).await.expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    (tls, alpn)
}

async fn h2_over<I>(io: I) -> H2
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    send
}

fn get(sim: &Sim, path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("{}{path}", sim.url()))
        .header("authorization", format!("Bearer {}", sim.token()))
        .body(Empty::new())
        .expect("request")
}

#[tokio::test]
async fn the_sim_should_offer_h2_by_alpn_and_serve_requests_over_it() {
    let sim = https_sim(false).await;
    let (tls, alpn) = tls_connect(&sim).await;
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    let mut h2 = h2_over(tls).await;
    let resp = h2
        .send_request(get(&sim, "/api/v1/namespaces/default/pods"))
        .await
        .expect("answer");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.version(), Version::HTTP_2);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("PodList"));
    assert_eq!(
        sim.requests_by_version().1,
        1,
        "counted as an HTTP/2 request"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn an_http1_only_sim_should_negotiate_http1_and_refuse_h2_prior_knowledge() {
    let sim = https_sim(true).await;
    let (_tls, alpn) = tls_connect(&sim).await;
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    sim.shutdown().await;

    let sim = podline_testkit::start_sim(
        SimConfig::default()
            .tls(false)
            .kubelet_enabled(false)
            .http1_only(true),
    )
    .await;
    let tcp = TcpStream::connect(sim.addr()).await.expect("connect");
    let outcome = tokio::time::timeout(Duration::from_secs(5), async {
        let mut h2 = h2_over(tcp).await;
        h2.send_request(get(&sim, "/api/v1/namespaces/default/pods"))
            .await
    })
    .await
    .expect("the sim answers or closes quickly");
    assert!(outcome.is_err(), "HTTP/2 prior knowledge must be refused");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_plain_http_sim_should_serve_h2_with_prior_knowledge() {
    let sim = super::common::sim_without_kubelet().await;
    let tcp = TcpStream::connect(sim.addr()).await.expect("connect");
    let mut h2 = h2_over(tcp).await;
    let resp = h2
        .send_request(get(&sim, "/api/v1/namespaces/default/pods"))
        .await
        .expect("answer");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.version(), Version::HTTP_2);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_freeze_should_stop_every_request_on_the_connection_without_closing_it() {
    let sim = https_sim(false).await;
    let (tls, _) = tls_connect(&sim).await;
    let mut h2 = h2_over(tls).await;
    // One answered request first, so the connection is known to work.
    let resp = h2
        .send_request(get(&sim, "/api/v1/namespaces"))
        .await
        .expect("answer");
    assert_eq!(resp.status(), StatusCode::OK);
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze { after_ms: None })
            .verb(FaultVerb::List)
            .resource("pods")
            .times(1),
    );
    let mut frozen = h2.clone();
    let request = get(&sim, "/api/v1/namespaces/default/pods");
    let list = tokio::spawn(async move { frozen.send_request(request).await });
    assert!(
        podline_testkit::wait_until(Duration::from_secs(5), || async {
            sim.frozen_connections() == 1
        })
        .await,
        "the LIST froze its connection"
    );
    // Another stream on the same connection gets nothing either: the whole connection is frozen.
    let other = tokio::time::timeout(
        Duration::from_millis(700),
        h2.send_request(get(&sim, "/api/v1/namespaces")),
    )
    .await;
    assert!(
        other.is_err(),
        "a request on a frozen connection is never answered"
    );
    assert!(
        !list.is_finished(),
        "the LIST is never answered, and not failed either"
    );
    assert_eq!(sim.connections(), 1, "the frozen connection is still open");
    // A new connection works.
    let (tls, _) = tls_connect(&sim).await;
    let mut fresh = h2_over(tls).await;
    let resp = fresh
        .send_request(get(&sim, "/api/v1/namespaces/default/pods"))
        .await
        .expect("answer on a new connection");
    assert_eq!(resp.status(), StatusCode::OK);
    list.abort();
    sim.shutdown().await;
}

#[tokio::test]
async fn a_delayed_freeze_should_open_the_watch_then_silence_the_connection() {
    let sim = super::common::sim_without_kubelet().await;
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze {
            after_ms: Some(300),
        })
        .verb(FaultVerb::Watch)
        .times(1),
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(podline_testkit::client(&sim).await);
    let watch = tcp_get(
        &sim,
        "/api/v1/namespaces/default/pods?watch=true",
        Duration::from_millis(1500),
    );
    let create_later = async {
        assert!(
            podline_testkit::wait_until(Duration::from_secs(5), || async {
                sim.frozen_connections() == 1
            })
            .await,
            "the watch's connection froze"
        );
        super::common::create_pods(&pods, &["after-freeze"]).await;
    };
    let ((body, ending), ()) = tokio::join!(watch, create_later);
    assert!(
        body.starts_with("HTTP/1.1 200"),
        "the watch was answered: {body}"
    );
    assert!(
        !body.contains("after-freeze"),
        "nothing passes a frozen connection: {body}"
    );
    assert_eq!(ending, Ending::Silent, "open and silent, never closed");
    sim.shutdown().await;
}
