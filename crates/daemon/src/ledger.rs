//! The power-budget ledger: the site cap and each partition's cap, minus the
//! predicted power of the jobs that hold reservations.
//!
//! It lives in memory and is rebuilt from the store's reservations at start.

use std::collections::{BTreeMap, HashMap};

use crate::store::Reservation;
use greenup::site::Site;
use greenup_core::quantity::Watts;
use greenup_proto::protocol::BudgetLine;

#[derive(Debug, Clone)]
struct Held {
    partition: Option<String>,
    watts: Watts,
    expires_at: i64,
    opened_at: i64,
}

/// Caps and reservations.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    site_cap_w: Option<Watts>,
    partition_caps_w: BTreeMap<String, Option<Watts>>,
    held: HashMap<u64, Held>,
    /// Counts every change to caps or reservations, so a reader can tell its copy is current.
    changes: u64,
}

impl Ledger {
    /// An empty ledger with the site's caps.
    pub fn new(site: &Site) -> Ledger {
        let mut l = Ledger::default();
        l.set_caps(site);
        l
    }

    /// Take the caps from a (re)loaded site config; reservations stay.
    pub fn set_caps(&mut self, site: &Site) {
        self.changes += 1;
        self.site_cap_w = site.power_cap_w.map(Watts);
        self.partition_caps_w = site
            .partitions
            .iter()
            .map(|(n, p)| (n.clone(), p.power_cap_w.map(Watts)))
            .collect();
    }

    /// Replace all reservations with the store's.
    pub fn rebuild(&mut self, reservations: &[Reservation]) {
        self.changes += 1;
        self.held = reservations
            .iter()
            .map(|r| {
                let h = Held {
                    partition: r.partition.clone(),
                    watts: Watts(r.watts),
                    expires_at: r.expires_at,
                    opened_at: r.opened_at,
                };
                (r.job_id, h)
            })
            .collect();
    }

    fn reserved(&self, partition: Option<&str>) -> (Watts, usize) {
        self.held
            .values()
            .filter(|h| partition.is_none() || h.partition.as_deref() == partition)
            .fold((Watts(0.0), 0), |(w, n), h| (w + h.watts, n + 1))
    }

    /// Watts a new job in `partition` may still use (`None`: no cap applies).
    ///
    /// The smaller of the site's free watts and the partition's. Below zero when the
    /// jobs hold more than a cap (a reload lowered it, or jobs ran over at their
    /// lowest power): the decider then knows by how much.
    pub fn free_w(&self, partition: Option<&str>) -> Option<Watts> {
        let site = self.site_cap_w.map(|cap| cap - self.reserved(None).0);
        let part = partition.and_then(|p| {
            self.partition_caps_w
                .get(p)
                .copied()
                .flatten()
                .map(|cap| cap - self.reserved(Some(p)).0)
        });
        match (site, part) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (Some(a), None) | (None, Some(a)) => Some(a),
            (None, None) => None,
        }
    }

    /// Hold `watts` for a job until it is released or reclaimed.
    pub fn reserve(
        &mut self,
        job_id: u64,
        partition: Option<&str>,
        watts: Watts,
        expires_at: i64,
        opened_at: i64,
    ) {
        let h = Held {
            partition: partition.map(str::to_string),
            watts,
            expires_at,
            opened_at,
        };
        self.held.insert(job_id, h);
        self.changes += 1;
    }

    /// Lower a job's reservation to `watts` (a give-back); a larger value changes nothing.
    pub fn shrink(&mut self, job_id: u64, watts: Watts) {
        if let Some(h) = self.held.get_mut(&job_id)
            && watts < h.watts
        {
            h.watts = watts;
            self.changes += 1;
        }
    }

    /// Drop a job's reservation; returns the watts it held.
    pub fn release(&mut self, job_id: u64) -> Option<Watts> {
        self.changes += 1;
        self.held.remove(&job_id).map(|h| h.watts)
    }

    /// How many times the caps or reservations have changed: equal counts, same ledger.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether a job holds a reservation.
    pub fn holds(&self, job_id: u64) -> bool {
        self.held.contains_key(&job_id)
    }

    /// Jobs whose time limit plus grace has passed at `now`.
    pub fn expired(&self, now: i64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, h)| h.expires_at <= now)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Jobs opened at or before `before` (candidates for asking Slurm whether they still exist).
    pub fn opened_before(&self, before: i64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, h)| h.opened_at <= before)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Jobs holding reservations.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no job holds a reservation.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The site line, then one line per partition.
    pub fn lines(&self) -> Vec<BudgetLine> {
        let line = |scope: &str, cap: Option<Watts>, (reserved, jobs): (Watts, usize)| BudgetLine {
            scope: scope.to_string(),
            cap_w: cap,
            reserved_w: reserved,
            free_w: cap.map(|c| (c - reserved).max(Watts(0.0))),
            jobs,
        };
        let mut out = vec![line("site", self.site_cap_w, self.reserved(None))];
        for (name, cap) in &self.partition_caps_w {
            out.push(line(name, *cap, self.reserved(Some(name))));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(site: Option<f64>, parts: &[(&str, Option<f64>)]) -> Ledger {
        Ledger {
            site_cap_w: site.map(Watts),
            partition_caps_w: parts
                .iter()
                .map(|(n, c)| (n.to_string(), c.map(Watts)))
                .collect(),
            held: HashMap::new(),
            changes: 0,
        }
    }

    #[test]
    fn free_is_the_tighter_of_site_and_partition() {
        let mut l = ledger(Some(1000.0), &[("a", Some(300.0)), ("b", None)]);
        assert_eq!(l.free_w(Some("a")), Some(Watts(300.0)));
        assert_eq!(l.free_w(Some("b")), Some(Watts(1000.0)));
        l.reserve(1, Some("a"), Watts(200.0), 100, 0);
        l.reserve(2, Some("b"), Watts(700.0), 100, 0);
        // a: partition 300-200 = 100; site 1000-900 = 100.
        assert_eq!(l.free_w(Some("a")), Some(Watts(100.0)));
        assert_eq!(l.free_w(Some("b")), Some(Watts(100.0)));
        l.reserve(3, Some("b"), Watts(150.0), 50, 0);
        // Site 1000 - (200 + 700 + 150) = -50 W: overdrawn, and said so.
        assert_eq!(l.free_w(Some("a")), Some(Watts(-50.0)));
        assert_eq!(l.expired(60), vec![3]);
        assert_eq!(l.release(2), Some(Watts(700.0)));
        assert_eq!(l.free_w(Some("b")), Some(Watts(650.0)));
        let lines = l.lines();
        assert_eq!(lines[0].scope, "site");
        assert_eq!(lines[0].reserved_w, Watts(350.0));
        assert_eq!(lines[1].free_w, Some(Watts(100.0)));
        assert_eq!(lines[2].cap_w, None);
    }

    #[test]
    fn no_caps_means_no_limit_and_rebuild_replaces() {
        let mut l = ledger(None, &[]);
        assert_eq!(l.free_w(None), None);
        l.reserve(9, None, Watts(10.0), 0, 0);
        l.rebuild(&[Reservation {
            job_id: 4,
            partition: None,
            watts: 5.0,
            expires_at: 9,
            opened_at: 1,
        }]);
        assert!(!l.holds(9));
        assert!(l.holds(4));
        assert_eq!(l.opened_before(1), vec![4]);
    }
}
