//! What every response carries: the `Host` allow-list (DNS rebinding), the security headers,
//! and a 404 page for paths no route knows.

use crate::support::{Fixture, get, send};

#[tokio::test]
async fn only_loopback_names_and_allowed_hosts_should_be_served() {
    let fixture = Fixture::with_run().await;
    let app = podline_ui::router(
        podline_ui::UiConfig::new(fixture.reader.clone())
            .allow_hosts(["podline.example.com:8443".to_owned(), "10.0.0.5".to_owned()])
            .host_hint("ask the operator"),
    );
    for path in [
        "/api/counts",
        "/api/pods/ok-0",
        "/",
        "/pods/ok-0",
        "/static/ui.css",
    ] {
        for host in [
            "localhost",
            "localhost:8080",
            "LocalHost:8080",
            "127.0.0.1:8080",
            "[::1]",
            "[::1]:8080",
            "podline.example.com",
            "PODLINE.example.com:80",
            "10.0.0.5:9000",
        ] {
            let answer = send(&app, "GET", path, host).await;
            assert_eq!(answer.status, 200, "{path} Host {host}: {}", answer.body);
        }
        // DNS rebinding: an attacker's name pointed at this address; no Host at all.
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example:8080",
            "podline.example.com.evil.example",
            "127.0.0.2:8080",
            "10.0.0.50",
            "",
        ] {
            let answer = send(&app, "GET", path, host).await;
            assert_eq!(answer.status, 403, "{path} Host {host:?}: {}", answer.body);
            assert_eq!(answer.headers["content-type"], "text/plain; charset=utf-8");
            assert!(
                answer.body.contains("DNS rebinding")
                    && answer.body.ends_with("; ask the operator\n"),
                "{}",
                answer.body
            );
            assert!(!answer.body.contains("pod-ok-0"), "{}", answer.body);
            assert!(
                answer.headers.contains_key("content-security-policy"),
                "a refusal carries the headers too"
            );
        }
    }
}

#[tokio::test]
async fn pages_api_and_assets_should_carry_a_strict_content_security_policy() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    for path in ["/", "/api/runs", "/static/ui.js", "/nowhere"] {
        let answer = get(&app, path).await;
        let csp = answer.headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'none'")
                && csp.contains("script-src 'self'")
                && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(
            answer.headers["x-content-type-options"], "nosniff",
            "{path}"
        );
        assert_eq!(answer.headers["referrer-policy"], "no-referrer", "{path}");
    }
}

#[tokio::test]
async fn unknown_paths_should_get_a_404_page_that_escapes_the_path() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    for path in ["/nowhere", "/static/nothing.js", "/pods", "/runs/default"] {
        let answer = get(&app, path).await;
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
    }
    let page = get(&app, "/nowhere").await;
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.body.contains("nothing at /nowhere"), "{}", page.body);
    let evil = get(&app, "/%3Cscript%3Ealert(1)%3C/script%3E").await;
    assert_eq!(evil.status, 404);
    assert!(!evil.body.contains("<script>alert"), "{}", evil.body);
}

#[tokio::test]
async fn the_stylesheet_and_script_should_be_served_embedded() {
    let fixture = Fixture::empty().await;
    let app = fixture.app();
    let css = get(&app, "/static/ui.css").await;
    assert_eq!(css.status, 200);
    assert!(
        css.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
    assert!(!css.body.is_empty());
    let js = get(&app, "/static/ui.js").await;
    assert_eq!(js.status, 200);
    assert!(
        js.headers["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
}
