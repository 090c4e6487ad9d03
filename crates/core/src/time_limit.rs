//! A job's time limit, as greenup knows it: a number of seconds, no limit at all, or
//! not known (a Slurm 22.05 prolog is not told, and squeue may not answer).
//!
//! The two ends differ where it matters: a plan never runs past a limit of seconds;
//! an unlimited job is planned without one; a job whose limit is unknown is planned
//! without one too, but greenupd asks slurmctld first, and a report says "unknown"
//! rather than claim the job had no limit.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// slurmctld's end time for a job without a limit: a year after its start. A limit this
/// long or longer is no limit.
pub const YEAR_S: f64 = 365.0 * 86_400.0;

/// A job's effective time limit.
///
/// On the wire and in stored records it is the field `time_limit_s`: absent when the
/// limit is unknown, a number of seconds otherwise, and [`YEAR_S`] for no limit (what
/// slurmctld itself writes, and what a greenupd of an earlier release reads as a year).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TimeLimit {
    /// Slurm ends the job this many seconds after it starts.
    Seconds(f64),
    /// The job has no limit (`UNLIMITED`, or a year or more).
    Unlimited,
    /// Nobody has said.
    #[default]
    Unknown,
}

impl TimeLimit {
    /// A limit of `s` seconds as slurmctld means it: a year or more, or no positive
    /// time at all, is no limit.
    pub fn of_seconds(s: f64) -> TimeLimit {
        if s > 0.0 && s < YEAR_S {
            TimeLimit::Seconds(s)
        } else {
            TimeLimit::Unlimited
        }
    }

    /// A limit as Slurm writes one (`30`, `11:00`, `1-00:00:00`, `UNLIMITED`; see
    /// [`crate::units::parse_time`]); zero is no limit, as it is to Slurm.
    pub fn parse(s: &str) -> Result<TimeLimit, crate::units::UnitError> {
        Ok(crate::units::parse_time(s)?.map_or(TimeLimit::Unlimited, TimeLimit::of_seconds))
    }

    /// The bound a plan must keep within: the seconds of a limit, `None` when there is
    /// none to keep (unlimited or unknown).
    pub fn seconds(self) -> Option<f64> {
        match self {
            TimeLimit::Seconds(s) => Some(s),
            TimeLimit::Unlimited | TimeLimit::Unknown => None,
        }
    }

    /// Whether the limit is known (seconds or unlimited).
    pub fn is_known(self) -> bool {
        !self.is_unknown()
    }

    /// Whether nobody has said the limit; the wire leaves such a field out.
    pub fn is_unknown(&self) -> bool {
        matches!(self, TimeLimit::Unknown)
    }

    /// The seconds to hold a budget or a grant for: the limit's, else a year, since a
    /// job without a known limit may run that long.
    pub fn hold_s(self) -> f64 {
        self.seconds().unwrap_or(YEAR_S)
    }

    /// The wire's number: the seconds, [`YEAR_S`] for no limit, `None` when unknown.
    fn wire_s(self) -> Option<f64> {
        match self {
            TimeLimit::Seconds(s) => Some(s),
            TimeLimit::Unlimited => Some(YEAR_S),
            TimeLimit::Unknown => None,
        }
    }

    /// The limit read from the wire's number (see [`TimeLimit::wire_s`]). A number that
    /// is not a positive time stays [`TimeLimit::Seconds`], so that whoever checks the
    /// request can refuse it by name.
    fn from_wire_s(s: Option<f64>) -> TimeLimit {
        match s {
            None => TimeLimit::Unknown,
            Some(s) if s >= YEAR_S => TimeLimit::Unlimited,
            Some(s) => TimeLimit::Seconds(s),
        }
    }
}

impl std::fmt::Display for TimeLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeLimit::Seconds(s) => f.write_str(&crate::units::format_duration(*s)),
            TimeLimit::Unlimited => f.write_str("unlimited"),
            TimeLimit::Unknown => f.write_str("unknown"),
        }
    }
}

impl Serialize for TimeLimit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.wire_s().serialize(s)
    }
}

impl<'de> Deserialize<'de> for TimeLimit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TimeLimit, D::Error> {
        Option::<f64>::deserialize(d).map(TimeLimit::from_wire_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Req {
        #[serde(
            rename = "time_limit_s",
            default,
            skip_serializing_if = "TimeLimit::is_unknown"
        )]
        limit: TimeLimit,
    }

    #[test]
    fn the_wire_keeps_the_three_apart_and_reads_what_earlier_releases_wrote() {
        let json = |l| serde_json::to_string(&Req { limit: l }).unwrap();
        assert_eq!(json(TimeLimit::Unknown), "{}");
        assert_eq!(json(TimeLimit::Seconds(660.0)), r#"{"time_limit_s":660.0}"#);
        assert_eq!(json(TimeLimit::Unlimited), r#"{"time_limit_s":31536000.0}"#);
        let read = |s: &str| serde_json::from_str::<Req>(s).unwrap().limit;
        assert_eq!(read("{}"), TimeLimit::Unknown);
        assert_eq!(read(r#"{"time_limit_s":null}"#), TimeLimit::Unknown);
        assert_eq!(read(r#"{"time_limit_s":660}"#), TimeLimit::Seconds(660.0));
        assert_eq!(read(r#"{"time_limit_s":31536000}"#), TimeLimit::Unlimited);
        assert_eq!(read(r#"{"time_limit_s":4e7}"#), TimeLimit::Unlimited);
        // Not a time: kept, so that the request's check names it.
        assert_eq!(read(r#"{"time_limit_s":-5}"#), TimeLimit::Seconds(-5.0));
        for l in [
            TimeLimit::Unknown,
            TimeLimit::Unlimited,
            TimeLimit::Seconds(1.5),
        ] {
            assert_eq!(read(&json(l)), l);
        }
    }

    #[test]
    fn only_seconds_bound_a_plan_and_a_hold_without_them_is_a_year() {
        assert_eq!(TimeLimit::Seconds(60.0).seconds(), Some(60.0));
        assert_eq!(TimeLimit::Unlimited.seconds(), None);
        assert_eq!(TimeLimit::Unknown.seconds(), None);
        assert_eq!(TimeLimit::Seconds(60.0).hold_s(), 60.0);
        assert_eq!(TimeLimit::Unknown.hold_s(), 365.0 * 86_400.0);
        assert_eq!(TimeLimit::of_seconds(0.0), TimeLimit::Unlimited);
        assert_eq!(TimeLimit::of_seconds(YEAR_S), TimeLimit::Unlimited);
        assert_eq!(TimeLimit::of_seconds(59.0), TimeLimit::Seconds(59.0));
        assert_eq!(TimeLimit::Unknown.to_string(), "unknown");
        assert_eq!(TimeLimit::parse("11:00"), Ok(TimeLimit::Seconds(660.0)));
        assert_eq!(TimeLimit::parse("UNLIMITED"), Ok(TimeLimit::Unlimited));
        assert_eq!(TimeLimit::parse("0"), Ok(TimeLimit::Unlimited));
        assert!(TimeLimit::parse("soon").is_err());
        assert_eq!(TimeLimit::Unlimited.to_string(), "unlimited");
    }
}
