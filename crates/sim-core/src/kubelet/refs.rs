//! What a kubelet reads from other objects to create a container: its environment
//! (`env[].valueFrom` and `envFrom`), as `makeEnvironmentVariables` in
//! pkg/kubelet/kubelet_pods.go builds it (read upstream, not copied).
//!
//! - `envFrom` first, in order: every key of the ConfigMap's `data` (or the Secret's `data`),
//!   with the source's `prefix`; a key that is not a valid variable name is skipped. A missing source that is not `optional` is an error: the API's
//!   NotFound text, `configmap "NAME" not found` / `secret "NAME" not found`.
//! - then `env`, in order: a literal `value` with `$(VAR)` references to earlier variables
//!   expanded (`$$` is a literal `$`, an unknown reference stays as written); `valueFrom`:
//!   `configMapKeyRef` / `secretKeyRef` (a missing object as above, a missing key
//!   `couldn't find key KEY in ConfigMap NS/NAME` / `... in Secret NS/NAME`, both skipped
//!   when `optional`), `fieldRef` (the downward API's pod fields) and `resourceFieldRef` (the
//!   container's requests or limits divided by `divisor`, rounded up; an unset limit is the
//!   node's allocatable).
//! - Later variables override earlier ones of the same name.
//!
//! The kubelet turns an error into the container's `CreateContainerConfigError` (`pod.rs`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ObjectFieldSelector, Pod, ResourceFieldSelector, Secret,
};

use super::node::{CAPACITY, HOST_IP};
use crate::cluster::Cluster;
use crate::quantity::Quantity;

/// The objects a kubelet reads references from (the cluster; a map in unit tests).
pub(crate) trait Objects {
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret>;
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap>;
}

impl Objects for Cluster {
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        Some(self.secret_table().get(namespace, name)?.decode())
    }
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        Some(self.config_map_table().get(namespace, name)?.decode())
    }
}

/// The API's NotFound message of a ConfigMap.
pub(crate) fn config_map_not_found(name: &str) -> String {
    format!("configmap {name:?} not found")
}

/// The API's NotFound message of a Secret.
pub(crate) fn secret_not_found(name: &str) -> String {
    format!("secret {name:?} not found")
}

/// The data of a ConfigMap (`data`, then `binaryData` for volumes) or a Secret as bytes.
pub(crate) fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

/// Whether `name` is a valid environment variable name as 1.32's kubelet checks `envFrom` keys
/// (`RelaxedEnvironmentVariableValidation`, beta and on in 1.32: `IsRelaxedEnvVarName`,
/// printable ASCII but `=`).
fn is_env_var_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
}

/// The container's environment as the kubelet makes it, in the order variables were first set;
/// Err with the kubelet's message when a reference cannot be resolved.
pub(crate) fn container_env(
    objects: &dyn Objects,
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
) -> Result<Vec<(String, String)>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| match env
        .iter_mut()
        .find(|(n, _)| *n == name)
    {
        Some(slot) => slot.1 = value,
        None => env.push((name, value)),
    };
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        let pairs: Vec<(String, String)> = if let Some(r) = &source.config_map_ref {
            match objects.config_map(namespace, &r.name) {
                Some(cm) => cm.data.unwrap_or_default().into_iter().collect(),
                None if r.optional == Some(true) => continue,
                None => return Err(config_map_not_found(&r.name)),
            }
        } else if let Some(r) = &source.secret_ref {
            match objects.secret(namespace, &r.name) {
                Some(secret) => secret_data(&secret)
                    .into_iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                    .collect(),
                None if r.optional == Some(true) => continue,
                None => return Err(secret_not_found(&r.name)),
            }
        } else {
            continue;
        };
        for (key, value) in pairs {
            let name = format!("{prefix}{key}");
            if is_env_var_name(&name) {
                set(&mut env, name, value);
            }
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => expand(var.value.as_deref().unwrap_or_default(), &env),
            Some(from) => {
                if let Some(r) = &from.config_map_key_ref {
                    let optional = r.optional == Some(true);
                    let Some(cm) = objects.config_map(namespace, &r.name) else {
                        if optional {
                            continue;
                        }
                        return Err(config_map_not_found(&r.name));
                    };
                    match cm.data.unwrap_or_default().remove(&r.key) {
                        Some(v) => v,
                        None if optional => continue,
                        None => {
                            return Err(format!(
                                "couldn't find key {} in ConfigMap {namespace}/{}",
                                r.key, r.name
                            ));
                        }
                    }
                } else if let Some(r) = &from.secret_key_ref {
                    let optional = r.optional == Some(true);
                    let Some(secret) = objects.secret(namespace, &r.name) else {
                        if optional {
                            continue;
                        }
                        return Err(secret_not_found(&r.name));
                    };
                    match secret_data(&secret).remove(&r.key) {
                        Some(v) => String::from_utf8_lossy(&v).into_owned(),
                        None if optional => continue,
                        None => {
                            return Err(format!(
                                "couldn't find key {} in Secret {namespace}/{}",
                                r.key, r.name
                            ));
                        }
                    }
                } else if let Some(f) = &from.field_ref {
                    pod_field(pod, f, pod_ip)?
                } else if let Some(r) = &from.resource_field_ref {
                    resource_field(pod, Some(container), r)?
                } else {
                    continue;
                }
            }
        };
        set(&mut env, var.name.clone(), value);
    }
    Ok(env)
}

