//! Energy, power and time as people write them: `20MJ`, `1.5 kWh`, `2kW`,
//! `2:00:00`, `1-12`, and the same quantities printed back for reports.
//!
//! Unit names are case-insensitive, so `kwh`, `KWh` and `kWh` all mean
//! kilowatt-hours. There is no milli prefix: `m`/`M` always means mega,
//! because no job or site cap is ever a thousandth of a joule or watt.

/// Joules per unit, by lower-case unit name.
const ENERGY_UNITS: &[(&str, f64)] = &[
    ("j", 1.0),
    ("kj", 1e3),
    ("mj", 1e6),
    ("gj", 1e9),
    ("wh", 3.6e3),
    ("kwh", 3.6e6),
    ("mwh", 3.6e9),
];

/// Watts per unit, by lower-case unit name.
const POWER_UNITS: &[(&str, f64)] = &[("w", 1.0), ("kw", 1e3), ("mw", 1e6)];

const ENERGY_VALID: &str =
    "a positive number with an optional unit J, kJ, MJ, GJ, Wh, kWh or MWh (e.g. 20MJ, 1.5kWh)";
const POWER_VALID: &str = "a positive number with an optional unit W, kW or MW (e.g. 2kW, 350W)";
const TIME_VALID: &str =
    "a Slurm time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED";

/// A quantity as written that is not one greenup reads; the message quotes the text and
/// lists what would have been accepted, so the person can fix it without the manual.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a positive energy in a known unit.
    #[error("invalid energy '{text}': expected {}", ENERGY_VALID)]
    Energy {
        /// The text as written.
        text: String,
    },
    /// Not a positive power in a known unit.
    #[error("invalid power '{text}': expected {}", POWER_VALID)]
    Power {
        /// The text as written.
        text: String,
    },
    /// Not a time in one of Slurm's formats.
    #[error("invalid time '{text}': expected {}", TIME_VALID)]
    Time {
        /// The text as written.
        text: String,
    },
}

/// Parse an energy such as `20MJ`, `1.5 kWh` or `5000` (joules) into joules.
///
/// The value must be finite and greater than zero, since energies people write are caps.
pub fn parse_energy(s: &str) -> Result<f64, UnitError> {
    parse_quantity(s, ENERGY_UNITS, "J").map_err(|_| UnitError::Energy {
        text: s.to_string(),
    })
}

/// Parse a power such as `2kW`, `350 W` or `1500` (watts) into watts.
///
/// The value must be finite and greater than zero, since powers people write are caps.
pub fn parse_power(s: &str) -> Result<f64, UnitError> {
    parse_quantity(s, POWER_UNITS, "W").map_err(|_| UnitError::Power {
        text: s.to_string(),
    })
}

/// A positive number followed by an optional unit from `units`; a bare number is in `base`.
fn parse_quantity(s: &str, units: &[(&str, f64)], base: &str) -> Result<f64, ()> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num = num.trim();
    // Only plain decimals: no sign, no "inf"/"nan", and no exponent (an "e" would be read as a unit).
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(());
    }
    let value: f64 = num.parse().map_err(|_| ())?;
    let unit = if unit.is_empty() {
        base.to_ascii_lowercase()
    } else {
        unit.to_ascii_lowercase()
    };
    let factor = units
        .iter()
        .find(|(u, _)| *u == unit)
        .map(|(_, f)| *f)
        .ok_or(())?;
    let out = value * factor;
    if out.is_finite() && out > 0.0 {
        Ok(out)
    } else {
        Err(())
    }
}

