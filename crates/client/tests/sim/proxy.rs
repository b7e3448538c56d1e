//! The kubeconfig's `proxy-url`: an HTTP CONNECT proxy between podline and a TLS sim carries
//! every request and watch (on one tunnel, over HTTP/2, certificate still verified), and sends
//! the URL's credentials as `Proxy-Authorization`.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::config::Kubeconfig;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::watch::{Event, WatchConfig, watch};
use podline_sim::SimConfig;
use podline_testkit::start_sim;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::create;

/// A minimal HTTP CONNECT proxy on loopback; records each CONNECT request's head.
async fn connect_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut client = BufReader::new(client);
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if client.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let target = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                log.lock().unwrap().push(head);
                let Ok(mut upstream) = TcpStream::connect(&target).await else {
                    let _ = client
                        .get_mut()
                        .write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                        .await;
                    return;
                };
                let mut client = client.into_inner();
                client
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (format!("http://ann:s%3Acret@{addr}"), seen)
}

#[tokio::test]
async fn requests_and_watches_should_go_through_the_kubeconfig_proxy_url() {
    let sim = start_sim(SimConfig::default().kubelet_enabled(false)).await;
    assert!(sim.url().starts_with("https://"));
    let (proxy_url, connects) = connect_proxy().await;
    let mut kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        if let Some(c) = cluster.cluster.as_mut() {
            c.proxy_url = Some(proxy_url.clone());
        }
    }
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions::default(),
    )
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(connected.client, "default");
    create(&api, "via-proxy").await;
    let listed = api.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    // A watch opens through the same tunnel and sees the pod.
    let mut watch = std::pin::pin!(watch(api.clone(), WatchConfig::default()));
    let seen = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(item) = watch.next().await {
            if let Ok(Event::InitApply(pod)) = item {
                return pod.metadata.name;
            }
        }
        None
    })
    .await
    .unwrap();
    assert_eq!(seen.as_deref(), Some("via-proxy"));

    let heads = connects.lock().unwrap().clone();
    assert_eq!(
        heads.len(),
        1,
        "one tunnel (one HTTP/2 connection) carries every request and the watch: {heads:?}"
    );
    let sim_authority = sim.url().trim_start_matches("https://").to_string();
    assert!(
        heads[0].starts_with(&format!("CONNECT {sim_authority} HTTP/1.1")),
        "{heads:?}"
    );
    // "ann:s:cret" (the password percent-decoded) in Basic auth.
    assert!(
        heads[0]
            .to_ascii_lowercase()
            .contains("proxy-authorization: basic yw5uonm6y3jlda=="),
        "{heads:?}"
    );
    assert_eq!(sim.accepted_connections(), 1);
}

#[tokio::test]
async fn an_unreachable_proxy_should_fail_the_call_not_bypass_the_proxy() {
    let sim = start_sim(SimConfig::default().kubelet_enabled(false)).await;
    let unused = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = unused.local_addr().unwrap();
    drop(unused);
    let mut kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        if let Some(c) = cluster.cluster.as_mut() {
            c.proxy_url = Some(format!("http://{dead}"));
        }
    }
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions::default(),
    )
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(connected.client, "default");
    assert!(api.list(&Default::default()).await.is_err());
    assert_eq!(sim.accepted_connections(), 0, "the proxy was bypassed");
}
