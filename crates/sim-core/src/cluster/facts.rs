//! [`Facts`]: what LIST and WATCH filtering need to know about a stored object (its namespace,
//! labels and the values of the fields its kind supports in field selectors), packed into two
//! one small shared allocation.
//!
//! The store keeps objects as their serialized JSON only (see `table.rs`); decoding 100k pods to
//! evaluate a selector would be far too slow, and keeping the decoded structs costs several KB
//! each. Facts are extracted once, at write time, from the object being written.

use std::sync::Arc;

use super::kind::Kind;

/// Several strings in one shared allocation, addressed by index: a header of end offsets (u32,
/// little-endian) followed by the strings' bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Strs(Arc<[u8]>);

impl Default for Strs {
    fn default() -> Self {
        Strs::new([])
    }
}

impl Strs {
    fn new<'a>(items: impl IntoIterator<Item = &'a str>) -> Strs {
        let items: Vec<&str> = items.into_iter().collect();
        let header = 4 * (1 + items.len());
        let mut data = Vec::with_capacity(header + items.iter().map(|s| s.len()).sum::<usize>());
        // Objects are far below 4 GiB (the API rejects bodies over a few MB).
        let count = u32::try_from(items.len()).unwrap_or(u32::MAX);
        data.extend_from_slice(&count.to_le_bytes());
        let mut end = header;
        for item in &items {
            end += item.len();
            data.extend_from_slice(&u32::try_from(end).unwrap_or(u32::MAX).to_le_bytes());
        }
        for item in &items {
            data.extend_from_slice(item.as_bytes());
        }
        Strs(data.into())
    }

    fn word(&self, index: usize) -> usize {
        let at = 4 * index;
        self.0
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, |b| u32::from_le_bytes(b) as usize)
    }

    fn len(&self) -> usize {
        self.word(0)
    }

    fn get(&self, index: usize) -> &str {
        if index >= self.len() {
            return "";
        }
        let start = match index {
            0 => 4 * (1 + self.len()),
            _ => self.word(index),
        };
        let end = self.word(index + 1);
        // The bytes were copied from whole `&str`s, so this is valid UTF-8.
        self.0
            .get(start..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }
}

/// The selector-relevant facts of one object version. See the module docs.
///
/// Layout of the packed strings: the namespace, then one value per entry of [`Kind::FIELDS`],
/// then the labels as key, value, key, value... Cloning shares them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    strs: Strs,
    fields: u16,
}

impl Facts {
    /// Extracts the facts of `obj`.
    pub fn of<K: Kind>(obj: &K) -> Facts {
        let meta = obj.meta();
        let values: Vec<String> = K::FIELDS
            .iter()
            .map(|field| obj.field(field).unwrap_or_default())
            .collect();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let labels = meta
            .labels
            .iter()
            .flatten()
            .flat_map(|(k, v)| [k.as_str(), v.as_str()]);
        let strs = Strs::new(
            std::iter::once(namespace)
                .chain(values.iter().map(String::as_str))
                .chain(labels),
        );
        Facts {
            strs,
            // A kind has a handful of selectable fields.
            fields: u16::try_from(K::FIELDS.len()).unwrap_or(u16::MAX),
        }
    }

    /// The object's namespace ("" for cluster-scoped kinds).
    pub fn namespace(&self) -> &str {
        self.strs.get(0)
    }

    /// The value of the field at `index` in its kind's [`Kind::FIELDS`] ("" when unset).
    pub fn field(&self, index: usize) -> &str {
        if index >= self.fields as usize {
            return "";
        }
        self.strs.get(1 + index)
    }

    /// The value of label `key`, if the object has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        let first = 1 + self.fields as usize;
        (first..self.strs.len())
            .step_by(2)
            .find(|&i| self.strs.get(i) == key)
            .map(|i| self.strs.get(i + 1))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn facts_answer_what_the_object_says() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("team-a".into()),
                labels: Some([("app".into(), "web".into()), ("tier".into(), "".into())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("sim-node".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
        };
        let facts = Facts::of(&pod);
        assert_eq!(facts.namespace(), "team-a");
        for (index, field) in Pod::FIELDS.iter().enumerate() {
            assert_eq!(
                facts.field(index),
                pod.field(field).unwrap_or_default(),
                "{field}"
            );
        }
        assert_eq!(facts.label("app"), Some("web"));
        assert_eq!(facts.label("tier"), Some(""));
        assert_eq!(facts.label("web"), None, "values are not keys");
        assert_eq!(facts.label("missing"), None);
        assert_eq!(facts.field(99), "");
    }

    #[test]
    fn packed_strings_come_back_as_given() {
        let strs = Strs::new(["", "ünï", "a", ""]);
        assert_eq!(strs.len(), 4);
        let got: Vec<&str> = (0..5).map(|i| strs.get(i)).collect();
        assert_eq!(got, ["", "ünï", "a", "", ""]);
        assert_eq!(Strs::default().len(), 0);
    }

    #[test]
    fn an_object_without_labels_or_namespace_has_empty_facts() {
        let facts = Facts::of(&Pod::default());
        assert_eq!(facts.namespace(), "");
        assert_eq!(facts.label("app"), None);
    }
}
