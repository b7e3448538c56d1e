//! What a watch yields ([`Event`]): its own module, so that the state machine and the public
//! [`super::watch`] both use it without depending on each other.

use super::skipped::Skipped;
use crate::reason::Reason;

/// What a watch yields (inside `Ok`).
///
/// `Delete` events can be missed while disconnected; after a re-list, anything applied before
/// `Init` but not seen between `Init` and `InitDone` must be treated as deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<K> {
    /// A (re-)list starts: a consumer opens a fresh "seen" set.
    Init,
    /// An object that exists now, from the list.
    InitApply(K),
    /// The list is complete: anything not seen since `Init` is gone.
    InitDone,
    /// An object was added or modified.
    Apply(K),
    /// An object was deleted (its last state).
    Delete(K),
    /// The server confirmed progress up to this resourceVersion: a safe resume point to persist.
    Bookmark(String),
    /// A LIST item or watch line that did not decode, skipped: log it (by
    /// [`Skipped::object_name`], with [`Skipped::error`]; never the object) and count it. The
    /// watch goes on, and resumes after it. A listed one ([`Skipped::is_listed`]) exists: do not
    /// treat it as gone at `InitDone`. A deleted one ([`Skipped::is_deletion`]) is gone. Its
    /// [`Skipped::resource_version`], when read, is a resume point like an event's.
    Skipped(Skipped),
    /// A watch request was answered and its stream is open (the watch is healthy: use it for
    /// readiness). `reason` says why the previous watch ended (the first cause, if several
    /// failures followed): [`Reason::ServerTimeout`], [`Reason::ClientTimeout`],
    /// [`Reason::Reset`], [`Reason::Http5xx`], [`Reason::TooManyRequests`], [`Reason::Gone`],
    /// [`Reason::Refused`], [`Reason::Transport`]... Count these as reconnects by reason. The
    /// stream's first `Connected` says [`Reason::Initial`] (or [`Reason::Resume`] when it started
    /// from [`WatchConfig::resume_from`](super::WatchConfig::resume_from)), even if attempts failed before it (those were yielded
    /// as errors); [`Reason::is_first_connect`] tells those apart from reconnects.
    Connected {
        /// Why the previous watch ended.
        reason: Reason,
        /// The resourceVersion this watch started from.
        resource_version: String,
    },
}
