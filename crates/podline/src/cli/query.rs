//! `podline runs`, `podline pods`, `podline show POD`: read what the recorder stored.
//!
//! They read only the store (no cluster needed). `-n` filters by namespace (default: all);
//! `-o table|wide|json|yaml` picks the format.

use podline_phase::Phase;
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use jiff::Timestamp;
use podline_store::{PodFilter, PodKey, PodRecord, RunFilter, RunSummary, StoreError, StoreRead};
use serde::Serialize;

use crate::cli::exit;
use crate::cli::{Output, OutputFlag};

/// Where the store is; shared by every query command.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// The store to read: a SQLite file path (or sqlite://PATH) or postgres://USER@HOST/DB.
    #[arg(
        long,
        env = "PODLINE_DB",
        // It may hold a password: `--help` names the variable, never its value.
        hide_env_values = true,
        default_value = "podline.db",
        value_name = "DB"
    )]
    pub db: String,
}

/// List runs (pods grouped by their run label), newest first.
#[derive(Debug, Clone, clap::Args)]
pub struct RunsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Only runs with pods in this namespace (default: every namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub output: OutputFlag,
    /// At most this many runs.
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
}

/// List recorded pods, newest first.
#[derive(Debug, Clone, clap::Args)]
pub struct PodsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Only pods in this namespace (default: every namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub output: OutputFlag,
    /// Only pods of this run.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Only pods in this phase (Pending, Running, Succeeded, Failed, Unknown).
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// At most this many pods.
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
}

/// Show one pod and its timeline: every phase with its time, its containers, its deletion.
#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The namespace of a POD given by its NAME alone (default: "default").
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub output: OutputFlag,
    /// The pod: NAME (in -n, else "default"), NAMESPACE/NAME, or its uid.
    #[arg(value_name = "POD")]
    pub pod: String,
}

/// Opens the store for reading only (queries and the UI): nothing is created, migrated or
/// written, so `--db typo.db` fails instead of leaving an empty store behind. The target is
/// shown redacted; a missing file says how to make one.
pub(crate) async fn open_read_only(db: &DbArgs) -> anyhow::Result<std::sync::Arc<dyn StoreRead>> {
    let shown = podline_store::Redacted::new(&db.db);
    match podline_store::open_read_only(&db.db).await {
        Ok(store) => Ok(store),
        // A --db naming no file is a mistyped flag: a usage error.
        Err(err @ StoreError::Missing { .. }) => Err(exit::usage(
            anyhow::anyhow!(
                "{err}; `podline record --db {shown}` creates it (or `podline demo --db FILE` \
                 makes a sample store)"
            )
            .context(format!("cannot open the store --db {shown}")),
        )),
        Err(err) => Err(err).with_context(|| format!("cannot open the store --db {shown}")),
    }
}

/// `podline runs`.
pub async fn runs(args: RunsArgs) -> anyhow::Result<ExitCode> {
    let store = open_read_only(&args.db).await?;
    let runs = store
        .runs(&RunFilter {
            namespace: args.namespace,
            limit: args.limit,
            ..RunFilter::default()
        })
        .await?;
    print!("{}", render_runs(&runs, args.output.output)?);
    Ok(ExitCode::SUCCESS)
}

/// `podline pods`.
pub async fn pods(args: PodsArgs) -> anyhow::Result<ExitCode> {
    let store = open_read_only(&args.db).await?;
    let pods = store
        .pods(&PodFilter {
            run: args.run,
            phase: args.phase,
            namespace: args.namespace,
            limit: args.limit,
        })
        .await?;
    print!("{}", render_pods(&pods, args.output.output)?);
    Ok(ExitCode::SUCCESS)
}

/// `podline show POD`.
pub async fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let store = open_read_only(&args.db).await?;
    let namespace = args.namespace.as_deref().unwrap_or("default");
    let key = PodKey::parse(&args.pod, namespace);
    match store.pod(&key).await? {
        Some(pod) => {
            print!("{}", render_pod(&pod, args.output.output)?);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!(
                "error: no recorded pod {:?} (looked for {namespace}/{} and for a uid)",
                args.pod, args.pod
            );
            Ok(exit::code(exit::ERROR))
        }
    }
}

