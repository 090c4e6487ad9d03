//! greenupd's budget accounts in memory: per budget and period, the joules settled and
//! the joules held by open jobs. The store holds the same charges durably (written in
//! the transaction that stores the job); this book is rebuilt from it at start.
//!
//! Admission reads the book and charges it under one lock, so two jobs racing for the
//! last joules cannot both see them free.

use std::collections::HashMap;

use greenup_core::quantity::Joules;
use serde::{Deserialize, Serialize};

use super::{AtAdmission, Budget, Combined};

/// One job's charge against one budget's period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Charge {
    /// `site`, `partition:NAME` or `account:NAME`.
    pub budget: String,
    /// Start of the period charged (Unix seconds).
    pub period_start: i64,
    /// Joules charged at admission (the prediction).
    pub charged_j: Joules,
    /// Joules settled at close; `None` while the job is open.
    pub settled_j: Option<Joules>,
    /// Whether the settlement came from measured energy (else from the prediction).
    pub measured: Option<bool>,
}

/// Joules settled and held in one budget's period.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Totals {
    /// Joules of closed jobs.
    pub used_j: Joules,
    /// Joules reserved by open jobs.
    pub held_j: Joules,
    /// Jobs charged in the period.
    pub jobs: u64,
}

/// The accounts.
#[derive(Debug, Clone, Default)]
pub struct Book {
    totals: HashMap<(String, i64), Totals>,
    held: HashMap<u64, Vec<Charge>>,
}

/// What admitting a job would do: each budget's state and the actions in force.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Assessment {
    /// One entry per budget the job falls under.
    pub budgets: Vec<AtAdmission>,
    /// The actions of the levels in force.
    pub actions: Combined,
}

impl Assessment {
    /// The charges to hold for the job.
    pub fn charges(&self) -> Vec<Charge> {
        self.budgets
            .iter()
            .map(|b| Charge {
                budget: b.budget.clone(),
                period_start: b.period_start,
                charged_j: b.charged_j,
                settled_j: None,
                measured: None,
            })
            .collect()
    }

