//! A job's energy on one node, counted over a series of RAPL readings. A counter wraps
//! at `max_energy_range_uj` (262 kJ on many Intel packages, 4.3 kJ on some AMD ones),
//! and two readings can only tell one wrap apart from none. A long job is therefore
//! counted from readings taken less than one wrap apart, and every wrap is seen.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::rapl::{Energy, Reading, delta_uj};

/// The shortest wait between readings: no counter wraps within a second.
pub const SHORTEST_WAIT: Duration = Duration::from_secs(1);

/// How many times faster than the highest power seen so far a zone may draw before a
/// wait could miss a wrap: readings come at most a quarter of a wrap period apart.
const WRAP_MARGIN: f64 = 4.0;

/// The running count: the last reading counted and the sum so far. Every reading counted
/// has the zones of the first, so the last one also names the zones and their ranges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// The latest reading counted (at the start, the job's first reading on this node).
    pub last: Reading,
    /// Microjoules counted so far, one entry per zone.
    pub counted_uj: Vec<u64>,
    /// The highest power seen between two readings, per zone, in watts.
    pub peak_w: Vec<f64>,
    /// How many readings were counted after the first.
    pub readings: u64,
    /// Why the count cannot be trusted, once something made it so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Tally {
    /// Start counting from `first`.
    pub fn start(first: Reading) -> Tally {
        let zones = first.zones.len();
        Tally {
            problem: first
                .problem
                .as_ref()
                .map(|p| format!("RAPL counter unreadable: {p}")),
            last: first,
            counted_uj: vec![0; zones],
            peak_w: vec![0.0; zones],
            readings: 0,
        }
    }

    /// Count the energy from the last reading to `r`; each zone may have wrapped once.
    pub fn add(&mut self, r: Reading) {
        if self.problem.is_some() {
            return;
        }
        if let Some(p) = &r.problem {
            self.problem = Some(format!("RAPL counter unreadable: {p}"));
            return;
        }
        if self.last.zones.is_empty() || r.zones.is_empty() {
            self.problem = Some("no RAPL energy counter on this node".into());
            return;
        }
        let same = self.last.zones.len() == r.zones.len()
            && self
                .last
                .zones
                .iter()
                .zip(&r.zones)
                .all(|(a, b)| a.id == b.id && a.max_energy_range_uj == b.max_energy_range_uj);
        if !same {
            self.problem = Some("RAPL zones changed during the job".into());
            return;
        }
        let seconds = r.unix_s - self.last.unix_s;
        for (i, (a, b)) in self.last.zones.iter().zip(&r.zones).enumerate() {
            let uj = delta_uj(a.energy_uj, b.energy_uj, a.max_energy_range_uj);
            self.counted_uj[i] = self.counted_uj[i].saturating_add(uj);
            if seconds > 0.0 {
                self.peak_w[i] = self.peak_w[i].max(uj as f64 / 1.0e6 / seconds);
            }
        }
        self.last = r;
        self.readings += 1;
    }

    /// The energy counted from the first reading to the last.
    pub fn energy(&self) -> Energy {
        if let Some(p) = &self.problem {
            return Energy::Unmeasured { reason: p.clone() };
        }
        if self.last.zones.is_empty() {
            return Energy::Unmeasured {
                reason: "no RAPL energy counter on this node".into(),
            };
        }
        Energy::Measured {
            joules: self.counted_uj.iter().sum::<u64>() as f64 / 1.0e6,
        }
    }

    /// How long to wait before the next reading: a quarter of the shortest wrap period
    /// at the highest power seen, between [`SHORTEST_WAIT`] and `longest`. Before any
    /// power has been seen, the shortest wait.
    pub fn next_wait(&self, longest: Duration) -> Duration {
        if self.readings == 0 {
            return SHORTEST_WAIT.min(longest);
        }
        let wrap_s = self
            .last
            .zones
            .iter()
            .zip(&self.peak_w)
            .filter(|(_, w)| **w > 0.0)
            .map(|(z, w)| z.max_energy_range_uj as f64 / 1.0e6 / w)
            .fold(f64::INFINITY, f64::min);
        let wait = Duration::try_from_secs_f64(wrap_s / WRAP_MARGIN).unwrap_or(longest);
        wait.clamp(SHORTEST_WAIT.min(longest), longest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::rapl::ZoneReading;

    fn reading(t: f64, counters: &[u64], range: u64) -> Reading {
        Reading {
            unix_s: t,
            zones: counters
                .iter()
                .enumerate()
                .map(|(i, &e)| ZoneReading {
                    id: format!("intel-rapl:{i}"),
                    name: format!("package-{i}"),
                    energy_uj: e,
                    max_energy_range_uj: range,
                })
                .collect(),
            problem: None,
        }
    }

    /// A counter of `range` uJ driven at `watts` for `seconds`, read every `every`
    /// seconds: the true energy is watts x seconds however often it wraps.
    fn counted(watts: f64, seconds: u64, every: u64, range: u64) -> Energy {
        let at = |t: u64| ((watts * t as f64 * 1e6) as u64) % range;
        let mut tally = Tally::start(reading(0.0, &[at(0)], range));
        let mut t = every;
        while t < seconds {
            tally.add(reading(t as f64, &[at(t)], range));
            t += every;
        }
        tally.add(reading(seconds as f64, &[at(seconds)], range));
        tally.energy()
    }

    #[test]
    fn readings_closer_than_a_wrap_count_every_wrap() {
        // 100 W on a 1 kJ counter wraps every 10 s; 95 s is 9.5 kJ, nine wraps.
        assert_eq!(
            counted(100.0, 95, 4, 1_000_000_000),
            Energy::Measured { joules: 9_500.0 }
        );
        // Read only at the start and end, the same counter shows 500 J: the case the
        // readings in between exist for.
        assert_eq!(
            counted(100.0, 95, 95, 1_000_000_000),
            Energy::Measured { joules: 500.0 }
        );
    }

    #[test]
    fn the_wait_is_a_quarter_wrap_at_the_highest_power_seen() {
        let range = 1_000_000_000; // 1 kJ
        let mut tally = Tally::start(reading(0.0, &[0], range));
        let longest = Duration::from_secs(30);
        assert_eq!(tally.next_wait(longest), SHORTEST_WAIT);
        // 50 W for 1 s, then 100 W for 1 s: 1 kJ at 100 W wraps in 10 s, a quarter is 2.5 s.
        tally.add(reading(1.0, &[50_000_000], range));
        tally.add(reading(2.0, &[150_000_000], range));
        assert_eq!(tally.next_wait(longest), Duration::from_millis(2500));
        // Power falling does not lengthen the wait: the peak holds.
        tally.add(reading(4.0, &[160_000_000], range));
        assert_eq!(tally.next_wait(longest), Duration::from_millis(2500));
        // A large range is read at the longest wait; an idle zone too.
        let mut big = Tally::start(reading(0.0, &[0], 262_143_328_850));
        big.add(reading(10.0, &[2_000_000_000], 262_143_328_850));
        assert_eq!(big.next_wait(longest), longest);
        let mut idle = Tally::start(reading(0.0, &[5], range));
        idle.add(reading(10.0, &[5], range));
        assert_eq!(idle.next_wait(longest), longest);
        // A very fast counter is still read no more than once a second.
        let mut fast = Tally::start(reading(0.0, &[0], 1_000_000));
        fast.add(reading(1.0, &[900_000], 1_000_000));
        assert_eq!(fast.next_wait(longest), SHORTEST_WAIT);
    }

    #[test]
    fn zones_sum_and_a_bad_reading_makes_the_count_unmeasured() {
        let range = 1_000_000;
        let mut tally = Tally::start(reading(0.0, &[100, 200], range));
        tally.add(reading(1.0, &[900_000, 300], range));
        tally.add(reading(2.0, &[50, 400], range));
        // Zone 0: 899_900 + (100_000 + 50); zone 1: 100 + 100.
        assert_eq!(
            tally.energy(),
            Energy::Measured {
                joules: 1_000_150.0e-6
            }
        );
        let mut changed = tally.clone();
        changed.add(reading(3.0, &[60], range));
        assert_eq!(
            changed.energy(),
            Energy::Unmeasured {
                reason: "RAPL zones changed during the job".into()
            }
        );
        let mut broken = tally.clone();
        let mut r = reading(3.0, &[60, 500], range);
        r.problem = Some("energy_uj: Permission denied".into());
        broken.add(r);
        // Once untrusted, later good readings do not make it trusted again.
        broken.add(reading(4.0, &[70, 600], range));
        assert_eq!(
            broken.energy(),
            Energy::Unmeasured {
                reason: "RAPL counter unreadable: energy_uj: Permission denied".into()
            }
        );
        let none = Tally::start(reading(0.0, &[], range));
        assert!(
            matches!(none.energy(), Energy::Unmeasured { ref reason } if reason.contains("no RAPL"))
        );
    }
}
