//! [`Part`]: which part of an object a write addresses, shared by the generic handlers, the
//! kinds' admission rules and server-side apply's field ownership.

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: status changes are ignored (for kinds with a status subresource).
    Main,
    /// The `status` subresource: only status changes are taken.
    Status,
}
