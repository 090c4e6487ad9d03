//! Budget periods on the UTC calendar: where the period holding an instant starts and
//! ends. All arithmetic is closed form on Unix seconds (no time zone database), so
//! every node and every restart of greenupd draws the same boundaries.

use serde::{Deserialize, Serialize};

/// Seconds in a day.
pub const DAY_S: i64 = 86_400;

/// How a budget's period repeats. Calendar periods reset at `reset_s` seconds after
/// UTC midnight (0 for midnight); weeks start on Monday, months on the 1st.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    /// Every UTC day, at `reset_s` past midnight.
    Day {
        /// Seconds after midnight UTC the period resets.
        reset_s: i64,
    },
    /// Every week from Monday, at `reset_s` past midnight UTC.
    Week {
        /// Seconds after midnight UTC the period resets.
        reset_s: i64,
    },
    /// Every calendar month from the 1st, at `reset_s` past midnight UTC.
    Month {
        /// Seconds after midnight UTC the period resets.
        reset_s: i64,
    },
    /// Every `length_s` seconds counted from `anchor` (Unix seconds).
    Every {
        /// Length of one period in seconds.
        length_s: i64,
        /// An instant at which a period starts (Unix seconds, UTC).
        anchor: i64,
    },
}

impl Period {
    /// The start and end (exclusive) of the period holding `t` (Unix seconds).
    pub fn bounds(&self, t: i64) -> (i64, i64) {
        match *self {
            Period::Day { reset_s } => {
                let start = (t - reset_s).div_euclid(DAY_S) * DAY_S + reset_s;
                (start, start + DAY_S)
            }
            Period::Week { reset_s } => {
                let day = (t - reset_s).div_euclid(DAY_S);
                // 1970-01-01 was a Thursday: day 0 is weekday 3 counted from Monday.
                let monday = day - (day + 3).rem_euclid(7);
                let start = monday * DAY_S + reset_s;
                (start, start + 7 * DAY_S)
            }
            Period::Month { reset_s } => {
                let day = (t - reset_s).div_euclid(DAY_S);
                let (y, m, _) = civil_from_days(day);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (
                    days_from_civil(y, m, 1) * DAY_S + reset_s,
                    days_from_civil(ny, nm, 1) * DAY_S + reset_s,
                )
            }
            Period::Every { length_s, anchor } => {
                let start = anchor + (t - anchor).div_euclid(length_s) * length_s;
                (start, start + length_s)
            }
        }
    }

    /// A word for messages: `day`, `week`, `month`, or `period`.
    pub fn noun(&self) -> &'static str {
        match self {
            Period::Day { .. } => "day",
            Period::Week { .. } => "week",
            Period::Month { .. } => "month",
            Period::Every { .. } => "period",
        }
    }
}

pub use greenup_core::utc::{civil_from_days, days_from_civil, month_days};

/// Parse a UTC date and time `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS]` (a space may stand
/// for `T`, a trailing `Z` is allowed) into Unix seconds.
pub fn parse_utc(s: &str) -> Option<i64> {
    greenup_core::utc::parse_utc(s.trim().trim_end_matches('Z'))
}