fn machine<T: Serialize>(value: &T, output: Output) -> anyhow::Result<Option<String>> {
    Ok(match output {
        Output::Json => Some(serde_json::to_string_pretty(value)? + "\n"),
        Output::Yaml => Some(serde_saphyr::to_string(value)?),
        Output::Table | Output::Wide => None,
    })
}

/// Renders runs as a table (or JSON/YAML).
pub fn render_runs(runs: &[RunSummary], output: Output) -> anyhow::Result<String> {
    if let Some(text) = machine(&runs, output)? {
        return Ok(text);
    }
    let wide = output == Output::Wide;
    let mut header = vec![
        "NAMESPACE",
        "RUN",
        "PODS",
        "SUCCEEDED",
        "FAILED",
        "RUNNING",
        "PENDING",
    ];
    if wide {
        header.extend(["DELETED", "FIRST CREATED", "LAST FINISHED"]);
    }
    let rows = runs.iter().map(|r| {
        let n = |phase: Phase| {
            r.phases
                .get(phase.as_str())
                .copied()
                .unwrap_or(0)
                .to_string()
        };
        let mut row = vec![
            r.namespace.clone(),
            r.run.clone(),
            r.pods.to_string(),
            n(Phase::Succeeded),
            n(Phase::Failed),
            n(Phase::Running),
            n(Phase::Pending),
        ];
        if wide {
            row.extend([
                r.deleted.to_string(),
                time(r.first_created_at),
                time(r.last_finished_at),
            ]);
        }
        row
    });
    Ok(table(&header, rows))
}

/// Renders pods as a table (or JSON/YAML).
pub fn render_pods(pods: &[PodRecord], output: Output) -> anyhow::Result<String> {
    if let Some(text) = machine(&pods, output)? {
        return Ok(text);
    }
    let wide = output == Output::Wide;
    let mut header = vec![
        "NAMESPACE",
        "NAME",
        "RUN",
        "PHASE",
        "EXIT",
        "CREATED",
        "DURATION",
    ];
    if wide {
        header.extend(["NODE", "REASON", "DELETED", "UID"]);
    }
    let rows = pods.iter().map(|p| {
        let mut row = vec![
            p.namespace.clone(),
            p.name.clone(),
            p.run.clone().unwrap_or_else(|| "-".into()),
            p.phase.clone().unwrap_or_else(|| "-".into()),
            exit_codes(p),
            time(p.created_at),
            duration(p.started_at.or(p.created_at), p.finished_at),
        ];
        if wide {
            row.extend([
                p.node.clone().unwrap_or_else(|| "-".into()),
                p.reason.clone().unwrap_or_else(|| "-".into()),
                deleted(p),
                p.uid.clone(),
            ]);
        }
        row
    });
    Ok(table(&header, rows))
}

/// Renders one pod with its timeline (or JSON/YAML).
pub fn render_pod(pod: &PodRecord, output: Output) -> anyhow::Result<String> {
    if let Some(text) = machine(pod, output)? {
        return Ok(text);
    }
    let mut out = String::new();
    let dash = |v: &Option<String>| v.as_deref().map_or_else(|| "-".into(), printable);
    let _ = writeln!(
        out,
        "Pod:        {}/{}",
        printable(&pod.namespace),
        printable(&pod.name)
    );
    let _ = writeln!(out, "UID:        {}", printable(&pod.uid));
    let _ = writeln!(out, "Run:        {}", dash(&pod.run));
    let _ = writeln!(out, "Owner:      {}", dash(&pod.owner));
    let _ = writeln!(out, "Node:       {}", dash(&pod.node));
    let phase = dash(&pod.phase);
    match &pod.reason {
        Some(reason) => {
            let reason = printable(reason);
            let _ = writeln!(out, "Phase:      {phase} ({reason})");
        }
        None => {
            let _ = writeln!(out, "Phase:      {phase}");
        }
    }
    if let Some(message) = &pod.message {
        let _ = writeln!(out, "Message:    {}", printable(message));
    }
    let _ = writeln!(out, "\nTimeline:");
    let start = pod.transitions.first().map(|t| t.at);
    // In the order a pod lives them, also within one second.
    for (at, what) in pod.lifecycle_events() {
        let offset =
            start.map_or_else(String::new, |s| format!("+{}", human(at.duration_since(s))));
        let what = printable(&what);
        let _ = writeln!(out, "  {:<22} {:>9}  {what}", at.to_string(), offset);
    }
    if !pod.containers.is_empty() {
        let _ = writeln!(out, "\nContainers:");
        let rows = pod.containers.iter().map(|c| {
            vec![
                c.name.clone(),
                c.image.clone(),
                c.state.map_or("-", |s| s.as_str()).to_owned(),
                c.exit_code.map_or_else(|| "-".into(), |e| e.to_string()),
                c.restarts.to_string(),
                dash(&c.reason),
            ]
        });
        for line in table(
            &["NAME", "IMAGE", "STATE", "EXIT", "RESTARTS", "REASON"],
            rows,
        )
        .lines()
        {
            let _ = writeln!(out, "  {line}");
        }
    }
    Ok(out)
}

