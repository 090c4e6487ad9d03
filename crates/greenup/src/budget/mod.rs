//! Energy budgets over a period: the site's, a partition's and a Slurm account's
//! joules per day, week, month or custom length, with warning levels whose actions
//! tighten admission as the budget is used up.
//!
//! This module holds the rules only (which budgets a job falls under, which level is
//! in force, what its action does); greenupd keeps the accounts ([`book`]) and the
//! store keeps them durable. Schema: docs/site-config.md, `budgets:`.

pub mod book;
pub mod period;

use greenup_core::quantity::{Ghz, Joules, Seconds};
use serde::{Deserialize, Serialize};

pub use greenup_wire::budget::{AtAdmission, PowerHold, Quote, Standing, show_budget_energy};
pub use period::Period;

/// Whose energy a budget counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Scope {
    /// Every job greenupd admits.
    Site,
    /// Jobs in one Slurm partition.
    Partition(String),
    /// Jobs charged to one Slurm account.
    Account(String),
}

impl Scope {
    /// The key the store files charges under: `site`, `partition:NAME`, `account:NAME`.
    pub fn key(&self) -> String {
        match self {
            Scope::Site => "site".into(),
            Scope::Partition(p) => format!("partition:{p}"),
            Scope::Account(a) => format!("account:{a}"),
        }
    }

    /// The scope of a store key written by [`Scope::key`].
    pub fn from_key(key: &str) -> Option<Scope> {
        match key.split_once(':') {
            None if key == "site" => Some(Scope::Site),
            Some(("partition", p)) => Some(Scope::Partition(p.into())),
            Some(("account", a)) => Some(Scope::Account(a.into())),
            _ => None,
        }
    }

    /// How a person names it: `site`, `partition batch`, `account chem`.
    pub fn label(&self) -> String {
        match self {
            Scope::Site => "site".into(),
            Scope::Partition(p) => format!("partition {p}"),
            Scope::Account(a) => format!("account {a}"),
        }
    }
}

/// What a warning level does to the jobs admitted while it is in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Decide the job with this policy (one of the site's policies) whatever it asked for.
    Policy(String),
    /// Decide the job with the policy in this file (a site's own policy YAML).
    PolicyFile(std::path::PathBuf),
    /// Run no node above this frequency.
    MaxFreqGhz(Ghz),
    /// Plan under this fraction (0-1] of the power the job would otherwise get.
    PowerShare(f64),
    /// Refuse the job at admission; the reason carries the quote.
    Refuse,
}

impl Action {
    /// One line for decision records: `policy min-energy`, `power share 50%`.
    pub fn describe(&self) -> String {
        match self {
            Action::Policy(p) => format!("policy {p}"),
            Action::PolicyFile(p) => format!("policy file {}", p.display()),
            Action::MaxFreqGhz(f) => format!("frequency ceiling {} GHz", f.0),
            Action::PowerShare(s) => format!("power share {:.0}%", s * 100.0),
            Action::Refuse => "refuse".into(),
        }
    }
}

/// A warning level: once a budget's use would pass `at` (a fraction of its amount),
/// `action` applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Fraction of the amount, e.g. 0.8 for 80%.
    pub at: f64,
    /// What happens to jobs admitted past it.
    pub action: Action,
}

/// One energy budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Whose jobs it counts.
    pub scope: Scope,
    /// Joules per period.
    pub amount_j: Joules,
    /// How the period repeats.
    pub period: Period,
    /// Warning levels, ascending by `at`, no two alike.
    pub levels: Vec<Level>,
}

impl Budget {
    /// The level in force when the budget would stand at `projected_j` (used, held, and
    /// the job being admitted): the highest level whose threshold it passes (strictly,
    /// so a job that brings use exactly to 100% still fits).
    pub fn level_at(&self, projected_j: Joules) -> Option<&Level> {
        self.levels
            .iter()
            .rev()
            .find(|l| projected_j > self.amount_j * l.at)
    }
}

/// Every budget a job falls under, in the order site, partition, account.
pub fn budgets_for<'a>(
    budgets: &'a [Budget],
    partition: Option<&str>,
    account: Option<&str>,
) -> Vec<&'a Budget> {
    budgets
        .iter()
        .filter(|b| match &b.scope {
            Scope::Site => true,
            Scope::Partition(p) => Some(p.as_str()) == partition,
            Scope::Account(a) => Some(a.as_str()) == account,
        })
        .collect()
}

/// What the levels in force ask of one job, combined over every budget it falls under:
/// refusal wins; the lowest ceiling and the smallest power share apply; the first
/// budget's (site, then partition, then account) forced policy applies.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Combined {
    /// Refuse the job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse: bool,
    /// Policy to decide with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Policy file to decide with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_file: Option<std::path::PathBuf>,
    /// Frequency ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_freq_ghz: Option<Ghz>,
    /// Share of the power the job would otherwise get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_share: Option<f64>,
}

