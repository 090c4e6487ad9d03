//! Named policies: an objective plus constraints, one YAML file each, loaded
//! from the site's policy directories (`policies/*.yaml`). A site adds a policy
//! by dropping a file there; no code changes.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use greenup_core::quantity::Ghz;
use greenup_wire::settings::NodeSettings;
use serde::Deserialize;

use crate::comm::{CommDvfs, GuardTerms, WaitMode};
use crate::input::{InputError, Origin, Spanned, file_origin, load_yaml};
use crate::model::gpus::Devices;
use crate::optimize::Objective;
use crate::units::{UnitError, parse_energy, parse_power};

/// Limits a policy adds to every job that uses it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PolicyConstraints {
    /// Most joules a job may use.
    pub energy_cap_j: Option<f64>,
    /// Most average watts a job may draw.
    pub power_cap_w: Option<f64>,
    /// Most slowdown against every node at maximum frequency (0.1 = 10 %).
    pub max_slowdown: Option<f64>,
    /// Least iso-energy-efficiency EE = E1 / Ep.
    pub min_ee: Option<f64>,
    /// Fewest and most nodes a job may use.
    pub nodes: Option<(usize, usize)>,
}

/// A named policy: what to optimize and within which limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The name users give, e.g. `min-energy`.
    pub name: String,
    /// One line for users.
    pub description: String,
    /// What to optimize.
    pub objective: Objective,
    /// Limits on top of the user's and the site's.
    pub constraints: PolicyConstraints,
    /// Record only: run every node at maximum frequency and change nothing.
    pub monitor: bool,
    /// Communication-phase DVFS in the job's MPI ranks (`comm_dvfs:`); absent: not asked for.
    pub comm_dvfs: Option<CommDvfs>,
    /// Which devices a decision may slow on GPU nodes: `cpu`, `gpu` or `both` (the default).
    pub devices: Devices,
    /// The file it came from.
    pub source: PathBuf,
}

/// Every policy a site offers, by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicySet {
    policies: BTreeMap<String, Policy>,
}

impl PolicySet {
    /// Load every `*.yaml` and `*.yml` file of `dirs`. When two directories define
    /// the same name, the earlier directory wins, so a site's own directory listed
    /// first overrides a shipped policy; the same name twice in one directory is an error.
    pub fn load(dirs: &[PathBuf]) -> Result<PolicySet, InputError> {
        let mut policies: BTreeMap<String, Policy> = BTreeMap::new();
        for dir in dirs {
            let read = std::fs::read_dir(dir).map_err(|e| {
                InputError::bare(
                    Origin::Path(dir.clone()),
                    format!("cannot read policy directory: {e}"),
                )
            })?;
            let mut files: Vec<PathBuf> = read
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    !p.is_dir()
                        && matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml"))
                })
                .collect();
            files.sort();
            let mut here: BTreeMap<String, PathBuf> = BTreeMap::new();
            for file in files {
                // A link out of the directory is refused, not followed (nor skipped).
                crate::input::inside(dir, &file)?;
                let policy = Policy::load(&file)?;
                if let Some(first) = here.get(&policy.name) {
                    return Err(InputError::new(
                        Origin::Path(file.clone()),
                        "name",
                        &policy.name,
                        format!("a name not already used by {}", first.display()),
                    ));
                }
                here.insert(policy.name.clone(), file);
                policies.entry(policy.name.clone()).or_insert(policy);
            }
        }
        Ok(PolicySet { policies })
    }

    /// The policy called `name`, if loaded.
    pub fn get(&self, name: &str) -> Option<&Policy> {
        self.policies.get(name)
    }

    /// Every policy name, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.policies.keys().map(String::as_str).collect()
    }

    /// Every policy, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Policy> {
        self.policies.values()
    }

    /// Add a policy from a file of its own (a budget level's `policy_file`); a name
    /// another file already gives is an error, the same file twice is not.
    pub fn add(&mut self, policy: Policy) -> Result<(), DuplicatePolicyError> {
        match self.policies.get(&policy.name) {
            Some(p) if p.source != policy.source => Err(DuplicatePolicyError {
                path: policy.source.clone(),
                name: policy.name.clone(),
                first: p.source.clone(),
            }),
            Some(_) => Ok(()),
            None => {
                self.policies.insert(policy.name.clone(), policy);
                Ok(())
            }
        }
    }
}

