//! Checks of names, labels and quantities, as the API server will make them, so a bad value
//! fails before anything is created with a message naming the setting (as the caller names it)
//! and what was expected.

use crate::error::SpecError;

/// Checks a pod name is a DNS-1123 subdomain, as the API server will.
pub fn validate_pod_name(name: &str) -> Result<(), SpecError> {
    let err = |why| {
        Err(SpecError::InvalidName {
            value: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return err("it is empty");
    }
    if name.len() > 253 {
        return err("it is longer than 253 characters");
    }
    for part in name.split('.') {
        if part.is_empty() {
            return err("it has an empty part between dots");
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return err("it has characters other than a-z, 0-9, '-' and '.'");
        }
        if part.starts_with('-') || part.ends_with('-') {
            return err("it starts or ends with '-'");
        }
    }
    Ok(())
}

fn is_label_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// Checks a label (or annotation) key: optional DNS prefix `/`, then a name of at most 63
/// characters, alphanumeric at both ends.
pub fn validate_label_key(flag: &'static str, key: &str) -> Result<(), SpecError> {
    let err = |why| {
        Err(SpecError::InvalidLabel {
            flag,
            what: "key",
            value: key.to_owned(),
            why,
        })
    };
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty() || prefix.len() > 253 || validate_pod_name(prefix).is_err())
    {
        return err("its prefix is not a DNS subdomain");
    }
    if name.is_empty() || name.len() > 63 {
        return err("the name part must be 1 to 63 characters");
    }
    let bytes = name.as_bytes();
    if !bytes.iter().all(|&b| is_label_name_char(b))
        || !bytes[0].is_ascii_alphanumeric()
        || !bytes[bytes.len() - 1].is_ascii_alphanumeric()
    {
        return err("use a-z, A-Z, 0-9, '-', '_', '.', alphanumeric at both ends");
    }
    Ok(())
}

/// Checks a label value: at most 63 characters, empty or alphanumeric at both ends.
pub fn validate_label_value(flag: &'static str, value: &str) -> Result<(), SpecError> {
    let err = |why| {
        Err(SpecError::InvalidLabel {
            flag,
            what: "value",
            value: value.to_owned(),
            why,
        })
    };
    if value.len() > 63 {
        return err("it is longer than 63 characters");
    }
    let bytes = value.as_bytes();
    if !bytes.is_empty()
        && (!bytes.iter().all(|&b| is_label_name_char(b))
            || !bytes[0].is_ascii_alphanumeric()
            || !bytes[bytes.len() - 1].is_ascii_alphanumeric())
    {
        return err("use a-z, A-Z, 0-9, '-', '_', '.', alphanumeric at both ends");
    }
    Ok(())
}

/// True if `s` is a Kubernetes quantity: a decimal number with an optional binary suffix
/// (`Ki`..`Ei`), decimal suffix (`n u m k M G T P E`) or exponent (`e3`).
pub fn is_quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let digits = num.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || num.matches('.').count() > 1 {
        return false;
    }
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        exp => {
            let Some(rest) = exp.strip_prefix(['e', 'E']) else {
                return false;
            };
            let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::spec::parse_resources;
    use crate::spec::task::tests::spec;

    #[test]
    fn quantities_should_follow_kubernetes_grammar() {
        for ok in [
            "1", "500m", "1.5", "1Gi", "128Mi", "2k", "1e3", ".5", "+1", "100E",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "m", "1GB", "1.2.3", "abc", "1e", "1 Gi", "1x"] {
            assert!(!is_quantity(bad), "{bad}");
        }
        let err = parse_resources("limits", "cpu=lots")
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits") && err.contains("cpu=lots"), "{err}");
        assert!(parse_resources("requests", "").is_err());
    }

    #[test]
    fn labels_should_be_validated() {
        validate_label_key("labels", "podline.io/task-id").unwrap();
        validate_label_key("labels", "app").unwrap();
        assert!(validate_label_key("labels", "-app").is_err());
        assert!(validate_label_key("labels", "Bad Prefix/x").is_err());
        validate_label_value("labels", "").unwrap();
        validate_label_value("labels", "v1.2_x").unwrap();
        assert!(validate_label_value("labels", &"a".repeat(64)).is_err());
        assert!(validate_label_value("labels", "a b").is_err());
        let mut s = spec();
        s.task_id = Some("not valid!".into());
        let err = s.build_pod("d").unwrap_err().to_string();
        assert!(err.contains("taskId"), "{err}");
    }
}
