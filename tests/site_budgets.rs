//! The `budgets:` section of the site config: a full example reads as written, and each
//! kind of bad budget gets one line naming the file, line, column, key and value and what
//! would be valid.

mod site_common;

use greenup::budget::{Action, Period, Scope};
use greenup::site;
use greenup_core::quantity::Joules;

const BASE: &str = "\
node_types:
  a:
    frequencies: [1.0, 2.0]
    power: {dynamic_w: 10, static_w: 2}
nodes:
  a: n[1-2]
partitions:
  batch: {nodes: n1}
";

fn parse(budgets: &str) -> Result<site::Site, greenup::input::InputError> {
    site_common::parse(&format!("{BASE}{budgets}"))
}

/// `budgets` must fail at `line`:`col` (counted in the whole file) naming every one of `words`.
fn bad(budgets: &str, line: u64, col: u64, words: &[&str]) {
    site_common::bad(&format!("{BASE}{budgets}"), line, col, words)
}

#[test]
fn every_kind_of_budget_reads_as_written() {
    let s = parse(
        "\
budgets:
  site:
    amount: 500 MWh
    period: month
    reset: \"06:00\"
  partitions:
    batch: {amount: 20 GJ, period: week}
  accounts:
    chem:
      amount: 10 MWh
      period: 10d
      start: 2026-11-01T00:00
      levels:
        - {at: 100%, refuse: true}
        - {at: 80%, policy: min-energy}
        - {at: 90%, power_share: 50%}
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.budgets.len(), 3);
    let site = &s.budgets[0];
    assert_eq!(site.scope, Scope::Site);
    assert_eq!(site.amount_j, Joules(500.0 * 3.6e9));
    assert_eq!(site.period, Period::Month { reset_s: 6 * 3600 });
    assert_eq!(s.budgets[1].scope, Scope::Partition("batch".into()));
    assert_eq!(s.budgets[1].period, Period::Week { reset_s: 0 });
    let chem = &s.budgets[2];
    assert_eq!(chem.amount_j, Joules(3.6e10));
    // 2026-11-01 is 20,758 days after 1970-01-01.
    assert_eq!(
        chem.period,
        Period::Every {
            length_s: 10 * 86_400,
            anchor: 20_758 * 86_400
        }
    );
    let levels: Vec<(f64, &Action)> = chem.levels.iter().map(|l| (l.at, &l.action)).collect();
    assert_eq!(
        levels,
        [
            (0.8, &Action::Policy("min-energy".into())),
            (0.9, &Action::PowerShare(0.5)),
            (1.0, &Action::Refuse)
        ]
    );
}

#[test]
fn bad_budgets_get_one_clear_line() {
    // Lines: BASE has 8, so "budgets:" is line 9.
    bad(
        "budgets:\n  site: {amount: lots, period: day}\n",
        10,
        18,
        &["budgets.site.amount", "'lots'", "kWh"],
    );
    bad(
        "budgets:\n  site: {amount: 1 MWh, period: fortnight}\n",
        10,
        33,
        &["budgets.site.period", "'fortnight'", "day, week, month"],
    );
    bad(
        "budgets:\n  site: {amount: 1 MWh, period: 36h}\n",
        10,
        33,
        &["budgets.site.period", "needs budgets.site.start"],
    );
    bad(
        "budgets:\n  site: {amount: 1 MWh, period: day, reset: \"25:00\"}\n",
        10,
        45,
        &["budgets.site.reset", "'25:00'", "HH:MM"],
    );
    bad(
        "budgets:\n  site: {amount: 1 MWh, period: 2d, start: 2026-02-30}\n",
        10,
        44,
        &["budgets.site.start", "'2026-02-30'", "YYYY-MM-DD"],
    );
    bad(
        "budgets:\n  partitions:\n    debug: {amount: 1 MWh, period: day}\n",
        11,
        12,
        &["budgets.partitions.debug", "batch"],
    );
    bad(
        "budgets:\n  accounts:\n    chem:\n      amount: 1 MWh\n      period: day\n      levels:\n        - {at: 80, refuse: true}\n",
        15,
        16,
        &["budgets.accounts.chem.levels[0].at", "'80'", "80%"],
    );
    bad(
        "budgets:\n  accounts:\n    chem:\n      amount: 1 MWh\n      period: day\n      levels:\n        - {at: 80%, refuse: true, power_share: 50%}\n",
        15,
        11,
        &["levels[0]", "exactly one action"],
    );
    bad(
        "budgets:\n  accounts:\n    chem:\n      amount: 1 MWh\n      period: day\n      levels:\n        - {at: 80%, power_share: 150%}\n",
        15,
        34,
        &["levels[0].power_share", "'150%'", "at most 100%"],
    );
    bad(
        "budgets:\n  accounts:\n    chem:\n      amount: 1 MWh\n      period: day\n      levels:\n        - {at: 80%, max_freq: fast}\n",
        15,
        31,
        &["levels[0].max_freq", "'fast'", "2.0GHz or 1800MHz"],
    );
    bad(
        "budgets:\n  accounts:\n    chem:\n      amount: 1 MWh\n      period: day\n      levels:\n        - {at: 80%, refuse: no}\n",
        15,
        29,
        &["levels[0].refuse", "true"],
    );
}

#[test]
fn a_forced_policy_must_be_one_the_site_allows() {
    let err = site::parse(
        "/etc/slurm/greenup.yaml",
        &format!(
            "{BASE}allowed_policies: [monitor]\nbudgets:\n  site:\n    amount: 1 MWh\n    period: day\n    levels: [{{at: 50%, policy: min-energy}}]\n"
        ),
    )
    .expect_err("min-energy is not allowed");
    let msg = err.to_string();
    assert!(msg.contains("budgets.site.levels[0].policy"), "{msg}");
    assert!(msg.contains("allowed_policies (monitor)"), "{msg}");
}
