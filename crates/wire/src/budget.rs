//! A budget's figures as they cross the wire and are stored: each budget as a job was
//! admitted ([`AtAdmission`], kept in its decision), as `greenup budget` shows it
//! ([`Standing`]), and what a job would be charged ([`Quote`]). The rules that make them
//! (periods, levels, the ledger's books) are the decision library's `budget`.

use greenup_core::quantity::{Joules, Seconds};
use serde::{Deserialize, Serialize};

/// A budget's state as a job was admitted, kept in its decision record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AtAdmission {
    /// `site`, `partition:NAME` or `account:NAME`.
    pub budget: String,
    /// Start of the period charged (Unix seconds).
    pub period_start: i64,
    /// Joules per period.
    pub amount_j: Joules,
    /// Joules settled in the period before this job.
    pub used_j: Joules,
    /// Joules held by open jobs before this job.
    pub held_j: Joules,
    /// Joules charged to this job.
    pub charged_j: Joules,
    /// The level in force with this job charged, as a percentage of the amount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_pct: Option<f64>,
    /// What that level did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

impl AtAdmission {
    /// Joules left after this job's charge.
    pub fn left_j(&self) -> Joules {
        self.amount_j - self.used_j - self.held_j - self.charged_j
    }

    /// One line for reports: `account:chem: charged 30.0 kJ; before it 0 J used, 30.0 kJ
    /// held of 50.0 kJ; level 100%: refuse`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}: charged {}; before it {} used, {} held of {}",
            self.budget,
            show_budget_energy(self.charged_j),
            show_budget_energy(self.used_j),
            show_budget_energy(self.held_j),
            show_budget_energy(self.amount_j)
        );
        if let (Some(p), Some(a)) = (self.level_pct, &self.action) {
            s.push_str(&format!("; level {p:.0}%: {a}"));
        }
        s
    }
}

/// Budget-sized energies read best in watt-hours: `3.40 MWh`, `120 kWh`; small ones in joules.
pub fn show_budget_energy(j: Joules) -> String {
    let wh = j.0 / 3600.0;
    for (f, u) in [(1e9, "GWh"), (1e6, "MWh"), (1e3, "kWh")] {
        if wh.abs() >= f {
            let v = wh / f;
            let d = if v.abs() >= 100.0 {
                0
            } else if v.abs() >= 10.0 {
                1
            } else {
                2
            };
            return format!("{v:.d$} {u}");
        }
    }
    j.to_string()
}

/// A budget as `greenup budget` shows it: use, holds and what is left in the current
/// period, a forecast to its end, and the level in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standing {
    /// `site`, `partition:NAME` or `account:NAME`.
    pub budget: String,
    /// `day`, `week`, `month` or `period`.
    pub period: String,
    /// Start of the current period (Unix seconds, UTC).
    pub period_start: i64,
    /// End of the current period (Unix seconds, UTC).
    pub period_end: i64,
    /// Joules per period.
    pub amount_j: Joules,
    /// Joules settled by closed jobs.
    pub used_j: Joules,
    /// Joules held by open jobs.
    pub held_j: Joules,
    /// Joules left: amount - used - held.
    pub left_j: Joules,
    /// Jobs charged this period.
    pub jobs: u64,
    /// Use at the period's end if it goes on at the rate so far (used + held, scaled
    /// from the time elapsed to the whole period).
    pub forecast_j: Joules,
    /// The warning level in force now, as a percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_pct: Option<f64>,
    /// What that level does to jobs admitted now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// What a job would be charged if it started now, and how each budget would stand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    /// The one line users see.
    pub line: String,
    /// Predicted joules.
    pub energy_j: Joules,
    /// Predicted wall time in seconds, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<Seconds>,
    /// Nodes the job would use.
    pub nodes: usize,
    /// Whether a warning level would refuse it now.
    pub refused: bool,
    /// Whether that refusal would fail the job at start (`enforce: strict`); under
    /// `enforce: open` a refused job runs unchanged.
    #[serde(default)]
    pub fails: bool,
    /// Each budget it falls under, with this job charged.
    pub budgets: Vec<AtAdmission>,
    /// The watts the job should hold in Slurm's queue (`power.enforce: queue`): the
    /// plan's predicted power, as the license greenup's cli_filter asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<PowerHold>,
}

/// Watts a job holds as a Slurm license.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerHold {
    /// The license (`greenup_w`).
    pub license: String,
    /// Whole watts.
    pub watts: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budgets_figures_cross_the_wire_as_bare_numbers() {
        let a = AtAdmission {
            budget: "account:chem".into(),
            period_start: 86_400,
            amount_j: Joules(50_000.0),
            used_j: Joules(0.0),
            held_j: Joules(30_000.0),
            charged_j: Joules(30_000.5),
            level_pct: Some(100.0),
            action: Some("refuse".into()),
        };
        let line = r#"{"budget":"account:chem","period_start":86400,"amount_j":50000.0,"used_j":0.0,"held_j":30000.0,"charged_j":30000.5,"level_pct":100.0,"action":"refuse"}"#;
        assert_eq!(serde_json::to_string(&a).unwrap(), line);
        assert_eq!(serde_json::from_str::<AtAdmission>(line).unwrap(), a);
        assert_eq!(a.left_j(), Joules(-10_000.5));
        assert_eq!(
            a.describe(),
            "account:chem: charged 30.0 kJ; before it 0 J used, 30.0 kJ held of 50.0 kJ; level 100%: refuse"
        );
        let q = Quote {
            line: "predicted".into(),
            energy_j: Joules(1.2e6),
            time_s: Some(Seconds(2520.0)),
            nodes: 6,
            refused: false,
            fails: false,
            budgets: vec![],
            hold: None,
        };
        let line = r#"{"line":"predicted","energy_j":1200000.0,"time_s":2520.0,"nodes":6,"refused":false,"fails":false,"budgets":[]}"#;
        assert_eq!(serde_json::to_string(&q).unwrap(), line);
        assert_eq!(serde_json::from_str::<Quote>(line).unwrap(), q);
        assert_eq!(show_budget_energy(Joules(3.4e9 * 3.6)), "3.40 MWh");
        assert_eq!(show_budget_energy(Joules(1500.0)), "1.50 kJ");
    }
}