/// Two policy files that give the same name: a level forcing that name would be ambiguous.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: policy {name} is already defined by {}", path.display(), first.display())]
pub struct DuplicatePolicyError {
    /// The file added last.
    pub path: PathBuf,
    /// The name both files give.
    pub name: String,
    /// The file that gave the name first.
    pub first: PathBuf,
}

/// A cap as written: a number, or a number with a unit.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Quantity {
    Number(f64),
    Text(String),
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quantity::Number(n) => write!(f, "{n}"),
            Quantity::Text(s) => f.write_str(s),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    objective: Spanned<String>,
    #[serde(default)]
    constraints: Option<RawConstraints>,
    #[serde(default)]
    monitor: Option<bool>,
    #[serde(default)]
    comm_dvfs: Option<RawComm>,
    #[serde(default)]
    devices: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawComm {
    enabled: Option<bool>,
    threshold_bytes: Option<u64>,
    strided_threshold_bytes: Option<u64>,
    timeout_us: Option<Spanned<u64>>,
    low_ghz: Option<Spanned<f64>>,
    wait: Option<Spanned<String>>,
}

impl RawComm {
    /// The settings, each unset field from [`CommDvfs::default`].
    fn check(&self, path: &Path) -> Result<CommDvfs, InputError> {
        let d = CommDvfs::default();
        let wait = match &self.wait {
            None => d.wait,
            Some(w) => match w.value.as_str() {
                "poll" => WaitMode::Poll,
                "block" => WaitMode::Block,
                _ => {
                    return Err(InputError::at(path, w, "comm_dvfs.wait", "poll or block"));
                }
            },
        };
        let c = CommDvfs {
            enabled: self.enabled.unwrap_or(d.enabled),
            threshold_bytes: self.threshold_bytes.unwrap_or(d.threshold_bytes),
            strided_threshold_bytes: self
                .strided_threshold_bytes
                .unwrap_or(d.strided_threshold_bytes),
            timeout_us: self.timeout_us.as_ref().map_or(d.timeout_us, |t| t.value),
            low_ghz: self.low_ghz.as_ref().map(|f| Ghz(f.value)),
            wait,
        };
        // The rule lives in CommDvfs::invalid; point at the field it names.
        if let Some(why) = c.invalid() {
            return Err(match (&self.low_ghz, &self.timeout_us) {
                (Some(f), _) if why.starts_with("low_ghz") => InputError::at(
                    path,
                    f,
                    "comm_dvfs.low_ghz",
                    "a frequency in GHz above 0, e.g. 1.2",
                ),
                (_, Some(t)) => InputError::at(path, t, "comm_dvfs.timeout_us", why),
                _ => InputError::bare(Origin::Path(path.to_path_buf()), why),
            });
        }
        Ok(c)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstraints {
    energy_cap: Option<Spanned<Quantity>>,
    power_cap: Option<Spanned<Quantity>>,
    max_slowdown: Option<Spanned<f64>>,
    min_ee: Option<Spanned<f64>>,
    nodes: Option<Spanned<Quantity>>,
}

impl Policy {
    /// Read and check one policy file.
    pub fn load(path: &Path) -> Result<Policy, InputError> {
        let raw: RawPolicy = load_yaml(path)?;
        let name = &raw.name.value;
        if !crate::names::is_name(name) {
            return Err(InputError::at(
                path,
                &raw.name,
                "name",
                format!(
                    "a policy name of {}, e.g. min-energy",
                    crate::names::NAME_RULE
                ),
            ));
        }
        let objective = Objective::parse(&raw.objective.value).ok_or_else(|| {
            let names: Vec<&str> = Objective::ALL.iter().map(|o| o.name()).collect();
            InputError::at(
                path,
                &raw.objective,
                "objective",
                format!("one of {}", names.join(", ")),
            )
        })?;
        let mut constraints = PolicyConstraints::default();
        if let Some(c) = &raw.constraints {
            constraints.energy_cap_j = c
                .energy_cap
                .as_ref()
                .map(|q| positive(path, q, "constraints.energy_cap", "J", parse_energy))
                .transpose()?;
            constraints.power_cap_w = c
                .power_cap
                .as_ref()
                .map(|q| positive(path, q, "constraints.power_cap", "W", parse_power))
                .transpose()?;
            if let Some(s) = &c.max_slowdown {
                if !(s.value.is_finite() && s.value >= 0.0) {
                    return Err(InputError::at(
                        path,
                        s,
                        "constraints.max_slowdown",
                        "a fraction >= 0, e.g. 0.1 for 10 %",
                    ));
                }
                constraints.max_slowdown = Some(s.value);
            }
            if let Some(m) = &c.min_ee {
                if !(m.value > 0.0 && m.value <= 1.0) {
                    return Err(InputError::at(
                        path,
                        m,
                        "constraints.min_ee",
                        "a number in (0, 1], e.g. 0.8",
                    ));
                }
                constraints.min_ee = Some(m.value);
            }
            if let Some(n) = &c.nodes {
                let range = parse_range(&n.value.to_string()).ok_or_else(|| {
                    InputError::at(
                        path,
                        n,
                        "constraints.nodes",
                        "MIN-MAX or N with 1 <= MIN <= MAX, e.g. \"2-8\"",
                    )
                })?;
                constraints.nodes = Some(range);
            }
        }
        let comm_dvfs = raw.comm_dvfs.as_ref().map(|c| c.check(path)).transpose()?;
        let devices = match &raw.devices {
            None => Devices::default(),
            Some(d) => match d.value.as_str() {
                "cpu" => Devices::Cpu,
                "gpu" => Devices::Gpu,
                "both" => Devices::Both,
                _ => {
                    return Err(InputError::at(
                        path,
                        d,
                        "devices",
                        "cpu, gpu or both: which devices a decision may slow on GPU nodes",
                    ));
                }
            },
        };
        Ok(Policy {
            devices,
            name: name.clone(),
            description: raw.description.unwrap_or_default(),
            objective,
            constraints,
            monitor: raw.monitor.unwrap_or(false),
            comm_dvfs,
            source: path.to_path_buf(),
        })
    }
}

/// What a node weighs when it decides whether a job's MPI steps run greenup's runtime,
/// and how ([`runtime_for_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RuntimeAsk {
    /// The policy's communication-phase DVFS, as the decision carries it.
    pub policy: Option<CommDvfs>,
    /// The job's `--energy-comm`: `Some(true)` on, `Some(false)` off.
    pub option: Option<bool>,
    /// The decision's in-job guard terms, when they hold a baseline rate to guard with.
    pub guard: Option<GuardTerms>,
    /// Whether greenup keeps the run as its application's measured baseline.
    pub baseline: bool,
    /// The site's `dvfs.measure_baselines`.
    pub measure_baselines: bool,
}

impl RuntimeAsk {
    /// What a node's settings `s` (`None`: greenupd did not answer), the job's
    /// `--energy-comm` (`option`) and the site's `dvfs.measure_baselines` ask.
    pub fn of(
        s: Option<&NodeSettings>,
        option: Option<bool>,
        measure_baselines: bool,
    ) -> RuntimeAsk {
        RuntimeAsk {
            policy: s.and_then(|s| s.comm_dvfs),
            option,
            // Terms without a rate have nothing to judge by: no reason to load anything.
            guard: s
                .and_then(|s| s.guard)
                .filter(|t| t.off.is_none() && t.baseline_rate.is_some()),
            baseline: s.is_some_and(|s| s.baseline),
            measure_baselines,
        }
    }
}

/// How a job's MPI steps on a node run greenup's runtime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobRuntime {
    /// The runtime's settings; `enabled: false` measures only.
    pub comm: CommDvfs,
    /// The in-job guard's terms, when the runtime guards the run.
    pub guard: Option<GuardTerms>,
}

