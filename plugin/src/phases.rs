//! Where a job prolog's or epilog's time goes: each step's milliseconds, logged beside
//! the total so that a site (and `tests/cluster/bench.sh`) can tell greenupd's answer
//! from RAPL writes, the meter's start and the plugin's own files.

use std::fmt;
use std::time::Instant;

/// The milliseconds of each step of one prolog or epilog, in the order they ran.
#[derive(Debug, Clone)]
pub struct Phases {
    last: Instant,
    marks: Vec<(&'static str, f64)>,
}

impl Phases {
    /// Start timing now.
    pub fn start() -> Self {
        Self {
            last: Instant::now(),
            marks: Vec::with_capacity(8),
        }
    }

    /// End the step `name` now: its time is what passed since the last mark.
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.marks
            .push((name, now.duration_since(self.last).as_secs_f64() * 1e3));
        self.last = now;
    }

    /// The milliseconds of step `name`, if it ran.
    pub fn ms(&self, name: &str) -> Option<f64> {
        self.marks.iter().find(|(n, _)| *n == name).map(|m| m.1)
    }
}

/// "phases site 0.11 greenupd 2.30 apply 1.05": one word and figure per step, so a log
/// reader can pick a step out with a pattern.
impl fmt::Display for Phases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("phases")?;
        for (name, ms) in &self.marks {
            write!(f, " {name} {ms:.2}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_gets_the_time_since_the_last_mark() {
        let mut p = Phases::start();
        std::thread::sleep(std::time::Duration::from_millis(3));
        p.mark("first");
        p.mark("second");
        let first = p.ms("first").unwrap();
        assert!(first >= 3.0, "{first}");
        assert!(p.ms("second").is_some_and(|ms| ms >= 0.0));
        assert_eq!(p.ms("third"), None);
        let text = p.to_string();
        assert!(text.starts_with("phases first "), "{text}");
        assert!(text.contains(" second "), "{text}");
    }
}
