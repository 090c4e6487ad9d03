//! A profile's first version, learned from an application's measured runs at maximum
//! frequency (monitor runs and baseline samples): what `greenup profile learn` writes.
//! Nothing in it is typed in; later runs refine it ([`super::refine`]).
//!
//! - hetero (paper 004): per node type, the compute time (and communication time, where
//!   the MPI runtime measured the split) of runs on the profile's node count; power is
//!   left to the site's node types until refinement fits it.
//! - amdahl (paper 003): F_p, T_C(0,1) and the communication law by the model's own
//!   [`amdahl::fit`] over runs on at least three node counts.
//! - iso_energy (paper 000): the machine vector from the site's node type (its watts,
//!   named and not copied, `power: TYPE`; one cycle per instruction, since greenup has no
//!   instruction counters; no memory split, since it has no memory counters either) and
//!   the network's price per counted call and byte from the time inside MPI; the
//!   application vector from runs the MPI runtime measured on at least two node counts:
//!   W_c and W_co from the time outside MPI, then M, B, alpha and the waiting share as
//!   refinement fits them ([`super::refine::iso_energy`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::lead;
use super::outcome::{Outcome, check, outcome_from_record};
use super::refine::fit_clock;
use super::{
    AmdahlFile, ClockFitFile, GpuFile, GpuTypeFile, HeteroFile, HeteroTypeFile, Param, Profile,
    ProfileFile, StepClassFile, StepWindowFile, unspanned,
};
use crate::model::amdahl;
use crate::model::hetero::TypeTimes;
use crate::model::steps::Steps;
use crate::record::JobRecord;
use crate::site::Site;

/// The models a first version can be learned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Paper 004's per node type times.
    Hetero,
    /// Paper 003's scaling across node counts.
    Amdahl,
    /// Paper 000's machine and application vectors.
    IsoEnergy,
}

impl Model {
    /// The profile section's name.
    pub fn name(self) -> &'static str {
        match self {
            Model::Hetero => "hetero",
            Model::Amdahl => "amdahl",
            Model::IsoEnergy => "iso_energy",
        }
    }
}

/// Why no first version could be learned, as one line saying what is missing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LearnError {
    /// The application's name is not one a profile may have.
    #[error(
        "NAME: invalid value '{name}': expected a profile name of {}",
        crate::names::NAME_RULE
    )]
    BadName {
        /// The name asked for.
        name: String,
    },
    /// Too few usable runs: what the model needs, then the runs left out and why.
    #[error("{need}{}", if .left_out.is_empty() { String::new() } else { format!(" (left out: {})", .left_out.join("; ")) })]
    TooFewRuns {
        /// What the model needs, in words.
        need: String,
        /// Each stored run that was left out, and why.
        left_out: Vec<String>,
    },
    /// The learned profile does not pass the checks every profile file passes.
    #[error("the learned profile does not check: {0}")]
    Unchecked(crate::input::InputError),
    /// The learned profile cannot predict on this site.
    #[error("the learned profile does not fit the site: {0}")]
    Misfit(crate::model::ModelError),
    /// Paper 003's regressions found no fit in the runs.
    #[error("amdahl: the runs of {app} on {counts} nodes do not fit: {source}")]
    AmdahlFit {
        /// The application.
        app: String,
        /// The node counts the runs covered, as a list.
        counts: String,
        /// Why the fit failed.
        source: crate::model::amdahl::FitError,
    },
    /// iso_energy's runs ran on more than one node type.
    #[error(
        "iso_energy models one kind of processor: the runs of {app} ran on node types {types}; learn from runs on one type"
    )]
    MixedTypes {
        /// The application.
        app: String,
        /// The node types, as a list.
        types: String,
    },
    /// The runs' node type is not in the site config.
    #[error("node type {0} is not in the site config")]
    UnknownType(String),
    /// A run measured no time outside MPI.
    #[error("iso_energy: a run of {0} measured no time outside MPI")]
    NoComputeTime(String),
    /// A communication law greenup tries could not be evaluated.
    #[error("iso_energy: law {law}: {source}")]
    Law {
        /// The law's expression.
        law: String,
        /// Why it could not be evaluated.
        source: crate::expr::ExprError,
    },
    /// No communication law fits the time outside MPI.
    #[error("iso_energy: no law fits the time outside MPI of {0}")]
    NoLaw(String),
    /// The time outside MPI grows so fast with p that no sequential work remains.
    #[error(
        "iso_energy: the time outside MPI of {app} grows so fast with p that no sequential work remains (W_c {w_c}); learn from runs on smaller node counts"
    )]
    NoSequentialWork {
        /// The application.
        app: String,
        /// The fitted sequential work.
        w_c: f64,
    },
    /// One of the machine's expressions did not parse.
    #[error("iso_energy: {expr}: {source}")]
    Expression {
        /// The expression.
        expr: String,
        /// Why it did not parse.
        source: crate::expr::ExprError,
    },
    /// Refinement could not fit the overhead terms to the runs.
    #[error("iso_energy: the runs of {app} do not fit: {source}")]
    IsoFit {
        /// The application.
        app: String,
        /// Why the fit failed.
        source: Box<super::refine::RefineError>,
    },
}

/// A learned first version and what it came from.
#[derive(Debug, Clone)]
pub struct Learned {
    /// The profile file, version 1.
    pub file: ProfileFile,
    /// The jobs it was learned from.
    pub jobs: Vec<u64>,
    /// One line per learned parameter group, for the admin to review.
    pub notes: Vec<String>,
}

/// Relative tolerance for "ran at f_max": sysfs gives kHz, decisions GHz.
const AT_FMAX: f64 = 1e-3;

/// Runs of `app` that ended well with every node at its type's maximum frequency, the
/// runs that ended well with some node below it (they can teach only how the compute
/// time follows the clock), and one line per stored run not at f_max saying why.
fn runs_at_fmax(
    site: &Site,
    app: &str,
    records: &[JobRecord],
) -> (Vec<Outcome>, Vec<Outcome>, Vec<String>) {
    let mut used = Vec::new();
    let mut clocked = Vec::new();
    let mut left_out = Vec::new();
    for r in records
        .iter()
        .filter(|r| r.decision.profile.as_deref() == Some(app))
    {
        let Some(o) = outcome_from_record(r, site) else {
            left_out.push(format!("job {}: not managed by greenup", r.job_id));
            continue;
        };
        if let Err(why) = check(&o) {
            left_out.push(format!("job {}: {why}", o.job_id));
            continue;
        }
        let below = o.nodes.iter().find(|n| {
            site.node_types
                .get(&n.node_type)
                .is_none_or(|t| n.freq_ghz < t.fmax() * (1.0 - AT_FMAX))
        });
        match below {
            Some(n) => {
                left_out.push(format!(
                    "job {}: {} ran at {} GHz, below its type's maximum",
                    o.job_id, n.name, n.freq_ghz
                ));
                if o.nodes
                    .iter()
                    .all(|n| site.node_types.contains_key(&n.node_type))
                {
                    clocked.push(o);
                }
            }
            None => used.push(o),
        }
    }
    used.sort_by_key(|o| o.job_id);
    clocked.sort_by_key(|o| o.job_id);
    (used, clocked, left_out)
}