/// The one rule for which jobs' MPI steps run greenup's runtime, and in which mode:
/// lowering where the policy or `--energy-comm=on` asks for it; measuring only where a
/// baseline is there to guard with, or where the run is its application's measured
/// baseline and the site measures them (the guard's baseline rate comes from those
/// runs' counts); never under `--energy-comm=off`. `None`: the steps are left untouched.
pub fn runtime_for_job(ask: &RuntimeAsk) -> Option<JobRuntime> {
    // Measuring keeps the MPI's own waits: nothing is lowered, so nothing need block.
    let measuring = CommDvfs {
        enabled: false,
        wait: WaitMode::Poll,
        ..CommDvfs::default()
    };
    let comm = match ask.option {
        // The user's way out of an LD_PRELOAD they cannot have, whatever else asks.
        Some(false) => return None,
        Some(true) => Some(CommDvfs {
            enabled: true,
            ..ask.policy.unwrap_or_default()
        }),
        None => ask.policy,
    };
    let comm = comm
        .or(ask.guard.map(|_| measuring))
        .or((ask.baseline && ask.measure_baselines).then_some(measuring))?;
    Some(JobRuntime {
        comm,
        guard: ask.guard,
    })
}

/// A node range `MIN-MAX` or `N`.
pub fn parse_range(text: &str) -> Option<(usize, usize)> {
    let text = text.trim();
    let (lo, hi) = match text.split_once('-') {
        Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
        None => {
            let n = text.parse().ok()?;
            (n, n)
        }
    };
    (lo >= 1 && lo <= hi).then_some((lo, hi))
}

