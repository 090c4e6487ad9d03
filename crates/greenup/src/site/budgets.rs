//! Reading the `budgets:` section of the site config into [`crate::budget::Budget`]s.
//! Every error names the file, line, key and value, and says what is valid.

use std::collections::BTreeMap;

use greenup_core::quantity::{Ghz, Joules};
use serde::Deserialize;
use serde_json::Value;

use super::check::{Checker, in_file_order, shown};
use crate::budget::{Action, Budget, Level, Period, Scope, period};
use crate::input::{InputError, Spanned};
use crate::names;

/// Most warning levels one budget may have.
const MAX_LEVELS: usize = 16;

/// `budgets:` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudgets {
    #[serde(default)]
    site: Option<Spanned<RawBudget>>,
    #[serde(default)]
    partitions: BTreeMap<String, Spanned<RawBudget>>,
    #[serde(default)]
    accounts: BTreeMap<String, Spanned<RawBudget>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    amount: Spanned<Value>,
    period: Spanned<Value>,
    #[serde(default)]
    reset: Option<Spanned<Value>>,
    #[serde(default)]
    start: Option<Spanned<Value>>,
    #[serde(default)]
    levels: Vec<Spanned<RawLevel>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLevel {
    at: Spanned<Value>,
    #[serde(default)]
    policy: Option<Spanned<Value>>,
    #[serde(default)]
    policy_file: Option<Spanned<Value>>,
    #[serde(default)]
    power_share: Option<Spanned<Value>>,
    #[serde(default)]
    max_freq: Option<Spanned<Value>>,
    #[serde(default)]
    refuse: Option<Spanned<Value>>,
}

const PERIOD_VALID: &str =
    "day, week, month, or a custom length such as 36h or 10d (with start: YYYY-MM-DDTHH:MM, UTC)";
const ACTION_VALID: &str = "exactly one action: policy: NAME, policy_file: PATH, power_share: PERCENT, max_freq: GHZ or refuse: true";

/// A frequency ceiling: `2.0` or `2.0GHz` (GHz) or `2000MHz`, above 0 and at most 100 GHz.
fn ghz(v: &Value) -> Option<f64> {
    let (text, scale) = match v {
        Value::Number(n) => return n.as_f64().filter(|f| *f > 0.0 && *f <= 100.0),
        Value::String(s) => {
            let s = s.trim();
            if let Some(n) = s.strip_suffix("GHz") {
                (n, 1.0)
            } else if let Some(n) = s.strip_suffix("MHz") {
                (n, 1.0e-3)
            } else {
                (s, 1.0)
            }
        }
        _ => return None,
    };
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let f = text.parse::<f64>().ok()? * scale;
    (f > 0.0 && f <= 100.0).then_some(f)
}

/// A percentage `80%` as the fraction 0.8, within `(0, hi]`.
fn percent(v: &Value, hi: f64) -> Option<f64> {
    let s = v.as_str()?.trim();
    let n = s.strip_suffix('%')?.trim();
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let x: f64 = n.parse().ok()?;
    (x > 0.0 && x <= hi).then_some(x / 100.0)
}

/// A custom period length `36h`, `10d`, `90m` in seconds (at least an hour).
fn length(s: &str) -> Option<i64> {
    let s = s.trim();
    let unit = s.chars().last()?;
    let n: i64 = s[..s.len() - unit.len_utf8()].parse().ok()?;
    let secs = match unit {
        'm' => n.checked_mul(60)?,
        'h' => n.checked_mul(3600)?,
        'd' => n.checked_mul(period::DAY_S)?,
        _ => return None,
    };
    (3600..=366 * period::DAY_S).contains(&secs).then_some(secs)
}

