//! The job options users give to sbatch, salloc and srun, how they are checked before
//! anything is submitted, and how they travel to the nodes.

use std::path::Path;

use greenup::input::{InputError, Origin};
use greenup::policy::PolicySet;
use greenup::profile::Profile;
use greenup::site::Site;
use greenup::units;

/// `--energy-policy=NAME`.
pub const OPT_POLICY: &str = "energy-policy";
/// `--energy-cap=ENERGY`.
pub const OPT_ENERGY_CAP: &str = "energy-cap";
/// `--power-cap=POWER`.
pub const OPT_POWER_CAP: &str = "power-cap";
/// `--energy-profile=NAME`.
pub const OPT_PROFILE: &str = "energy-profile";
/// `--energy-report`.
pub const OPT_REPORT: &str = "energy-report";
/// `--energy-min-nodes=N`.
pub const OPT_MIN_NODES: &str = "energy-min-nodes";
/// `--energy-comm=on|off`.
pub const OPT_COMM: &str = "energy-comm";
/// `--energy-quote`.
pub const OPT_QUOTE: &str = "energy-quote";

/// The largest node count `--energy-min-nodes` accepts.
pub const MAX_NODES: usize = 1_000_000;

/// Every option: name, value placeholder (None: a flag), and usage line.
pub const OPTIONS: [(&str, Option<&str>, &str); 8] = [
    (
        OPT_POLICY,
        Some("NAME"),
        "greenup: energy policy for this job (see `greenup policy list`)",
    ),
    (
        OPT_ENERGY_CAP,
        Some("ENERGY"),
        "greenup: energy cap for the whole job, e.g. 20MJ or 5kWh",
    ),
    (
        OPT_POWER_CAP,
        Some("POWER"),
        "greenup: power cap for the whole job, e.g. 2kW",
    ),
    (
        OPT_PROFILE,
        Some("NAME"),
        "greenup: application profile from the site's profile directory",
    ),
    (
        OPT_REPORT,
        None,
        "greenup: print predicted against measured time and energy at the end",
    ),
    (
        OPT_MIN_NODES,
        Some("N"),
        "greenup: the decision may give back allocated nodes, keeping at least N",
    ),
    (
        OPT_COMM,
        Some("on|off"),
        "greenup: lower the core's frequency while MPI ranks wait in large or long calls",
    ),
    (
        OPT_QUOTE,
        None,
        "greenup: print the job's energy quote and budgets left, and submit nothing",
    ),
];

/// Job-control variables carrying checked options to the prolog, epilog and steps,
/// where Slurm shows them with a `SPANK_` prefix.
pub const ENV_POLICY: &str = "GREENUP_POLICY";
/// The energy cap in joules.
pub const ENV_ENERGY_CAP_J: &str = "GREENUP_ENERGY_CAP_J";
/// The power cap in watts.
pub const ENV_POWER_CAP_W: &str = "GREENUP_POWER_CAP_W";
/// The profile name.
pub const ENV_PROFILE: &str = "GREENUP_PROFILE";
/// `1` when --energy-report was given.
pub const ENV_REPORT: &str = "GREENUP_REPORT";
/// The fewest nodes the decision may keep.
pub const ENV_MIN_NODES: &str = "GREENUP_MIN_NODES";
/// `on` or `off` when --energy-comm was given.
pub const ENV_COMM: &str = "GREENUP_COMM";

/// The options as the user wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Raw {
    /// --energy-policy.
    pub policy: Option<String>,
    /// --energy-cap.
    pub energy_cap: Option<String>,
    /// --power-cap.
    pub power_cap: Option<String>,
    /// --energy-profile.
    pub profile: Option<String>,
    /// --energy-report.
    pub report: bool,
    /// --energy-min-nodes.
    pub min_nodes: Option<String>,
    /// --energy-comm.
    pub comm: Option<String>,
    /// --energy-quote.
    pub quote: bool,
}

impl Raw {
    /// True when the user gave no greenup option at all.
    pub fn is_empty(&self) -> bool {
        *self == Raw::default()
    }
}