/// "1, 2 and 4", "4" or "none".
fn and_list<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    let v: Vec<String> = items.into_iter().map(|x| x.to_string()).collect();
    match v.as_slice() {
        [] => "none".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The error for too little data: `what`, then the runs left out, if any.
fn missing(need: String, left_out: &[String]) -> LearnError {
    LearnError::TooFewRuns {
        need,
        left_out: left_out.to_vec(),
    }
}

/// Learn the first version of `app`'s profile for `model` from its stored `records`
/// (any order; other applications' are ignored). `nodes`: the node count a hetero
/// profile is for (default: the largest count among the runs).
pub fn learn(
    site: &Site,
    app: &str,
    model: Model,
    records: &[JobRecord],
    nodes: Option<usize>,
) -> Result<Learned, LearnError> {
    if !crate::names::is_name(app) {
        return Err(LearnError::BadName { name: app.into() });
    }
    let (runs, clocked, left_out) = runs_at_fmax(site, app, records);
    let (mut file, mut notes, jobs) = match model {
        Model::Hetero => hetero(site, app, records, &runs, &clocked, &left_out, nodes)?,
        Model::Amdahl => amdahl_section(app, &runs, &left_out)?,
        Model::IsoEnergy => iso_energy_section(site, app, &runs, &left_out)?,
    };
    if let Some((gpu, note)) = gpu_section(site, &runs) {
        file.gpu = Some(gpu);
        notes.push(note);
    }
    let (below, top): (Vec<u64>, Vec<u64>) = jobs
        .iter()
        .partition(|j| clocked.iter().any(|o| o.job_id == **j));
    let below_text = if below.is_empty() {
        String::new()
    } else {
        format!(
            " and {} below it (clock sensitivity only)",
            and_list(&below)
        )
    };
    file.description = Some(unspanned(Param::Text(format!(
        "{app}, learned by greenup profile learn from jobs {} at maximum frequency{below_text}",
        and_list(&top)
    ))));
    // The learned file must load and plan on this site like any admin's file.
    let path = Path::new(app);
    let profile = Profile::from_file(path, file.clone()).map_err(LearnError::Unchecked)?;
    profile.predictor(site).map_err(LearnError::Misfit)?;
    Ok(Learned { file, jobs, notes })
}

/// The `gpu:` section, when runs measured the GPUs of some node type on every node of it:
/// per type, each run's mean busy seconds per node of the type, scaled to the largest of
/// those runs' node counts (the GPUs' work divides evenly over a job's nodes), averaged;
/// and the mean SM clock and busy power they ran at, where every such node measured them.
fn gpu_section(site: &Site, runs: &[Outcome]) -> Option<(GpuFile, String)> {
    struct Seen {
        nodes: usize,
        busy_s: f64,
        mhz: Option<f64>,
        watts: Option<f64>,
        job: u64,
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut per_type: BTreeMap<&str, Vec<Seen>> = BTreeMap::new();
    for o in runs {
        for t in site.gpu_types.keys() {
            let used: Option<Vec<super::outcome::GpuUse>> = o
                .nodes
                .iter()
                .filter(|n| &n.node_type == t)
                .map(|n| n.gpu)
                .collect();
            let Some(used) = used.filter(|u| !u.is_empty()) else {
                continue;
            };
            let all = |f: fn(&super::outcome::GpuUse) -> Option<f64>| {
                used.iter()
                    .map(f)
                    .collect::<Option<Vec<f64>>>()
                    .map(|v| mean(&v))
            };
            per_type.entry(t).or_default().push(Seen {
                nodes: o.nodes.len(),
                busy_s: mean(&used.iter().map(|u| u.busy_s).collect::<Vec<_>>()),
                mhz: all(|u| u.sm_mhz),
                watts: all(|u| u.busy_w),
                job: o.job_id,
            });
        }
    }
    let nodes = per_type.values().flatten().map(|s| s.nodes).max()?;
    let mut node_types = BTreeMap::new();
    let mut said = Vec::new();
    for (t, seen) in &per_type {
        let busy_s = mean(
            &seen
                .iter()
                .map(|s| s.busy_s * s.nodes as f64 / nodes as f64)
                .collect::<Vec<_>>(),
        );
        let every = |f: fn(&Seen) -> Option<f64>| {
            seen.iter()
                .map(f)
                .collect::<Option<Vec<f64>>>()
                .map(|v| mean(&v))
        };
        let mhz = every(|s| s.mhz).map(f64::round);
        let watts = every(|s| s.watts).map(|w| (w * 10.0).round() / 10.0);
        node_types.insert(
            t.to_string(),
            GpuTypeFile {
                busy_s: unspanned(Param::Number(round_s(busy_s))),
                clock_mhz: mhz.map(|m| unspanned(Param::Number(m))),
                power_w: watts.map(|w| unspanned(Param::Number(w))),
            },
        );
        said.push(format!(
            "{t}'s GPUs busy {busy_s:.3} s per node{}{} (jobs {})",
            mhz.map(|m| format!(" at {m} MHz")).unwrap_or_default(),
            watts.map(|w| format!(", {w} W each")).unwrap_or_default(),
            and_list(seen.iter().map(|s| s.job))
        ));
    }
    let file = GpuFile {
        nodes: unspanned(Param::Number(nodes as f64)),
        node_types,
    };
    let note = format!(
        "gpu: on {nodes} nodes, {}; NVML's utilization times each run, its clock and power while busy",
        said.join(", ")
    );
    Some((file, note))
}

/// Seconds kept to the microsecond, so a learned file reads cleanly.
fn round_s(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

fn empty_file(app: &str) -> ProfileFile {
    ProfileFile {
        name: unspanned(Param::Text(app.to_string())),
        version: unspanned(Param::Number(1.0)),
        description: None,
        prefer: None,
        node_counts: None,
        iso_energy: None,
        roofline: None,
        amdahl: None,
        hetero: None,
        gpu: None,
    }
}

type Section = (ProfileFile, Vec<String>, Vec<u64>);

/// Compute and communication seconds of one node at f_max, where they can be told apart:
/// the MPI runtime's split, or a run on nodes of one type alone (every node then does
/// the same work, and the whole wall time counts as compute).
fn attributed(o: &Outcome, n: &super::outcome::NodeOutcome) -> Option<(f64, f64)> {
    o.split(n).or_else(|| {
        o.nodes
            .iter()
            .all(|m| m.node_type == n.node_type)
            .then_some((o.time_s, 0.0))
    })
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn hetero(
    site: &Site,
    app: &str,
    records: &[JobRecord],
    runs: &[Outcome],
    clocked: &[Outcome],
    left_out: &[String],
    nodes: Option<usize>,
) -> Result<Section, LearnError> {
    let counts: BTreeSet<usize> = runs.iter().map(|o| o.nodes.len()).collect();
    let Some(n) = nodes.or_else(|| counts.last().copied()) else {
        return Err(missing(
            format!("hetero needs completed monitor runs of {app} at maximum frequency; have none"),
            left_out,
        ));
    };
    let on_n: Vec<&Outcome> = runs.iter().filter(|o| o.nodes.len() == n).collect();
    if on_n.is_empty() {
        return Err(missing(
            format!(
                "hetero for {n} nodes needs a monitor run of {app} on {n} nodes; have {}",
                if counts.is_empty() {
                    "none".to_string()
                } else {
                    format!("runs on {} nodes", and_list(&counts))
                }
            ),
            left_out,
        ));
    }
    // Per type: (t_cp, t_cm) samples of the runs on n nodes that tell the types apart.
    let mut direct: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut mixed: Vec<&Outcome> = Vec::new();
    for o in &on_n {
        let mut all = true;
        for node in &o.nodes {
            match attributed(o, node) {
                Some(s) => direct.entry(node.node_type.clone()).or_default().push(s),
                None => all = false,
            }
        }
        if !all {
            mixed.push(o);
        }
    }
    // A run on several types that nothing split: its wall time is its slowest type's
    // compute time (paper 004 at f_max, communication unknown so 0), and the types'
    // relative speed comes from runs on each type alone on equal node counts.
    let mut scaled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let alone = |ty: &str, m: usize| -> Option<f64> {
        let w: Vec<f64> = runs
            .iter()
            .filter(|o| o.nodes.len() == m && o.nodes.iter().all(|x| x.node_type == ty))
            .map(|o| o.time_s)
            .collect();
        (!w.is_empty()).then(|| mean(&w))
    };
    for o in &mixed {
        let types: BTreeSet<&str> = o.nodes.iter().map(|x| x.node_type.as_str()).collect();
        let common = counts.iter().copied().find_map(|m| {
            let w: Option<Vec<(&str, f64)>> =
                types.iter().map(|t| alone(t, m).map(|w| (*t, w))).collect();
            w
        });
        let Some(walls) = common else {
            let have = direct.keys().cloned().collect::<Vec<_>>();
            let lacking: Vec<&str> = types
                .iter()
                .copied()
                .filter(|t| !direct.contains_key(*t))
                .collect();
            if lacking.is_empty() {
                continue;
            }
            return Err(missing(
                format!(
                    "hetero cannot tell the compute time of type {} on {n} nodes: job {} ran on types {} together and nothing measured each node's compute time; run {app} under monitor on nodes of each type alone on equal node counts, or with the MPI runtime measuring (have types {})",
                    and_list(&lacking),
                    o.job_id,
                    and_list(&types),
                    and_list(&have)
                ),
                left_out,
            ));
        };
        let slowest = walls.iter().map(|(_, w)| *w).fold(0.0, f64::max);
        for (t, w) in walls {
            scaled
                .entry(t.to_string())
                .or_default()
                .push(o.time_s * w / slowest);
        }
    }
    let mut node_types = BTreeMap::new();
    let mut notes = Vec::new();
    // Runs below f_max that taught a type its clock sensitivity.
    let mut below_jobs: BTreeSet<u64> = BTreeSet::new();
    let number = |x: f64| unspanned(Param::Number(x));
    for ty in site.node_types.keys() {
        let (cp, cm, how) = if let Some(s) = direct.get(ty) {
            let cp: Vec<f64> = s.iter().map(|x| x.0).collect();
            let cm: Vec<f64> = s.iter().map(|x| x.1).collect();
            (mean(&cp), mean(&cm), format!("{} node runs", s.len()))
        } else if let Some(s) = scaled.get(ty) {
            (
                mean(s),
                0.0,
                format!(
                    "{} run(s) on several types, scaled by runs on each type alone",
                    s.len()
                ),
            )
        } else {
            notes.push(format!(
                "type {ty}: no run on {n} nodes ran on it; jobs on it cannot be planned until one does"
            ));
            continue;
        };
        notes.push(format!(
            "type {ty}: t_cp_s {cp:.3}, t_cm_s {cm:.3} at maximum frequency, from {how}; power: the site's"
        ));
        // Clock sensitivity: the measured compute seconds of this type's nodes on n
        // nodes, at f_max and below it.
        let fmax = site.node_types[ty].fmax();
        let mut samples = Vec::new();
        let mut from_below = Vec::new();
        for o in clocked.iter().filter(|o| o.nodes.len() == n) {
            for node in o.nodes.iter().filter(|x| &x.node_type == ty) {
                if let Some((c, _)) = o.split(node) {
                    samples.push((node.freq_ghz, c));
                    from_below.push(o.job_id);
                }
            }
        }
        for o in &on_n {
            for node in o.nodes.iter().filter(|x| &x.node_type == ty) {
                if let Some((c, _)) = o.split(node) {
                    samples.push((node.freq_ghz, c));
                }
            }
        }
        let mut entry = HeteroTypeFile {
            t_cp_s: number(cp),
            t_cm_s: number(cm),
            p_dyn_w: None,
            p_static_w: None,
            t_mem_s: None,
            t_mem_fit: None,
            lead: None,
            wait_share: None,
        };
        // The clock law the lead compares each node's compute time against.
        let mut law = TypeTimes::timed(cp, cm);
        match fit_clock(fmax, &samples) {
            Some(term) => {
                law.t_cp_s = term.t_cp_s;
                law.t_mem_s = Some(term.t_mem_s);
                let fit = term.record("greenup profile learn, measured compute time");
                notes.push(format!(
                    "type {ty}: clock sensitivity from {} node runs at {} clocks: t_cp_s {:.3} scales with the clock, t_mem_s {:.3} does not (fit error {:.1}%)",
                    fit.samples,
                    fit.clocks,
                    term.t_cp_s,
                    term.t_mem_s,
                    fit.rms_error * 100.0
                ));
                entry.t_cp_s = number(term.t_cp_s);
                entry.t_mem_s = Some(number(term.t_mem_s));
                entry.t_mem_fit = Some(ClockFitFile::from_fit(&fit));
                below_jobs.extend(from_below);
            }
            None => notes.push(format!(
                "type {ty}: clock sensitivity not learned (no run on {n} nodes measured its compute time below maximum frequency); taken as compute-bound until refinement sees runs at a second clock"
            )),
        }
        let timed: Vec<&Outcome> = on_n
            .iter()
            .copied()
            .chain(clocked.iter().filter(|o| o.nodes.len() == n))
            .collect();
        if let Some(l) = lead::of_type(&timed, ty, fmax, &law, 1.0) {
            notes.push(format!(
                "type {ty}: its slowest node computes {:.0}% longer than its mean node (lead {l:.3}): the program gives its nodes unequal work, and a run waits for the slowest",
                (l - 1.0) * 100.0
            ));
            entry.lead = Some(number(l));
        }
        node_types.insert(ty.clone(), entry);
    }
    if node_types.is_empty() {
        return Err(missing(
            format!("hetero learned no node type from the runs of {app} on {n} nodes"),
            left_out,
        ));
    }
    let (ladder, steps_notes) = learned_steps(&on_n, records, &node_types);
    notes.extend(steps_notes);
    let mut jobs: Vec<u64> = runs.iter().map(|o| o.job_id).collect();
    jobs.extend(below_jobs);
    let mut file = empty_file(app);
    file.hetero = Some(HeteroFile {
        iterations: number(1.0),
        nodes: Some(number(n as f64)),
        node_types,
        // The finest window's classes are the ones decisions use until refinement has
        // measured which length predicts best: their compute is a sum of per-window
        // maxima, at least any coarser length's (a max of sums is at most the sum of
        // maxes), so they predict the most slowdown (on HPL, 10 ms windows overstated it:
        // 10.2 % RMS time error) and a max_slowdown bound made with them errs safe.
        steps: ladder.first().map(|(_, s)| StepClassFile::from_steps(s)),
        step_windows: (!ladder.is_empty()).then(|| StepWindowFile::from_ladder(&ladder)),
        model_choice: None,
    });
    Ok((file, notes, jobs))
}

/// Most step classes a learned profile keeps. Directions are merged on a dyadic grid
/// (`Steps::compressed`): with four node types the grid of half-width cells has up to
/// 15 of them, so 16 classes keep that grid where 8 would merge every step into one
/// class, paper 004's max model. The exact search costs about linearly in classes
/// (docs/BENCHMARKS.md, `steps-typed/144`).
pub const MAX_STEP_CLASSES: usize = 16;

/// Fewest windows every used run must keep for a coarser window length to be learned:
/// below it a run is a handful of steps and its classes say more about where the
/// windows fell than about the program.
pub const MIN_WINDOWS_PER_RUN: usize = 8;

/// Each rung of the window ladder is this many times the one before: doubling would
/// give near-duplicate candidates, and each one costs refinement a prediction per run.
const WINDOW_LADDER_STEP: f64 = 4.0;

/// The step models of the runs on the profile's node count, from their nodes' compute
/// windows, one per window length from the finest (the runs' own) up, and the lines
/// saying what they came from or why there are none.
fn learned_steps(
    runs: &[&Outcome],
    records: &[JobRecord],
    types: &BTreeMap<String, HeteroTypeFile>,
) -> (Vec<(f64, Steps)>, Vec<String>) {
    let own = super::windows::run_steps(runs, records);
    if own.steps.is_empty() {
        return (
            Vec::new(),
            vec!["steps: none learned (no run measured its nodes' compute windows); time follows paper 004's max model".to_string()],
        );
    }
    // One length per candidate: runs counted at different windows meet at the longest.
    let finest = own.window_s.iter().copied().fold(0.0, f64::max);
    let first = super::windows::run_steps_at(runs, records, finest);
    let (steps, note) = match steps_of(&first, types) {
        Ok(x) => x,
        Err(note) => return (Vec::new(), vec![note]),
    };
    let mut ladder = vec![(finest, steps)];
    let mut window = finest * WINDOW_LADDER_STEP;
    // Windows shorter than the program's steps cut steps apart and overstate what slowing
    // a type costs; longer ones merge steps led by different types and understate it.
    // Which length predicts best is measured by refinement, so learn keeps every length
    // the runs are long enough for.
    for _ in 0..64 {
        let seen = super::windows::run_steps_at(runs, records, window);
        if seen.jobs != first.jobs || seen.windows.iter().any(|n| *n < MIN_WINDOWS_PER_RUN) {
            break;
        }
        if let Ok((s, _)) = steps_of(&seen, types) {
            ladder.push((window, s));
        }
        window *= WINDOW_LADDER_STEP;
    }
    let lengths: Vec<String> = ladder.iter().map(|(w, _)| format!("{w}")).collect();
    let ladder_note = format!(
        "step_windows: classes learned at windows of {} s (every run keeps at least {MIN_WINDOWS_PER_RUN} windows); steps: holds the {} s ones until refinement keeps the length whose step model predicts the measured runs best",
        and_list(&lengths),
        lengths[0],
    );
    (ladder, vec![note, ladder_note])
}

/// The step model of one window length's steps and the line saying what it came from,
/// or the line saying why there is none.
fn steps_of(
    seen: &super::windows::RunSteps,
    types: &BTreeMap<String, HeteroTypeFile>,
) -> Result<(Steps, String), String> {
    // Only the profile's types can lead a step of its model, and every one of them must.
    let per_step: Vec<BTreeMap<String, f64>> = seen
        .steps
        .iter()
        .map(|s| {
            s.iter()
                .filter(|(t, _)| types.contains_key(*t))
                .map(|(t, c)| (t.clone(), *c))
                .collect()
        })
        .collect();
    let silent: Vec<&str> = types
        .keys()
        .filter(|t| !per_step.iter().any(|s| s.get(*t).is_some_and(|c| *c > 0.0)))
        .map(String::as_str)
        .collect();
    if !silent.is_empty() {
        return Err(format!(
            "steps: none learned (type {} computed in no window of jobs {}); time follows paper 004's max model",
            and_list(&silent),
            and_list(&seen.jobs)
        ));
    }
    match Steps::compressed(&per_step, MAX_STEP_CLASSES) {
        Ok(c) => {
            let windows: BTreeSet<String> = seen.window_s.iter().map(|w| format!("{w}")).collect();
            let merged = if c.quantum > 0.0 {
                format!(", directions merged on a grid of {}", c.quantum)
            } else {
                String::new()
            };
            let note = format!(
                "steps: {} classes from {} windows of {} s of jobs {}{merged}; the decision uses them only where they predict at least the max model's slowdown, or, once refinement has measured runs, where they predict time better (model_choice)",
                c.steps.classes.len(),
                per_step.len(),
                and_list(&windows),
                and_list(&seen.jobs),
            );
            Ok((c.steps, note))
        }
        Err(e) => Err(format!("steps: none learned ({e})")),
    }
}

fn amdahl_section(app: &str, runs: &[Outcome], left_out: &[String]) -> Result<Section, LearnError> {
    let counts: BTreeSet<usize> = runs.iter().map(|o| o.nodes.len()).collect();
    if counts.len() < 3 {
        return Err(missing(
            format!(
                "amdahl needs monitor runs of {app} on 3 node counts; have {}",
                and_list(&counts)
            ),
            left_out,
        ));
    }
    let fit_runs: Vec<amdahl::Run> = runs
        .iter()
        .map(|o| amdahl::Run {
            nodes: o.nodes.len(),
            time_s: o.time_s,
            blocked_s: o.blocked_s(),
        })
        .collect();
    let fit = amdahl::fit(&fit_runs).map_err(|source| LearnError::AmdahlFit {
        app: app.into(),
        counts: and_list(&counts),
        source,
    })?;
    let notes = vec![format!(
        "T_C(0,1) {:.3} s, F_p {:.4}, communication {} with {:.4} s, from {} runs on {} nodes (mean error {:.1}%); power: the site's",
        fit.t_c1_s,
        fit.parallel_fraction,
        fit.law.name(),
        fit.coeff_s,
        runs.len(),
        and_list(&counts),
        fit.avg_rel_error * 100.0
    )];
    let mut file = empty_file(app);
    file.amdahl = Some(AmdahlFile::from_fit(&fit));
    Ok((file, notes, runs.iter().map(|o| o.job_id).collect()))
}

/// The laws W_co(p) may follow when W_c is learned beside it: each vanishes on one
/// processor, where the parallel run is the sequential one (paper 000, eq. 17).
const W_CO_LAWS: [&str; 3] = ["p - 1", "p * log2(p)", "p * (p - 1)"];

/// Least squares `y = a + k * x` with a, k >= 0: (a, k), or None when x does not vary.
fn line_nonneg(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let (a, k) = super::refine::least_squares_line(x, y)?;
    if k < 0.0 {
        let my = y.iter().sum::<f64>() / y.len() as f64;
        return Some((my.max(0.0), 0.0));
    }
    if a < 0.0 {
        return Some((0.0, super::refine::slope_through_origin(x, y).max(0.0)));
    }
    Some((a, k))
}

/// The RMS of (fit / y - 1).
fn rms_rel(fit: impl Iterator<Item = f64>, y: &[f64]) -> f64 {
    let e: Vec<f64> = fit.zip(y).map(|(f, v)| f / v - 1.0).collect();
    (e.iter().map(|x| x * x).sum::<f64>() / e.len() as f64).sqrt()
}

fn iso_energy_section(
    site: &Site,
    app: &str,
    runs: &[Outcome],
    left_out: &[String],
) -> Result<Section, LearnError> {
    use crate::model::iso_energy::{AppVector, IsoEnergy, MachinePower, MachineVector};
    // Runs the runtime measured on every node: its time outside and inside MPI, its calls
    // and bytes.
    let measured: Vec<&Outcome> = runs
        .iter()
        .filter(|o| {
            o.nodes.iter().all(|n| {
                n.compute_s.is_some()
                    && n.comm_s.is_some()
                    && n.calls.is_some()
                    && n.bytes.is_some()
            })
        })
        .collect();
    let counts: BTreeSet<usize> = measured.iter().map(|o| o.nodes.len()).collect();
    if counts.len() < 2 {
        return Err(missing(
            format!(
                "iso_energy needs monitor runs of {app} that greenup's MPI runtime measured on 2 node counts; have {} ({} of {} runs measured)",
                if counts.is_empty() {
                    "none".to_string()
                } else {
                    format!("runs on {} nodes", and_list(&counts))
                },
                measured.len(),
                runs.len()
            ),
            left_out,
        ));
    }
    let types: BTreeSet<&str> = measured
        .iter()
        .flat_map(|o| o.nodes.iter().map(|n| n.node_type.as_str()))
        .collect();
    let [ty] = types.iter().copied().collect::<Vec<_>>()[..] else {
        return Err(LearnError::MixedTypes {
            app: app.into(),
            types: and_list(&types),
        });
    };
    let node_type = site
        .node_types
        .get(ty)
        .ok_or_else(|| LearnError::UnknownType(ty.to_string()))?;
    // Per run: p, seconds outside MPI per cycle's worth at f_max, inside MPI, calls, bytes.
    let fmax = node_type.fmax();
    let t_c = 1e-9 / fmax;
    let ps: Vec<f64> = measured.iter().map(|o| o.nodes.len() as f64).collect();
    let sum = |o: &Outcome, f: fn(&super::outcome::NodeOutcome) -> f64| -> f64 {
        o.nodes.iter().map(f).sum()
    };
    let cycles: Vec<f64> = measured
        .iter()
        .map(|o| sum(o, |n| n.compute_s.unwrap_or(0.0)) / t_c)
        .collect();
    let comm: Vec<f64> = measured
        .iter()
        .map(|o| sum(o, |n| n.comm_s.unwrap_or(0.0)))
        .collect();
    let calls: Vec<f64> = measured
        .iter()
        .map(|o| sum(o, |n| n.calls.unwrap_or(0) as f64))
        .collect();
    let bytes: Vec<f64> = measured
        .iter()
        .map(|o| sum(o, |n| n.bytes.unwrap_or(0) as f64))
        .collect();
    if cycles.iter().any(|c| c.is_nan() || *c <= 0.0) {
        return Err(LearnError::NoComputeTime(app.into()));
    }
    // W_c + W_co(p): the cycles outside MPI. Two node counts fit the first law exactly;
    // three or more choose the law with the least relative RMS error.
    let np = |law: &str, p: f64| -> Result<f64, LearnError> {
        crate::expr::Expr::parse(law, &["n", "p"])
            .and_then(|e| e.eval(&[1.0, p]))
            .map_err(|source| LearnError::Law {
                law: law.into(),
                source,
            })
    };
    let mut best: Option<(f64, &str, f64, f64)> = None;
    for law in W_CO_LAWS.iter().take(if counts.len() >= 3 { 3 } else { 1 }) {
        let x: Vec<f64> = ps.iter().map(|p| np(law, *p)).collect::<Result<_, _>>()?;
        let Some((w_c, k)) = line_nonneg(&x, &cycles) else {
            continue;
        };
        let err = rms_rel(x.iter().map(|v| w_c + k * v), &cycles);
        if best.is_none_or(|b| err < b.0) {
            best = Some((err, law, w_c, k));
        }
    }
    let (w_err, w_law, w_c, w_k) = best.ok_or_else(|| LearnError::NoLaw(app.into()))?;
    if w_c.is_nan() || w_c <= 0.0 {
        return Err(LearnError::NoSequentialWork {
            app: app.into(),
            w_c,
        });
    }
    // The network's price: the time inside MPI over the counted calls and bytes, both
    // at least 0; when calls and bytes move together they cannot be told apart, and the
    // calls take it all.
    let (t_msg, t_byte, net_note) = {
        let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
        let (a, b, c) = (
            dot(&calls, &calls),
            dot(&calls, &bytes),
            dot(&bytes, &bytes),
        );
        let (r1, r2) = (dot(&calls, &comm), dot(&bytes, &comm));
        let d = a * c - b * b;
        let (tm, tb) = if d > 1e-6 * a * c {
            ((c * r1 - b * r2) / d, (a * r2 - b * r1) / d)
        } else {
            (-1.0, -1.0)
        };
        if tm >= 0.0 && tb >= 0.0 {
            (
                tm,
                tb,
                "from the time inside MPI over counted calls and bytes",
            )
        } else if a > 0.0 {
            (
                r1 / a,
                0.0,
                "from the time inside MPI over counted calls (calls and bytes cannot be told apart)",
            )
        } else {
            (0.0, 0.0, "none: no MPI call was counted")
        }
    };
    let machine_src = [
        ("t_c", "1e-9 / f".to_string()),
        ("t_m", "1e-9 / f".to_string()),
        ("t_msg", format!("{t_msg:e}")),
        ("t_byte", format!("{t_byte:e}")),
    ];
    // The watts the waiting share is learned against: the type's, with what these runs
    // measured of its busy watts laid over, as greenupd lays what every run measured.
    let curves = super::node_power::learn(runs, &site.node_types).curves;
    let watts = node_type.with_measured(curves.get(ty).cloned());
    let ex = |src: &str, vars: &[&str]| {
        crate::expr::Expr::parse(src, vars).map_err(|source| LearnError::Expression {
            expr: src.into(),
            source,
        })
    };
    let w_co = format!("{w_k:e} * ({w_law})");
    let model = IsoEnergy {
        n: 1.0,
        machine: MachineVector {
            t_c: ex(&machine_src[0].1, &["f"])?,
            t_m: ex(&machine_src[1].1, &["f"])?,
            t_msg: ex(&machine_src[2].1, &["f"])?,
            t_byte: ex(&machine_src[3].1, &["f"])?,
            power: MachinePower::Site {
                node_type: ty.to_string(),
                watts: Some(Box::new(watts)),
            },
            wait_share: 0.0,
        },
        app: AppVector {
            alpha: crate::expr::Expr::constant(1.0),
            w_c: crate::expr::Expr::constant(w_c),
            w_m: crate::expr::Expr::constant(0.0),
            w_co: ex(&w_co, &["n", "p"])?,
            w_mo: crate::expr::Expr::constant(0.0),
            m: ex("p", &["n", "p"])?,
            b: ex("p", &["n", "p"])?,
        },
    };
    // M, B (and W_co again, on this W_c) and alpha as refinement fits them.
    let owned: Vec<Outcome> = measured.iter().map(|o| (*o).clone()).collect();
    let r = super::refine::iso_energy(&model, &owned).map_err(|source| LearnError::IsoFit {
        app: app.into(),
        source: Box::new(source),
    })?;
    let text = |s: &str| unspanned(Param::Text(s.to_string()));
    let num = |x: f64| unspanned(Param::Number(x));
    let section = super::IsoEnergyFile {
        n: num(1.0),
        machine: super::MachineFile {
            t_c: text(&machine_src[0].1),
            t_m: text(&machine_src[1].1),
            t_msg: num(t_msg),
            t_byte: num(t_byte),
            power: Some(text(ty)),
            p_idle: None,
            dp_c: None,
            dp_m: None,
            wait_share: r.params.wait_share.map(num),
        },
        application: super::AppFile {
            alpha: num(r.params.alpha),
            w_c: num(w_c),
            w_m: num(0.0),
            w_co: text(r.params.app.w_co.source()),
            w_mo: text(r.params.app.w_mo.source()),
            m: text(r.params.app.m.source()),
            b: text(r.params.app.b.source()),
        },
    };
    let notes = vec![
        format!(
            "machine: node type {ty}'s watts, as greenupd knows them when it decides (the site config, with the busy watts it measured per clock laid over); one cycle per instruction (t_c = 1e-9 / f) and no memory split (W_m = 0): greenup counts neither instructions nor memory accesses"
        ),
        format!("network: t_msg {t_msg:.3e} s, t_byte {t_byte:.3e} s, {net_note}"),
        format!(
            "work: W_c {w_c:.4e} cycles and W_co {w_k:.4e} * ({w_law}) from the time outside MPI on p = {} (rms {:.1}%)",
            and_list(&counts),
            w_err * 100.0
        ),
        r.params.note.clone(),
    ];
    let mut file = empty_file(app);
    file.iso_energy = Some(section);
    Ok((file, notes, measured.iter().map(|o| o.job_id).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::refine::refine_profile;
    use crate::record::{Decision, JobState, NodeOutcome, OpenJob, Verdict};
    use crate::record::{JobEnd, Source};

    fn site() -> Site {
        crate::site::example()
    }

    /// One node of a run: its name, the GHz it reported, and the MPI runtime's compute
    /// and MPI seconds if it measured them.
    type Node<'a> = (&'a str, Option<f64>, Option<(f64, f64)>);

    /// A closed monitor run of `app` that took `wall` seconds on `nodes`.
    fn run(job_id: u64, app: &str, wall: f64, nodes: &[Node]) -> JobRecord {
        let names: Vec<String> = nodes.iter().map(|n| n.0.to_string()).collect();
        JobRecord {
            job_id,
            uid: 1000,
            user: None,
            partition: None,
            state: JobState::Closed,
            end: Some(JobEnd::Completed),
            opened_at: 0,
            closed_at: Some(1),
            earlier_runs: Vec::new(),
            earlier_run_count: 0,
            slurm_energy_j: None,
            request: OpenJob {
                restart_count: None,
                job_id,
                uid: 1000,
                user: None,
                partition: None,
                account: None,
                nodes: names,
                nodelist: None,
                min_nodes: None,
                time_limit: crate::record::TimeLimit::Unknown,
                policy: Some("monitor".into()),
                profile: Some(app.into()),
                energy_cap_j: None,
                power_cap_w: None,
                algorithm: None,
                granted_w: None,
            },
            decision: Decision {
                job_id,
                verdict: Verdict::Unchanged,
                reason: "policy monitor records only".into(),
                policy: "monitor".into(),
                monitor: true,
                baseline_sample: false,
                clock_sample: false,
                profile: Some(app.into()),
                profile_version: None,
                power_cap_w: None,
                reserved_w: greenup_core::quantity::Watts(0.0),
                plan: None,
                decided_at: 0,
                refusal: None,
                budgets: Vec::new(),
                comm_dvfs: None,
                grant: None,
                guard: None,
                watts: Vec::new(),
            },
            outcomes: nodes
                .iter()
                .map(|(name, ghz, split)| NodeOutcome {
                    restart_count: None,
                    job_id,
                    node: name.to_string(),
                    freq_ghz: ghz.map(greenup_core::quantity::Ghz),
                    energy_j: Some(greenup_core::quantity::Joules(1000.0)),
                    elapsed_s: Some(greenup_core::quantity::Seconds(wall)),
                    source: Some(Source::Rapl),
                    restored: true,
                    note: None,
                    comm: split.map(|(compute_s, comm_s)| crate::comm::NodeComm {
                        ranks: 1,
                        compute_s: greenup_core::quantity::Seconds(compute_s),
                        comm_s: greenup_core::quantity::Seconds(comm_s),
                        ..Default::default()
                    }),
                    gpu: None,
                    power: None,
                })
                .collect(),
        }
    }

    const FAST: Option<f64> = Some(3.0);
    const ECO: Option<f64> = Some(2.4);

    /// What the test cluster's helper runs: each type alone on two nodes, then all four.
    fn cluster_runs(app: &str) -> Vec<JobRecord> {
        vec![
            run(1, app, 40.0, &[("n1", FAST, None), ("n2", FAST, None)]),
            run(2, app, 50.0, &[("n3", ECO, None), ("n4", ECO, None)]),
            run(3, app, 26.0, &four(None)),
        ]
    }

    /// The test cluster's four nodes, fast n1 and n2 at FAST and eco n3 and n4 at ECO,
    /// each with the same MPI runtime measurement.
    fn four(split: Option<(f64, f64)>) -> [Node<'static>; 4] {
        [
            ("n1", FAST, split),
            ("n2", FAST, split),
            ("n3", ECO, split),
            ("n4", ECO, split),
        ]
    }

    fn num(p: &Param) -> f64 {
        match p {
            Param::Number(x) => *x,
            other => panic!("{other}"),
        }
    }

    /// A feasible exact plan of `policy` for `nodes`, predicting `predicted_s` against a
    /// baseline of `baseline_s`: what outcome_from_record reads of a decision's plan.
    fn plan(
        policy: &str,
        nodes: Vec<crate::plan::PlannedNode>,
        predicted_s: f64,
        baseline_s: f64,
        objective: f64,
    ) -> crate::plan::Plan {
        use crate::plan::{Algorithm, Estimate, SearchInfo};
        use greenup_core::quantity::{Joules, Seconds, Watts};
        let est = |time_s: f64| Estimate {
            time_s: Seconds(time_s),
            energy_j: Joules(1.0),
            avg_power_w: Watts(1.0),
        };
        crate::plan::Plan {
            policy: policy.into(),
            feasible: true,
            reason: String::new(),
            node_count: nodes.len(),
            nodes,
            predicted: est(predicted_s),
            baseline: est(baseline_s),
            objective,
            search: SearchInfo {
                algorithm: Algorithm::Exact,
                candidates: 1,
                elapsed_us: 0,
                reused: false,
            },
            gpus: None,
        }
    }

    /// `name`, a fast node, planned at `ghz` with its GPUs left alone.
    fn planned(name: &str, ghz: f64) -> crate::plan::PlannedNode {
        crate::plan::PlannedNode {
            gpu_mhz: None,
            name: name.into(),
            node_type: "fast".into(),
            freq_ghz: greenup_core::quantity::Ghz(ghz),
        }
    }

    fn times(l: &Learned, ty: &str) -> (f64, f64) {
        let t = &l.file.hetero.as_ref().unwrap().node_types[ty];
        (num(&t.t_cp_s.value), num(&t.t_cm_s.value))
    }

    #[test]
    fn hetero_scales_a_mixed_run_by_the_types_measured_alone() {
        let l = learn(&site(), "md", Model::Hetero, &cluster_runs("md"), None).unwrap();
        // Four nodes: eco is the slower alone (50 s against 40 s on two nodes), so the
        // 26 s of the four-node run are eco's, and fast's are 26 * 40 / 50 = 20.8 s.
        assert_eq!(times(&l, "eco"), (26.0, 0.0));
        let (fast, cm) = times(&l, "fast");
        assert!((fast - 20.8).abs() < 1e-12, "{fast}");
        assert_eq!(cm, 0.0);
        let h = l.file.hetero.as_ref().unwrap();
        assert_eq!(
            h.nodes.as_ref().map(|n| n.value.clone()),
            Some(Param::Number(4.0))
        );
        assert_eq!(l.jobs, vec![1, 2, 3]);
        // On two nodes each type's own run says it directly.
        let two = learn(&site(), "md", Model::Hetero, &cluster_runs("md"), Some(2)).unwrap();
        assert_eq!((times(&two, "fast").0, times(&two, "eco").0), (40.0, 50.0));
    }

    #[test]
    fn runs_at_a_second_clock_teach_t_mem_and_without_them_the_note_says_so() {
        // The fast nodes alone on two nodes, each measured by the MPI runtime. Truth per
        // node (one iteration): t_cp 10 s at 3.0 GHz, t_mem 8 s, 2 s in MPI. At 3.0 GHz
        // compute is 18 s; at 1.5 GHz (S = 2) 28 s; at 2.0 GHz (S = 1.5) 23 s.
        let at = |job, ghz: f64, compute: f64| {
            let n = Some((compute, 2.0));
            run(
                job,
                "md",
                compute + 2.0,
                &[("n1", Some(ghz), n), ("n2", Some(ghz), n)],
            )
        };
        let recs = vec![at(1, 3.0, 18.0), at(2, 1.5, 28.0), at(3, 2.0, 23.0)];
        let l = learn(&site(), "md", Model::Hetero, &recs, None).unwrap();
        let t = &l.file.hetero.as_ref().unwrap().node_types["fast"];
        assert!((num(&t.t_cp_s.value) - 10.0).abs() < 1e-9, "{t:?}");
        assert!(
            (num(&t.t_mem_s.as_ref().unwrap().value) - 8.0).abs() < 1e-9,
            "{t:?}"
        );
        let fit = t.t_mem_fit.as_ref().unwrap();
        assert_eq!(fit.clocks.value, Param::Number(3.0));
        assert_eq!(fit.samples.value, Param::Number(6.0));
        assert!(num(&fit.rms_error.value) < 1e-9);
        assert!(
            l.notes.iter().any(|x| x.starts_with(
                "type fast: clock sensitivity from 6 node runs at 3 clocks: t_cp_s 10.000 scales with the clock, t_mem_s 8.000 does not"
            )),
            "{:?}",
            l.notes
        );
        assert_eq!(l.jobs, vec![1, 2, 3]);
        assert_eq!(
            l.file.description.as_ref().unwrap().value,
            Param::Text(
                "md, learned by greenup profile learn from jobs 1 at maximum frequency and 2 and 3 below it (clock sensitivity only)".into()
            )
        );
        // The learned profile predicts 10 * 3.0 / 1.0 + 8 + 2 = 40 s at 1.0 GHz.
        let p = Profile::from_file(Path::new("md"), l.file.clone()).unwrap();
        let h = p.hetero_model(&site()).unwrap();
        let tt = &h.types["fast"];
        assert!((tt.compute_s(3.0) + tt.t_cm_s - 40.0).abs() < 1e-9);

        // At f_max only: t_cp is the whole 18 s, t_mem is left out and the note says why.
        let l = learn(&site(), "md", Model::Hetero, &recs[..1], None).unwrap();
        let t = &l.file.hetero.as_ref().unwrap().node_types["fast"];
        assert_eq!((num(&t.t_cp_s.value), t.t_mem_s.as_ref()), (18.0, None));
        assert!(
            l.notes
                .iter()
                .any(|x| x.starts_with("type fast: clock sensitivity not learned")),
            "{:?}",
            l.notes
        );
    }

    #[test]
    fn the_gpus_busy_time_is_learned_from_nvmls_utilization_over_each_run() {
        let mut s = site();
        // etc/greenup.yaml's fast nodes n1 and n2 get two GPUs each.
        s.gpu_types.insert(
            "fast".into(),
            crate::site::GpuType {
                count: 2,
                clocks_mhz: Some((800, 1600)),
                clock_step_mhz: None,
                power_limit_w: None,
                dynamic_w: 250.0,
                static_w: 50.0,
                gamma: 3.0,
            },
        );
        // Each GPU draws 50 W idle and 300 W busy, so a node's two draw on average
        // 2 x (50 (1 - u) + 300 u) W at utilization u.
        let util = |rec: &mut JobRecord, node: &str, pct: f64, mhz: f64| {
            let o = rec.outcomes.iter_mut().find(|o| o.node == node).unwrap();
            let u = pct / 100.0;
            o.gpu = Some(Box::new(crate::record::NodeGpu {
                gpus: 2,
                source: Default::default(),
                energy_j: Some(greenup_core::quantity::Joules(1.0)),
                avg_power_w: Some(greenup_core::quantity::Watts(
                    2.0 * (50.0 * (1.0 - u) + 300.0 * u),
                )),
                sm_mhz: Some(mhz),
                util_pct: Some(pct),
                note: None,
            }));
        };
        let mut recs = cluster_runs("md");
        // Job 1, two nodes, 40 s: 50 % and 60 %, so 22 s per node on 2 nodes, the work
        // of 11 s per node on 4. Job 3, four nodes, 26 s: 40 % on both, 10.4 s.
        util(&mut recs[0], "n1", 50.0, 1500.0);
        util(&mut recs[0], "n2", 60.0, 1500.0);
        util(&mut recs[2], "n1", 40.0, 1400.0);
        util(&mut recs[2], "n2", 40.0, 1400.0);
        // Job 4 measured one of its fast nodes' GPUs only: it says nothing of them.
        let mut partial = run(4, "md", 26.0, &[("n1", FAST, None), ("n2", FAST, None)]);
        util(&mut partial, "n1", 90.0, 1000.0);
        recs.push(partial);
        let l = learn(&s, "md", Model::Hetero, &recs, None).unwrap();
        let g = l.file.gpu.as_ref().expect("a gpu section");
        assert_eq!(g.nodes.value, Param::Number(4.0));
        assert_eq!(g.node_types.keys().collect::<Vec<_>>(), ["fast"]);
        let Param::Number(busy) = g.node_types["fast"].busy_s.value else {
            panic!("{:?}", g.node_types["fast"].busy_s.value);
        };
        assert!((busy - (11.0 + 10.4) / 2.0).abs() < 1e-9, "{busy}");
        // The clock: the mean of the two runs' 1500 and 1400 MHz; the busy power, each
        // node's mean power with the idle share's static power taken out: 300 W.
        let t = &g.node_types["fast"];
        assert_eq!(t.clock_mhz.as_ref().unwrap().value, Param::Number(1450.0));
        assert_eq!(t.power_w.as_ref().unwrap().value, Param::Number(300.0));
        assert!(
            l.notes.iter().any(|n| n.starts_with("gpu: on 4 nodes")),
            "{:?}",
            l.notes
        );
        // The profile carries it to decisions.
        let p = Profile::from_file(Path::new("md"), l.file).unwrap();
        assert_eq!(p.gpu_busy().unwrap().types["fast"].busy_s, busy);
        // Without GPU readings there is no section.
        let l = learn(&s, "md", Model::Hetero, &cluster_runs("md"), None).unwrap();
        assert!(l.file.gpu.is_none());
    }

    #[test]
    fn hetero_takes_each_nodes_compute_and_mpi_time_where_the_runtime_measured_them() {
        let split = Some((18.0, 7.0));
        let eco_split = Some((23.0, 2.5));
        let recs = vec![run(
            7,
            "md",
            26.0,
            &[
                ("n1", FAST, split),
                ("n2", FAST, Some((20.0, 5.0))),
                ("n3", ECO, eco_split),
                ("n4", ECO, eco_split),
            ],
        )];
        let l = learn(&site(), "md", Model::Hetero, &recs, None).unwrap();
        // Means over each type's nodes: fast (18 + 20) / 2 and (7 + 5) / 2.
        assert_eq!(times(&l, "fast"), (19.0, 6.0));
        assert_eq!(times(&l, "eco"), (23.0, 2.5));
        // The run waits for n2, 20 s against the fast mean's 19: lead 20 / 19, said in a
        // note. The eco nodes did equal work: no lead.
        let types = &l.file.hetero.as_ref().unwrap().node_types;
        let lead = types["fast"].lead.as_ref().map(|v| num(&v.value)).unwrap();
        assert!((lead - 20.0 / 19.0).abs() < 1e-12, "{lead}");
        assert!(types["eco"].lead.is_none());
        assert!(
            l.notes
                .iter()
                .any(|n| n.starts_with("type fast: its slowest node computes 5% longer")),
            "{:?}",
            l.notes
        );
    }

    #[test]
    fn steps_are_learned_from_each_types_slowest_node_per_window() {
        let windows = |c: &[f64]| crate::comm::StepTimes {
            window_s: greenup_core::quantity::Seconds(0.01),
            compute_s: c.to_vec(),
        };
        let split = Some((0.014, 0.006));
        let mut rec = run(8, "md", 0.02, &four(split));
        let counted = [
            ("n1", [0.010, 0.002]),
            ("n2", [0.008, 0.004]),
            ("n3", [0.003, 0.010]),
            ("n4", [0.002, 0.009]),
        ];
        for (node, c) in counted {
            let o = rec.outcomes.iter_mut().find(|o| o.node == node).unwrap();
            o.comm.as_mut().unwrap().steps = Some(windows(&c));
        }
        let l = learn(&site(), "md", Model::Hetero, &[rec.clone()], None).unwrap();
        // Per window, each type's slowest node: fast 10 and 4 ms, eco 3 and 10 ms. Over
        // each type's total (14 and 13 ms) the two steps' shares are fast 10/14, eco 3/13
        // and fast 4/14, eco 10/13: two directions, kept apart exactly.
        let steps = l.file.hetero.as_ref().unwrap().steps.as_ref().unwrap();
        let mut got: Vec<(f64, f64)> = steps
            .iter()
            .map(|c| (num(&c.share["fast"].value), num(&c.share["eco"].value)))
            .collect();
        got.sort_by(|a, b| b.0.total_cmp(&a.0));
        let want = [(10.0 / 14.0, 3.0 / 13.0), (4.0 / 14.0, 10.0 / 13.0)];
        assert_eq!(got.len(), 2, "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g.0 - w.0).abs() < 1e-12 && (g.1 - w.1).abs() < 1e-12,
                "{got:?}"
            );
        }
        assert!(
            l.notes
                .iter()
                .any(|x| x.starts_with("steps: 2 classes from 2 windows of 0.01 s of jobs 8")),
            "{:?}",
            l.notes
        );
        // A node without windows leaves the run out, and nothing is learned.
        rec.outcomes[3].comm.as_mut().unwrap().steps = None;
        let l = learn(&site(), "md", Model::Hetero, &[rec], None).unwrap();
        assert!(l.file.hetero.as_ref().unwrap().steps.is_none());
        assert!(
            l.notes
                .iter()
                .any(|x| x.starts_with("steps: none learned (no run measured")),
            "{:?}",
            l.notes
        );
    }

    #[test]
    fn steps_are_learned_at_each_window_length_the_runs_are_long_enough_for() {
        // 32 windows of 10 ms, in 8 blocks of 40 ms. Even blocks: fast computes 9 ms in
        // each of its 4 windows, eco 8 ms in the first only; odd blocks the other way
        // round, eco 9 ms in each, fast 4 ms in the first. At 10 ms that is 4 directions;
        // at 40 ms it is the blocks' alternation, 2 directions.
        let (fast, eco): (Vec<f64>, Vec<f64>) = (0..32)
            .map(|k| match ((k / 4) % 2, k % 4) {
                (0, 0) => (0.009, 0.008),
                (0, _) => (0.009, 0.0),
                (_, 0) => (0.004, 0.009),
                _ => (0.0, 0.009),
            })
            .unzip();
        let split = Some((0.16, 0.16));
        let mut rec = run(9, "md", 0.32, &four(split));
        for (node, c) in [("n1", &fast), ("n2", &fast), ("n3", &eco), ("n4", &eco)] {
            let o = rec.outcomes.iter_mut().find(|o| o.node == node).unwrap();
            o.comm.as_mut().unwrap().steps = Some(crate::comm::StepTimes {
                window_s: greenup_core::quantity::Seconds(0.01),
                compute_s: c.clone(),
            });
        }
        let l = learn(&site(), "md", Model::Hetero, &[rec], None).unwrap();
        let h = l.file.hetero.as_ref().unwrap();
        let ladder = h.step_windows.as_ref().expect("step_windows");
        // 10 ms, then 40 ms (8 windows); 160 ms would leave the run 2.
        let lengths: Vec<f64> = ladder.iter().map(|w| num(&w.window_s.value)).collect();
        assert_eq!(lengths, [0.01, 0.04]);
        // steps: is the finest length's classes.
        assert_eq!(h.steps.as_ref(), Some(&ladder[0].classes));
        let steps: Vec<u64> = ladder[0]
            .classes
            .iter()
            .map(|c| num(&c.steps.value) as u64)
            .collect();
        assert_eq!(steps, [4, 12, 4, 12]);
        // At 40 ms, over the totals (fast 4 * 36 + 4 * 4 = 160 ms, eco 4 * 8 + 4 * 36 =
        // 176 ms): even blocks fast 144/160, eco 32/176; odd blocks fast 16/160, eco 144/176.
        let mut got: Vec<(u64, f64, f64)> = ladder[1]
            .classes
            .iter()
            .map(|c| {
                (
                    num(&c.steps.value) as u64,
                    num(&c.share["fast"].value),
                    num(&c.share["eco"].value),
                )
            })
            .collect();
        got.sort_by(|a, b| b.1.total_cmp(&a.1));
        let want = [(4, 0.9, 2.0 / 11.0), (4, 0.1, 9.0 / 11.0)];
        assert_eq!(got.len(), 2, "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                g.0 == w.0 && (g.1 - w.1).abs() < 1e-12 && (g.2 - w.2).abs() < 1e-12,
                "{got:?}"
            );
        }
        assert!(
            l.notes
                .iter()
                .any(|x| x
                    .starts_with("step_windows: classes learned at windows of 0.01 and 0.04 s")),
            "{:?}",
            l.notes
        );
        let p = Profile::from_file(Path::new("md"), l.file).unwrap();
        let w: Vec<f64> = p.hetero_step_windows().iter().map(|x| x.0).collect();
        assert_eq!(w, [0.01, 0.04]);
        assert_eq!(p.hetero_steps(), Some(&p.hetero_step_windows()[0].1));
    }

    #[test]
    fn missing_data_is_one_line_saying_what_is_missing() {
        let s = site();
        // Only the mixed run: nothing tells the types apart.
        let e = learn(&s, "md", Model::Hetero, &cluster_runs("md")[2..], None).unwrap_err();
        assert!(
            e.to_string().starts_with("hetero cannot tell the compute time of type eco and fast on 4 nodes: job 3 ran on types eco and fast together"),
            "{e}"
        );
        // amdahl needs three node counts.
        let e = learn(&s, "md", Model::Amdahl, &cluster_runs("md"), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "amdahl needs monitor runs of md on 3 node counts; have 2 and 4"
        );
        // Runs that cannot teach say why they were left out.
        let mut failed = run(8, "md", 30.0, &[("n1", FAST, None)]);
        failed.end = Some(JobEnd::Failed);
        let slow = run(9, "md", 30.0, &[("n1", Some(2.2), None)]);
        let silent = run(10, "md", 30.0, &[("n2", None, None)]);
        let e = learn(&s, "md", Model::Amdahl, &[failed, slow, silent], None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "amdahl needs monitor runs of md on 3 node counts; have none (left out: job 8: job ended FAILED; job 9: n1 ran at 2.2 GHz, below its type's maximum; job 10: node n2 did not report the frequency it ran at)"
        );
        let e = learn(&s, "md", Model::Hetero, &[], Some(4)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hetero for 4 nodes needs a monitor run of md on 4 nodes; have none"
        );
        let e = learn(&s, "md", Model::Hetero, &cluster_runs("md"), Some(3)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hetero for 3 nodes needs a monitor run of md on 3 nodes; have runs on 2 and 4 nodes"
        );
        // Other applications' runs do not count.
        let e = learn(&s, "lmp", Model::Hetero, &cluster_runs("md"), None).unwrap_err();
        assert!(e.to_string().contains("have none"), "{e}");
    }

    #[test]
    fn amdahl_is_the_least_squares_fit_over_three_node_counts() {
        // Truth: T(n) = 900 / n + 100 + 20 log2 n: T_C(0,1) = 1000 s, F_p = 0.9, log law
        // with 20 s. T(1) = 1000, T(2) = 570, T(4) = 365, T(8) = 272.5. The two runs on
        // four nodes lie 5 s either side of 365: least squares over duplicated rows at
        // one n is the fit through their mean, so the truth is recovered exactly, and
        // only the log law fits four counts without error.
        let node = |i: usize| {
            let names = ["n1", "n2", "n3", "n4", "h001", "h002", "h003", "h004"];
            let f = [FAST, FAST, ECO, ECO];
            (names[i], f.get(i).copied().flatten().or(Some(2.5)), None)
        };
        let on = |n: usize| (0..n).map(node).collect::<Vec<_>>();
        let recs = vec![
            run(1, "md", 1000.0, &on(1)),
            run(2, "md", 570.0, &on(2)),
            run(3, "md", 360.0, &on(4)),
            run(4, "md", 370.0, &on(4)),
            run(5, "md", 272.5, &on(8)),
        ];
        let l = learn(&site(), "md", Model::Amdahl, &recs, None).unwrap();
        let a = l.file.amdahl.as_ref().unwrap();
        assert!((num(&a.t_c1_s.value) - 1000.0).abs() < 1e-6);
        assert!((num(&a.parallel_fraction.value) - 0.9).abs() < 1e-9);
        assert!((num(&a.comm.coeff_s.value) - 20.0).abs() < 1e-6);
        assert_eq!(a.comm.law.value, Param::Text("log".into()));
        assert_eq!(l.jobs, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_clock_sample_is_learned_at_the_clock_it_ran_never_as_a_run_at_fmax() {
        let s = site();
        // A monitor job the site ran with both nodes at 1.8 GHz: n1 reported it, n2
        // reported nothing and stands at its planned clock.
        let mut rec = run(
            12,
            "md",
            40.0,
            &[("n1", Some(1.8), Some((30.0, 9.0))), ("n2", None, None)],
        );
        rec.decision.verdict = Verdict::Planned;
        rec.decision.monitor = false;
        rec.decision.clock_sample = true;
        let nodes = vec![planned("n1", 1.8), planned("n2", 1.8)];
        rec.decision.plan = Some(plan("monitor", nodes, 45.0, 30.0, 45.0));
        assert!(!rec.decision.measured_baseline());
        let o = outcome_from_record(&rec, &s).unwrap();
        let clocks: Vec<f64> = o.nodes.iter().map(|n| n.freq_ghz).collect();
        assert_eq!(clocks, [1.8, 1.8]);
        // Judged against its own prediction at 1.8 GHz (45 s), not f_max's 30 s.
        assert_eq!(o.predicted_time_s, 45.0);
        // A first version learns from runs at f_max: this one can teach only how the
        // time follows the clock.
        let (used, clocked, left_out) = runs_at_fmax(&s, "md", std::slice::from_ref(&rec));
        assert!(used.is_empty(), "{used:?}");
        assert_eq!(clocked.len(), 1);
        assert_eq!(
            left_out,
            ["job 12: n1 ran at 1.8 GHz, below its type's maximum"]
        );
    }

    #[test]
    fn a_baseline_sample_is_an_outcome_of_every_node_at_the_frequency_it_reported() {
        let s = site();
        // The policy planned n1 alone at 1.8 GHz; the site sampled the job instead, so
        // it ran unchanged on both nodes at the frequency each reported.
        let mut rec = run(
            11,
            "md",
            40.0,
            &[("n1", FAST, Some((30.0, 9.0))), ("n2", Some(2.6), None)],
        );
        rec.decision.policy = "max-dist".into();
        rec.decision.baseline_sample = true;
        let nodes = vec![planned("n1", 1.8)];
        rec.decision.plan = Some(plan("max-dist", nodes, 70.0, 90.0, 0.0));
        let o = outcome_from_record(&rec, &s).unwrap();
        let seen: Vec<(&str, &str, f64)> = o
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.node_type.as_str(), n.freq_ghz))
            .collect();
        assert_eq!(seen, vec![("n1", "fast", 3.0), ("n2", "fast", 2.6)]);
        assert_eq!(
            (o.nodes[0].compute_s, o.nodes[0].comm_s),
            (Some(30.0), Some(9.0))
        );
        // Its length is judged against the all-f_max baseline (90 s), not the plan's 70 s.
        assert_eq!((o.time_s, o.predicted_time_s), (40.0, 90.0));
        assert!(matches!(
            check(&o),
            Err(crate::profile::outcome::Outlier::TooShort { .. })
        ));
        // A plan that locked the GPUs, applied: the models leave the GPUs' stretch of the
        // run out, so its run refines nothing; the same plan at their own clock may.
        rec.decision.baseline_sample = false;
        rec.decision.verdict = Verdict::Planned;
        rec.decision.plan.as_mut().unwrap().nodes[0].gpu_mhz = Some(1200);
        let o = outcome_from_record(&rec, &s).unwrap();
        assert!(o.gpu_locked);
        assert!(matches!(
            check(&o),
            Err(crate::profile::outcome::Outlier::GpuLocked)
        ));
        rec.decision.plan.as_mut().unwrap().nodes[0].gpu_mhz = None;
        assert!(!outcome_from_record(&rec, &s).unwrap().gpu_locked);
        // A refused job ran unmanaged: greenup learns nothing from it.
        rec.decision.verdict = Verdict::Refused;
        assert!(outcome_from_record(&rec, &s).is_none());
    }

    #[test]
    fn refinement_of_a_learned_hetero_profile_uses_only_runs_on_its_node_count() {
        let s = site();
        let l = learn(&s, "md", Model::Hetero, &cluster_runs("md"), None).unwrap();
        let profile = Profile::from_file(Path::new("md.yaml"), l.file).unwrap();
        let mut recs = cluster_runs("md");
        recs.push(run(4, "md", 28.6, &four(None)));
        let outcomes: Vec<Outcome> = recs
            .iter()
            .filter_map(|r| outcome_from_record(r, &s))
            .collect();
        let r = refine_profile(&profile, &s, &outcomes).unwrap();
        // Without compute times every type is scaled by the mean measured / predicted
        // wall time of the four-node runs: (26 / 26 + 28.6 / 26) / 2 = 1.05. The two-node
        // runs (40 / 20.8 and 50 / 26) would have made it about 1.49.
        let t = &r.file.hetero.as_ref().unwrap().node_types;
        assert!((num(&t["eco"].t_cp_s.value) - 26.0 * 1.05).abs() < 1e-9);
        assert!((num(&t["fast"].t_cp_s.value) - 20.8 * 1.05).abs() < 1e-9);
        assert_eq!(r.samples, 2);
    }

    /// A run of `app` the MPI runtime measured on `p` type1 nodes (h001..) at their 2.5
    /// GHz: paper 000's vectors worked by hand. t_c = 1e-9 / 2.5 = 4e-10 s per cycle;
    /// W_c = 5e9 cycles and W_co = 2.5e8 (p - 1), so the time outside MPI summed over the
    /// nodes is (5e9 + 2.5e8 (p - 1)) 4e-10 s; M = 1000 p calls and B = 1e5 p (p - 1)
    /// bytes at t_msg = 2e-5 s and t_byte = 1e-8 s inside MPI; the wall time is
    /// alpha Tp / p with alpha = 0.8.
    fn iso_run(job_id: u64, app: &str, p: usize) -> JobRecord {
        let pf = p as f64;
        let compute = (5e9 + 2.5e8 * (pf - 1.0)) * 4e-10;
        let (calls, bytes) = (1000.0 * pf, 1e5 * pf * (pf - 1.0));
        let comm = calls * 2e-5 + bytes * 1e-8;
        let wall = 0.8 * (compute + comm) / pf;
        let names: Vec<String> = (1..=p).map(|i| format!("h{i:03}")).collect();
        let nodes: Vec<Node> = names
            .iter()
            .map(|n| (n.as_str(), Some(2.5), Some((compute / pf, comm / pf))))
            .collect();
        let mut r = run(job_id, app, wall, &nodes);
        for o in &mut r.outcomes {
            let c = o.comm.as_mut().unwrap();
            c.calls = (calls / pf) as u64;
            c.bytes = (bytes / pf) as u64;
        }
        r
    }

    #[test]
    fn iso_energy_recovers_paper_000s_vectors_worked_by_hand() {
        let recs: Vec<JobRecord> = [2, 3, 4]
            .iter()
            .enumerate()
            .map(|(i, p)| iso_run(10 + i as u64, "md", *p))
            .collect();
        let l = learn(&site(), "md", Model::IsoEnergy, &recs, None).unwrap();
        let iso = l.file.iso_energy.as_ref().expect("an iso_energy section");
        let text = |p: &Param| p.to_string();
        let close = |got: f64, want: f64| (got / want - 1.0).abs() < 1e-6;
        let a = &iso.application;
        assert!(close(num(&a.w_c.value), 5e9), "{}", a.w_c.value);
        assert!(close(num(&a.alpha.value), 0.8), "{}", a.alpha.value);
        let m = &iso.machine;
        assert!(close(num(&m.t_msg.value), 2e-5), "{}", m.t_msg.value);
        assert!(close(num(&m.t_byte.value), 1e-8), "{}", m.t_byte.value);
        // The machine names the site's type1 for its watts and copies none of them.
        assert_eq!(text(&m.power.as_ref().unwrap().value), "type1");
        assert!(m.p_idle.is_none() && m.dp_c.is_none() && m.dp_m.is_none());
        // Each law is the one the runs were made with, at its coefficient.
        let law = |p: &Param, want: &str, k: f64| {
            let e = crate::expr::Expr::parse(&text(p), &["n", "p"]).unwrap();
            assert!(text(p).ends_with(&format!("({want})")), "{}", text(p));
            let got = e.eval(&[1.0, 4.0]).unwrap();
            let at4 = crate::expr::Expr::parse(want, &["n", "p"])
                .unwrap()
                .eval(&[1.0, 4.0])
                .unwrap();
            assert!(close(got, k * at4), "{} at p = 4: {got}", text(p));
        };
        law(&a.w_co.value, "p - 1", 2.5e8);
        law(&a.m.value, "p", 1000.0);
        law(&a.b.value, "p * (p - 1)", 1e5);
        assert_eq!(l.jobs, vec![10, 11, 12]);
        // The learned profile predicts the runs it came from.
        let profile = Profile::from_file(Path::new("md.yaml"), l.file.clone()).unwrap();
        let model = profile
            .iso_energy()
            .unwrap()
            .on_site(&site().node_types)
            .unwrap();
        for p in [2usize, 3, 4] {
            let pf = p as f64;
            let want = 0.8
                * ((5e9 + 2.5e8 * (pf - 1.0)) * 4e-10
                    + 1000.0 * pf * 2e-5
                    + 1e5 * pf * (pf - 1.0) * 1e-8)
                / pf;
            let got = model.wall_time_s(1.0, p, 2.5).unwrap();
            assert!(close(got, want), "p = {p}: {got} s, want {want} s");
        }
    }

    #[test]
    fn iso_energy_learns_how_much_a_waiting_node_draws_from_the_runs_energy() {
        // type1 draws 4 W static and 20 W dynamic at 2.5 GHz; each node draws 0.6 of its
        // dynamic watts while it waits in MPI, so its energy is 4 T + 20 c + 12 w. Two
        // runs, so no clock has the three runs a measured curve needs: the site's watts
        // stand, and the fit has one answer, 0.6.
        let recs: Vec<JobRecord> = [2usize, 4]
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let mut r = iso_run(20 + i as u64, "md", p);
                for o in &mut r.outcomes {
                    let c = o.comm.as_ref().unwrap();
                    let (wall, busy, wait) = (o.elapsed_s.unwrap().0, c.compute_s.0, c.comm_s.0);
                    o.energy_j = Some(greenup_core::quantity::Joules(
                        4.0 * wall + 20.0 * busy + 12.0 * wait,
                    ));
                }
                r
            })
            .collect();
        let l = learn(&site(), "md", Model::IsoEnergy, &recs, None).unwrap();
        let m = &l.file.iso_energy.as_ref().unwrap().machine;
        let w = num(&m.wait_share.as_ref().expect("a waiting share").value);
        assert!((w - 0.6).abs() < 1e-9, "{w}");
        assert!(
            l.notes
                .iter()
                .any(|n| n.contains("waiting share 0.60 from the measured energy of 2 runs")),
            "{:?}",
            l.notes
        );
        // Nodes that drew nothing while they waited (energy 4 T + 20 c) learn 0, and a
        // share the runs put above 1 is held to 1.
        for (k, want) in [(0.0, 0.0), (30.0, 1.0)] {
            let mut recs = recs.clone();
            for r in &mut recs {
                for o in &mut r.outcomes {
                    let c = o.comm.as_ref().unwrap();
                    let (wall, busy, wait) = (o.elapsed_s.unwrap().0, c.compute_s.0, c.comm_s.0);
                    o.energy_j = Some(greenup_core::quantity::Joules(
                        4.0 * wall + 20.0 * busy + k * wait,
                    ));
                }
            }
            let l = learn(&site(), "md", Model::IsoEnergy, &recs, None).unwrap();
            let m = &l.file.iso_energy.as_ref().unwrap().machine;
            assert_eq!(num(&m.wait_share.as_ref().unwrap().value), want);
        }
    }

    #[test]
    fn iso_energy_without_the_runtimes_measurements_or_on_two_types_is_one_line() {
        let e = learn(&site(), "md", Model::IsoEnergy, &cluster_runs("md"), None).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "iso_energy needs monitor runs of md that greenup's MPI runtime measured on 2 node counts; have none (0 of 3 runs measured)"
            ),
            "{e}"
        );
        let one = vec![iso_run(10, "md", 2), iso_run(11, "md", 2)];
        let e = learn(&site(), "md", Model::IsoEnergy, &one, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("have runs on 2 nodes (2 of 2 runs measured)"),
            "{e}"
        );
        // A run on the fast pair beside type1's: two kinds of processor.
        let mut mixed = vec![iso_run(10, "md", 2), iso_run(11, "md", 3)];
        let mut fast = iso_run(12, "md", 2);
        for (o, n) in fast.outcomes.iter_mut().zip(["n1", "n2"]) {
            o.node = n.into();
            o.freq_ghz = Some(greenup_core::quantity::Ghz(3.0));
        }
        fast.request.nodes = vec!["n1".into(), "n2".into()];
        mixed.push(fast);
        let e = learn(&site(), "md", Model::IsoEnergy, &mixed, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "iso_energy models one kind of processor: the runs of md ran on node types fast and type1; learn from runs on one type"
        );
    }
}
