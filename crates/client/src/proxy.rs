//! The kubeconfig's `proxy-url`, as kubectl reads it: `http://` (an HTTP CONNECT tunnel) and
//! `socks5://` proxies, with credentials from the URL's userinfo.
//!
//! Why podline has its own: its transport ([`crate::transport`]) is not kube's, so kube's proxy
//! support does not apply, and a client that silently ignored `proxy-url` would try to reach an
//! API server that is only reachable through the proxy and time out with no hint why. The TLS
//! session with the API server runs end to end *through* the tunnel (the proxy sees only the
//! CONNECT line), so verification, ALPN (HTTP/2) and PING work as on a direct connection.
//! `https://` proxies (TLS to the proxy itself) are refused with a clear message.

use std::task::{Context, Poll};

use base64::Engine;
use futures::future::BoxFuture;
use http::{HeaderValue, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::{SocksV5, Tunnel};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower::{BoxError, Service};

/// Why a `proxy-url` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProxyError {
    /// A scheme other than `http` or `socks5`.
    #[error(
        "proxy-url {url} in the kubeconfig uses scheme {scheme:?}; podline supports http:// (HTTP CONNECT) and socks5:// proxies"
    )]
    UnsupportedScheme {
        /// The URL, with any password removed.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// No host in the URL.
    #[error("proxy-url {0} in the kubeconfig has no host")]
    NoHost(String),
}

/// How the transport reaches the API server's TCP port: directly, or through a proxy.
#[derive(Debug, Clone)]
pub enum ProxyConnector {
    /// No `proxy-url`: plain TCP.
    Direct(HttpConnector),
    /// `http://host:port`: an HTTP CONNECT tunnel to the API server's host and port.
    Tunnel(Tunnel<HttpConnector>),
    /// `socks5://host:port`: a SOCKS5 handshake (names resolved by the proxy, like kubectl).
    Socks5(SocksV5<HttpConnector>),
}

impl ProxyConnector {
    /// The connector for `proxy_url` (none: direct), over the given TCP connector.
    pub fn new(proxy_url: Option<&Uri>, tcp: HttpConnector) -> Result<Self, ProxyError> {
        let Some(url) = proxy_url else {
            return Ok(Self::Direct(tcp));
        };
        let shown = redacted(url);
        if url.host().is_none() {
            return Err(ProxyError::NoHost(shown));
        }
        let credentials = userinfo(url);
        match url.scheme_str() {
            Some("http") => {
                let mut tunnel = Tunnel::new(url.clone(), tcp);
                if let Some((user, password)) = credentials {
                    let token = base64::engine::general_purpose::STANDARD
                        .encode(format!("{user}:{password}"));
                    // Invariant: base64 output is visible ASCII, always a valid header value.
                    if let Ok(value) = HeaderValue::from_str(&format!("Basic {token}")) {
                        tunnel = tunnel.with_auth(value);
                    }
                }
                Ok(Self::Tunnel(tunnel))
            }
            Some("socks5") => {
                let mut socks = SocksV5::new(url.clone(), tcp);
                if let Some((user, password)) = credentials {
                    socks = socks.with_auth(user, password);
                }
                Ok(Self::Socks5(socks))
            }
            other => Err(ProxyError::UnsupportedScheme {
                url: shown,
                scheme: other.unwrap_or("").to_string(),
            }),
        }
    }
}

/// The URL's `user:password` (percent-decoded), if it has userinfo.
fn userinfo(url: &Uri) -> Option<(String, String)> {
    let authority = url.authority()?.as_str();
    let (info, _) = authority.rsplit_once('@')?;
    let (user, password) = info.split_once(':').unwrap_or((info, ""));
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    Some((decode(user), decode(password)))
}

/// The URL without its password, for messages (credentials are never logged).
fn redacted(url: &Uri) -> String {
    let text = url.to_string();
    match url.authority().map(|a| a.as_str()) {
        Some(authority) if authority.contains('@') => {
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            text.replacen(authority, &format!("***@{host}"), 1)
        }
        _ => text,
    }
}

impl Service<Uri> for ProxyConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Self::Direct(c) => c.poll_ready(cx).map_err(BoxError::from),
            Self::Tunnel(c) => c.poll_ready(cx).map_err(BoxError::from),
            Self::Socks5(c) => c.poll_ready(cx).map_err(BoxError::from),
        }
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match self {
            Self::Direct(c) => {
                let fut = c.call(dst);
                Box::pin(async move { fut.await.map_err(BoxError::from) })
            }
            Self::Tunnel(c) => {
                let fut = c.call(dst);
                Box::pin(async move { fut.await.map_err(BoxError::from) })
            }
            Self::Socks5(c) => {
                let fut = c.call(dst);
                Box::pin(async move { fut.await.map_err(BoxError::from) })
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tcp() -> HttpConnector {
        HttpConnector::new()
    }

    #[test]
    fn no_proxy_url_connects_directly() {
        assert!(matches!(
            ProxyConnector::new(None, tcp()).unwrap(),
            ProxyConnector::Direct(_)
        ));
    }

    #[test]
    fn http_and_socks5_proxies_are_accepted() {
        let http: Uri = "http://proxy.local:3128".parse().unwrap();
        assert!(matches!(
            ProxyConnector::new(Some(&http), tcp()).unwrap(),
            ProxyConnector::Tunnel(_)
        ));
        let socks: Uri = "socks5://proxy.local:1080".parse().unwrap();
        assert!(matches!(
            ProxyConnector::new(Some(&socks), tcp()).unwrap(),
            ProxyConnector::Socks5(_)
        ));
    }

    #[test]
    fn an_https_proxy_is_refused_by_name_without_its_password() {
        let url: Uri = "https://ann:s3cret@proxy.local:3128".parse().unwrap();
        let err = ProxyConnector::new(Some(&url), tcp()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"https\""), "{text}");
        assert!(
            text.contains("http:// (HTTP CONNECT) and socks5://"),
            "{text}"
        );
        assert!(!text.contains("s3cret"), "password leaked: {text}");
        assert!(text.contains("***@proxy.local:3128"), "{text}");
    }

    #[test]
    fn userinfo_is_percent_decoded() {
        let url: Uri = "http://ann%40corp:p%3Ass@proxy.local:3128".parse().unwrap();
        assert_eq!(
            userinfo(&url),
            Some(("ann@corp".to_string(), "p:ss".to_string()))
        );
        let bare: Uri = "http://proxy.local:3128".parse().unwrap();
        assert_eq!(userinfo(&bare), None);
    }
}