/// Parse a Slurm time limit into seconds; `UNLIMITED`, `INFINITE` and `0` mean no limit (`None`).
///
/// Accepts `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` and `D-HH:MM:SS`, as sbatch `--time` does.
/// The leading field may be any size (`90` is 90 minutes); the fields after it must be below
/// 60 (minutes, seconds) or 24 (hours after a day count).
pub fn parse_time(s: &str) -> Result<Option<f64>, UnitError> {
    let bad = || UnitError::Time {
        text: s.to_string(),
    };
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") {
        return Ok(None);
    }
    let field = |x: &str, limit: Option<u64>| -> Result<u64, UnitError> {
        if x.is_empty() || x.len() > 9 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let v: u64 = x.parse().map_err(|_| bad())?;
        match limit {
            Some(l) if v >= l => Err(bad()),
            _ => Ok(v),
        }
    };
    let secs = match t.split_once('-') {
        Some((days, rest)) => {
            let d = field(days, None)?;
            let parts: Vec<&str> = rest.split(':').collect();
            let (h, m, sec) = match parts.as_slice() {
                [h] => (field(h, Some(24))?, 0, 0),
                [h, m] => (field(h, Some(24))?, field(m, Some(60))?, 0),
                [h, m, sec] => (
                    field(h, Some(24))?,
                    field(m, Some(60))?,
                    field(sec, Some(60))?,
                ),
                _ => return Err(bad()),
            };
            ((d * 24 + h) * 60 + m) * 60 + sec
        }
        None => {
            let parts: Vec<&str> = t.split(':').collect();
            match parts.as_slice() {
                [m] => field(m, None)? * 60,
                [m, sec] => field(m, None)? * 60 + field(sec, Some(60))?,
                [h, m, sec] => {
                    (field(h, None)? * 60 + field(m, Some(60))?) * 60 + field(sec, Some(60))?
                }
                _ => return Err(bad()),
            }
        }
    };
    Ok(if secs == 0 { None } else { Some(secs as f64) })
}

