//! The Prometheus text greenupd serves: every line follows the exposition
//! grammar, and the values are the snapshot's, worked out by hand.

use std::collections::{BTreeMap, HashMap};

use greenup::report::metrics::{Budget, ErrorHistogram, Snapshot, render};

fn snapshot() -> Snapshot {
    let mut h = ErrorHistogram::default();
    for e in [0.5, 3.0, 3.0, 15.0, -40.0, 250.0, f64::NAN] {
        h.observe(e);
    }
    Snapshot {
        site: Some(Budget {
            name: "site".into(),
            cap_w: Some(10_000.0),
            reserved_w: 6_500.0,
        }),
        partitions: vec![
            Budget {
                name: "batch".into(),
                cap_w: Some(4_000.0),
                reserved_w: 4_500.0,
            },
            Budget {
                name: "gpu \"a\"\\b".into(),
                cap_w: None,
                reserved_w: 2_000.0,
            },
        ],
        running_jobs: 3,
        decisions_by_policy: BTreeMap::from([("min-energy".into(), 7), ("max-dist".into(), 2)]),
        fallbacks_by_reason: BTreeMap::from([("daemon unreachable".into(), 1)]),
        prediction_error: h,
        store_bytes: 1_234_567,
        store_jobs: 42,
        power_limit_nodes: BTreeMap::from([("held".into(), 5), ("not_held".into(), 2)]),
        measurement_runs: BTreeMap::from([("clock_sample".into(), 4)]),
    }
}

/// A parsed sample: metric name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// A sample line: name, labels (unescaped), value. Panics with the line on bad grammar.
fn parse_sample(line: &str) -> Sample {
    let name_end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("no value: {line}"));
    let name = &line[..name_end];
    assert!(is_name(name), "bad metric name in: {line}");
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        loop {
            let start = chars
                .peek()
                .map(|(i, _)| *i)
                .unwrap_or_else(|| panic!("unterminated labels: {line}"));
            if r[start..].starts_with('}') {
                rest = &r[start + 1..];
                break;
            }
            let eq = r[start..]
                .find('=')
                .unwrap_or_else(|| panic!("label without '=': {line}"))
                + start;
            let lname = &r[start..eq];
            assert!(
                is_name(lname) && !lname.contains(':'),
                "bad label name '{lname}' in: {line}"
            );
            assert_eq!(
                &r[eq + 1..eq + 2],
                "\"",
                "label value must be quoted: {line}"
            );
            let mut value = String::new();
            let mut i = eq + 2;
            let bytes: Vec<char> = r[i..].chars().collect();
            let mut k = 0;
            loop {
                let ch = *bytes
                    .get(k)
                    .unwrap_or_else(|| panic!("unterminated label value: {line}"));
                match ch {
                    '\\' => {
                        let nx = bytes[k + 1];
                        assert!(matches!(nx, '\\' | '"' | 'n'), "bad escape in: {line}");
                        value.push(if nx == 'n' { '\n' } else { nx });
                        k += 2;
                    }
                    '"' => {
                        k += 1;
                        break;
                    }
                    '\n' => panic!("raw newline in label: {line}"),
                    c => {
                        value.push(c);
                        k += 1;
                    }
                }
            }
            i += bytes[..k].iter().map(|c| c.len_utf8()).sum::<usize>();
            labels.push((lname.to_string(), value));
            let after = &r[i..];
            let skip = if after.starts_with(',') { 1 } else { 0 };
            while chars.peek().is_some_and(|(j, _)| *j < i + skip) {
                chars.next();
            }
        }
    }
    let mut parts = rest
        .strip_prefix(' ')
        .unwrap_or_else(|| panic!("no space before value: {line}"))
        .split(' ');
    let v = parse_value(parts.next().unwrap_or("")).unwrap_or_else(|| panic!("bad value: {line}"));
    if let Some(ts) = parts.next() {
        assert!(ts.parse::<i64>().is_ok(), "bad timestamp: {line}");
    }
    assert!(parts.next().is_none(), "trailing fields: {line}");
    (name.to_string(), labels, v)
}

