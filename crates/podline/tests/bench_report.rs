//! The benchmark report's unit tests (numbers, target verdicts, the kept hand-written section).
//!
//! The benchmark is a `harness = false` bench target, which runs no `#[test]`s; this test target
//! compiles its report module so those tests run with the rest of the suite.

#[path = "../benches/podline/report.rs"]
#[allow(dead_code)] // only the tested parts of the report are used here
mod report;

#[cfg(test)]
mod tests {
    use super::report::*;

    #[test]
    fn human_numbers_read_well() {
        assert_eq!(human(2345.6), "2,346");
        assert_eq!(human(1_000_000.0), "1,000,000");
        assert_eq!(human(12.34), "12.3");
        assert_eq!(human(7.0), "7");
    }

    #[test]
    fn rows_say_whether_the_target_was_met() {
        assert_eq!(
            Row::at_least("sim", "creates", 2500.0, 2000.0, "/s").met,
            Some(true)
        );
        assert_eq!(
            Row::at_most("sim", "list", 150.0, 100.0, "ms").met,
            Some(false)
        );
        let table = markdown(&[Row::at_least("sim", "x", 1.0, 2.0, "/s")]);
        assert!(table.contains("| sim | x | >= 2 /s | 1 /s | **no** |"));
    }

    #[test]
    fn a_new_report_keeps_the_hand_kept_section_of_the_old_one() {
        let old = "# Benchmarks\n\n| old table |\n\n## Other figures\n\n| by tests | 1 s |\n";
        let rows = [Row::at_least("sim", "x", 3.0, 2.0, "/s")];
        let text = render_file(&rows, &["a note".into()], kept_section(old));
        assert!(!text.contains("| old table |"), "{text}");
        assert!(
            text.contains("| sim | x | >= 2 /s | 3 /s | yes |"),
            "{text}"
        );
        assert!(
            text.ends_with("- a note\n\n## Other figures\n\n| by tests | 1 s |\n"),
            "{text}"
        );
        assert_eq!(kept_section("# Benchmarks\n| t |\n"), None);
    }
}