impl Checker<'_> {
    /// Every budget in `raw`, site first, then partitions and accounts in file order.
    pub(super) fn budgets(
        &self,
        raw: Option<Spanned<RawBudgets>>,
        partitions: &BTreeMap<String, super::Partition>,
        allowed_policies: &[String],
    ) -> Result<Vec<Budget>, InputError> {
        let Some(raw) = raw else { return Ok(vec![]) };
        let raw = raw.value;
        let mut out = vec![];
        if let Some(b) = raw.site {
            out.push(self.budget(Scope::Site, "budgets.site", b, allowed_policies)?);
        }
        for (name, b) in in_file_order(raw.partitions) {
            let key = format!("budgets.partitions.{name}");
            if !partitions.contains_key(&name) {
                let known: Vec<&str> = partitions.keys().map(String::as_str).collect();
                return Err(self.err(
                    &b,
                    &key,
                    &name,
                    format!("a partition from partitions: {}", known.join(", ")),
                ));
            }
            out.push(self.budget(Scope::Partition(name), &key, b, allowed_policies)?);
        }
        for (name, b) in in_file_order(raw.accounts) {
            let key = format!("budgets.accounts.{name}");
            if !names::is_name(&name) {
                return Err(self.err(
                    &b,
                    &key,
                    &name,
                    format!("a Slurm account name of {}", names::NAME_RULE),
                ));
            }
            out.push(self.budget(Scope::Account(name), &key, b, allowed_policies)?);
        }
        Ok(out)
    }

    fn budget(
        &self,
        scope: Scope,
        key: &str,
        raw: Spanned<RawBudget>,
        allowed_policies: &[String],
    ) -> Result<Budget, InputError> {
        let b = raw.value;
        let amount_j = Joules(self.energy(&b.amount, &format!("{key}.amount"))?);
        let period = self.period(&b, key)?;
        let mut levels: Vec<Level> = vec![];
        if b.levels.len() > MAX_LEVELS {
            return Err(self.err(
                &b.levels[MAX_LEVELS],
                &format!("{key}.levels"),
                format!("{} levels", b.levels.len()),
                format!("at most {MAX_LEVELS} warning levels"),
            ));
        }
        for (i, l) in b.levels.into_iter().enumerate() {
            let lkey = format!("{key}.levels[{i}]");
            let level = self.level(&lkey, l, allowed_policies)?;
            levels.push(level);
        }
        levels.sort_by(|a, b| a.at.total_cmp(&b.at));
        if let Some(w) = levels.windows(2).find(|w| w[0].at == w[1].at) {
            return Err(InputError::new(
                crate::input::Origin::Path(self.path.to_path_buf()),
                format!("{key}.levels"),
                format!("{}%", w[0].at * 100.0),
                "each level at a different percentage",
            ));
        }
        Ok(Budget {
            scope,
            amount_j,
            period,
            levels,
        })
    }

    fn period(&self, b: &RawBudget, key: &str) -> Result<Period, InputError> {
        let pkey = format!("{key}.period");
        let written = self.text(&b.period, &pkey, PERIOD_VALID)?;
        let reset_s = match &b.reset {
            Some(r) => {
                let rkey = format!("{key}.reset");
                let valid = "a UTC time of day HH:MM, e.g. 06:00";
                let t = self.text(r, &rkey, valid)?;
                Some(period::parse_clock(&t).ok_or_else(|| self.err(r, &rkey, &t, valid))?)
            }
            None => None,
        };
        let calendar = |reset_s: i64| match written.as_str() {
            "day" => Some(Period::Day { reset_s }),
            "week" => Some(Period::Week { reset_s }),
            "month" => Some(Period::Month { reset_s }),
            _ => None,
        };
        if let Some(p) = calendar(reset_s.unwrap_or(0)) {
            if let Some(s) = &b.start {
                return Err(self.err(
                    s,
                    &format!("{key}.start"),
                    shown(&s.value),
                    format!("no start with period {written}; a calendar period starts at reset (HH:MM UTC)"),
                ));
            }
            return Ok(p);
        }
        let length_s =
            length(&written).ok_or_else(|| self.err(&b.period, &pkey, &written, PERIOD_VALID))?;
        if let Some(r) = &b.reset {
            return Err(self.err(
                r,
                &format!("{key}.reset"),
                shown(&r.value),
                "no reset with a custom period length; give start: YYYY-MM-DDTHH:MM (UTC)",
            ));
        }
        let skey = format!("{key}.start");
        let valid = "a UTC date and time YYYY-MM-DDTHH:MM at which a period starts";
        let Some(s) = &b.start else {
            return Err(self.err(
                &b.period,
                &pkey,
                &written,
                format!("a custom length needs {skey}: {valid}"),
            ));
        };
        let text = self.text(s, &skey, valid)?;
        let anchor = period::parse_utc(&text).ok_or_else(|| self.err(s, &skey, &text, valid))?;
        Ok(Period::Every { length_s, anchor })
    }

    fn level(
        &self,
        key: &str,
        raw: Spanned<RawLevel>,
        allowed_policies: &[String],
    ) -> Result<Level, InputError> {
        let l = &raw.value;
        let at = percent(&l.at.value, 1000.0).ok_or_else(|| {
            self.err(
                &l.at,
                &format!("{key}.at"),
                shown(&l.at.value),
                "a percentage of the amount such as 80%, above 0% and at most 1000%",
            )
        })?;
        let given = [
            l.policy.is_some(),
            l.policy_file.is_some(),
            l.power_share.is_some(),
            l.max_freq.is_some(),
            l.refuse.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(self.err(
                &raw,
                key,
                format!("at {}", shown(&l.at.value)),
                ACTION_VALID,
            ));
        }
        let action = if let Some(v) = &l.policy {
            let k = format!("{key}.policy");
            let name = self.text(v, &k, "a policy name, e.g. min-energy")?;
            self.forced_policy(v, &k, &name, allowed_policies)?;
            Action::Policy(name)
        } else if let Some(v) = &l.policy_file {
            let k = format!("{key}.policy_file");
            let file = self.text(v, &k, "a policy YAML file")?;
            let path = self.base.join(&file);
            let policy = crate::policy::Policy::load(&path)?;
            self.forced_policy(v, &k, &policy.name, allowed_policies)?;
            Action::PolicyFile(path)
        } else if let Some(v) = &l.power_share {
            let share = percent(&v.value, 100.0).ok_or_else(|| {
                self.err(
                    v,
                    &format!("{key}.power_share"),
                    shown(&v.value),
                    "a percentage above 0% and at most 100%, e.g. 50%",
                )
            })?;
            Action::PowerShare(share)
        } else if let Some(v) = &l.max_freq {
            let f = ghz(&v.value).ok_or_else(|| {
                self.err(
                    v,
                    &format!("{key}.max_freq"),
                    shown(&v.value),
                    "a frequency such as 2.0GHz or 1800MHz (a bare number is GHz), above 0 and at most 100 GHz",
                )
            })?;
            Action::MaxFreqGhz(Ghz(f))
        } else {
            let v = l
                .refuse
                .as_ref()
                .ok_or_else(|| self.err(&raw, key, "", ACTION_VALID))?;
            if v.value != Value::Bool(true) {
                return Err(self.err(
                    v,
                    &format!("{key}.refuse"),
                    shown(&v.value),
                    "true (leave the level out to not refuse)",
                ));
            }
            Action::Refuse
        };
        Ok(Level { at, action })
    }

    /// A policy a level forces must be one users could be given.
    fn forced_policy(
        &self,
        v: &Spanned<Value>,
        key: &str,
        name: &str,
        allowed: &[String],
    ) -> Result<(), InputError> {
        if !names::is_name(name) {
            return Err(self.err(
                v,
                key,
                name,
                format!("a policy name of {}", names::NAME_RULE),
            ));
        }
        if !allowed.is_empty() && !allowed.iter().any(|a| a == name) {
            return Err(self.err(
                v,
                key,
                name,
                format!(
                    "a policy in allowed_policies ({}); add {name} there too",
                    allowed.join(", ")
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percents_and_lengths_parse_strictly() {
        assert_eq!(percent(&Value::String("80%".into()), 1000.0), Some(0.8));
        assert_eq!(percent(&Value::String("0%".into()), 1000.0), None);
        assert_eq!(percent(&Value::String("80".into()), 1000.0), None);
        assert_eq!(percent(&Value::String("-5%".into()), 1000.0), None);
        assert_eq!(percent(&Value::String("150%".into()), 100.0), None);
        assert_eq!(length("36h"), Some(36 * 3600));
        assert_eq!(length("10d"), Some(10 * 86_400));
        assert_eq!(length("30m"), None);
        assert_eq!(length("400d"), None);
        assert_eq!(length("h"), None);
    }

    #[test]
    fn frequency_ceilings_parse_in_ghz_or_mhz() {
        let s = |t: &str| ghz(&Value::String(t.into()));
        assert_eq!(s("2.0GHz"), Some(2.0));
        assert_eq!(s("1800MHz"), Some(1.8));
        assert_eq!(s("2.2"), Some(2.2));
        assert_eq!(ghz(&serde_json::json!(1.6)), Some(1.6));
        assert_eq!(s("0GHz"), None);
        assert_eq!(s("-1GHz"), None);
        assert_eq!(s("2 kHz"), None);
        assert_eq!(ghz(&serde_json::json!(true)), None);
    }
}
