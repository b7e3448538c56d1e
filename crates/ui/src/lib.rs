//! `podline ui`: a read-only web page and JSON API over the recorder's store.
//!
//! People look at a slow or failed pipeline run rather than read tables: which pods waited
//! for scheduling, which pulled images for long, which ran long, which failed and why. This
//! crate serves that from the store the recorder writes (SQLite or PostgreSQL), opened
//! read-only:
//!
//! - **pages** (server-rendered HTML, every value escaped by [`maud`]): runs with their counts
//!   and filters, a run's timeline (one SVG bar per pod, pending / pulling / running segments
//!   coloured by outcome, hover for details), a pod page, and failures grouped by reason;
//! - **a JSON API** under `/api/` with the same data (documented in `docs/ui.md`);
//! - **live updates**: `/api/events` is a server-sent event stream driven by the store's
//!   cheap "what changed since" query ([`StoreRead::changes`](podline_store::StoreRead::changes)); the
//!   page's small script re-renders its main part when something changed.
//!
//! Everything (CSS, script) is embedded in the binary; nothing is fetched at run time. Only
//! `GET` routes exist, and responses carry a strict Content-Security-Policy.
//!
//! **Depends on** the store's read side ([`podline_store::StoreRead`]) and the web stack, nothing
//! else of podline. It **must not depend on** the recorder (`podline-record`), the sim
//! (`podline-sim`) or the launcher (`podline-launch`): it shows what is in the store, whoever
//! wrote it, and never talks to a cluster. Nor does it name a CLI flag or environment
//! variable; the binary (`podline ui`) parses those and passes a [`UiConfig`].
//!
//! [`router`] is the whole UI as an axum `Router` (tests drive it in-process); [`serve`] runs
//! it on a listener until shutdown.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = podline_store::open_read_only("podline.db").await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! podline_ui::serve(listener, podline_ui::UiConfig::new(store), shutdown).await?;
//! # Ok(())
//! # }
//! ```

// Modules, each depending only on those listed before it (no module imports one that
// imports it back):
// - `error`, `params`, `timeline`, `host`: leaves (errors, query parsing, timeline building,
//   the `Host` allow-list);
// - `state`: the shared `UiConfig` handlers read;
// - `load`: the store reads pages, API and event stream share;
// - `api`, `live`, `pages`, `assets`: the handlers;
// - `app`: the router assembling them;
// - `server`: serving the router on a listener.
mod api;
mod app;
mod assets;
mod error;
mod host;
mod live;
mod load;
mod pages;
mod params;
mod server;
mod state;
pub mod timeline;

pub use app::router;
pub use error::UiError;
pub use server::serve;
pub use state::UiConfig;
