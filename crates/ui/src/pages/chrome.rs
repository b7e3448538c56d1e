//! The page chrome every page shares: the frame ([`layout`]) with its navigation ([`Nav`]),
//! the error page and [`PageError`], and the formatting and link helpers (`time`, `run_href`,
//! `pod_href`, `query_value`).
//!
//! Its own module so the pages depend on it one way: it names no page, and `pages/mod.rs`
//! (which declares the pages) defines nothing a page uses, so no page imports its parent
//! (issue 19).

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use jiff::Timestamp;
use maud::{DOCTYPE, Markup, html};

use crate::error::UiError;
use crate::params::mark_text;

/// Which page is shown, to highlight its navigation link.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Runs,
    Failures,
    None,
}

/// The page frame: head, navigation, the live indicator and `main`. The script re-renders
/// `main` when the event stream (started from `mark`) reports a change.
pub(crate) fn layout(title: &str, nav: Nav, mark: Option<Timestamp>, main: Markup) -> Html<String> {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · podline" }
                link rel="stylesheet" href="/static/ui.css";
                script src="/static/ui.js" defer {}
            }
            body data-mark=(mark_text(mark)) {
                header.top {
                    a.brand href="/" { "podline" }
                    nav {
                        a href="/" class=[(nav == Nav::Runs).then_some("current")] { "Runs" }
                        a href="/failures" class=[(nav == Nav::Failures).then_some("current")] { "Failures" }
                        a href="/api/runs" { "JSON API" }
                    }
                    span #live.live title="Updates while podline record writes" { "live" }
                }
                main #main { (main) }
            }
        }
    };
    Html(page.into_string())
}

/// An error page with the message as text.
pub(crate) fn error_page(status: StatusCode, message: &str) -> Html<String> {
    layout(
        status.canonical_reason().unwrap_or("Error"),
        Nav::None,
        None,
        html! {
            h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
            p.error { (message) }
            p { a href="/" { "Back to the runs" } }
        },
    )
}

/// Page error: an HTML page saying what went wrong.
pub(crate) struct PageError(pub UiError);

impl<E: Into<UiError>> From<E> for PageError {
    fn from(err: E) -> Self {
        PageError(err.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        self.0.log();
        let status = self.0.status();
        let page = error_page(status, &self.0.message());
        (status, page).into_response()
    }
}

/// A time as people read it: `2026-01-01 10:00:03Z` (to the second), or `-`.
pub(crate) fn time(t: Option<Timestamp>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| {
            t.round(jiff::Unit::Second)
                .unwrap_or(t)
                .strftime("%Y-%m-%d %H:%M:%SZ")
                .to_string()
        },
    )
}

/// Percent-encodes one path segment (a namespace, run or uid) for a link.
pub(crate) fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Link to a run's timeline.
pub(crate) fn run_href(namespace: &str, run: &str) -> String {
    format!("/runs/{}/{}", segment(namespace), segment(run))
}

/// Link to a pod page.
pub(crate) fn pod_href(uid: &str) -> String {
    format!("/pods/{}", segment(uid))
}

/// A query string value, percent-encoded.
pub(crate) fn query_value(value: &str) -> String {
    segment(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_should_encode_every_reserved_character() {
        assert_eq!(run_href("ns", "a/b?c"), "/runs/ns/a%2Fb%3Fc");
        assert_eq!(pod_href("u-1"), "/pods/u-1");
        assert_eq!(segment("<x>"), "%3Cx%3E");
    }

    #[test]
    fn text_in_the_layout_should_be_escaped() {
        let page = error_page(StatusCode::NOT_FOUND, "<script>alert(1)</script>").0;
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
    }
}
