//! What the client says when it cannot talk to the API server: a certificate signed by another CA,
//! an `http://` URL naming a TLS server, nothing listening, an unreadable kubeconfig. Each message
//! names the server and the problem, each cause once, and the hopeless ones are not retried.

use std::error::Error as _;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::config::Kubeconfig;
use podline_client::connect::{ConfigSource, ConnectOptions, Lookup, connect_with_kubeconfig};
use podline_client::error::Chain;
use podline_client::retry::{Disposition, Reason, RetryPolicy, classify, retry_counted};
use podline_sim::SimConfig;
use podline_testkit::start_sim;
use tokio::time::Instant;

/// How often `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Every error of the chain joined, as a plain `source()` walk (anyhow's `{:#}`) prints it.
fn naive_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cause = e.source();
    }
    out
}

fn tls_sim() -> SimConfig {
    SimConfig::default().kubelet_enabled(false)
}

async fn pods_with(kubeconfig: Kubeconfig, source: ConfigSource) -> Api<Pod> {
    let opts = ConnectOptions {
        client_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let connected = connect_with_kubeconfig(kubeconfig, source, &opts)
        .await
        .unwrap();
    Api::namespaced(connected.client, "default")
}

/// The CA data of another sim's kubeconfig.
fn ca_data_of(yaml: &str) -> String {
    let kubeconfig = Kubeconfig::from_yaml(yaml).unwrap();
    kubeconfig.clusters[0]
        .cluster
        .as_ref()
        .and_then(|c| c.certificate_authority_data.clone())
        .expect("a TLS sim's kubeconfig carries its CA")
}

/// A wrong CA (another sim's): the error says the certificate was not trusted, why (not signed
/// by that CA), and which CA was used, each once, and is fatal.
#[tokio::test]
async fn a_wrong_ca_should_say_the_certificate_was_not_trusted_and_which_ca_was_used() {
    let sim = start_sim(tls_sim()).await;
    let other = start_sim(tls_sim()).await;
    let mut kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        let c = cluster.cluster.as_mut().unwrap();
        c.certificate_authority_data = Some(ca_data_of(&other.kubeconfig_yaml()));
    }
    let source = ConfigSource::Flag(PathBuf::from("/tmp/wrong-ca.kubeconfig"));
    let api = pods_with(kubeconfig, source).await;
    let err = api.list(&Default::default()).await.unwrap_err();
    let message = Chain(&err).to_string();
    eprintln!("{message}");
    // The sims' CAs share their name, so rustls finds the issuer and rejects its signature.
    assert!(
        message.contains("certificate was not trusted") && message.contains("not signed by"),
        "{message}"
    );
    assert!(
        message.contains("certificate-authority-data")
            && message.contains("in /tmp/wrong-ca.kubeconfig"),
        "the CA used must be named: {message}"
    );
    assert!(message.contains(&sim.url()), "the server: {message}");
    assert_eq!(count(&message, "invalid peer certificate"), 1, "{message}");
    assert_eq!(
        classify(&err),
        Disposition::Fatal {
            reason: Reason::Tls
        }
    );

    // A CA file is named by its path.
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("other-ca.crt");
    std::fs::write(&ca_file, other.ca_pem().unwrap()).unwrap();
    let mut kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        let c = cluster.cluster.as_mut().unwrap();
        c.certificate_authority_data = None;
        c.certificate_authority = Some(ca_file.display().to_string());
    }
    let api = pods_with(kubeconfig, ConfigSource::InCluster).await;
    let err = api.list(&Default::default()).await.unwrap_err();
    let message = Chain(&err).to_string();
    assert!(
        message.contains("not trusted") && message.contains(&ca_file.display().to_string()),
        "{message}"
    );
}

/// `http://` in front of a TLS server: the server answers the plain request with a TLS alert.
/// The call fails at once, says to use https://, and no retry policy repeats it.
#[tokio::test]
async fn an_http_url_to_a_tls_server_should_fail_at_once_saying_use_https() {
    let sim = start_sim(tls_sim()).await;
    let https = sim.url();
    let http = https.replacen("https://", "http://", 1);
    let yaml = sim.kubeconfig_yaml().replace(&https, &http);
    assert!(yaml.contains(&http));
    let api = pods_with(
        Kubeconfig::from_yaml(&yaml).unwrap(),
        ConfigSource::InCluster,
    )
    .await;
    let started = Instant::now();
    let params = kube::api::ListParams::default();
    let outcome = retry_counted(&RetryPolicy::default(), "list pods", || api.list(&params)).await;
    let err = outcome.result.unwrap_err();
    let message = Chain(&err).to_string();
    eprintln!("{message}");
    assert_eq!(outcome.attempts, 1, "not retried: {message}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        message.contains("speaks TLS") && message.contains("use https://"),
        "{message}"
    );
    assert!(message.contains(&http), "names the URL: {message}");
    assert_eq!(
        classify(&err),
        Disposition::Fatal {
            reason: Reason::Tls
        }
    );
}

