//! The kubeconfig's `proxy-url`, as kubectl reads it: `http://` (an HTTP CONNECT tunnel) and
//! `socks5://` proxies, with credentials from the URL's userinfo. Without a `proxy-url`, the
//! environment's `HTTPS_PROXY` / `HTTP_PROXY` and `NO_PROXY`, as kubectl (Go's
//! `ProxyFromEnvironment`) reads them: [`from_environment`].
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
        "proxy {url} (the kubeconfig's proxy-url, or HTTPS_PROXY/HTTP_PROXY) uses scheme {scheme:?}; podline supports http:// (HTTP CONNECT) and socks5:// proxies"
    )]
    UnsupportedScheme {
        /// The URL, with any password removed.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// No host in the URL.
    #[error("proxy {0} (the kubeconfig's proxy-url, or HTTPS_PROXY/HTTP_PROXY) has no host")]
    NoHost(String),
    /// A proxy variable of the environment that is not a URL (its value is not shown: it may
    /// hold a password).
    #[error(
        "the environment variable {variable} is not a proxy URL; expected e.g. http://proxy.example:3128"
    )]
    BadEnvironment {
        /// The variable's name.
        variable: &'static str,
    },
}

/// The proxy for `cluster_url` from the environment, chosen as kubectl chooses it when the
/// kubeconfig has no `proxy-url`: `HTTPS_PROXY` for an https server, `HTTP_PROXY` for an http
/// one (upper case first, then lower case), and none when `NO_PROXY` names the server (hosts,
/// domain suffixes, IPs, CIDRs, `*`; curl's rules, as implemented by hyper-util). A value
/// without a scheme means `http://`, as in Go.
pub fn from_environment(cluster_url: &Uri) -> Result<Option<Uri>, ProxyError> {
    from_variables(cluster_url, |name| std::env::var(name).ok())
}

/// [`from_environment`] over any source of variables (tests pass a map).
fn from_variables(
    cluster_url: &Uri,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<Uri>, ProxyError> {
    let first = |names: [&'static str; 2]| {
        names
            .into_iter()
            .find_map(|name| var(name).filter(|v| !v.is_empty()).map(|v| (name, v)))
    };
    let https = first(["HTTPS_PROXY", "https_proxy"]);
    let http = first(["HTTP_PROXY", "http_proxy"]);
    let chosen = match cluster_url.scheme_str() {
        Some("https") => https.clone(),
        _ => http.clone(),
    };
    let Some((variable, value)) = chosen else {
        return Ok(None);
    };
    let value = if value.contains("://") {
        value
    } else {
        format!("http://{value}")
    };
    let url: Uri = value
        .parse()
        .map_err(|_| ProxyError::BadEnvironment { variable })?;
    if url.host().is_none() {
        return Err(ProxyError::BadEnvironment { variable });
    }
    let no_proxy = first(["NO_PROXY", "no_proxy"]).map(|(_, v)| v);
    let mut matcher =
        hyper_util::client::proxy::matcher::Matcher::builder().no(no_proxy.unwrap_or_default());
    if let Some((_, https)) = https {
        matcher = matcher.https(https);
    }
    if let Some((_, http)) = http {
        matcher = matcher.http(http);
    }
    if matcher.build().intercept(cluster_url).is_none() {
        return Ok(None); // NO_PROXY names the server
    }
    Ok(Some(url))
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

    fn env_proxy(server: &str, vars: &[(&str, &str)]) -> Result<Option<String>, ProxyError> {
        let vars: std::collections::HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let server: Uri = server.parse().unwrap();
        from_variables(&server, |name| vars.get(name).cloned()).map(|u| u.map(|u| u.to_string()))
    }

    #[test]
    fn the_environment_proxy_is_chosen_by_the_servers_scheme_like_kubectl() {
        let vars = [
            ("HTTPS_PROXY", "http://secure.proxy:3128"),
            ("HTTP_PROXY", "http://plain.proxy:3128"),
        ];
        assert_eq!(
            env_proxy("https://api.example:6443", &vars)
                .unwrap()
                .as_deref(),
            Some("http://secure.proxy:3128/")
        );
        assert_eq!(
            env_proxy("http://api.example:8080", &vars)
                .unwrap()
                .as_deref(),
            Some("http://plain.proxy:3128/")
        );
        assert_eq!(env_proxy("https://api.example:6443", &[]).unwrap(), None);
        // Lower case counts too; a bare host:port means http://.
        assert_eq!(
            env_proxy(
                "https://api.example:6443",
                &[("https_proxy", "proxy.corp:8080")]
            )
            .unwrap()
            .as_deref(),
            Some("http://proxy.corp:8080/")
        );
    }

    #[test]
    fn no_proxy_exempts_hosts_domains_and_networks() {
        let proxy = ("HTTPS_PROXY", "http://proxy.corp:3128");
        for (server, no_proxy, proxied) in [
            ("https://127.0.0.1:6443", "localhost,127.0.0.1", false),
            ("https://10.1.2.3:6443", "10.0.0.0/8", false),
            ("https://api.cluster.local:6443", ".cluster.local", false),
            ("https://api.cluster.local:6443", "*", false),
            (
                "https://api.example:6443",
                "localhost,127.0.0.1,.cluster.local",
                true,
            ),
        ] {
            let found = env_proxy(server, &[proxy, ("NO_PROXY", no_proxy)]).unwrap();
            assert_eq!(
                found.is_some(),
                proxied,
                "{server} with NO_PROXY={no_proxy}"
            );
        }
        let lower = env_proxy(
            "https://127.0.0.1:6443",
            &[proxy, ("no_proxy", "127.0.0.1")],
        );
        assert_eq!(lower.unwrap(), None);
    }

    #[test]
    fn a_bad_proxy_variable_is_named_without_its_value() {
        let err = env_proxy(
            "https://api.example:6443",
            &[("HTTPS_PROXY", "http://ann:s3cret@ bad host")],
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("HTTPS_PROXY"), "{text}");
        assert!(!text.contains("s3cret"), "password leaked: {text}");
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
