//! Figures the demo's summary reads from the recorders' rendered Prometheus metrics (the demo
//! restarts its recorder, so a figure is summed over every instance's metrics).

use std::collections::BTreeMap;

/// Sums every sample of a Prometheus counter in rendered texts.
pub fn sum_metric(rendered: &[String], name: &str) -> u64 {
    rendered
        .iter()
        .flat_map(|text| text.lines())
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// "value=count, ..." for a labelled Prometheus counter in rendered texts, summed per label
/// value; "none" when every count is zero.
pub fn by_label(rendered: &[String], name: &str, label: &str) -> String {
    let needle = format!("{label}=\"");
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for line in rendered
        .iter()
        .flat_map(|text| text.lines())
        .filter(|line| line.starts_with(name))
    {
        let Some(start) = line.find(&needle) else {
            continue;
        };
        let rest = &line[start + needle.len()..];
        let Some(end) = rest.find('"') else { continue };
        let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        *counts.entry(&rest[..end]).or_default() += value as u64;
    }
    let parts: Vec<String> = counts
        .iter()
        .filter(|(_, count)| **count > 0)
        .map(|(value, count)| format!("{value}={count}"))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "# HELP podline_record_watch_reconnects_total x\n\
        podline_record_watch_reconnects_total{reason=\"client_timeout\"} 2\n\
        podline_record_watch_reconnects_total{reason=\"reset\"} 1\n\
        podline_record_watch_reconnects_total{reason=\"gone\"} 0\n\
        podline_record_watch_relists_total 3\n";

    #[test]
    fn counters_are_read_from_rendered_metrics() {
        let one = [RENDERED.to_owned()];
        assert_eq!(
            by_label(&one, "podline_record_watch_reconnects_total", "reason"),
            "client_timeout=2, reset=1"
        );
        assert_eq!(sum_metric(&one, "podline_record_watch_relists_total"), 3);
        assert_eq!(
            by_label(&[], "podline_record_watch_reconnects_total", "reason"),
            "none"
        );
    }

    #[test]
    fn counters_of_several_recorders_are_summed() {
        let two = [RENDERED.to_owned(), RENDERED.to_owned()];
        assert_eq!(
            by_label(&two, "podline_record_watch_reconnects_total", "reason"),
            "client_timeout=4, reset=2"
        );
        assert_eq!(sum_metric(&two, "podline_record_watch_relists_total"), 6);
    }
}