impl Combined {
    /// Fold one level's action in.
    pub fn add(&mut self, action: &Action) {
        match action {
            Action::Refuse => self.refuse = true,
            Action::Policy(p) => {
                if self.policy.is_none() && self.policy_file.is_none() {
                    self.policy = Some(p.clone());
                }
            }
            Action::PolicyFile(f) => {
                if self.policy.is_none() && self.policy_file.is_none() {
                    self.policy_file = Some(f.clone());
                }
            }
            Action::MaxFreqGhz(f) => {
                self.max_freq_ghz = Some(self.max_freq_ghz.map_or(*f, |g| Ghz(g.0.min(f.0))));
            }
            Action::PowerShare(s) => {
                self.power_share = Some(self.power_share.map_or(*s, |t| t.min(*s)));
            }
        }
    }

    /// Whether the decision must be made again under these actions.
    pub fn changes_plan(&self) -> bool {
        self.policy.is_some()
            || self.policy_file.is_some()
            || self.max_freq_ghz.is_some()
            || self.power_share.is_some()
    }
}

/// The one-line quote: `predicted 1.20 MJ (±8%, from 5 runs), 00:42:00 on 6 nodes;
/// account chem: 3.40 MWh of 10.0 MWh left this month`.
pub fn quote_line(
    energy_j: Joules,
    spread: Option<(f64, u32)>,
    time_s: Option<Seconds>,
    nodes: usize,
    budgets: &[(Scope, Joules, Joules, Period)],
) -> String {
    let mut s = format!("predicted {energy_j}");
    if let Some((pct, runs)) = spread {
        let plural = if runs == 1 { "" } else { "s" };
        s.push_str(&format!(" (±{pct:.0}%, from {runs} run{plural})"));
    }
    if let Some(t) = time_s {
        let t = t.0.round() as u64;
        s.push_str(&format!(
            ", {:02}:{:02}:{:02}",
            t / 3600,
            t / 60 % 60,
            t % 60
        ));
    }
    s.push_str(&format!(
        " on {nodes} node{}",
        if nodes == 1 { "" } else { "s" }
    ));
    for (scope, left, amount, period) in budgets {
        s.push_str(&format!(
            "; {}: {} of {} left this {}",
            scope.label(),
            show_budget_energy(Joules(left.0.max(0.0))),
            show_budget_energy(*amount),
            period.noun()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(levels: &[(f64, Action)]) -> Budget {
        Budget {
            scope: Scope::Account("chem".into()),
            amount_j: Joules(1000.0),
            period: Period::Day { reset_s: 0 },
            levels: levels
                .iter()
                .map(|(at, action)| Level {
                    at: *at,
                    action: action.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_highest_level_passed_is_in_force_and_exactly_full_still_fits() {
        let b = budget(&[
            (0.8, Action::Policy("min-energy".into())),
            (0.9, Action::PowerShare(0.5)),
            (1.0, Action::Refuse),
        ]);
        assert_eq!(b.level_at(Joules(800.0)), None);
        assert_eq!(b.level_at(Joules(800.5)).unwrap().at, 0.8);
        assert_eq!(b.level_at(Joules(950.0)).unwrap().at, 0.9);
        assert_eq!(b.level_at(Joules(1000.0)).unwrap().at, 0.9);
        assert_eq!(b.level_at(Joules(1000.1)).unwrap().action, Action::Refuse);
    }

    #[test]
    fn combined_actions_take_the_strictest() {
        let mut c = Combined::default();
        c.add(&Action::PowerShare(0.5));
        c.add(&Action::PowerShare(0.25));
        c.add(&Action::MaxFreqGhz(Ghz(2.0)));
        c.add(&Action::MaxFreqGhz(Ghz(2.4)));
        c.add(&Action::Policy("min-energy".into()));
        c.add(&Action::Policy("max-perf".into()));
        assert_eq!(c.power_share, Some(0.25));
        assert_eq!(c.max_freq_ghz, Some(Ghz(2.0)));
        assert_eq!(c.policy.as_deref(), Some("min-energy"));
        assert!(!c.refuse && c.changes_plan());
        c.add(&Action::Refuse);
        assert!(c.refuse);
    }

    #[test]
    fn a_job_falls_under_the_site_its_partition_and_its_account() {
        let mk = |scope| Budget {
            scope,
            amount_j: Joules(1.0),
            period: Period::Day { reset_s: 0 },
            levels: vec![],
        };
        let all = vec![
            mk(Scope::Site),
            mk(Scope::Partition("batch".into())),
            mk(Scope::Account("chem".into())),
            mk(Scope::Account("phys".into())),
        ];
        let got: Vec<_> = budgets_for(&all, Some("batch"), Some("chem"))
            .iter()
            .map(|b| b.scope.key())
            .collect();
        assert_eq!(got, ["site", "partition:batch", "account:chem"]);
        assert_eq!(budgets_for(&all, None, None).len(), 1);
        for b in &all {
            assert_eq!(Scope::from_key(&b.scope.key()), Some(b.scope.clone()));
        }
    }

    #[test]
    fn the_quote_reads_as_one_line() {
        let q = quote_line(
            Joules(1.2e6),
            Some((8.0, 5)),
            Some(Seconds(2520.0)),
            6,
            &[(
                Scope::Account("chem".into()),
                Joules(3.4e9 * 3.6),
                Joules(1e10 * 3.6),
                Period::Month { reset_s: 0 },
            )],
        );
        assert_eq!(
            q,
            "predicted 1.20 MJ (±8%, from 5 runs), 00:42:00 on 6 nodes; account chem: 3.40 MWh of 10.0 MWh left this month"
        );
    }
}

impl Budget {
    /// Where this budget stands at `now` with `totals` charged in its current period.
    pub fn standing(&self, totals: book::Totals, now: i64) -> Standing {
        let (start, end) = self.period.bounds(now);
        let spent = totals.used_j + totals.held_j;
        // At least a minute elapsed, so a period just begun does not forecast wildly.
        let elapsed = (now - start).max(60) as f64;
        let level = self
            .levels
            .iter()
            .rev()
            .find(|l| spent > self.amount_j * l.at);
        Standing {
            budget: self.scope.key(),
            period: self.period.noun().into(),
            period_start: start,
            period_end: end,
            amount_j: self.amount_j,
            used_j: totals.used_j,
            held_j: totals.held_j,
            left_j: self.amount_j - spent,
            jobs: totals.jobs,
            forecast_j: spent * ((end - start) as f64 / elapsed).max(1.0),
            level_pct: level.map(|l| l.at * 100.0),
            action: level.map(|l| l.action.describe()),
        }
    }
}

#[cfg(test)]
mod standing_tests {
    use super::*;

    #[test]
    fn the_forecast_scales_use_from_the_time_elapsed_to_the_whole_period() {
        let b = Budget {
            scope: Scope::Site,
            amount_j: Joules(1000.0),
            period: Period::Day { reset_s: 0 },
            levels: vec![Level {
                at: 0.5,
                action: Action::PowerShare(0.5),
            }],
        };
        let t = book::Totals {
            used_j: Joules(200.0),
            held_j: Joules(100.0),
            jobs: 3,
        };
        // A quarter of the day gone with 300 J spent: 1200 J by its end.
        let s = b.standing(t, 6 * 3600);
        assert_eq!((s.period_start, s.period_end), (0, 86_400));
        assert_eq!(s.left_j, Joules(700.0));
        assert_eq!(s.forecast_j, Joules(1200.0));
        assert_eq!(s.level_pct, None);
        let s = b.standing(
            book::Totals {
                used_j: Joules(600.0),
                ..t
            },
            86_399,
        );
        assert_eq!(s.level_pct, Some(50.0));
        assert_eq!(s.action.as_deref(), Some("power share 50%"));
    }
}

/// A gauge's name, help line and value.
type Gauge = (&'static str, &'static str, fn(&Standing) -> f64);

/// The budgets as Prometheus gauges, one series per budget (`budget="account:chem"`).
pub fn prometheus(list: &[Standing]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let gauges: [Gauge; 6] = [
        ("amount_joules", "Joules per period.", |s| s.amount_j.0),
        (
            "used_joules",
            "Joules settled by closed jobs this period.",
            |s| s.used_j.0,
        ),
        (
            "held_joules",
            "Joules held by open jobs this period.",
            |s| s.held_j.0,
        ),
        ("left_joules", "Joules left this period.", |s| s.left_j.0),
        (
            "forecast_joules",
            "Use forecast for the period's end.",
            |s| s.forecast_j.0,
        ),
        ("level_percent", "Warning level in force (0: none).", |s| {
            s.level_pct.unwrap_or(0.0)
        }),
    ];
    let mut out = String::new();
    for (name, help, get) in gauges {
        out.push_str(&format!(
            "# HELP greenup_budget_{name} {help}\n# TYPE greenup_budget_{name} gauge\n"
        ));
        for s in list {
            let label = s.budget.replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!(
                "greenup_budget_{name}{{budget=\"{label}\"}} {}\n",
                get(s)
            ));
        }
    }
    out
}
