//! [`Verb`]: the verb of an API request, as kube-apiserver's RequestInfoFactory names it. Its
//! own module under the API, the audit stream and the counts, which all name it (the API's
//! `RequestInfo` parses it from a request's method and path).

use std::fmt;

/// The verb of a request, as kube-apiserver's RequestInfoFactory names it: what counts, the
/// audit stream, fault rules and the resource dispatcher match on. Spelled on the wire (counts'
/// keys, audit entries, messages) by [`Verb::as_str`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Verb {
    /// POST to a collection.
    Create,
    /// GET (or HEAD) of a named object or one of its subresources.
    Get,
    /// GET (or HEAD) of a collection.
    List,
    /// GET of a collection with `watch` set, or under the legacy `/watch/` prefix.
    Watch,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of a named object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// A resource path with a method kube-apiserver has no verb for (e.g. OPTIONS).
    Unknown,
    /// A path that is not a resource path (`/version`, `/api`, `/openapi/v2`). kube-apiserver's
    /// RequestInfo says the lowercase HTTP method there; the sim's counts, audit and faults see
    /// resource requests only, so it keeps none.
    #[default]
    NonResource,
}

impl Verb {
    /// The verb as kube-apiserver spells it (`create`, `deletecollection`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Unknown => "unknown",
            Verb::NonResource => "nonresource",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