/// `$(VAR)` expansion as `third_party/forked/golang/expansion` does it: a defined variable is
/// replaced, `$$` is `$`, anything else is kept as written.
fn expand(input: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(')
            && let Some(end) = body.find(')')
        {
            let name = &body[..end];
            match env.iter().find(|(n, _)| n == name) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `podFieldSelectorRuntimeValue` and the downward API's `ExtractFieldPathAsString`.
pub(crate) fn pod_field(
    pod: &Pod,
    f: &ObjectFieldSelector,
    pod_ip: &str,
) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let path = f.field_path.as_str();
    let map_entry = |map: &Option<BTreeMap<String, String>>, prefix: &str| -> Option<String> {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    let format_map = |map: &Option<BTreeMap<String, String>>| -> String {
        map.iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(&meta.labels),
        "metadata.annotations" => format_map(&meta.annotations),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => HOST_IP.to_owned(),
        "status.podIP" | "status.podIPs" => pod_ip.to_owned(),
        _ => {
            if let Some(v) = map_entry(&meta.labels, "metadata.labels['") {
                v
            } else if let Some(v) = map_entry(&meta.annotations, "metadata.annotations['") {
                v
            } else {
                return Err(format!("unsupported fieldPath: {path}"));
            }
        }
    })
}

/// `ExtractContainerResourceValue`: the container's request or limit of a resource divided by
/// the divisor, rounded up (an unset limit is the node's allocatable, an unset request 0).
pub(crate) fn resource_field(
    pod: &Pod,
    container: Option<&Container>,
    r: &ResourceFieldSelector,
) -> Result<String, String> {
    let named = r.container_name.as_deref().filter(|n| !n.is_empty());
    let container = match named {
        Some(name) => pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == name)),
        None => container,
    }
    .ok_or_else(|| format!("container {:?} not found", named.unwrap_or_default()))?;
    let (bag, resource) = r
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported container resource : {}", r.resource))?;
    let resources = container.resources.clone().unwrap_or_default();
    let set = match bag {
        "limits" => resources.limits,
        "requests" => resources.requests,
        _ => return Err(format!("unsupported container resource : {}", r.resource)),
    };
    let value = match set.as_ref().and_then(|m| m.get(resource)) {
        Some(q) => q.0.clone(),
        None if bag == "limits" => CAPACITY
            .iter()
            .find(|(k, _)| *k == resource)
            .map(|(_, v)| (*v).to_owned())
            .unwrap_or_else(|| "0".to_owned()),
        None => "0".to_owned(),
    };
    let divisor = r.divisor.as_ref().map_or("1", |d| d.0.as_str());
    let (Some(value), Some(divisor)) = (Quantity::parse(&value), Quantity::parse(divisor)) else {
        return Err(format!(
            "invalid quantity in resourceFieldRef {}",
            r.resource
        ));
    };
    if divisor.nanos <= 0 {
        return Err(format!(
            "invalid divisor in resourceFieldRef {}",
            r.resource
        ));
    }
    let ceil = (value.nanos + divisor.nanos - 1).div_euclid(divisor.nanos);
    Ok(ceil.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource, PodSpec,
        ResourceRequirements, SecretKeySelector,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[derive(Default)]
    struct Map {
        secrets: Vec<Secret>,
        config_maps: Vec<ConfigMap>,
    }

    impl Objects for Map {
        fn secret(&self, _: &str, name: &str) -> Option<Secret> {
            self.secrets
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .cloned()
        }
        fn config_map(&self, _: &str, name: &str) -> Option<ConfigMap> {
            self.config_maps
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .cloned()
        }
    }

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            ..ObjectMeta::default()
        }
    }

    fn objects() -> Map {
        Map {
            secrets: vec![Secret {
                metadata: meta("creds"),
                data: Some([("password".to_owned(), ByteString(b"s3cret".to_vec()))].into()),
                ..Secret::default()
            }],
            config_maps: vec![ConfigMap {
                metadata: meta("settings"),
                data: Some(
                    [
                        ("MODE".to_owned(), "fast".to_owned()),
                        ("1st".to_owned(), "x".to_owned()),
                    ]
                    .into(),
                ),
                ..ConfigMap::default()
            }],
        }
    }

    fn var(name: &str, from: EnvVarSource) -> EnvVar {
        EnvVar {
            name: name.to_owned(),
            value_from: Some(from),
            ..EnvVar::default()
        }
    }

    fn pod_with(container: Container) -> Pod {
        Pod {
            metadata: ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..meta("p")
            },
            spec: Some(PodSpec {
                containers: vec![container],
                node_name: Some("sim-node-1".to_owned()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn references_resolve_as_the_kubelet_resolves_them() {
        let container = Container {
            name: "main".to_owned(),
            env_from: Some(vec![EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "settings".to_owned(),
                    optional: None,
                }),
                ..EnvFromSource::default()
            }]),
            env: Some(vec![
                var(
                    "PASSWORD",
                    EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: "creds".to_owned(),
                            key: "password".to_owned(),
                            optional: None,
                        }),
                        ..EnvVarSource::default()
                    },
                ),
                EnvVar {
                    name: "GREETING".to_owned(),
                    value: Some("mode $(MODE) $$(MODE) $(NOPE)".to_owned()),
                    ..EnvVar::default()
                },
                var(
                    "APP",
                    EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "metadata.labels['app']".to_owned(),
                            api_version: None,
                        }),
                        ..EnvVarSource::default()
                    },
                ),
                var(
                    "MEM_MI",
                    EnvVarSource {
                        resource_field_ref: Some(ResourceFieldSelector {
                            resource: "limits.memory".to_owned(),
                            divisor: Some(Q("1Mi".to_owned())),
                            container_name: None,
                        }),
                        ..EnvVarSource::default()
                    },
                ),
                var(
                    "CPU",
                    EnvVarSource {
                        resource_field_ref: Some(ResourceFieldSelector {
                            resource: "requests.cpu".to_owned(),
                            divisor: None,
                            container_name: None,
                        }),
                        ..EnvVarSource::default()
                    },
                ),
            ]),
            resources: Some(ResourceRequirements {
                requests: Some([("cpu".to_owned(), Q("250m".to_owned()))].into()),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        };
        let pod = pod_with(container.clone());
        let env = container_env(&objects(), &pod, &container, "10.244.0.2").unwrap();
        assert_eq!(
            env,
            [
                ("1st", "x"),
                ("MODE", "fast"),
                ("PASSWORD", "s3cret"),
                ("GREETING", "mode fast $(MODE) $(NOPE)"),
                ("APP", "web"),
                ("MEM_MI", "16384"),
                ("CPU", "1"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn a_missing_reference_is_the_kubelets_error_unless_optional() {
        let key_ref = |name: &str, key: &str, optional| {
            var(
                "X",
                EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name: name.to_owned(),
                        key: key.to_owned(),
                        optional,
                    }),
                    ..EnvVarSource::default()
                },
            )
        };
        let run = |vars: Vec<EnvVar>| {
            let container = Container {
                name: "main".to_owned(),
                env: Some(vars),
                ..Container::default()
            };
            container_env(&objects(), &pod_with(container.clone()), &container, "")
        };
        assert_eq!(
            run(vec![key_ref("nope", "k", None)]),
            Err("configmap \"nope\" not found".to_owned())
        );
        assert_eq!(
            run(vec![key_ref("settings", "k", None)]),
            Err("couldn't find key k in ConfigMap ns/settings".to_owned())
        );
        assert_eq!(run(vec![key_ref("nope", "k", Some(true))]), Ok(vec![]));
        assert_eq!(run(vec![key_ref("settings", "k", Some(true))]), Ok(vec![]));
        let secret = var(
            "S",
            EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: "gone".to_owned(),
                    key: "k".to_owned(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            },
        );
        assert_eq!(
            run(vec![secret]),
            Err("secret \"gone\" not found".to_owned())
        );
    }
}
