//! Reading and checking the site config file. Every error names the file, line,
//! column, key and value, and says what would be valid.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::check::{Checker, in_file_order, shown};
use super::{
    BaselineSettings, DaemonLimits, DaemonSettings, DvfsSettings, Enforce, NodeType, OnMiss,
    OverBudget, Partition, PowerModel, Site,
};
use crate::expr::Expr;
use crate::input::{InputError, Origin, Spanned, parse_yaml};
use crate::names;
use crate::{hostlist, units};

/// Where Debian's Slurm packages keep configuration, and so where greenup looks first.
pub const DEFAULT_PATH: &str = "/etc/slurm/greenup.yaml";
/// Default policy directories: shipped policies, then the site's own.
pub const DEFAULT_POLICY_DIRS: &[&str] =
    &["/usr/share/greenup/policies", "/etc/slurm/greenup/policies"];
/// Default directory of application profiles.
pub const DEFAULT_PROFILE_DIR: &str = "/etc/slurm/greenup/profiles";
/// Default greenupd TCP address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7470";
/// Default greenupd Unix socket for the local CLI.
pub const DEFAULT_SOCKET: &str = "/run/greenupd/greenupd.sock";
/// Default SQLite database.
pub const DEFAULT_STORE: &str = "/var/lib/greenup/greenup.db";
/// Default node-local spool of outcomes greenupd has not received yet.
pub const DEFAULT_SPOOL_DIR: &str = "/var/spool/greenup";
/// Default per-node directory for saved settings.
pub const DEFAULT_RUN_DIR: &str = "/run/greenup";
/// Where greenup's packages install the in-job MPI runtime.
pub const DEFAULT_MPI_RUNTIME: &str = "/usr/lib/greenup/libgreenup_mpi.so";
/// Default policy: change nothing, record only.
pub const DEFAULT_POLICY: &str = "monitor";
/// Most frequencies one node type may list; more is a typo in `step`.
const MAX_FREQS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    #[serde(default)]
    node_types: BTreeMap<String, Spanned<RawNodeType>>,
    #[serde(default)]
    nodes: BTreeMap<String, Spanned<Value>>,
    #[serde(default)]
    power_cap: Option<Spanned<Value>>,
    #[serde(default)]
    partitions: BTreeMap<String, Spanned<RawPartition>>,
    #[serde(default)]
    job_energy_limit: Option<Spanned<Value>>,
    #[serde(default)]
    default_policy: Option<Spanned<Value>>,
    #[serde(default)]
    allowed_policies: Option<Spanned<Value>>,
    #[serde(default)]
    policy_dirs: Option<Spanned<Value>>,
    #[serde(default)]
    profile_dir: Option<Spanned<Value>>,
    #[serde(default)]
    enforce: Option<Spanned<Value>>,
    #[serde(default)]
    daemon: RawDaemon,
    #[serde(default)]
    dvfs: RawDvfs,
    #[serde(default)]
    budgets: Option<Spanned<super::budgets::RawBudgets>>,
    #[serde(default)]
    baseline: Option<Spanned<RawBaseline>>,
    #[serde(default)]
    power: Option<Spanned<super::power::RawPowerSection>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBaseline {
    #[serde(default)]
    fraction: Option<Spanned<Value>>,
    #[serde(default)]
    min_runs: Option<Spanned<Value>>,
    #[serde(default)]
    on_miss: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNodeType {
    frequencies: Spanned<Value>,
    power: RawPower,
    #[serde(default)]
    gpus: Option<Spanned<super::gpu::RawGpus>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPower {
    dynamic_w: Spanned<Value>,
    static_w: Spanned<Value>,
    #[serde(default)]
    gamma: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    nodes: Spanned<Value>,
    #[serde(default)]
    power_cap: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    #[serde(default)]
    listen: Option<Spanned<Value>>,
    #[serde(default)]
    socket: Option<Spanned<Value>>,
    #[serde(default)]
    store: Option<Spanned<Value>>,
    #[serde(default)]
    slurm_user: Option<Spanned<Value>>,
    #[serde(default)]
    admins: Option<Spanned<Value>>,
    #[serde(default)]
    timeout_ms: Option<Spanned<Value>>,
    #[serde(default)]
    grace_s: Option<Spanned<Value>>,
    #[serde(default)]
    metrics_listen: Option<Spanned<Value>>,
    #[serde(default)]
    over_budget: Option<Spanned<Value>>,
    #[serde(default)]
    spool_dir: Option<Spanned<Value>>,
    #[serde(default)]
    max_job_nodes: Option<Spanned<Value>>,
    #[serde(default)]
    user_connections: Option<Spanned<Value>>,
    #[serde(default)]
    users_connections: Option<Spanned<Value>>,
    #[serde(default)]
    unauthenticated: Option<Spanned<Value>>,
    #[serde(default)]
    slurm_energy: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDvfs {
    #[serde(default)]
    sysfs_root: Option<Spanned<Value>>,
    #[serde(default)]
    run_dir: Option<Spanned<Value>>,
    #[serde(default)]
    per_core_shared: Option<Spanned<Value>>,
    #[serde(default)]
    mpi_runtime: Option<Spanned<Value>>,
    #[serde(default)]
    measure_baselines: Option<Spanned<Value>>,
    #[serde(default)]
    nvml_library: Option<Spanned<Value>>,
}

/// Read and check the site config at `path`.
pub fn load(path: impl AsRef<Path>) -> Result<Site, InputError> {
    let path = path.as_ref();
    crate::input::check_file(path, "site config", |text| parse(path, text))
}

/// Check site config `text` that came from `path`; relative paths inside it are taken
/// relative to the directory of `path`.
pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<Site, InputError> {
    let path = path.as_ref();
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Err(InputError::bare(
            Origin::Path(path.to_path_buf()),
            "the site config is empty; it needs at least node_types (see docs/site-config.md)",
        ));
    }
    let raw: RawSite = parse_yaml(path, text)?;
    // Relative paths in the file follow the file, not whatever directory a daemon runs in.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    Checker { path, base: &base }.site(raw)
}

impl Checker<'_> {
    /// A non-empty string value, or an error saying `valid`.
    pub(super) fn text(
        &self,
        v: &Spanned<Value>,
        key: &str,
        valid: &str,
    ) -> Result<String, InputError> {
        match &v.value {
            Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
            other => Err(self.err(v, key, shown(other), valid)),
        }
    }

    /// A list of strings, each accepted by `ok`; a single string counts as a list of one.
    fn texts(
        &self,
        v: &Spanned<Value>,
        key: &str,
        ok: fn(&str) -> bool,
        valid: &str,
    ) -> Result<Vec<String>, InputError> {
        let items: Vec<&Value> = match &v.value {
            Value::Array(a) => a.iter().collect(),
            Value::Null => vec![],
            one => vec![one],
        };
        items
            .into_iter()
            .map(|it| match it {
                Value::String(s) if ok(s) => Ok(s.clone()),
                other => Err(self.err(v, key, shown(other), valid)),
            })
            .collect()
    }

    /// One of `choices`, given as `(written, meaning)` pairs.
    pub(super) fn choice<T: Copy>(
        &self,
        v: &Option<Spanned<Value>>,
        key: &str,
        choices: &[(&str, T)],
        default: T,
    ) -> Result<T, InputError> {
        let Some(v) = v else { return Ok(default) };
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        let valid = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        match &v.value {
            Value::String(s) => choices.iter().find(|(n, _)| n == s).map(|(_, t)| *t),
            _ => None,
        }
        .ok_or_else(|| self.err(v, key, shown(&v.value), valid))
    }

    /// A whole number in `lo..=hi`.
    fn uint(
        &self,
        v: &Option<Spanned<Value>>,
        key: &str,
        lo: u64,
        hi: u64,
        default: u64,
        unit: &str,
    ) -> Result<u64, InputError> {
        let Some(v) = v else { return Ok(default) };
        v.value
            .as_u64()
            .filter(|x| (lo..=hi).contains(x))
            .ok_or_else(|| {
                self.err(
                    v,
                    key,
                    shown(&v.value),
                    format!("{unit} in {lo}-{hi}, e.g. {default}"),
                )
            })
    }

    fn boolean(
        &self,
        v: &Option<Spanned<Value>>,
        key: &str,
        default: bool,
    ) -> Result<bool, InputError> {
        let Some(v) = v else { return Ok(default) };
        v.value
            .as_bool()
            .ok_or_else(|| self.err(v, key, shown(&v.value), "true or false"))
    }

    fn hostlist(&self, v: &Spanned<Value>, key: &str) -> Result<(String, Vec<String>), InputError> {
        let valid = "a Slurm hostlist such as n[1-4,7],gpu[01-02]";
        let list = self.text(v, key, valid)?;
        let names = hostlist::expand(&list)
            .map_err(|e| self.err(v, key, &list, format!("{valid}; {e}")))?;
        if let Some(bad) = names.iter().find(|n| !names::is_node(n)) {
            return Err(self.err(
                v,
                key,
                &list,
                format!(
                    "{valid}, each node name of {}; not {bad:?}",
                    names::NODE_RULE
                ),
            ));
        }
        Ok((list, names))
    }

    fn site(&self, raw: RawSite) -> Result<Site, InputError> {
        if raw.node_types.is_empty() {
            return Err(InputError::new(
                Origin::Path(self.path.to_path_buf()),
                "node_types",
                "(none)",
                "at least one node type, e.g. node_types: {xeon: {frequencies: [1.2, 2.6], power: {dynamic_w: 95, static_w: 20}}}",
            ));
        }
        let mut node_types = BTreeMap::new();
        let mut gpu_types = BTreeMap::new();
        for (name, mut t) in in_file_order(raw.node_types) {
            let gpus = t.value.gpus.take();
            let nt = self.node_type(&name, t)?;
            if let Some(g) = gpus {
                gpu_types.insert(name.clone(), self.gpus(&name, g)?);
            }
            node_types.insert(name, nt);
        }

        let mut nodes: BTreeMap<String, String> = BTreeMap::new();
        for (type_name, v) in in_file_order(raw.nodes) {
            let key = format!("nodes.{type_name}");
            if !node_types.contains_key(&type_name) {
                let known: Vec<&str> = node_types.keys().map(String::as_str).collect();
                return Err(self.err(
                    &v,
                    &key,
                    &type_name,
                    format!("a node type from node_types: {}", known.join(", ")),
                ));
            }
            let (list, names) = self.hostlist(&v, &key)?;
            for n in names {
                if let Some(prev) = nodes.get(&n) {
                    let why = if *prev == type_name {
                        format!(
                            "node {n} is listed twice for type {type_name}; list each node once"
                        )
                    } else {
                        format!("node {n} is already of type {prev}; a node has exactly one type")
                    };
                    return Err(self.err(&v, &key, &list, why));
                }
                nodes.insert(n, type_name.clone());
            }
        }

        let power_cap_w = raw
            .power_cap
            .as_ref()
            .map(|v| self.power(v, "power_cap"))
            .transpose()?;

        let mut partitions = BTreeMap::new();
        for (name, p) in in_file_order(raw.partitions) {
            if !names::is_name(&name) {
                return Err(self.err(
                    &p,
                    "partitions",
                    &name,
                    format!("a partition name of {}", names::NAME_RULE),
                ));
            }
            let key = format!("partitions.{name}.nodes");
            let (list, names) = self.hostlist(&p.value.nodes, &key)?;
            if let Some(unknown) = names.iter().find(|n| !nodes.contains_key(*n)) {
                return Err(self.err(
                    &p.value.nodes,
                    &key,
                    &list,
                    format!("node {unknown} is not in `nodes`; give every partition node a type"),
                ));
            }
            let cap = p
                .value
                .power_cap
                .as_ref()
                .map(|v| self.power(v, &format!("partitions.{name}.power_cap")))
                .transpose()?;
            partitions.insert(
                name,
                Partition {
                    nodes: names,
                    power_cap_w: cap,
                },
            );
        }

        let job_energy_limit_j = raw
            .job_energy_limit
            .as_ref()
            .map(|v| self.energy(v, "job_energy_limit"))
            .transpose()?;

        let policy = format!(
            "a list of policy names of {} (e.g. [min-energy, max-dist])",
            names::NAME_RULE
        );
        let allowed_policies = match &raw.allowed_policies {
            Some(v) => self.texts(v, "allowed_policies", names::is_name, &policy)?,
            None => vec![],
        };
        let default_policy = match &raw.default_policy {
            Some(v) => {
                let name = self.text(v, "default_policy", "a policy name, e.g. min-energy")?;
                if !names::is_name(&name) {
                    return Err(self.err(
                        v,
                        "default_policy",
                        &name,
                        format!("a policy name of {}", names::NAME_RULE),
                    ));
                }
                if !allowed_policies.is_empty() && !allowed_policies.contains(&name) {
                    return Err(self.err(
                        v,
                        "default_policy",
                        &name,
                        format!("one of allowed_policies: {}", allowed_policies.join(", ")),
                    ));
                }
                name
            }
            None => DEFAULT_POLICY.to_string(),
        };

        let policy_dirs = match &raw.policy_dirs {
            Some(v) => self
                .texts(
                    v,
                    "policy_dirs",
                    |d| !d.trim().is_empty() && !d.contains('\0'),
                    "a list of directories",
                )?
                .into_iter()
                .map(|d| self.base.join(d))
                .collect(),
            None => DEFAULT_POLICY_DIRS.iter().map(PathBuf::from).collect(),
        };
        let profile_dir = self.path_or(&raw.profile_dir, "profile_dir", DEFAULT_PROFILE_DIR)?;
        let enforce = self.choice(
            &raw.enforce,
            "enforce",
            &[("open", Enforce::Open), ("strict", Enforce::Strict)],
            Enforce::Open,
        )?;

        let budgets = self.budgets(raw.budgets, &partitions, &allowed_policies)?;
        let power = match raw.power {
            Some(mut p) => {
                let racks = std::mem::take(&mut p.value.racks);
                let enforce_at = p.value.enforce_span();
                let mut s = self.power_settings(p.value)?;
                s.racks = self.racks(racks, &nodes, s.enforce)?;
                // `hres` is written whenever it is the mode, so its place is known.
                if let (super::PowerEnforce::Hres, None, Some(at)) =
                    (s.enforce, power_cap_w, &enforce_at)
                {
                    return Err(self.err(
                        at,
                        "power.enforce",
                        "hres",
                        "hres with a site `power_cap` (the top layer of Slurm's resource); \
                         without one use queue",
                    ));
                }
                s
            }
            None => Default::default(),
        };
        Ok(Site {
            path: self.path.to_path_buf(),
            budgets,
            node_types,
            gpu_types,
            nodes,
            partitions,
            power_cap_w,
            job_energy_limit_j,
            default_policy,
            allowed_policies,
            policy_dirs,
            profile_dir,
            enforce,
            daemon: self.daemon(raw.daemon)?,
            dvfs: self.dvfs(raw.dvfs)?,
            baseline: raw.baseline.map(|b| self.baseline(b.value)).transpose()?,
            power,
        })
    }

    /// `power.racks`: each rack's nodes (typed, in no other rack) and cap. Racks hold
    /// power only as Slurm's hierarchical resource, so they need `enforce: hres`.
    fn racks(
        &self,
        raw: BTreeMap<String, Spanned<super::power::RawRack>>,
        nodes: &BTreeMap<String, String>,
        enforce: super::PowerEnforce,
    ) -> Result<BTreeMap<String, super::Rack>, InputError> {
        let mut out = BTreeMap::new();
        let mut rack_of: BTreeMap<String, String> = BTreeMap::new();
        for (name, r) in in_file_order(raw) {
            if enforce != super::PowerEnforce::Hres {
                return Err(self.err(
                    &r,
                    "power.racks",
                    &name,
                    "racks only under power.enforce: hres (Slurm 25.05+'s hierarchical resources)",
                ));
            }
            if !names::is_name(&name) {
                return Err(self.err(
                    &r,
                    "power.racks",
                    &name,
                    format!("a rack name of {}", names::NAME_RULE),
                ));
            }
            let key = format!("power.racks.{name}.nodes");
            let (list, names) = self.hostlist(&r.value.nodes, &key)?;
            for n in &names {
                let why = if !nodes.contains_key(n) {
                    format!("node {n} is not in `nodes`; give every rack node a type")
                } else if let Some(other) = rack_of.get(n) {
                    format!("node {n} is already in rack {other}; a node sits in one rack")
                } else {
                    continue;
                };
                return Err(self.err(&r.value.nodes, &key, &list, why));
            }
            rack_of.extend(names.iter().map(|n| (n.clone(), name.clone())));
            let power_cap_w =
                self.power(&r.value.power_cap, &format!("power.racks.{name}.power_cap"))?;
            out.insert(
                name,
                super::Rack {
                    nodes: names,
                    power_cap_w,
                },
            );
        }
        Ok(out)
    }

    /// The `baseline:` section: how many jobs run at f_max as measured baselines.
    fn baseline(&self, raw: RawBaseline) -> Result<BaselineSettings, InputError> {
        let fraction = match &raw.fraction {
            Some(v) => v
                .value
                .as_f64()
                .filter(|x| (0.0..=1.0).contains(x))
                .ok_or_else(|| {
                    self.err(
                        v,
                        "baseline.fraction",
                        shown(&v.value),
                        "a share of jobs in 0-1, e.g. 0.05 for one job in twenty",
                    )
                })?,
            None => BaselineSettings::DEFAULT_FRACTION,
        };
        let min_runs = self.uint(
            &raw.min_runs,
            "baseline.min_runs",
            0,
            1000,
            u64::from(BaselineSettings::DEFAULT_MIN_RUNS),
            "a number of baseline runs",
        )? as u32;
        let on_miss = self.choice(
            &raw.on_miss,
            "baseline.on_miss",
            &[("report", OnMiss::Report), ("monitor", OnMiss::Monitor)],
            OnMiss::Report,
        )?;
        Ok(BaselineSettings {
            fraction,
            min_runs,
            on_miss,
        })
    }

    fn node_type(&self, name: &str, t: Spanned<RawNodeType>) -> Result<NodeType, InputError> {
        if !names::is_name(name) {
            return Err(self.err(
                &t,
                "node_types",
                name,
                format!("a node type name of {}", names::NAME_RULE),
            ));
        }
        let t = t.value;
        let freqs_ghz =
            self.frequencies(&t.frequencies, &format!("node_types.{name}.frequencies"))?;
        let fmax = freqs_ghz.last().copied().unwrap_or(0.0);
        let key = |k: &str| format!("node_types.{name}.power.{k}");
        let p = &t.power;
        let power = match (as_watts(&p.dynamic_w.value), as_watts(&p.static_w.value)) {
            (Some(d), Some(s)) => {
                let gamma = match &p.gamma {
                    Some(g) => g
                        .value
                        .as_f64()
                        .filter(|x| x.is_finite() && *x > 0.0 && *x <= 10.0)
                        .ok_or_else(|| {
                            self.err(
                                g,
                                &key("gamma"),
                                shown(&g.value),
                                "a number in (0, 10]; 3 is the usual cube law",
                            )
                        })?,
                    None => 3.0,
                };
                PowerModel::AtMax {
                    dynamic_w: d,
                    static_w: s,
                    gamma,
                }
            }
            _ => {
                if let Some(g) = &p.gamma {
                    return Err(self.err(
                        g,
                        &key("gamma"),
                        shown(&g.value),
                        "no gamma when dynamic_w or static_w is an expression in f; write the law into the expression",
                    ));
                }
                PowerModel::Expr {
                    dynamic_w: self.power_expr(&p.dynamic_w, &key("dynamic_w"))?,
                    static_w: self.power_expr(&p.static_w, &key("static_w"))?,
                }
            }
        };
        let nt = NodeType {
            name: name.to_string(),
            freqs_ghz,
            power,
        };
        // Every frequency must give a usable power, so a search never meets a bad value later.
        for &f in &nt.freqs_ghz {
            for (k, span, v) in [
                ("dynamic_w", &p.dynamic_w, nt.dynamic_w(f)),
                ("static_w", &p.static_w, nt.static_w(f)),
            ] {
                match v {
                    Ok(w) if w.is_finite() && w >= 0.0 => {}
                    Ok(w) => {
                        return Err(self.err(
                            span,
                            &key(k),
                            shown(&span.value),
                            format!("watts >= 0 at every frequency; it is {w} at f = {f} GHz (max {fmax} GHz)"),
                        ));
                    }
                    Err(e) => {
                        return Err(self.err(span, &key(k), shown(&span.value), e.to_string()));
                    }
                }
            }
        }
        Ok(nt)
    }

    fn frequencies(&self, v: &Spanned<Value>, key: &str) -> Result<Vec<f64>, InputError> {
        const VALID: &str = "a list of GHz like [1.2, 1.6, 2.0] or {min: 1.2, max: 2.6, step: 0.1}";
        let bad = |why: &str| self.err(v, key, shown(&v.value), format!("{why}; write {VALID}"));
        let ghz = |x: &Value| {
            x.as_f64()
                .filter(|f| f.is_finite() && *f > 0.0 && *f < 1000.0)
        };
        let mut freqs = match &v.value {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(bad("no frequencies"));
                }
                if items.len() > MAX_FREQS {
                    return Err(bad(&format!("more than {MAX_FREQS} frequencies")));
                }
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    out.push(ghz(it).ok_or_else(|| {
                        bad(&format!(
                            "'{}' is not a frequency in GHz above 0",
                            shown(it)
                        ))
                    })?);
                }
                out
            }
            Value::Object(m) => {
                if let Some(k) = m
                    .keys()
                    .find(|k| !["min", "max", "step"].contains(&k.as_str()))
                {
                    return Err(bad(&format!("unknown key '{k}'")));
                }
                let get = |k: &str| {
                    let x = m.get(k).ok_or_else(|| bad(&format!("missing '{k}'")))?;
                    ghz(x).ok_or_else(|| {
                        bad(&format!(
                            "{k} '{}' is not a frequency in GHz above 0",
                            shown(x)
                        ))
                    })
                };
                let (min, max, step) = (get("min")?, get("max")?, get("step")?);
                if max < min {
                    return Err(bad(&format!("max {max} is below min {min}")));
                }
                let steps = (max - min) / step;
                if steps.round() >= MAX_FREQS as f64 {
                    return Err(bad(&format!(
                        "step {step} gives more than {MAX_FREQS} frequencies"
                    )));
                }
                if (steps - steps.round()).abs() > 1e-6 {
                    return Err(bad(&format!(
                        "step {step} does not divide max - min = {}; list the frequencies instead",
                        round_ghz(max - min)
                    )));
                }
                (0..=steps.round() as usize)
                    .map(|i| round_ghz(min + i as f64 * step))
                    .collect()
            }
            _ => return Err(bad("not a list or a range")),
        };
        freqs.sort_by(f64::total_cmp);
        if let Some(w) = freqs.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(&format!("{} GHz is listed twice", w[0])));
        }
        Ok(freqs)
    }

    fn power_expr(&self, v: &Spanned<Value>, key: &str) -> Result<Expr, InputError> {
        let valid = "watts (e.g. 20 or 20W) or an expression in f GHz (e.g. \"30 * (f / 2.5)^3\")";
        match &v.value {
            Value::Number(_) => as_watts(&v.value)
                .map(Expr::constant)
                .ok_or_else(|| self.err(v, key, shown(&v.value), format!("{valid}, at least 0"))),
            Value::String(s) => match units::parse_power(s) {
                Ok(w) => Ok(Expr::constant(w)),
                Err(_) => {
                    Expr::parse(s, &["f"]).map_err(|e| self.err(v, key, s, format!("{valid}: {e}")))
                }
            },
            other => Err(self.err(v, key, shown(other), valid)),
        }
    }

    fn power(&self, v: &Spanned<Value>, key: &str) -> Result<f64, InputError> {
        self.quantity(
            v,
            key,
            units::parse_power,
            "a power above 0 such as 2kW, 350W or 1500 (watts)",
        )
    }

    pub(super) fn energy(&self, v: &Spanned<Value>, key: &str) -> Result<f64, InputError> {
        self.quantity(
            v,
            key,
            units::parse_energy,
            "an energy above 0 such as 20MJ, 1.5kWh or 5000 (joules)",
        )
    }

    fn quantity(
        &self,
        v: &Spanned<Value>,
        key: &str,
        parse: fn(&str) -> Result<f64, units::UnitError>,
        valid: &str,
    ) -> Result<f64, InputError> {
        let x = match &v.value {
            Value::Number(n) => n.as_f64().filter(|x| x.is_finite() && *x > 0.0),
            Value::String(s) => parse(s).ok(),
            _ => None,
        };
        x.ok_or_else(|| self.err(v, key, shown(&v.value), valid))
    }

    /// A path; relative ones are taken from the config file's directory.
    fn path_or(
        &self,
        v: &Option<Spanned<Value>>,
        key: &str,
        default: &str,
    ) -> Result<PathBuf, InputError> {
        let Some(v) = v else {
            return Ok(PathBuf::from(default));
        };
        let p = self.text(v, key, "a path")?;
        if p.contains('\0') {
            return Err(self.err(v, key, &p, "a path"));
        }
        Ok(self.base.join(p))
    }

    fn address(&self, v: &Spanned<Value>, key: &str) -> Result<String, InputError> {
        const VALID: &str = "HOST:PORT with a port in 1-65535, e.g. 127.0.0.1:7470";
        let a = self.text(v, key, VALID)?;
        let ok = a.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty()
                && !host.contains(char::is_whitespace)
                && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if ok {
            Ok(a)
        } else {
            Err(self.err(v, key, &a, VALID))
        }
    }

    fn daemon(&self, d: RawDaemon) -> Result<DaemonSettings, InputError> {
        let listen = match &d.listen {
            Some(a) => self.address(a, "daemon.listen")?,
            None => DEFAULT_LISTEN.to_string(),
        };
        let metrics_listen = d
            .metrics_listen
            .as_ref()
            .map(|a| self.address(a, "daemon.metrics_listen"))
            .transpose()?;
        let slurm_user = match &d.slurm_user {
            Some(v) => {
                let u = self.text(v, "daemon.slurm_user", "a user name, e.g. slurm")?;
                if !names::is_user(&u) {
                    return Err(self.err(v, "daemon.slurm_user", &u, "a user name, e.g. slurm"));
                }
                u
            }
            None => "slurm".to_string(),
        };
        let admins = match &d.admins {
            Some(v) => self.texts(
                v,
                "daemon.admins",
                names::is_user,
                "a list of user names, e.g. [root, alice]",
            )?,
            None => vec![],
        };
        let over_budget = self.choice(
            &d.over_budget,
            "daemon.over_budget",
            &[
                ("lowest", OverBudget::Lowest),
                ("unchanged", OverBudget::Unchanged),
                ("refuse", OverBudget::Refuse),
            ],
            OverBudget::Lowest,
        )?;
        Ok(DaemonSettings {
            listen,
            socket: self.path_or(&d.socket, "daemon.socket", DEFAULT_SOCKET)?,
            store: self.path_or(&d.store, "daemon.store", DEFAULT_STORE)?,
            slurm_user,
            admins,
            timeout_ms: self.uint(
                &d.timeout_ms,
                "daemon.timeout_ms",
                1,
                600_000,
                2000,
                "milliseconds",
            )?,
            grace_s: self.uint(&d.grace_s, "daemon.grace_s", 0, 7 * 86_400, 300, "seconds")?,
            metrics_listen,
            over_budget,
            spool_dir: self.spool_dir(&d.spool_dir)?,
            limits: self.daemon_limits(&d)?,
            slurm_energy: self.boolean(&d.slurm_energy, "daemon.slurm_energy", false)?,
        })
    }

    /// `daemon.max_job_nodes` and the connection limits; a user's own limit may not
    /// exceed what all users together may hold.
    fn daemon_limits(&self, d: &RawDaemon) -> Result<DaemonLimits, InputError> {
        let def = DaemonLimits::default();
        let n = |v: &Option<Spanned<Value>>, key: &str, hi: u64, default: usize, unit: &str| {
            self.uint(v, key, 1, hi, default as u64, unit)
                .map(|x| x as usize)
        };
        let limits = DaemonLimits {
            max_job_nodes: n(
                &d.max_job_nodes,
                "daemon.max_job_nodes",
                1_000_000,
                def.max_job_nodes,
                "nodes",
            )?,
            user_connections: n(
                &d.user_connections,
                "daemon.user_connections",
                65_536,
                def.user_connections,
                "connections",
            )?,
            users_connections: n(
                &d.users_connections,
                "daemon.users_connections",
                65_536,
                def.users_connections,
                "connections",
            )?,
            unauthenticated: n(
                &d.unauthenticated,
                "daemon.unauthenticated",
                65_536,
                def.unauthenticated,
                "connections",
            )?,
        };
        if limits.user_connections > limits.users_connections
            && let Some(v) = d.user_connections.as_ref()
        {
            return Err(self.err(
                v,
                "daemon.user_connections",
                limits.user_connections,
                format!(
                    "at most daemon.users_connections ({})",
                    limits.users_connections
                ),
            ));
        }
        Ok(limits)
    }

    /// A path in which `%n` (the node's name) is the only `%` pattern.
    fn spool_dir(&self, v: &Option<Spanned<Value>>) -> Result<PathBuf, InputError> {
        const KEY: &str = "daemon.spool_dir";
        const VALID: &str = "a path; %n stands for the node's name, e.g. /var/spool/greenup/%n";
        let p = self.path_or(v, KEY, DEFAULT_SPOOL_DIR)?;
        let text = p.to_string_lossy();
        let bad_pattern = text.split('%').skip(1).any(|rest| !rest.starts_with('n'));
        match v {
            Some(v) if bad_pattern => {
                let written = self.text(v, KEY, VALID)?;
                Err(self.err(v, KEY, written, VALID))
            }
            _ => Ok(p),
        }
    }

    fn dvfs(&self, d: RawDvfs) -> Result<DvfsSettings, InputError> {
        Ok(DvfsSettings {
            sysfs_root: self.path_or(&d.sysfs_root, "dvfs.sysfs_root", "/sys")?,
            run_dir: self.path_or(&d.run_dir, "dvfs.run_dir", DEFAULT_RUN_DIR)?,
            per_core_shared: self.boolean(&d.per_core_shared, "dvfs.per_core_shared", false)?,
            mpi_runtime: self.path_or(&d.mpi_runtime, "dvfs.mpi_runtime", DEFAULT_MPI_RUNTIME)?,
            measure_baselines: self.boolean(
                &d.measure_baselines,
                "dvfs.measure_baselines",
                true,
            )?,
            nvml_library: self.nvml_library(&d.nvml_library)?,
        })
    }
}

/// A plain number or a number with a power unit, as watts >= 0; `None` for anything else.
fn as_watts(v: &Value) -> Option<f64> {
    let w = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => units::parse_power(s).ok()?,
        _ => return None,
    };
    (w.is_finite() && w >= 0.0).then_some(w)
}

/// Frequencies to the kHz, so that a range's `min + i * step` prints as written.
fn round_ghz(f: f64) -> f64 {
    (f * 1e6).round() / 1e6
}