/// The options after checking, in base units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// Policy name.
    pub policy: Option<String>,
    /// Energy cap in joules.
    pub energy_cap_j: Option<f64>,
    /// Power cap in watts.
    pub power_cap_w: Option<f64>,
    /// Profile name.
    pub profile: Option<String>,
    /// Whether to print a report at the end.
    pub report: bool,
    /// The fewest nodes the decision may keep (a shrink at start gives back the rest).
    pub min_nodes: Option<usize>,
    /// --energy-comm: communication-phase DVFS on or off whatever the policy says.
    pub comm: Option<bool>,
}

impl Checked {
    /// The job-control variables that carry these options.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(p) = &self.policy {
            out.push((ENV_POLICY, p.clone()));
        }
        if let Some(e) = self.energy_cap_j {
            out.push((ENV_ENERGY_CAP_J, e.to_string()));
        }
        if let Some(p) = self.power_cap_w {
            out.push((ENV_POWER_CAP_W, p.to_string()));
        }
        if let Some(p) = &self.profile {
            out.push((ENV_PROFILE, p.clone()));
        }
        if self.report {
            out.push((ENV_REPORT, "1".into()));
        }
        if let Some(n) = self.min_nodes {
            out.push((ENV_MIN_NODES, n.to_string()));
        }
        if let Some(on) = self.comm {
            out.push((ENV_COMM, if on { "on" } else { "off" }.into()));
        }
        out
    }

    /// Read the options back from variables, looked up by `get` (which adds any prefix).
    /// Values that do not parse are dropped: they were checked at submission.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Checked {
        let num = |k| {
            get(k)
                .and_then(|v: String| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        Checked {
            policy: get(ENV_POLICY).filter(|s| !s.is_empty()),
            energy_cap_j: num(ENV_ENERGY_CAP_J),
            power_cap_w: num(ENV_POWER_CAP_W),
            profile: get(ENV_PROFILE).filter(|s| !s.is_empty()),
            report: get(ENV_REPORT).as_deref() == Some("1"),
            min_nodes: get(ENV_MIN_NODES)
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|n| (1..=MAX_NODES).contains(n)),
            comm: get(ENV_COMM).as_deref().and_then(parse_on_off),
        }
    }
}

/// `on` or `off`, as --energy-comm takes them.
fn parse_on_off(v: &str) -> Option<bool> {
    match v.trim() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

fn opt_err(option: &str, message: impl Into<String>) -> InputError {
    InputError::bare(Origin::Option(format!("--{option}")), message)
}

/// Units only: what can be checked without the site config.
pub fn check_units(raw: &Raw) -> Result<Checked, InputError> {
    let energy_cap_j = raw
        .energy_cap
        .as_deref()
        .map(units::parse_energy)
        .transpose()
        .map_err(|e| opt_err(OPT_ENERGY_CAP, e.to_string()))?;
    let power_cap_w = raw
        .power_cap
        .as_deref()
        .map(units::parse_power)
        .transpose()
        .map_err(|e| opt_err(OPT_POWER_CAP, e.to_string()))?;
    for (opt, v) in [(OPT_POLICY, &raw.policy), (OPT_PROFILE, &raw.profile)] {
        if let Some(v) = v
            && !greenup::names::is_name(v)
        {
            return Err(opt_err(
                opt,
                format!(
                    "invalid name '{v}': expected a name of {}",
                    greenup::names::NAME_RULE
                ),
            ));
        }
    }
    let min_nodes = raw
        .min_nodes
        .as_deref()
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_NODES).contains(n))
                .ok_or_else(|| {
                    opt_err(
                        OPT_MIN_NODES,
                        format!(
                            "invalid node count '{v}': expected a whole number from 1 to {MAX_NODES}"
                        ),
                    )
                })
        })
        .transpose()?;
    let comm = raw
        .comm
        .as_deref()
        .map(|v| {
            parse_on_off(v).ok_or_else(|| {
                opt_err(OPT_COMM, format!("invalid value '{v}': expected on or off"))
            })
        })
        .transpose()?;
    Ok(Checked {
        comm,
        policy: raw.policy.clone(),
        energy_cap_j,
        power_cap_w,
        profile: raw.profile.clone(),
        report: raw.report,
        min_nodes,
    })
}

