//! Tasks files (a YAML or JSON list of tasks): reading them into [`TaskSpec`]s and checking
//! every task before any runs.

use super::task::TaskSpec;
use crate::error::SpecError;

/// Parses a tasks file's text (YAML or JSON) into specs: a list of tasks, or `{tasks: [...]}`;
/// fields are those of [`TaskSpec`] in camelCase (`image`, `command`, `env` as `[[K, V]]`,
/// `labels`, `taskId`...).
///
/// The whole file is checked before it is returned, every task as [`TaskSpec::build_pod`] would
/// check it, so a bad third task fails the run before the first one is created. An error names
/// the task (index from 1, and its name or task id), the field and what was expected
/// ([`SpecError::Task`]). Each task is read on its own (not through an untagged enum, whose error
/// would only say that the data matched no variant).
pub fn parse_tasks(path: &str, text: &str) -> Result<Vec<TaskSpec>, SpecError> {
    let file_error = |message: String| SpecError::TasksFile {
        path: path.to_owned(),
        message,
    };
    let document = read_document(text).map_err(file_error)?;
    let tasks = match document {
        serde_json::Value::Array(tasks) => tasks,
        serde_json::Value::Object(mut map) if map.len() == 1 && map.contains_key("tasks") => {
            match map.remove("tasks") {
                Some(serde_json::Value::Array(tasks)) => tasks,
                _ => return Err(file_error("`tasks:` must be a list of tasks".into())),
            }
        }
        serde_json::Value::Null => Vec::new(),
        other => {
            return Err(file_error(format!(
                "not a list of tasks: expected a list of tasks or `tasks: [...]`, got {}",
                json_kind(&other)
            )));
        }
    };
    if tasks.is_empty() {
        return Err(file_error(
            "no tasks in the file (expected a list of tasks)".into(),
        ));
    }
    tasks
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let name = ["name", "taskId"]
                .iter()
                .find_map(|k| value.get(k).and_then(|v| v.as_str()).map(str::to_owned));
            read_task(value).map_err(|(field, message)| SpecError::Task {
                path: path.to_owned(),
                index: i + 1,
                name,
                field,
                message,
            })
        })
        .collect()
}

/// The file's document: JSON when it looks like JSON (read without the YAML reader's node
/// limit), else YAML. An error gives the position and kind, never text of the file: a tasks
/// file holds env values ([`podline_client::parse_error`]).
fn read_document(text: &str) -> Result<serde_json::Value, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        // JSON is YAML too, and a JSON file that serde_json cannot read (a trailing comma,
        // comments) may still be fine YAML; a file that is neither gets serde_json's position.
        return serde_json::from_str(text).or_else(|json| {
            serde_saphyr::from_str(text).map_err(|_| {
                format!(
                    "not a list of tasks: {}",
                    podline_client::parse_error::json(&json)
                )
            })
        });
    }
    serde_saphyr::from_str(text).map_err(|err| match &err {
        err if podline_client::parse_error::is_node_limit(err) => format!(
            "too large for a YAML tasks file: it has more than {} YAML nodes (values, lists and mappings; a task of image, command and taskId is about 8), the YAML reader's limit. Write the file as JSON (a list of tasks, read without this limit), or split it and run each part with its own `podline run -f`",
            podline_client::parse_error::MAX_YAML_NODES
        ),
        _ => format!(
            "not a list of tasks: {}",
            podline_client::parse_error::yaml(&err)
        ),
    })
}