    /// Which levels acted and why, for the decision's reason; empty when none did.
    pub fn why(&self) -> String {
        self.budgets
            .iter()
            .filter_map(|b| {
                let pct = b.level_pct?;
                Some(format!(
                    "{} budget past its {pct:.0}% level ({:.1}% with this job): {}",
                    b.budget,
                    100.0 * (b.amount_j - b.left_j()).0 / b.amount_j.0,
                    b.action.as_deref().unwrap_or("")
                ))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Book {
    /// Replace everything with the store's accounts: each period's totals, and the
    /// charges of jobs still open.
    pub fn restore(&mut self, totals: Vec<(String, i64, Totals)>, held: Vec<(u64, Charge)>) {
        *self = Book::default();
        for (budget, start, t) in totals {
            self.totals.insert((budget, start), t);
        }
        for (job, c) in held {
            self.held.entry(job).or_default().push(c);
        }
    }

    /// The totals of `budget`'s period starting at `period_start`.
    pub fn totals(&self, budget: &str, period_start: i64) -> Totals {
        self.totals
            .get(&(budget.to_string(), period_start))
            .copied()
            .unwrap_or_default()
    }

    /// What charging `charge_j` at time `now` against `budgets` would find.
    pub fn assess(&self, budgets: &[&Budget], now: i64, charge_j: Joules) -> Assessment {
        let mut out = Assessment::default();
        for b in budgets {
            let key = b.scope.key();
            let (start, _) = b.period.bounds(now);
            let t = self.totals(&key, start);
            let level = b.level_at(t.used_j + t.held_j + charge_j);
            if let Some(l) = level {
                out.actions.add(&l.action);
            }
            out.budgets.push(AtAdmission {
                budget: key,
                period_start: start,
                amount_j: b.amount_j,
                used_j: t.used_j,
                held_j: t.held_j,
                charged_j: charge_j,
                level_pct: level.map(|l| l.at * 100.0),
                action: level.map(|l| l.action.describe()),
            });
        }
        out
    }

    /// Hold `charges` for `job_id` (a job already holding keeps its first charges).
    pub fn hold(&mut self, job_id: u64, charges: Vec<Charge>) {
        if self.held.contains_key(&job_id) || charges.is_empty() {
            return;
        }
        for c in &charges {
            let t = self
                .totals
                .entry((c.budget.clone(), c.period_start))
                .or_default();
            t.held_j += c.charged_j;
            t.jobs += 1;
        }
        self.held.insert(job_id, charges);
    }

    /// Drop `job_id`'s holds without settling (its open was never stored).
    pub fn release(&mut self, job_id: u64) {
        for c in self.held.remove(&job_id).unwrap_or_default() {
            if let Some(t) = self.totals.get_mut(&(c.budget, c.period_start)) {
                t.held_j -= c.charged_j;
                t.jobs = t.jobs.saturating_sub(1);
            }
        }
    }

    /// Settle `job_id`: its holds become use, in the amounts the store settled.
    pub fn settle(&mut self, job_id: u64, settled: &[Charge]) {
        let Some(held) = self.held.remove(&job_id) else {
            return;
        };
        for c in held {
            let amount = settled
                .iter()
                .find(|s| s.budget == c.budget && s.period_start == c.period_start)
                .and_then(|s| s.settled_j)
                .unwrap_or(c.charged_j);
            if let Some(t) = self.totals.get_mut(&(c.budget, c.period_start)) {
                t.held_j -= c.charged_j;
                t.used_j += amount;
            }
        }
    }

    /// The charges `job_id` holds.
    pub fn held_by(&self, job_id: u64) -> Option<&[Charge]> {
        self.held.get(&job_id).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Action, Level, Period, Scope};
    use super::*;

    fn chem() -> Budget {
        Budget {
            scope: Scope::Account("chem".into()),
            amount_j: Joules(100.0),
            period: Period::Every {
                length_s: 10,
                anchor: 0,
            },
            levels: vec![Level {
                at: 1.0,
                action: Action::Refuse,
            }],
        }
    }

    #[test]
    fn holds_settle_into_use_and_a_new_period_starts_empty() {
        let b = chem();
        let mut book = Book::default();
        let a = book.assess(&[&b], 3, Joules(60.0));
        assert!(!a.actions.refuse);
        book.hold(1, a.charges());
        // 60 held + 50 asked passes 100: refused.
        assert!(book.assess(&[&b], 4, Joules(50.0)).actions.refuse);
        let settled = Charge {
            settled_j: Some(Joules(30.0)),
            measured: Some(true),
            ..a.charges()[0].clone()
        };
        book.settle(1, &[settled]);
        let t = book.totals("account:chem", 0);
        assert_eq!((t.used_j, t.held_j), (Joules(30.0), Joules(0.0)));
        assert!(!book.assess(&[&b], 5, Joules(70.0)).actions.refuse);
        // Period [10, 20) owes nothing to [0, 10).
        let next = book.assess(&[&b], 10, Joules(100.0));
        assert_eq!(next.budgets[0].period_start, 10);
        assert_eq!(next.budgets[0].used_j, Joules(0.0));
        assert!(!next.actions.refuse);
    }

    #[test]
    fn release_undoes_a_hold_and_a_restored_book_settles_like_the_original() {
        let b = chem();
        let mut book = Book::default();
        book.hold(1, book.assess(&[&b], 1, Joules(20.0)).charges());
        book.hold(2, book.assess(&[&b], 1, Joules(30.0)).charges());
        book.release(2);
        assert_eq!(book.totals("account:chem", 0).held_j, Joules(20.0));
        let held = vec![(1, book.held_by(1).unwrap()[0].clone())];
        let mut again = Book::default();
        again.restore(
            vec![("account:chem".into(), 0, book.totals("account:chem", 0))],
            held,
        );
        assert_eq!(
            again.totals("account:chem", 0),
            book.totals("account:chem", 0)
        );
        again.settle(1, &[]);
        let t = again.totals("account:chem", 0);
        assert_eq!((t.used_j, t.held_j, t.jobs), (Joules(20.0), Joules(0.0), 1));
    }
}
