//! The benchmark report: one row per figure, printed as a table and written to
//! docs/benchmarks.md together with a description of the machine.

use std::fmt::Write as _;
use std::path::Path;

/// One measured figure next to the target an issue set for it.
#[derive(Debug, Clone)]
pub struct Row {
    /// Which part of podline was measured ("sim", "launch", "record", "store", ...).
    pub area: &'static str,
    /// What was measured, in words a reader of the table understands.
    pub metric: String,
    /// The target from the issue, e.g. ">= 2,000 /s" (empty when there is none).
    pub target: String,
    /// The measured value with its unit.
    pub measured: String,
    /// Whether the target was met; `None` when the row has no target.
    pub met: Option<bool>,
}

impl Row {
    /// A row whose figure must be at least `target` (higher is better).
    pub fn at_least(
        area: &'static str,
        metric: impl Into<String>,
        value: f64,
        target: f64,
        unit: &str,
    ) -> Row {
        Row {
            area,
            metric: metric.into(),
            target: format!(">= {} {unit}", human(target)),
            measured: format!("{} {unit}", human(value)),
            met: Some(value >= target),
        }
    }

    /// A row whose figure must be at most `target` (lower is better).
    pub fn at_most(
        area: &'static str,
        metric: impl Into<String>,
        value: f64,
        target: f64,
        unit: &str,
    ) -> Row {
        Row {
            area,
            metric: metric.into(),
            target: format!("<= {} {unit}", human(target)),
            measured: format!("{} {unit}", human(value)),
            met: Some(value <= target),
        }
    }
}

/// Formats a number with a thousands separator and at most one decimal.
pub fn human(value: f64) -> String {
    if value.abs() >= 100.0 {
        let rounded = value.round() as i64;
        let digits = rounded.abs().to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if rounded < 0 { format!("-{out}") } else { out }
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// Describes the machine the figures were measured on.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("MemTotal:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    format!(
        "{cores} cores ({cpu}), {memory_gib:.0} GiB RAM, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Renders the rows as a Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut out =
        String::from("| area | metric | target | measured | met |\n|---|---|---|---|---|\n");
    for row in rows {
        let met = match row.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            row.area, row.metric, row.target, row.measured, met
        );
    }
    out
}

/// The heading of the hand-kept part of docs/benchmarks.md (figures measured by tests and
/// examples, not by the benchmark command), which [`write_file`] carries over from the old file.
pub const KEPT_SECTION: &str = "## Other figures";

/// The hand-kept section of an existing report (from [`KEPT_SECTION`] to the end), if any.
pub fn kept_section(old: &str) -> Option<&str> {
    let start = old.find(&format!("\n{KEPT_SECTION}"))?;
    Some(old[start..].trim_start_matches('\n'))
}

/// Writes docs/benchmarks.md: how to reproduce, the machine, the date, the table and notes.
/// A section headed [`KEPT_SECTION`] in the existing file is kept at the end, so a benchmark run
/// (even `--only` one part) never erases figures measured some other way.
pub fn write_file(path: &Path, rows: &[Row], notes: &[String]) -> std::io::Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let text = render_file(rows, notes, kept_section(&old));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

/// The report's text; `kept` (a hand-kept section) is appended as is.
pub fn render_file(rows: &[Row], notes: &[String], kept: Option<&str>) -> String {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M UTC")
        .to_string();
    let mut text = String::from("# Benchmarks\n\n");
    text.push_str(
        "Reproduce with one command (it builds in release mode and takes a few minutes):\n\n",
    );
    text.push_str("```sh\ncargo bench -p podline --bench podline\n```\n\n");
    text.push_str(
        "Flags go after `--` (`cargo bench -p podline --bench podline -- --only launch`). `--only sim,launch,store,mlmd,record,stall` runs a subset; `--quick` uses smaller sizes (the targets then\n",
    );
    text.push_str(
        "still apply to the rates, not to the sizes); `--rss-pods N` sets the pod count of the sim's memory row\n",
    );
    text.push_str("alone. Each figure is one run, not a best-of.\n\n");
    let _ = writeln!(text, "Measured {now} on: {}.\n", machine());
    text.push_str(&markdown(rows));
    if !notes.is_empty() {
        text.push_str("\nNotes:\n\n");
        for note in notes {
            let _ = writeln!(text, "- {note}");
        }
    }
    if let Some(kept) = kept {
        text.push('\n');
        text.push_str(kept);
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}
