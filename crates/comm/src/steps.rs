//! Compute seconds per window of wall time: what the step model learns a run's
//! synchronised steps from.
//!
//! A bulk-synchronous program's run is a sequence of steps, and in each step one node
//! type leads while the others wait. Which type leads which step is lost in a run's
//! totals (compute and MPI seconds per rank), so each rank also counts its compute
//! seconds in consecutive windows of wall time since `MPI_Init`. A window whose
//! compute on one node type is near the window's length is a step that type leads; a
//! type that computes little in it waits there, and slowing it costs nothing until its
//! compute fills the window. Windows stand in for steps because they need no knowledge
//! of the program's structure and cost one number each: the learned profile holds only
//! a few step classes made from them (`greenup::model::steps`).
//!
//! The window starts at [`FIRST_WINDOW_S`] and doubles whenever a run outgrows
//! [`MAX_WINDOWS`] windows, merging pairs, so a rank holds at most `MAX_WINDOWS` numbers
//! (about 6 KB of a rank file's JSON) whatever the run's length, and every rank's window is `FIRST_WINDOW_S` times
//! a power of two: two ranks' counts always line up after the shorter window is
//! coarsened to the longer one.

use serde::{Deserialize, Serialize};

use crate::Seconds;

/// The first window's length in seconds: a few of a tightly coupled program's steps.
pub const FIRST_WINDOW_S: f64 = 0.01;

/// Most windows one rank or node keeps (each doubling halves the count).
pub const MAX_WINDOWS: usize = 256;

/// Compute seconds in each window of wall time since `MPI_Init`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTimes {
    /// Each window's length in seconds: [`FIRST_WINDOW_S`] times a power of two.
    pub window_s: Seconds,
    /// Compute seconds in window k, which covers `[k * window_s, (k + 1) * window_s)`.
    pub compute_s: Vec<f64>,
}

impl Default for StepTimes {
    fn default() -> Self {
        StepTimes {
            window_s: Seconds(FIRST_WINDOW_S),
            compute_s: Vec::new(),
        }
    }
}

impl StepTimes {
    /// Count computation from `start_s` to `end_s` (seconds since `MPI_Init`), split over
    /// the windows it spans. Intervals out of order, negative or not finite are ignored.
    pub fn add(&mut self, start_s: f64, end_s: f64) {
        if !(start_s.is_finite() && end_s.is_finite() && start_s >= 0.0 && end_s > start_s) {
            return;
        }
        while end_s > self.window_s.0 * MAX_WINDOWS as f64 {
            self.double();
        }
        let w = self.window_s.0;
        let first = (start_s / w) as usize;
        let last = ((end_s / w) as usize).min(MAX_WINDOWS - 1);
        if self.compute_s.len() <= last {
            self.compute_s.resize(last + 1, 0.0);
        }
        for k in first..=last {
            let lo = start_s.max(k as f64 * w);
            let hi = end_s.min((k + 1) as f64 * w);
            if hi > lo {
                self.compute_s[k] += hi - lo;
            }
        }
    }

    /// Double the window, adding each pair of windows into one.
    fn double(&mut self) {
        let merged = self
            .compute_s
            .chunks(2)
            .map(|p| p.iter().sum::<f64>())
            .collect();
        self.compute_s = merged;
        self.window_s = self.window_s * 2.0;
    }

    /// The doublings from [`FIRST_WINDOW_S`] to this window, or `None` when the window
    /// is not `FIRST_WINDOW_S` times a power of two (a file not written by greenup).
    pub fn doublings(&self) -> Option<u32> {
        let r = self.window_s.0 / FIRST_WINDOW_S;
        if !(r.is_finite() && r >= 1.0) {
            return None;
        }
        let k = r.log2().round();
        ((r - 2f64.powf(k)).abs() <= 1e-9 * r && k <= 62.0).then_some(k as u32)
    }

    /// Whether these counts could have been measured in `wall_s` seconds: a greenup
    /// window, at most [`MAX_WINDOWS`] of them, none with more compute than its length
    /// or below zero, and none past the wall time.
    pub fn fits(&self, wall_s: f64) -> bool {
        let w = self.window_s.0;
        let slack = 1e-6 * w.max(1.0);
        self.doublings().is_some()
            && self.compute_s.len() <= MAX_WINDOWS
            && self
                .compute_s
                .iter()
                .all(|c| c.is_finite() && *c >= 0.0 && *c <= w + slack)
            && (self.compute_s.len().saturating_sub(1)) as f64 * w <= wall_s + slack
    }