/// One task of a tasks file, read and checked; the error is (field, what is wrong).
fn read_task(value: serde_json::Value) -> Result<TaskSpec, (String, String)> {
    let serde_json::Value::Object(fields) = value else {
        return Err((
            "(task)".into(),
            format!(
                "expected a mapping of task fields (image, command, ...), got {}",
                json_kind(&value)
            ),
        ));
    };
    let spec = match serde_json::from_value::<TaskSpec>(serde_json::Value::Object(fields.clone())) {
        Ok(spec) => spec,
        Err(whole) => {
            // Find the field at fault: read each field alone (the others default).
            for (key, field_value) in fields {
                let one = serde_json::Map::from_iter([(key.clone(), field_value)]);
                if let Err(err) = serde_json::from_value::<TaskSpec>(serde_json::Value::Object(one))
                {
                    return Err((key, explain_serde(&err.to_string())));
                }
            }
            return Err(("(task)".into(), explain_serde(&whole.to_string())));
        }
    };
    match spec.build_pod("default") {
        Ok(_) => Ok(spec),
        Err(err) => Err(file_field_error(&err)),
    }
}

/// serde's message without the values it quotes ([`podline_client::parse_error::serde_message`]:
/// `invalid type: integer `5`` would print an env value), with a hint for the common YAML
/// trap: an unquoted `true`, `5` or `null` where a string is expected (`command: [true]`).
fn explain_serde(message: &str) -> String {
    let message = &podline_client::parse_error::serde_message(message);
    if message.contains("invalid type") && message.contains("expected a string") {
        format!(
            "{message} (quote it, e.g. \"true\" or \"5\": YAML reads unquoted true, 5 or null as a boolean, number or null)"
        )
    } else {
        message.to_owned()
    }
}