/// The reverse: `https://` in front of a plain-HTTP server, which answers the TLS handshake in
/// HTTP. The call fails at once, says to use http://, and no retry policy repeats it.
#[tokio::test]
async fn an_https_url_to_a_plain_http_server_should_fail_at_once_saying_use_http() {
    let sim = start_sim(SimConfig::default().tls(false).kubelet_enabled(false)).await;
    let http = sim.url();
    let https = http.replacen("http://", "https://", 1);
    let yaml = sim.kubeconfig_yaml().replace(&http, &https);
    assert!(yaml.contains(&https));
    let api = pods_with(
        Kubeconfig::from_yaml(&yaml).unwrap(),
        ConfigSource::InCluster,
    )
    .await;
    let started = Instant::now();
    let params = kube::api::ListParams::default();
    let outcome = retry_counted(&RetryPolicy::default(), "list pods", || api.list(&params)).await;
    let err = outcome.result.unwrap_err();
    let message = Chain(&err).to_string();
    eprintln!("{message}");
    assert_eq!(outcome.attempts, 1, "not retried: {message}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        message.contains("speaks plain HTTP") && message.contains("use http://"),
        "{message}"
    );
    assert!(message.contains(&https), "names the URL: {message}");
    assert_eq!(
        classify(&err),
        Disposition::Fatal {
            reason: Reason::Tls
        }
    );
}

/// A Go TLS server (kube-apiserver) answers a plain request with 400 "Client sent an HTTP request
/// to an HTTPS server.": that too fails at once saying to use https://.
#[tokio::test]
async fn a_go_tls_servers_400_to_plain_http_should_say_use_https() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                // What Go's net/http writes, byte for byte, then it closes the connection.
                let _ = conn
                    .write_all(
                        b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
                    )
                    .await;
            });
        }
    });
    let api = pods_with(
        Kubeconfig::from_yaml(&kubeconfig_for(&server)).unwrap(),
        ConfigSource::InCluster,
    )
    .await;
    let params = kube::api::ListParams::default();
    let outcome = retry_counted(&RetryPolicy::default(), "list pods", || api.list(&params)).await;
    let err = outcome.result.unwrap_err();
    let message = Chain(&err).to_string();
    eprintln!("{message}");
    assert_eq!(outcome.attempts, 1, "not retried: {message}");
    assert!(
        message.contains("speaks TLS") && message.contains("use https://"),
        "{message}"
    );
    assert!(message.contains(&server), "names the URL: {message}");
    assert_eq!(
        classify(&err),
        Disposition::Fatal {
            reason: Reason::Tls
        }
    );
}

/// A kubeconfig naming `server`, without credentials.
fn kubeconfig_for(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {{ server: \"{server}\" }}\ncontexts:\n- name: c\n  context: {{ cluster: c, user: u }}\nusers:\n- name: u\n  user: {{}}\n"
    )
}

/// Nothing listening: the message names the server and "connection refused", once.
#[tokio::test]
async fn a_refused_connection_should_name_the_server_and_the_cause_once() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let server = format!("http://127.0.0.1:{port}");
    let yaml = kubeconfig_for(&server);
    let api = pods_with(
        Kubeconfig::from_yaml(&yaml).unwrap(),
        ConfigSource::InCluster,
    )
    .await;
    let err = api.list(&Default::default()).await.unwrap_err();
    let message = Chain(&err).to_string();
    eprintln!("{message}");
    assert!(message.contains(&server), "{message}");
    assert_eq!(
        count(&message.to_lowercase(), "connection refused"),
        1,
        "{message}"
    );
    assert!(
        !message.contains("client error (Connect)"),
        "hyper's generic text says nothing: {message}"
    );
    assert!(classify(&err).is_retryable(), "a server may come up");
}

/// A kubeconfig that cannot be read: the error names the file and the OS error once, however
/// the chain is printed (its own message, or a `source()` walk).
#[tokio::test]
async fn an_unreadable_kubeconfig_should_name_the_file_and_the_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.kubeconfig");
    let lookup = Lookup {
        flag: Some(missing.clone()),
        ..Default::default()
    };
    let err = podline_client::connect::load_config(&lookup, None)
        .await
        .unwrap_err();
    for printed in [err.to_string(), naive_chain(&err), Chain(&err).to_string()] {
        assert!(
            printed.contains(&missing.display().to_string()),
            "{printed}"
        );
        assert_eq!(count(&printed, "No such file or directory"), 1, "{printed}");
    }
    assert!(err.source().is_none(), "the message is complete on its own");
}