    /// These counts over windows of `window_s` (a longer greenup window), adding windows
    /// together; unchanged when `window_s` is not longer.
    pub fn coarsened(&self, window_s: f64) -> StepTimes {
        let mut c = self.clone();
        c.coarsen_to(window_s);
        c
    }

    /// Coarsen to `window_s` (a longer greenup window), adding windows together.
    fn coarsen_to(&mut self, window_s: f64) {
        while self.window_s.0 < window_s * (1.0 - 1e-9) {
            self.double();
        }
    }

    /// Take, window by window, the larger of these counts and `other`'s: a node's steps
    /// are led by its slowest rank. Both are first brought to the longer window.
    pub fn max_with(&mut self, other: &StepTimes) {
        let mut other = other.clone();
        let w = self.window_s.0.max(other.window_s.0);
        self.coarsen_to(w);
        other.coarsen_to(w);
        if self.compute_s.len() < other.compute_s.len() {
            self.compute_s.resize(other.compute_s.len(), 0.0);
        }
        for (a, b) in self.compute_s.iter_mut().zip(&other.compute_s) {
            *a = a.max(*b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn an_interval_is_split_over_the_windows_it_spans() {
        let mut s = StepTimes::default();
        // 5 ms to 27 ms over 10 ms windows: 5 + 10 + 7 ms.
        s.add(0.005, 0.027);
        assert_eq!(s.compute_s.len(), 3);
        assert!(close(s.compute_s[0], 0.005) && close(s.compute_s[1], 0.010));
        assert!(close(s.compute_s[2], 0.007), "{s:?}");
        // Ignored: backwards, negative, not finite.
        s.add(0.02, 0.01);
        s.add(-1.0, 0.001);
        s.add(0.0, f64::NAN);
        assert!(close(s.compute_s.iter().sum::<f64>(), 0.022));
    }

    #[test]
    fn a_long_run_doubles_the_window_and_keeps_its_total() {
        let mut s = StepTimes::default();
        // Busy half of every 10 ms for 25.6 s: 256 windows hold 2.56 s at 10 ms, so the
        // window doubles four times, to 160 ms (160 windows of 80 ms compute each).
        for k in 0..2560 {
            let t = k as f64 * 0.01;
            s.add(t, t + 0.005);
        }
        assert!(close(s.window_s.0, 0.16), "{}", s.window_s.0);
        assert_eq!(s.compute_s.len(), 160);
        assert!(s.compute_s.iter().all(|c| (c - 0.08).abs() < 1e-9));
        assert!((s.compute_s.iter().sum::<f64>() - 12.8).abs() < 1e-9);
        assert_eq!(s.doublings(), Some(4));
        assert!(s.fits(25.6) && !s.fits(20.0));
    }

    #[test]
    fn two_ranks_line_up_at_the_longer_window() {
        let mut a = StepTimes::default();
        a.add(0.0, 0.015); // 10 ms + 5 ms
        let mut b = StepTimes {
            window_s: Seconds(0.02),
            compute_s: vec![0.004, 0.02],
        };
        b.max_with(&a);
        // a at 20 ms windows: [15 ms]; window 0 takes max(4, 15) ms.
        assert!(close(b.window_s.0, 0.02));
        assert_eq!(b.compute_s, vec![0.015, 0.02]);
        a.max_with(&b);
        assert_eq!(a.compute_s, vec![0.015, 0.02]);
    }

    #[test]
    fn counts_no_greenup_runtime_could_write_do_not_fit() {
        let odd = StepTimes {
            window_s: Seconds(0.03),
            compute_s: vec![0.01],
        };
        assert_eq!(odd.doublings(), None);
        assert!(!odd.fits(1.0));
        let over = StepTimes {
            window_s: Seconds(0.01),
            compute_s: vec![0.02],
        };
        assert!(!over.fits(1.0));
        let late = StepTimes {
            window_s: Seconds(0.01),
            compute_s: vec![0.0; 200],
        };
        assert!(!late.fits(1.0) && late.fits(2.0));
    }
}
