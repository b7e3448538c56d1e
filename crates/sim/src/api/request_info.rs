//! [`RequestInfo`]: what a request is about (verb, group, resource, namespace, name), parsed from
//! its method, path and query like the real server's RequestInfoFactory. Counts, faults and the
//! resource dispatcher all read it.

use http::Method;

pub use crate::verb::Verb;

/// What an API request is about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path is a resource path (`/api/v1/...` or `/apis/g/v/...` with a resource).
    pub is_resource: bool,
    /// The verb ([`Verb::NonResource`] for non-resource paths).
    pub verb: Verb,
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// Subresource (`status`, `log`), or empty.
    pub subresource: String,
    /// Namespace, or empty for cluster-scoped and all-namespace requests.
    pub namespace: String,
    /// Object name, or empty for collections.
    pub name: String,
}

impl RequestInfo {
    /// `pods` or `pods/log`: the resource as counts and fault rules name it.
    pub fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// Parses a request.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Self {
        let non_resource = RequestInfo::default;
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, mut rest) = match parts.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return non_resource(),
        };
        if rest.is_empty() {
            return non_resource();
        }
        let mut legacy_watch = false;
        if rest[0] == "watch" {
            legacy_watch = true;
            rest = &rest[1..];
        }
        let mut info = RequestInfo {
            is_resource: true,
            group: group.to_owned(),
            version: version.to_owned(),
            ..RequestInfo::default()
        };
        match rest {
            ["namespaces", ns, resource, tail @ ..] => {
                info.namespace = (*ns).to_owned();
                info.resource = (*resource).to_owned();
                match tail {
                    [] => {}
                    [name] => info.name = (*name).to_owned(),
                    [name, sub, ..] => {
                        info.name = (*name).to_owned();
                        info.subresource = (*sub).to_owned();
                    }
                }
                // `namespaces/{name}/status` and `/finalize` are subresources of a namespace.
                if group.is_empty() && matches!(*resource, "status" | "finalize") && tail.is_empty()
                {
                    info.resource = "namespaces".to_owned();
                    info.name = (*ns).to_owned();
                    info.namespace = (*ns).to_owned();
                    info.subresource = (*resource).to_owned();
                }
            }
            [resource] => info.resource = (*resource).to_owned(),
            [resource, name] => {
                info.resource = (*resource).to_owned();
                info.name = (*name).to_owned();
                if *resource == "namespaces" {
                    info.namespace = (*name).to_owned();
                }
            }
            [resource, name, sub, ..] => {
                info.resource = (*resource).to_owned();
                info.name = (*name).to_owned();
                info.subresource = (*sub).to_owned();
            }
            [] => return non_resource(),
        }
        // Like kube-apiserver's RequestInfoFactory: any value but `0`/`false` is a watch.
        let watch_param = super::query::Query::new(query).flag("watch") == Some(true);
        info.verb = match *method {
            Method::GET | Method::HEAD => {
                if legacy_watch || (info.name.is_empty() && watch_param) {
                    Verb::Watch
                } else if info.name.is_empty() {
                    Verb::List
                } else {
                    Verb::Get
                }
            }
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE => {
                if info.name.is_empty() {
                    Verb::DeleteCollection
                } else {
                    Verb::Delete
                }
            }
            _ => Verb::Unknown,
        };
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_namespaced_pod_paths() {
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/ns1/pods/p1/log", None);
        assert_eq!(info.verb, Verb::Get);
        assert_eq!(info.resource_path(), "pods/log");
        assert_eq!(info.namespace, "ns1");
        assert_eq!(info.name, "p1");
        let info = RequestInfo::parse(&Method::GET, "/api/v1/pods", Some("watch=true&x=1"));
        assert_eq!(info.verb, Verb::Watch);
        assert_eq!(info.namespace, "");
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/ns1/pods", None);
        assert_eq!(info.verb, Verb::List);
        // kube-apiserver's parameter codec: only `0` and `false` (any case) are false.
        for (query, verb) in [
            ("watch=maybe", Verb::Watch),
            ("watch=TRUE", Verb::Watch),
            ("watch=", Verb::Watch),
            ("watch=False", Verb::List),
            ("watch=0", Verb::List),
        ] {
            let info = RequestInfo::parse(&Method::GET, "/api/v1/pods", Some(query));
            assert_eq!(info.verb, verb, "{query}");
        }
        let info = RequestInfo::parse(&Method::POST, "/api/v1/namespaces/ns1/pods", None);
        assert_eq!(info.verb, Verb::Create);
    }

    #[test]
    fn parses_groups_namespaces_and_legacy_watch() {
        let info = RequestInfo::parse(
            &Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            None,
        );
        assert_eq!(
            (
                info.group.as_str(),
                info.resource.as_str(),
                info.verb.as_str()
            ),
            ("coordination.k8s.io", "leases", "update")
        );
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/default", None);
        assert_eq!(
            (info.resource.as_str(), info.name.as_str()),
            ("namespaces", "default")
        );
        let info = RequestInfo::parse(&Method::GET, "/api/v1/watch/namespaces/a/pods", None);
        assert_eq!(
            (info.verb.as_str(), info.namespace.as_str()),
            ("watch", "a")
        );
        let info = RequestInfo::parse(&Method::GET, "/version", None);
        assert!(!info.is_resource);
        assert_eq!(info.verb, Verb::NonResource);
        let info = RequestInfo::parse(&Method::OPTIONS, "/api/v1/pods", None);
        assert_eq!(info.verb, Verb::Unknown);
        let info = RequestInfo::parse(&Method::DELETE, "/api/v1/namespaces/a/pods", None);
        assert_eq!(info.verb, Verb::DeleteCollection);
    }

    #[test]
    fn verbs_are_spelled_as_kube_apiserver_spells_them() {
        assert_eq!(Verb::DeleteCollection.to_string(), "deletecollection");
        assert_eq!(Verb::Watch.as_str(), "watch");
        assert_eq!(Verb::Create.as_str(), "create");
    }
}
