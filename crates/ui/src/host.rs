//! The `Host` allow-list that keeps DNS rebinding away: only loopback names, the listen
//! address and explicitly allowed names are served. Depends on nothing else in the crate.

use axum::http::header;
use axum::response::IntoResponse as _;

/// The `Host` allow-list (DNS rebinding protection).
pub(crate) struct HostCheck {
    /// Lower-case names besides the loopback ones.
    pub(crate) allowed: Vec<String>,
    /// Appended to the refusal text.
    pub(crate) hint: Option<String>,
}

impl HostCheck {
    fn allows(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]") || self.allowed.contains(&name)
    }

    /// Passes the request on when its `Host` is allowed, else answers 403 with the reason.
    pub(crate) async fn check(
        &self,
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        // HTTP/1.1 sends Host; HTTP/2 may send only the :authority of the URI.
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
        match host {
            Some(host) if self.allows(&host) => next.run(request).await,
            host => {
                let shown = host.map_or_else(|| "(none)".to_owned(), |h| format!("{h:?}"));
                let mut text = format!(
                    "podline ui does not serve the host {shown}: only localhost, 127.0.0.1, \
                     [::1], the listen address and explicitly allowed names are served (a guard \
                     against DNS rebinding)"
                );
                if let Some(hint) = &self.hint {
                    text.push_str("; ");
                    text.push_str(hint);
                }
                text.push('\n');
                (
                    axum::http::StatusCode::FORBIDDEN,
                    [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                    text,
                )
                    .into_response()
            }
        }
    }
}

/// The name part of a `Host` value: `[::1]:8080` -> `[::1]`, `example.com:80` -> `example.com`.
pub(crate) fn host_name(host: &str) -> &str {
    let host = host.trim();
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}
