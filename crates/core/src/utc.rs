//! Dates and times in UTC, as Slurm's sacct prints and takes them, without a calendar
//! library: the proleptic Gregorian calendar by day counts.

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d`.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    // Count from 0000-03-01, so the leap day ends each 400-year era's year.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of `days` since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days in month `m` of year `y`.
pub fn month_days(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A Unix time as `YYYY-MM-DDTHH:MM:SS` in UTC (what sacct prints for End).
pub fn fmt_utc(unix: i64) -> String {
    let (year, month, day) = civil_from_days(unix.div_euclid(86_400));
    let secs = unix.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Parse `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS]` (UTC, as sacct's --starttime takes it)
/// into Unix seconds; `None` when it is not such a date.
pub fn parse_utc(s: &str) -> Option<i64> {
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || day < 1 || day > i64::from(month_days(year, month as u32)) {
        return None;
    }
    let secs = match time {
        None => 0,
        Some(t) => {
            let mut p = t.split(':');
            let h: i64 = p.next()?.parse().ok()?;
            let m: i64 = p.next()?.parse().ok()?;
            let sec: i64 = match p.next() {
                Some(x) => x.parse().ok()?,
                None => 0,
            };
            if p.next().is_some()
                || !(0..24).contains(&h)
                || !(0..60).contains(&m)
                || !(0..60).contains(&sec)
            {
                return None;
            }
            h * 3600 + m * 60 + sec
        }
    };
    let days = days_from_civil(year, month as u32, day as u32);
    Some(days * 86_400 + secs)
}
