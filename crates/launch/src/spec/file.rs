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
    let document: serde_json::Value = serde_saphyr::from_str(text)
        .map_err(|e| file_error(format!("not a list of tasks: {e}")))?;
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

/// serde's message, with a hint for the common YAML trap: an unquoted `true`, `5` or `null`
/// where a string is expected (`command: [true]`).
fn explain_serde(message: &str) -> String {
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
        assert!(parse_tasks("t.yaml", "[]").is_err());
        assert!(parse_tasks("t.yaml", "image: a\n").is_err());
    }
}