/// A [`TaskSpec::build_pod`] error, told in the file's terms: the field as spelled in the file
/// (`build_pod` names fields so already, except the pod's `activeDeadlineSeconds`) and what was
/// expected, with examples in YAML rather than `KEY=VALUE` form.
fn file_field_error(err: &SpecError) -> (String, String) {
    let field = |name: &str| {
        match name {
            "activeDeadlineSeconds" => "activeDeadline",
            other => other,
        }
        .to_owned()
    };
    match err {
        SpecError::MissingImage => (
            "image".into(),
            "missing: every task needs an image (e.g. `image: busybox:1.36`)".into(),
        ),
        SpecError::InvalidLabel {
            flag,
            what,
            value,
            why,
        } => (field(flag), format!("{what} {value:?} is invalid: {why}")),
        SpecError::InvalidQuantity { flag, value } => (
            field(flag),
            format!(
                "{value:?} is not a Kubernetes quantity (expected e.g. cpu: 500m, memory: 1Gi)"
            ),
        ),
        SpecError::InvalidName { value, why } => (
            "name".into(),
            format!(
                "{value:?} is not a valid pod name: {why} (expected lower-case a-z, 0-9, '-' and '.', starting and ending alphanumeric)"
            ),
        ),
        SpecError::OutOfRange { flag, message } => (field(flag), message.clone()),
        other => ("(task)".into(), other.to_string()),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "nothing (null)",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tasks_file_should_parse_list_and_wrapped_forms() {
        let list = parse_tasks(
            "t.yaml",
            "- image: busybox\n  command: [sh, -c, 'exit 0']\n  taskId: a\n- image: alpine\n",
        )
        .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].task_id.as_deref(), Some("a"));
        assert_eq!(list[1].image.as_deref(), Some("alpine"));
        let wrapped =
            parse_tasks("t.json", r#"{"tasks":[{"image":"x","activeDeadline":30}]}"#).unwrap();
        assert_eq!(
            wrapped[0].active_deadline,
            Some(std::time::Duration::from_secs(30))
        );
        let err = parse_tasks("t.yaml", "- imgae: typo\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t.yaml") && err.contains("task 1") && err.contains("imgae"),
            "{err}"
        );
    }

    #[test]
    fn every_task_should_be_checked_before_any_runs() {
        let text = "- image: busybox\n- name: second\n  command: [echo, hi]\n- image: alpine\n";
        let err = parse_tasks("t.yaml", text).unwrap_err();
        assert!(
            matches!(&err, SpecError::Task { index: 2, field, .. } if field == "image"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "t.yaml: task 2 (\"second\"): image: missing: every task needs an image (e.g. `image: busybox:1.36`)"
        );
        for (text, index, field, want) in [
            (
                "- image: a\n- image: b\n  command: [true]\n",
                2,
                "command",
                "expected a string",
            ),
            (
                "tasks:\n- image: a\n  taskId: t1\n  labels: {\"bad key\": v}\n",
                1,
                "labels",
                "bad key",
            ),
            (
                "- image: a\n  activeDeadline: 18446744073709551615\n",
                1,
                "activeDeadline",
                "1 to 2147483647",
            ),
            (
                "- image: a\n  activeDeadline: 0\n",
                1,
                "activeDeadline",
                "1 to",
            ),
            (
                "- image: a\n  requests: {cpu: lots}\n",
                1,
                "requests",
                "quantity",
            ),
            ("- image: a\n- just a string\n", 2, "(task)", "a string"),
        ] {
            let err = parse_tasks("t.yaml", text).unwrap_err();
            let shown = err.to_string();
            match &err {
                SpecError::Task {
                    index: i, field: f, ..
                } => assert_eq!((*i, f.as_str()), (index, field), "{shown}"),
                other => panic!("{other:?}"),
            }
            assert!(shown.contains(want), "{text:?}: {shown}");
            assert!(!shown.contains("untagged"), "{shown}");
        }
        assert!(parse_tasks("t.yaml", "").is_err());
        assert!(
            parse_tasks("t.json", "[{\"image\": \"a\"},]").is_ok(),
            "YAML-only JSON"
        );
        assert!(parse_tasks("t.yaml", "[]").is_err());
        assert!(parse_tasks("t.yaml", "image: a\n").is_err());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod secrecy_and_size_tests {
    use super::*;

    const MARKER: &str = "Zq9EnvMarker";

    /// A tasks file holds env values: no error quotes one, whatever is wrong where.
    #[test]
    fn no_error_should_quote_a_value_of_the_file() {
        for text in [
            format!("- image: a\n  env: [[K, \"{MARKER}\"]]\n\t- image: b\n"),
            format!("- image: a\n  env: [[K, {MARKER}, x]]\n"),
            format!("- image: a\n  env: [[K, {MARKER}], [{MARKER}]]\n"),
            "- image: a\n  env: [[K, 987654321]]\n".to_owned(),
            format!("- image: a\n  env: {{K: \"{MARKER}\"}}\n"),
            format!("- image: a\n  env: \"{MARKER}\"\n"),
            format!(r#"[{{"image": "a", "env": [["K", ["{MARKER}"]]]}}]"#),
            format!(r#"[{{"image": "a", "env": [["K", "{MARKER}"#),
            format!("- image: a\n  env: [[K, \"{MARKER}\"]]\n  imgae: {MARKER}\n"),
        ] {
            let err = parse_tasks("t.yaml", &text).unwrap_err().to_string();
            assert!(
                !err.contains(MARKER) && !err.contains("987654321"),
                "{text:?}: {err}"
            );
            assert!(err.starts_with("t.yaml: "), "{text:?}: {err}");
        }
    }

    /// Past the YAML reader's node limit the message names the limit and the two ways on;
    /// the same tasks as JSON are read.
    #[test]
    fn a_yaml_file_past_the_node_limit_should_say_so_and_json_should_run_more() {
        let tasks = 90_000; // three nodes each: 270,000
        let yaml = "- image: a\n".repeat(tasks);
        let err = parse_tasks("big.yaml", &yaml).unwrap_err().to_string();
        assert!(
            err.contains("250000 YAML nodes") && err.contains("JSON") && err.contains("split"),
            "{err}"
        );
        assert!(!err.contains("budget breached"), "{err}");
        let json = format!("[{}]", vec![r#"{"image":"a"}"#; tasks].join(","));
        assert_eq!(parse_tasks("big.json", &json).unwrap().len(), tasks);
    }
}