fn exit_codes(p: &PodRecord) -> String {
    let codes: Vec<String> = p
        .containers
        .iter()
        .filter_map(|c| c.exit_code.map(|e| e.to_string()))
        .collect();
    if codes.is_empty() {
        "-".into()
    } else {
        codes.join(",")
    }
}

fn deleted(p: &PodRecord) -> String {
    match (p.deleted_at, p.final_state_observed) {
        (None, _) => "-".into(),
        (Some(_), true) => "yes".into(),
        (Some(_), false) => "vanished".into(),
    }
}

fn time(t: Option<Timestamp>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| {
            t.round(jiff::Unit::Second)
                .map_or_else(|_| t.to_string(), |t| t.to_string())
        },
    )
}

fn duration(from: Option<Timestamp>, to: Option<Timestamp>) -> String {
    match (from, to) {
        (Some(from), Some(to)) => human(to.duration_since(from)),
        _ => "-".into(),
    }
}

fn human(d: jiff::SignedDuration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        let secs = d.as_secs();
        format!("{}m{}s", secs / 60, secs % 60)
    }
}

/// Left-aligned columns separated by three spaces, like kubectl.
/// Every cell goes through [`printable`]: pod-controlled text never reaches the terminal raw.
fn table(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                let _ = write!(s, "{cell:<w$}   ");
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// `text` safe to print on a terminal: every control character (C0 including newline and ESC,
/// DEL, C1) is written as a visible escape (`\n`, `\t`, `\r`, else `\u{1b}`), so a pod's
/// image, message, reason or label cannot move the cursor, recolour, retitle or inject lines
/// into an operator's terminal (as kubectl has done since CVE-2021-25743). Human output only:
/// JSON and YAML stay faithful, their serializers escape on their own.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for ch in text.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // char::is_control: exactly C0, DEL and C1.
            ch if ch.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(ch));
            }
            ch => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use podline_store::{ContainerObservation, ContainerState, PhaseTransition};

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn record() -> PodRecord {
        PodRecord {
            uid: "u-1".into(),
            namespace: "ns".into(),
            name: "train-1".into(),
            resource_version: 9,
            run: Some("r1".into()),
            labels: Default::default(),
            annotations: Default::default(),
            owner: Some("Workflow/wf".into()),
            node: Some("sim-node-1".into()),
            phase: Some("Failed".into()),
            reason: Some("Error".into()),
            message: None,
            created_at: Some(t("2026-01-01T00:00:00Z")),
            scheduled_at: Some(t("2026-01-01T00:00:01Z")),
            started_at: Some(t("2026-01-01T00:00:02Z")),
            finished_at: Some(t("2026-01-01T00:00:05Z")),
            deletion_requested_at: None,
            deleted_at: Some(t("2026-01-01T00:01:00Z")),
            final_state_observed: false,
            recorded_at: t("2026-01-01T00:00:00Z"),
            updated_at: t("2026-01-01T00:00:05Z"),
            containers: vec![ContainerObservation {
                name: "main".into(),
                image: "busybox".into(),
                state: Some(ContainerState::Terminated),
                exit_code: Some(3),
                reason: Some("Error".into()),
                ..Default::default()
            }],
            transitions: vec![
                PhaseTransition::new("Pending", t("2026-01-01T00:00:00Z")),
                PhaseTransition::new("Running", t("2026-01-01T00:00:02Z")),
                PhaseTransition::new("Failed", t("2026-01-01T00:00:05Z")),
            ],
        }
    }

    #[test]
    fn show_prints_a_timeline_in_time_order_with_offsets() {
        let text = render_pod(&record(), Output::Table).unwrap();
        let pending = text.find("Pending").unwrap();
        let scheduled = text.find("Scheduled").unwrap();
        let failed = text.find("+5.0s  Failed").unwrap();
        let deleted = text.find("Deleted (vanished").unwrap();
        assert!(
            pending < scheduled && scheduled < failed && failed < deleted,
            "{text}"
        );
        assert!(text.contains("+5.0s"), "{text}");
        assert!(text.contains("Phase:      Failed (Error)"), "{text}");
        assert!(text.contains("terminated"), "{text}");
    }

    /// Transitions of one second, stored by phase name (Failed, Pending, Running), are shown in
    /// the order the pod lived them, the Scheduled condition in its place.
    #[test]
    fn show_should_order_same_second_transitions_by_the_lifecycle() {
        let mut pod = record();
        let second = t("2026-01-01T00:00:00Z");
        pod.scheduled_at = Some(second);
        pod.deleted_at = None;
        pod.deletion_requested_at = Some(second);
        pod.transitions = vec![
            PhaseTransition::new("Failed", second),
            PhaseTransition::new("Pending", second),
            PhaseTransition::new("Running", second),
        ];
        let text = render_pod(&pod, Output::Table).unwrap();
        let text = &text[text.find("Timeline:").unwrap()..];
        let at = |what: &str| {
            text.find(&format!("  {what}"))
                .unwrap_or_else(|| panic!("{what} missing in\n{text}"))
        };
        let order = [
            at("Pending"),
            at("Scheduled"),
            at("Running"),
            at("Failed"),
            at("Deletion requested"),
        ];
        assert!(order.is_sorted(), "{order:?}\n{text}");
    }

    #[test]
    fn human_output_should_escape_terminal_control_characters_and_json_stay_faithful() {
        let evil = "\u{1b}]0;owned\u{7}\u{1b}[2J\r\nFAKE\u{7f}\u{9b}31m";
        let mut pod = record();
        pod.reason = Some(evil.into());
        pod.message = Some(evil.into());
        pod.containers[0].image = evil.into();
        pod.containers[0].reason = Some(evil.into());
        pod.run = Some(evil.into());
        for text in [
            render_pod(&pod, Output::Table).unwrap(),
            render_pods(std::slice::from_ref(&pod), Output::Table).unwrap(),
            render_pods(std::slice::from_ref(&pod), Output::Wide).unwrap(),
        ] {
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "raw control characters: {text:?}"
            );
            assert!(!text.contains("\nFAKE"), "an injected line: {text}");
            assert!(text.contains("\\u{1b}]0;owned\\u{7}"), "{text}");
            assert!(text.contains("\\r\\nFAKE\\u{7f}\\u{9b}31m"), "{text}");
        }
        let json = render_pod(&pod, Output::Json).unwrap();
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["message"], evil, "JSON keeps the exact text");
        assert!(!json.contains('\u{1b}'), "serde escapes it: {json}");
        let yaml = render_pod(&pod, Output::Yaml).unwrap();
        assert!(!yaml.contains('\u{1b}'), "YAML escapes it too: {yaml:?}");
        assert_eq!(printable("plain ünïcode"), "plain ünïcode");
    }

    #[test]
    fn pods_table_and_machine_formats() {
        let pods = vec![record()];
        let table = render_pods(&pods, Output::Table).unwrap();
        let mut lines = table.lines();
        assert!(lines.next().unwrap().starts_with("NAMESPACE   NAME"));
        let row = lines.next().unwrap();
        assert!(
            row.contains("train-1") && row.contains("Failed") && row.contains("3.0s"),
            "{row}"
        );
        let wide = render_pods(&pods, Output::Wide).unwrap();
        assert!(wide.contains("vanished") && wide.contains("u-1"), "{wide}");
        let json: serde_json::Value =
            serde_json::from_str(&render_pods(&pods, Output::Json).unwrap()).unwrap();
        assert_eq!(json[0]["name"], "train-1");
        assert!(
            render_pods(&pods, Output::Yaml)
                .unwrap()
                .contains("name: train-1")
        );
    }
}
