//! Nodes whose jobs never report. A node where spank_greenup did not load (plugstack.conf's
//! `optional` lets slurmd run jobs without it) runs its jobs with no decision, no clock and
//! no RAPL limit, and tells greenupd nothing. greenupd notices it from the jobs it closes:
//! a node allocated to [`SILENT_AFTER`] closed jobs in a row without an outcome from it is
//! logged once and counted in the metrics, until it reports again.

use std::collections::HashMap;

/// Closed jobs in a row without an outcome from a node before it counts as silent: one
/// miss is a spooled outcome still on its way or a node that died with its job; three in
/// a row is a node whose plugin does not run.
pub(super) const SILENT_AFTER: u32 = 3;

/// The most nodes followed: a large cluster's, bounded so that job records naming made-up
/// nodes cannot grow the map without end (a node past it is not followed).
const MAX_NODES: usize = 200_000;

/// Each node's closed jobs in a row without an outcome from it.
#[derive(Debug, Default)]
pub(super) struct Silent {
    misses: HashMap<String, u32>,
}

impl Silent {
    /// `node` reported an outcome: true when it had counted as silent, so it is back.
    pub(super) fn heard(&mut self, node: &str) -> bool {
        self.misses.remove(node).is_some_and(|m| m >= SILENT_AFTER)
    }

    /// A job allocated `nodes` closed, and `reported` says which of them sent an outcome
    /// for it. Returns the nodes this close made silent (their miss count just reached
    /// [`SILENT_AFTER`]), each once.
    pub(super) fn closed<'a>(
        &mut self,
        nodes: &'a [String],
        reported: impl Fn(&str) -> bool,
    ) -> Vec<&'a str> {
        let mut now_silent = Vec::new();
        for node in nodes {
            if reported(node) {
                self.misses.remove(node.as_str());
                continue;
            }
            if !self.misses.contains_key(node.as_str()) && self.misses.len() >= MAX_NODES {
                continue;
            }
            let m = self.misses.entry(node.clone()).or_default();
            *m = m.saturating_add(1);
            if *m == SILENT_AFTER {
                now_silent.push(node.as_str());
            }
        }
        now_silent
    }

    /// How many nodes count as silent now.
    pub(super) fn count(&self) -> usize {
        self.misses.values().filter(|m| **m >= SILENT_AFTER).count()
    }

    /// The count as a Prometheus gauge for greenupd's metrics page.
    pub(super) fn prometheus(&self) -> String {
        format!(
            "# HELP greenup_nodes_silent Nodes whose last {SILENT_AFTER} or more closed jobs sent \
             greenupd no outcome (is spank_greenup loaded there?).\n\
             # TYPE greenup_nodes_silent gauge\ngreenup_nodes_silent {}\n",
            self.count()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_node_is_silent_at_its_third_closed_job_in_a_row_without_an_outcome() {
        let mut s = Silent::default();
        let nodes = names(&["n1", "n2", "n3"]);
        // n3 never reports; n2 misses once, then reports.
        assert!(s.closed(&nodes, |n| n == "n1").is_empty());
        assert!(s.closed(&nodes, |n| n != "n3").is_empty());
        assert_eq!(s.count(), 0);
        assert_eq!(s.closed(&nodes, |n| n != "n3"), ["n3"]);
        assert_eq!(s.count(), 1);
        // Said once: a fourth miss names it no more.
        assert!(s.closed(&nodes, |n| n != "n3").is_empty());
        assert!(s.prometheus().ends_with("greenup_nodes_silent 1\n"));
        // An outcome from it brings it back, and its count starts again.
        assert!(s.heard("n3"));
        assert!(!s.heard("n1"));
        assert_eq!(s.count(), 0);
        assert!(s.closed(&nodes, |n| n != "n3").is_empty());
    }

    #[test]
    fn a_job_that_reports_between_misses_resets_the_count() {
        let mut s = Silent::default();
        let nodes = names(&["n1"]);
        for _ in 0..2 {
            assert!(s.closed(&nodes, |_| false).is_empty());
        }
        assert!(s.closed(&nodes, |_| true).is_empty());
        for _ in 0..2 {
            assert!(s.closed(&nodes, |_| false).is_empty());
        }
        assert_eq!(s.closed(&nodes, |_| false), ["n1"]);
    }
}