/// Joules as a short human string with three significant digits: `950 J`, `20.0 MJ`.
pub fn format_energy(joules: f64) -> String {
    scaled(joules, &[(1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ"), (1.0, "J")])
}

/// Watts as a short human string with three significant digits: `350 W`, `1.50 kW`.
pub fn format_power(watts: f64) -> String {
    scaled(watts, &[(1e6, "MW"), (1e3, "kW"), (1.0, "W")])
}

/// Pick the largest unit the magnitude reaches and print three significant digits.
fn scaled(x: f64, units: &[(f64, &str)]) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let (factor, unit) = units
        .iter()
        .find(|(f, _)| x.abs() >= *f)
        .or(units.last())
        .copied()
        .unwrap_or((1.0, ""));
    let v = x / factor;
    let decimals = if v.abs() >= 100.0 || v == 0.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$} {unit}")
}

/// Seconds as Slurm prints elapsed time (`[D-]HH:MM:SS`); below a minute, as `12.3 s`.
pub fn format_duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return format!("{seconds}");
    }
    if seconds.abs() < 59.95 {
        return format!("{seconds:.1} s");
    }
    let sign = if seconds < 0.0 { "-" } else { "" };
    let total = seconds.abs().round() as u64;
    let (d, rem) = (total / 86_400, total % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if d > 0 {
        format!("{sign}{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn energy_units() {
        let cases = [
            ("5000", 5000.0),
            ("5000J", 5000.0),
            ("2.5kJ", 2500.0),
            ("20MJ", 20e6),
            ("20 MJ", 20e6),
            ("20mj", 20e6),
            ("1GJ", 1e9),
            ("1Wh", 3600.0),
            ("1.5kWh", 5.4e6),
            ("1.5 KWH", 5.4e6),
            ("2MWh", 7.2e9),
            (" 3kj ", 3000.0),
            (".5MJ", 5e5),
        ];
        for (s, want) in cases {
            let got = parse_energy(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert!(close(got, want), "{s}: {got} != {want}");
        }
    }

    #[test]
    fn power_units() {
        for (s, want) in [
            ("350", 350.0),
            ("350W", 350.0),
            ("2kW", 2000.0),
            ("2 kw", 2000.0),
            ("1.25MW", 1.25e6),
        ] {
            let got = parse_power(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert!(close(got, want), "{s}: {got} != {want}");
        }
    }

    #[test]
    fn bad_energy_names_value_and_units() {
        for s in [
            "", "MJ", "20XJ", "-5MJ", "0", "0kJ", "inf", "nan", "1e6", "20 M J", "1.2.3J", "20kW",
            "+5J", "20MJs",
        ] {
            let e = parse_energy(s).expect_err(s);
            let e = e.to_string();
            assert!(
                e.contains(&format!("'{s}'")) && e.contains("kWh"),
                "{s}: {e}"
            );
        }
    }

    #[test]
    fn bad_power_names_value_and_units() {
        for s in ["", "kW", "2kWh", "-1W", "0W", "2 GW", "abc", "1,5kW"] {
            let e = parse_power(s).expect_err(s);
            let e = e.to_string();
            assert!(
                e.contains(&format!("'{s}'")) && e.contains("kW"),
                "{s}: {e}"
            );
        }
    }

    #[test]
    fn slurm_times() {
        let cases = [
            ("30", 1800.0),
            ("90", 5400.0),
            ("5:30", 330.0),
            ("2:00:00", 7200.0),
            ("1:02:03", 3723.0),
            ("1-0", 86400.0),
            ("1-12", 129600.0),
            ("2-03:04", 2.0 * 86400.0 + 3.0 * 3600.0 + 240.0),
            ("1-01:01:01", 86400.0 + 3661.0),
            ("0:30", 30.0),
        ];
        for (s, want) in cases {
            assert_eq!(
                parse_time(s).unwrap_or_else(|e| panic!("{s}: {e}")),
                Some(want),
                "{s}"
            );
        }
    }

    #[test]
    fn unlimited_times() {
        for s in [
            "UNLIMITED",
            "unlimited",
            "INFINITE",
            "Infinite",
            "0",
            "0:00",
            "0-0",
        ] {
            assert_eq!(parse_time(s).unwrap(), None, "{s}");
        }
    }

    #[test]
    fn bad_times_name_value_and_formats() {
        for s in [
            "",
            "abc",
            "1:2:3:4",
            "1-2-3",
            "-5",
            "1:60",
            "1:60:00",
            "1-24",
            "1-1:1:1:1",
            "5m",
            "1.5",
            "1-",
            ":",
            "1:-1",
        ] {
            let e = parse_time(s).expect_err(s);
            let e = e.to_string();
            assert!(
                e.contains(&format!("'{s}'")) && e.contains("D-HH:MM:SS"),
                "{s}: {e}"
            );
        }
    }

    #[test]
    fn energy_formatting() {
        assert_eq!(format_energy(950.0), "950 J");
        assert_eq!(format_energy(20e6), "20.0 MJ");
        assert_eq!(format_energy(1234.0), "1.23 kJ");
        assert_eq!(format_energy(3.2e9), "3.20 GJ");
        assert_eq!(format_energy(0.0), "0 J");
    }

    #[test]
    fn power_formatting() {
        assert_eq!(format_power(350.0), "350 W");
        assert_eq!(format_power(1500.0), "1.50 kW");
        assert_eq!(format_power(2.5e6), "2.50 MW");
    }

    #[test]
    fn duration_formatting() {
        assert_eq!(format_duration(12.34), "12.3 s");
        assert_eq!(format_duration(3723.0), "01:02:03");
        assert_eq!(format_duration(86400.0 + 3661.0), "1-01:01:01");
        assert_eq!(format_duration(60.0), "00:01:00");
    }

    #[test]
    fn formatted_values_parse_back() {
        for j in [950.0, 20e6, 3.2e9] {
            let s = format_energy(j).replace(' ', "");
            assert!(close(parse_energy(&s).unwrap(), j), "{s}");
        }
        assert_eq!(
            parse_time(&format_duration(86400.0 + 3661.0)).unwrap(),
            Some(86400.0 + 3661.0)
        );
    }
}