/// Parse a time of day `HH:MM` into seconds after midnight.
pub fn parse_clock(s: &str) -> Option<i64> {
    let (h, m) = s.trim().split_once(':')?;
    let ok = |x: &str| x.len() == 2 && x.bytes().all(|b| b.is_ascii_digit());
    if !ok(h) || !ok(m) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 3600 + m * 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix seconds of a UTC date, counted by hand from 1970 with the leap-year rule,
    /// not by the functions under test.
    fn oracle(y: i64, m: u32, d: u32) -> i64 {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let mut days = 0i64;
        for yy in 1970..y {
            days += if leap(yy) { 366 } else { 365 };
        }
        let lens = [
            31,
            if leap(y) { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        for len in &lens[..(m - 1) as usize] {
            days += len;
        }
        (days + i64::from(d) - 1) * DAY_S
    }

    #[test]
    fn civil_dates_match_a_day_by_day_count() {
        for y in [1970, 1999, 2000, 2024, 2026, 2100, 2400] {
            for m in 1..=12 {
                for d in [1, month_days(y, m)] {
                    assert_eq!(
                        days_from_civil(y, m, d) * DAY_S,
                        oracle(y, m, d),
                        "{y}-{m}-{d}"
                    );
                    assert_eq!(civil_from_days(oracle(y, m, d) / DAY_S), (y, m, d));
                }
            }
        }
    }

    #[test]
    fn month_bounds_follow_month_lengths_and_leap_years() {
        let p = Period::Month { reset_s: 0 };
        // February of a leap year (2024), of a century non-leap year (2100), of 2000.
        for (y, feb) in [(2024, 29), (2026, 28), (2100, 28), (2000, 29)] {
            let mid = oracle(y, 2, 10) + 5;
            let (s, e) = p.bounds(mid);
            assert_eq!(s, oracle(y, 2, 1));
            assert_eq!(e, oracle(y, 3, 1));
            assert_eq!((e - s) / DAY_S, feb);
        }
        // December rolls into January of the next year.
        let (s, e) = p.bounds(oracle(2026, 12, 31) + 86_399);
        assert_eq!((s, e), (oracle(2026, 12, 1), oracle(2027, 1, 1)));
        // The boundary instant belongs to the new period, the second before it to the old.
        assert_eq!(p.bounds(oracle(2026, 12, 1)).0, oracle(2026, 12, 1));
        assert_eq!(p.bounds(oracle(2026, 12, 1) - 1).0, oracle(2026, 11, 1));
    }

    #[test]
    fn a_reset_time_shifts_every_calendar_boundary() {
        let six = 6 * 3600;
        let p = Period::Month { reset_s: six };
        // 05:59 on the 1st still belongs to the month before.
        let t = oracle(2026, 11, 1) + six - 60;
        assert_eq!(
            p.bounds(t),
            (oracle(2026, 10, 1) + six, oracle(2026, 11, 1) + six)
        );
        let d = Period::Day { reset_s: six };
        assert_eq!(
            d.bounds(oracle(2026, 11, 24) + 3600).0,
            oracle(2026, 11, 23) + six
        );
    }

    #[test]
    fn weeks_start_on_monday() {
        let p = Period::Week { reset_s: 0 };
        // 2026-11-23 is a Monday (2026-11-24, a Tuesday, is 7 days after 2026-11-17).
        let monday = oracle(2026, 11, 23);
        assert_eq!(
            p.bounds(oracle(2026, 11, 24) + 100),
            (monday, monday + 7 * DAY_S)
        );
        assert_eq!(p.bounds(oracle(2026, 11, 29) + 86_399).0, monday);
        assert_eq!(p.bounds(oracle(2026, 11, 30)).0, oracle(2026, 11, 30));
        // Before the epoch too: 1969-12-29 was a Monday.
        assert_eq!(p.bounds(0).0, -3 * DAY_S);
    }

    #[test]
    fn custom_lengths_count_from_their_anchor_both_ways() {
        let anchor = oracle(2026, 1, 1) + 6 * 3600;
        let p = Period::Every {
            length_s: 10 * DAY_S,
            anchor,
        };
        assert_eq!(p.bounds(anchor), (anchor, anchor + 10 * DAY_S));
        assert_eq!(p.bounds(anchor + 25 * DAY_S).0, anchor + 20 * DAY_S);
        assert_eq!(p.bounds(anchor - 1), (anchor - 10 * DAY_S, anchor));
    }

    #[test]
    fn dates_and_clocks_parse_strictly() {
        assert_eq!(parse_utc("2026-11-24"), Some(oracle(2026, 11, 24)));
        assert_eq!(
            parse_utc("2024-02-29T06:30Z"),
            Some(oracle(2024, 2, 29) + 6 * 3600 + 1800)
        );
        assert_eq!(parse_utc("2026-02-29"), None);
        assert_eq!(parse_utc("2026-13-01"), None);
        assert_eq!(parse_clock("24:00"), None);
        assert_eq!(parse_clock("6:00"), None);
        assert_eq!(parse_clock("23:59"), Some(86_340));
        assert_eq!(
            crate::report::paragraph::fmt_utc(oracle(2026, 11, 24) + 3661),
            "2026-11-24T01:01:01"
        );
    }
}