fn positive(
    path: &Path,
    q: &Spanned<Quantity>,
    key: &str,
    unit: &str,
    parse: fn(&str) -> Result<f64, UnitError>,
) -> Result<f64, InputError> {
    let v = match &q.value {
        Quantity::Number(n) => Ok(*n),
        Quantity::Text(s) => parse(s),
    };
    match v {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(InputError::new(
            file_origin(path, &q.referenced),
            key,
            &q.value,
            format!("a positive amount in {unit}"),
        )),
        Err(why) => Err(InputError::new(
            file_origin(path, &q.referenced),
            key,
            &q.value,
            why.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Policy, String> {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("p.yaml");
        std::fs::write(&p, text).unwrap();
        Policy::load(&p).map_err(|e| e.to_string())
    }

    const HEAD: &str = "name: p\nobjective: max_dist\n";

    #[test]
    fn comm_dvfs_takes_the_contract_defaults_for_what_it_leaves_out() {
        let p = load(&format!("{HEAD}comm_dvfs:\n  threshold_bytes: 4096\n")).unwrap();
        let c = p.comm_dvfs.unwrap();
        assert_eq!(c.threshold_bytes, 4096);
        assert_eq!(c.strided_threshold_bytes, 64 * 1024);
        assert_eq!(c.timeout_us, 500);
        assert_eq!(
            (c.enabled, c.low_ghz, c.wait),
            (true, None, WaitMode::Block)
        );
        assert_eq!(load(HEAD).unwrap().comm_dvfs, None);
    }

    #[test]
    fn devices_says_what_a_decision_may_slow_and_a_bad_value_is_one_line() {
        assert_eq!(load(HEAD).unwrap().devices, Devices::Both);
        assert_eq!(
            load(&format!("{HEAD}devices: gpu\n")).unwrap().devices,
            Devices::Gpu
        );
        let e = load(&format!("{HEAD}devices: fast\n")).unwrap_err();
        assert!(
            e.contains(":3:10: devices: invalid value 'fast': expected cpu, gpu or both"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_bad_comm_dvfs_field_is_one_line_with_its_place_and_what_is_valid() {
        for (body, want) in [
            (
                "comm_dvfs:\n  low_ghz: -1\n",
                ":4:12: comm_dvfs.low_ghz: invalid value '-1': expected a frequency in GHz above 0",
            ),
            (
                "comm_dvfs:\n  wait: spin\n",
                ":4:9: comm_dvfs.wait: invalid value 'spin': expected poll or block",
            ),
            (
                "comm_dvfs:\n  timeout_us: 61000000\n",
                ":4:15: comm_dvfs.timeout_us: invalid value '61000000': expected timeout_us 61000000 is over a minute",
            ),
            ("comm_dvfs:\n  threshold: 1\n", "unknown field `threshold`"),
        ] {
            let e = load(&format!("{HEAD}{body}")).unwrap_err();
            assert!(e.contains(want), "{e}\n  should contain {want}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    const MEASURING: CommDvfs = CommDvfs {
        enabled: false,
        wait: WaitMode::Poll,
        threshold_bytes: 16 * 1024,
        strided_threshold_bytes: 64 * 1024,
        timeout_us: 500,
        low_ghz: None,
    };

    fn comm(ask: RuntimeAsk) -> Option<CommDvfs> {
        runtime_for_job(&ask).map(|r| r.comm)
    }

    #[test]
    fn the_job_option_overrides_the_policy_either_way() {
        let off = CommDvfs {
            enabled: false,
            ..CommDvfs::default()
        };
        let ask = |policy, option| RuntimeAsk {
            policy,
            option,
            ..RuntimeAsk::default()
        };
        assert_eq!(comm(ask(None, None)), None);
        assert_eq!(comm(ask(Some(off), None)), Some(off));
        assert_eq!(comm(ask(Some(off), Some(false))), None);
        assert_eq!(
            comm(ask(Some(off), Some(true))).map(|c| c.enabled),
            Some(true)
        );
        assert_eq!(comm(ask(None, Some(true))), Some(CommDvfs::default()));
    }

    #[test]
    fn a_measured_baseline_runs_the_runtime_measuring_only_unless_told_not_to() {
        let baseline = RuntimeAsk {
            baseline: true,
            measure_baselines: true,
            ..RuntimeAsk::default()
        };
        // A monitor run that names a profile: measured, nothing lowered, no guard.
        let r = runtime_for_job(&baseline).unwrap();
        assert_eq!((r.comm, r.guard), (MEASURING, None));
        // A monitor run without a profile is no baseline: untouched.
        let no_profile = RuntimeAsk {
            baseline: false,
            ..baseline
        };
        assert_eq!(comm(no_profile), None);
        // The user's off wins; so does the site's switch.
        let off = RuntimeAsk {
            option: Some(false),
            ..baseline
        };
        assert_eq!(comm(off), None);
        let site_off = RuntimeAsk {
            measure_baselines: false,
            ..baseline
        };
        assert_eq!(comm(site_off), None);
        // What a policy or the user asks is kept as it was.
        let lowering = CommDvfs::default();
        let asked = RuntimeAsk {
            policy: Some(lowering),
            ..baseline
        };
        assert_eq!(comm(asked), Some(lowering));
        let on = RuntimeAsk {
            option: Some(true),
            ..baseline
        };
        assert_eq!(comm(on), Some(CommDvfs::default()));
    }

    #[test]
    fn a_guard_with_a_baseline_loads_the_runtime_but_not_against_the_users_off() {
        let terms = GuardTerms {
            max_slowdown: 0.1,
            baseline_rate: Some(100.0),
            off: None,
        };
        let guarded = RuntimeAsk {
            guard: Some(terms),
            ..RuntimeAsk::default()
        };
        let r = runtime_for_job(&guarded).unwrap();
        assert_eq!((r.comm, r.guard), (MEASURING, Some(terms)));
        let lowering = RuntimeAsk {
            policy: Some(CommDvfs::default()),
            ..guarded
        };
        let r = runtime_for_job(&lowering).unwrap();
        assert_eq!((r.comm, r.guard), (CommDvfs::default(), Some(terms)));
        let off = RuntimeAsk {
            option: Some(false),
            ..guarded
        };
        assert_eq!(runtime_for_job(&off), None);
    }

    #[test]
    fn a_nodes_settings_ask_what_their_decision_says() {
        let settings = |extra: &str| -> NodeSettings {
            serde_json::from_str(&format!(
                r#"{{"job_id":1,"node":"n1","used":true,"freq_ghz":null,"verdict":"unchanged"{extra}}}"#
            ))
            .unwrap()
        };
        let base = settings(r#","baseline":true"#);
        let ask = RuntimeAsk::of(Some(&base), None, true);
        assert_eq!(comm(ask), Some(MEASURING));
        assert_eq!(comm(RuntimeAsk::of(Some(&base), None, false)), None);
        // From an older greenupd, or no answer at all: nothing to measure for.
        assert_eq!(comm(RuntimeAsk::of(Some(&settings("")), None, true)), None);
        assert_eq!(comm(RuntimeAsk::of(None, None, true)), None);
        // Terms without a rate guard nothing.
        let unguarded = settings(r#","guard":{"max_slowdown":0.1,"off":"no_baseline"}"#);
        let ask = RuntimeAsk::of(Some(&unguarded), None, true);
        assert_eq!((ask.guard, comm(ask)), (None, None));
    }

    #[test]
    fn the_shipped_comm_policy_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
        let set = PolicySet::load(&[dir]).unwrap();
        let p = set.get("max-dist-comm").unwrap();
        assert_eq!(p.objective, Objective::MaxDist);
        assert_eq!(p.comm_dvfs, Some(CommDvfs::default()));
        assert_eq!(set.get("max-dist").unwrap().comm_dvfs, None);
    }
}