/// Check every option against the site: units, a known and allowed policy, a readable
/// and valid profile, and caps within the site's limits.
pub fn check(site: &Site, policies: &PolicySet, raw: &Raw) -> Result<Checked, InputError> {
    let c = check_units(raw)?;
    if let Some(p) = &c.policy {
        let allowed: Vec<&str> = if site.allowed_policies.is_empty() {
            policies.names()
        } else {
            site.allowed_policies
                .iter()
                .map(String::as_str)
                .filter(|n| policies.get(n).is_some())
                .collect()
        };
        if !allowed.contains(&p.as_str()) {
            return Err(opt_err(
                OPT_POLICY,
                format!(
                    "unknown policy '{p}': expected one of {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
    if let Some(name) = &c.profile {
        let origin = Origin::Option(format!("--{OPT_PROFILE}"));
        let cannot = |e: InputError| {
            let why = match e.origin {
                Origin::Option(_) => e.message(),
                _ => e.to_string(),
            };
            opt_err(
                OPT_PROFILE,
                format!("profile '{name}' cannot be used: {why}"),
            )
        };
        // `--energy-policy=monitor` (any policy that only records) with the name of an
        // application that has no profile yet records its runs under that name: they are
        // what its first version is learned from (`greenup profile learn`).
        let records_only = c
            .policy
            .as_deref()
            .and_then(|p| policies.get(p))
            .is_some_and(|p| p.monitor);
        if !records_only || greenup::profile::locate::exists(site, name) {
            let located = greenup::profile::locate::for_job(site, name, origin).map_err(cannot)?;
            Profile::load(&located.path).map_err(cannot)?;
        }
    }
    if let (Some(cap), Some(limit)) = (c.energy_cap_j, site.job_energy_limit_j)
        && cap > limit
    {
        return Err(opt_err(
            OPT_ENERGY_CAP,
            format!(
                "{} is above the site's job energy limit: expected at most {}",
                units::format_energy(cap),
                units::format_energy(limit)
            ),
        ));
    }
    if let (Some(cap), Some(limit)) = (c.power_cap_w, site.power_cap_w)
        && cap > limit
    {
        return Err(opt_err(
            OPT_POWER_CAP,
            format!(
                "{} is above the site's power cap: expected at most {}",
                units::format_power(cap),
                units::format_power(limit)
            ),
        ));
    }
    Ok(c)
}

/// Load the site config and its policies, then check `raw` against them.
pub fn check_with_config(config: &Path, raw: &Raw) -> Result<Checked, InputError> {
    let site = greenup::site::load(config)?;
    let policies = PolicySet::load(&site.policy_dirs)?;
    check(&site, &policies, raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The test cluster's site config, pointed at this repo's policies and test profiles.
    fn site() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = include_str!("../../tests/cluster/greenup.yaml")
            .replace(
                "/etc/greenup-test/policies",
                &root.join("policies").display().to_string(),
            )
            .replace(
                "/etc/greenup-test/profiles",
                &root.join("tests/cluster/profiles").display().to_string(),
            );
        let path = t.path().join("greenup.yaml");
        std::fs::write(&path, text).unwrap();
        (t, path)
    }

    fn raw(f: impl FnOnce(&mut Raw)) -> Raw {
        let mut r = Raw::default();
        f(&mut r);
        r
    }

    #[test]
    fn good_options_become_base_units_and_travel_as_variables() {
        let (_t, cfg) = site();
        let c = check_with_config(
            &cfg,
            &raw(|r| {
                r.policy = Some("max-dist".into());
                r.energy_cap = Some("5kWh".into());
                r.power_cap = Some("1.5kW".into());
                r.profile = Some("solver".into());
                r.report = true;
                r.min_nodes = Some("2".into());
                r.comm = Some("off".into());
            }),
        )
        .unwrap();
        assert_eq!(c.min_nodes, Some(2));
        assert_eq!(c.comm, Some(false));
        // 5 kWh = 5 * 3.6e6 J; 1.5 kW = 1500 W.
        assert_eq!(c.energy_cap_j, Some(18.0e6));
        assert_eq!(c.power_cap_w, Some(1500.0));
        let env = c.env();
        let back = Checked::from_env(|k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()));
        assert_eq!(back, c);
    }

    #[test]
    fn each_bad_option_is_one_line_naming_the_option_and_what_is_valid() {
        let (_t, cfg) = site();
        let cases: Vec<(Raw, &str)> = vec![
            (
                raw(|r| r.energy_cap = Some("20XJ".into())),
                "option --energy-cap: invalid energy '20XJ': expected",
            ),
            (
                raw(|r| r.power_cap = Some("0W".into())),
                "option --power-cap: invalid power '0W'",
            ),
            (
                raw(|r| r.policy = Some("fastest".into())),
                "option --energy-policy: unknown policy 'fastest': expected one of ",
            ),
            (
                raw(|r| r.profile = Some("nope".into())),
                "option --energy-profile: profile 'nope' cannot be used: ",
            ),
            (
                raw(|r| r.profile = Some("../x".into())),
                "option --energy-profile: invalid name '../x'",
            ),
            // The site allows at most 20 MJ per job and 2 kW.
            (
                raw(|r| r.energy_cap = Some("21MJ".into())),
                "option --energy-cap: 21",
            ),
            (
                raw(|r| r.power_cap = Some("2.5kW".into())),
                "option --power-cap: 2.5",
            ),
            (
                raw(|r| r.min_nodes = Some("0".into())),
                "option --energy-min-nodes: invalid node count '0': expected a whole number from 1 to 1000000",
            ),
            (
                raw(|r| r.min_nodes = Some("two".into())),
                "option --energy-min-nodes: invalid node count 'two'",
            ),
            (
                raw(|r| r.comm = Some("yes".into())),
                "option --energy-comm: invalid value 'yes': expected on or off",
            ),
        ];
        for (r, want) in cases {
            let e = check_with_config(&cfg, &r).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}\n  should start with {want}");
            assert!(!e.contains('\n'), "{e}");
        }
        // At the limit is allowed.
        assert!(check_with_config(&cfg, &raw(|r| r.energy_cap = Some("20MJ".into()))).is_ok());
        // An application with no profile yet, run explicitly under monitor, is recorded
        // under its name; under a policy that plans it is still refused, and a bad
        // name is refused even under monitor.
        let monitor = |p: &str| {
            raw(|r| {
                r.policy = Some("monitor".into());
                r.profile = Some(p.into());
            })
        };
        let c = check_with_config(&cfg, &monitor("newapp")).unwrap();
        assert_eq!(c.profile.as_deref(), Some("newapp"));
        let planned = raw(|r| {
            r.policy = Some("max-dist".into());
            r.profile = Some("newapp".into());
        });
        let e = check_with_config(&cfg, &planned).unwrap_err().to_string();
        assert!(e.starts_with("option --energy-profile: profile 'newapp' cannot be used"));
        let e = check_with_config(&cfg, &monitor("../x"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("option --energy-profile: invalid name '../x'"),
            "{e}"
        );
        assert!(check_with_config(&cfg, &raw(|r| r.power_cap = Some("2kW".into()))).is_ok());
    }

    #[test]
    fn variables_that_do_not_parse_are_dropped() {
        let c = Checked::from_env(|k| match k {
            ENV_ENERGY_CAP_J => Some("lots".into()),
            ENV_POWER_CAP_W => Some("-5".into()),
            ENV_POLICY => Some(String::new()),
            ENV_MIN_NODES => Some("0".into()),
            ENV_COMM => Some("1".into()),
            _ => None,
        });
        assert_eq!(c, Checked::default());
    }
}