#[test]
fn exposition_grammar_and_values() {
    let text = render(&snapshot());
    assert!(text.ends_with('\n'));
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# ") {
            let mut f = c.splitn(3, ' ');
            let (kw, name, rest) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap_or(""));
            assert!(is_name(name), "bad name: {line}");
            match kw {
                "HELP" => assert!(!rest.is_empty(), "empty help: {line}"),
                "TYPE" => {
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&rest),
                        "{line}"
                    );
                    assert!(
                        types.insert(name.into(), rest.into()).is_none(),
                        "TYPE twice: {line}"
                    );
                }
                _ => panic!("unknown comment keyword: {line}"),
            }
            continue;
        }
        assert!(
            !line.is_empty() && !line.starts_with(' '),
            "stray line: {line:?}"
        );
        let s = parse_sample(line);
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suf| {
                s.0.strip_suffix(suf)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(&s.0)
            .to_string();
        assert!(
            types.contains_key(&family),
            "sample before its TYPE: {line}"
        );
        samples.push(s);
    }
    let get = |name: &str, label: Option<(&str, &str)>| -> f64 {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name && label.is_none_or(|(k, v)| l.iter().any(|(a, b)| a == k && b == v))
            })
            .unwrap_or_else(|| panic!("missing {name} {label:?}"))
            .2
    };
    assert_eq!(get("greenup_site_power_available_watts", None), 3_500.0);
    assert_eq!(get("greenup_site_power_reserved_watts", None), 6_500.0);
    // Over-reserved partition: nothing available, never negative.
    assert_eq!(
        get(
            "greenup_partition_power_available_watts",
            Some(("partition", "batch"))
        ),
        0.0
    );
    // The escaped label reads back as written, and an uncapped partition has no "available".
    assert_eq!(
        get(
            "greenup_partition_power_reserved_watts",
            Some(("partition", "gpu \"a\"\\b"))
        ),
        2_000.0
    );
    assert_eq!(
        samples
            .iter()
            .filter(|s| s.0 == "greenup_partition_power_available_watts")
            .count(),
        1
    );
    assert_eq!(get("greenup_running_jobs", None), 3.0);
    assert_eq!(
        get("greenup_decisions_total", Some(("policy", "min-energy"))),
        7.0
    );
    assert_eq!(
        get(
            "greenup_fallbacks_total",
            Some(("reason", "daemon unreachable"))
        ),
        1.0
    );
    assert_eq!(get("greenup_store_bytes", None), 1_234_567.0);
    assert_eq!(
        get(
            "greenup_power_limit_nodes_total",
            Some(("status", "not_held"))
        ),
        2.0
    );
    // Both kinds of measurement run, the one never taken as a zero.
    assert_eq!(
        get(
            "greenup_measurement_runs_total",
            Some(("kind", "clock_sample"))
        ),
        4.0
    );
    assert_eq!(
        get(
            "greenup_measurement_runs_total",
            Some(("kind", "baseline_sample"))
        ),
        0.0
    );

    // Errors |0.5|,3,3,15,|-40|,250 (NaN dropped): cumulative counts by hand.
    let expect = [
        ("1", 1.0),
        ("2", 1.0),
        ("5", 3.0),
        ("10", 3.0),
        ("20", 4.0),
        ("50", 5.0),
        ("100", 5.0),
        ("200", 5.0),
        ("+Inf", 6.0),
    ];
    for (le, n) in expect {
        assert_eq!(
            get("greenup_prediction_error_percent_bucket", Some(("le", le))),
            n,
            "le={le}"
        );
    }
    assert_eq!(get("greenup_prediction_error_percent_count", None), 6.0);
    assert_eq!(get("greenup_prediction_error_percent_sum", None), 311.5);
}

#[test]
fn empty_snapshot_still_parses() {
    let text = render(&Snapshot::default());
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        parse_sample(line);
    }
    assert!(text.contains("greenup_prediction_error_percent_bucket{le=\"+Inf\"} 0"));
}

#[test]
fn snapshot_from_daemon_status() {
    use greenup_core::quantity::Watts;
    use greenup_proto::protocol::{BudgetLine, Status};
    let line = |scope: &str, cap: Option<f64>, reserved: f64| BudgetLine {
        scope: scope.into(),
        cap_w: cap.map(Watts),
        reserved_w: Watts(reserved),
        free_w: cap.map(|c| Watts(c - reserved)),
        jobs: 1,
    };
    let status = Status {
        version: "0.1.0".into(),
        protocol: 1,
        uptime_s: 10,
        config: "/etc/slurm/greenup.yaml".into(),
        open_jobs: 2,
        total_jobs: 50,
        outcomes: 120,
        connections: 1,
        decisions: 0,
        ledger: vec![
            line("site", Some(8_000.0), 900.0),
            line("batch", None, 900.0),
        ],
    };
    let s = greenup_daemon::metrics_http::snapshot_of(&status);
    assert_eq!(s.site.as_ref().unwrap().available_w(), Some(7_100.0));
    assert_eq!(s.partitions.len(), 1);
    assert_eq!(s.partitions[0].name, "batch");
    let text = render(&s);
    assert!(text.contains("greenup_site_power_available_watts 7100\n"));
    assert!(text.contains("greenup_running_jobs 2\n"));
    assert!(text.contains("greenup_store_jobs 50\n"));
}
