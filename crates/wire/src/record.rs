//! One vocabulary for a job's record: what was asked ([`OpenJob`]), what was decided ([`Decision`], [`Verdict`]), what each node measured
//! ([`NodeOutcome`], [`Source`]), whether each node's setting took ([`Applied`]), how
//! the job ended ([`JobEnd`], [`RunState`]) and the rules that read nothing but them.
//!
//! The protocol, the store, reports, refinement and the plugin all use these types,
//! so a word such as `cancelled` or `rapl` is parsed in one place only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use greenup_core::plan::{Algorithm, Plan};
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
pub use greenup_core::time_limit::TimeLimit;

/// Where a job is in greenupd's life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Decided and holding a power reservation.
    Open,
    /// Closed by Slurm's epilog; reservation released.
    Closed,
    /// Gone from Slurm without a close, or past its time limit plus grace; reservation reclaimed.
    Reclaimed,
}

impl JobState {
    /// The lowercase name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Open => "open",
            JobState::Closed => "closed",
            JobState::Reclaimed => "reclaimed",
        }
    }

    /// Parse the lowercase name.
    pub fn parse(s: &str) -> Option<JobState> {
        match s {
            "open" => Some(JobState::Open),
            "closed" => Some(JobState::Closed),
            "reclaimed" => Some(JobState::Reclaimed),
            _ => None,
        }
    }
}

/// How a job ended: sent by the job's first node at close, settled by greenupd against
/// Slurm's final record, stored, reported, and read by refinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobEnd {
    /// The batch script (or the allocation's command) exited 0.
    Completed,
    /// It exited non-zero, died of a signal of its own, or lost a node.
    Failed,
    /// Ended from outside (scancel, an admin, preemption) before it finished.
    Cancelled,
    /// Ended by its time limit.
    Timeout,
    /// Nothing certain says how it ended. Older closes sent `ended` for this.
    #[serde(alias = "ended")]
    Unknown,
}

impl JobEnd {
    /// The lowercase word used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            JobEnd::Completed => "completed",
            JobEnd::Failed => "failed",
            JobEnd::Cancelled => "cancelled",
            JobEnd::Timeout => "timeout",
            JobEnd::Unknown => "unknown",
        }
    }

    /// Read a stored word. Stores written by earlier versions hold `ended`, `ok` and
    /// free text from reclaims; anything not a known end is [`JobEnd::Unknown`].
    pub fn from_stored(s: &str) -> JobEnd {
        match s.to_ascii_lowercase().as_str() {
            "completed" | "ok" => JobEnd::Completed,
            "failed" => JobEnd::Failed,
            "timeout" => JobEnd::Timeout,
            s if s.starts_with("cancel") => JobEnd::Cancelled,
            _ => JobEnd::Unknown,
        }
    }

    /// The end a final Slurm job state (as `scontrol` or `sacct` print it, `CANCELLED
    /// by 0` included) stands for; `None` while the job is not over (`RUNNING`,
    /// `COMPLETING`, `PENDING`, ...), or for a word this version does not know.
    pub fn from_slurm_state(state: &str) -> Option<JobEnd> {
        let word = state.split_whitespace().next().unwrap_or("");
        match word {
            "COMPLETED" => Some(JobEnd::Completed),
            "CANCELLED" | "PREEMPTED" | "REVOKED" => Some(JobEnd::Cancelled),
            "TIMEOUT" | "DEADLINE" => Some(JobEnd::Timeout),
            "FAILED" | "NODE_FAIL" | "BOOT_FAIL" | "OUT_OF_MEMORY" => Some(JobEnd::Failed),
            _ => None,
        }
    }
}

/// What greenupd decided for a job, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Apply the plan.
    Planned,
    /// The budget could not fit the policy's choice; the plan is the lowest-power configuration.
    BudgetLimited,
    /// Run the job as submitted (no profile, a monitoring policy, or `over_budget: unchanged`).
    Unchanged,
    /// greenup does not manage the job: the budget is used up and the site refuses
    /// (`over_budget: refuse`), or no plan can be made for what the job asked (a
    /// policy the site does not allow, a bad profile, an invalid cap). The reason says
    /// which; under `enforce: open` the job runs unmanaged and holds its nodes' full power.
    Refused,
}

impl Verdict {
    /// The snake_case word used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Planned => "planned",
            Verdict::BudgetLimited => "budget_limited",
            Verdict::Unchanged => "unchanged",
            Verdict::Refused => "refused",
        }
    }

    /// Whether a job decided so, reserving `reserved_w`, holds it in the ledger; see
    /// [`Decision::holds_reservation`].
    pub fn holds_reservation(self, reserved_w: Watts) -> bool {
        self != Verdict::Refused || reserved_w.0 > 0.0
    }

    /// Whether the nodes apply a plan under this verdict.
    pub fn applies_plan(self) -> bool {
        matches!(self, Verdict::Planned | Verdict::BudgetLimited)
    }
}

/// A job's stored decision: the same for every node that asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Slurm job id.
    pub job_id: u64,
    /// What to do.
    pub verdict: Verdict,
    /// Why, in one line (empty when there is nothing to say).
    pub reason: String,
    /// The policy applied.
    pub policy: String,
    /// Whether that policy only records (its `monitor: true`), whatever its name: such a
    /// job runs unchanged on purpose, and its run is a measured baseline. False for a
    /// clock sample, which applies a plan although its policy is a monitor policy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub monitor: bool,
    /// Whether the site picked this job as a measured baseline: every node at f_max,
    /// recorded as monitor, although its policy would have planned (the plan is kept).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline_sample: bool,
    /// Whether the site picked this monitor job as a clock sample (`power.sample_clocks`):
    /// its nodes run at a clock whose watts no run has measured yet, so the run is not a
    /// measured baseline and savings are never measured against it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock_sample: bool,
    /// The profile used, if any.
    pub profile: Option<String>,
    /// The profile's version, if any.
    pub profile_version: Option<String>,
    /// The power cap the plan was made under (the user's cap or the budget left, whichever is lower).
    pub power_cap_w: Option<Watts>,
    /// Watts reserved in the ledger for this job.
    pub reserved_w: Watts,
    /// The plan, when there is one.
    pub plan: Option<Plan>,
    /// Unix seconds when the decision was made.
    pub decided_at: i64,
    /// For a refused job, the error every node is answered with (`over_budget`,
    /// `plan_failed`, `bad_request`); absent in decisions stored before it existed,
    /// which were all `over_budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<ErrorCode>,
    /// Each energy budget the job was charged to, as it stood at admission, with the
    /// warning level that acted on the decision, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<crate::budget::AtAdmission>,
    /// Communication-phase DVFS as the job's policy asks for it (`low_ghz` unset: each
    /// node's type resolves its own low gear); absent when the policy does not ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_dvfs: Option<greenup_comm::CommDvfs>,
    /// The watts Slurm granted the job and how they are shared among its nodes, when the
    /// site holds power in Slurm's queue; each node's RAPL limit is its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::power::Grant>,
    /// The in-job guard's terms when the job's policy promises a `max_slowdown`: the
    /// promise and the measured baseline's rate, or why the guard is off; absent when
    /// there is no promise to guard (and in decisions from before the guard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<greenup_comm::GuardTerms>,
    /// The watts the plan was made with, for each node type at each clock the plan set
    /// its nodes to, and where they came from; empty when no plan is applied (and in
    /// decisions from before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watts: Vec<TypeWatts>,
}

/// Where a node type's watts at one clock come from. The model reads it from its
/// measured curves and the decision stores it, so it is the wire's, in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PowerSource {
    /// The site config's power model.
    Site,
    /// The mean of what nodes measured at this clock in this many runs.
    Measured {
        /// Distinct runs that measured it.
        runs: usize,
    },
    /// A straight line between the two nearest measured clocks.
    Interpolated,
    /// A clock above or below every measured one: the site's model, scaled by measured /
    /// site at the nearest measured clock; below them, no lower than that clock's dynamic
    /// watts scaled with the clock alone (`greenup::model::measured_power`).
    SiteScaled,
}

impl PowerSource {
    /// The source's kind as one word (`site`, `measured`, `interpolated`,
    /// `site_scaled`, as in JSON), for labels that must not grow with the run count.
    pub fn kind(self) -> &'static str {
        match self {
            PowerSource::Site => "site",
            PowerSource::Measured { .. } => "measured",
            PowerSource::Interpolated => "interpolated",
            PowerSource::SiteScaled => "site_scaled",
        }
    }
}

/// How `greenup site power`, the job report and the logs word a source.
impl std::fmt::Display for PowerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PowerSource::Site => write!(f, "site"),
            PowerSource::Measured { runs: 1 } => write!(f, "measured, 1 run"),
            PowerSource::Measured { runs } => write!(f, "measured, {runs} runs"),
            PowerSource::Interpolated => write!(f, "interpolated between measured clocks"),
            PowerSource::SiteScaled => write!(f, "scaled from the nearest measured clock"),
        }
    }
}

/// The watts one node of a type was planned with at the clock its plan set it to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeWatts {
    /// The node type, as the site config names it.
    #[serde(rename = "type")]
    pub node_type: String,
    /// The clock the plan set the type's nodes to, in GHz.
    pub freq_ghz: Ghz,
    /// Watts of one node while computing at that clock.
    pub busy_w: Watts,
    /// Watts of one node while not computing (always the site config's).
    pub idle_w: Watts,
    /// Where `busy_w` comes from.
    pub source: PowerSource,
    /// The nodes of this type at this clock that the plan scaled by their own learned
    /// power factor (they draw measurably more or less than their type), by name; empty
    /// when none did, and in decisions from before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_factors: BTreeMap<String, f64>,
}

impl Decision {
    /// Whether the job holds its `reserved_w` in the ledger until it is closed: every
    /// job greenup manages, and a refused one that still runs (unmanaged, at full
    /// power) under `enforce: open`. A refused job that holds nothing fails under
    /// `enforce: strict` and is closed as it is stored.
    pub fn holds_reservation(&self) -> bool {
        self.verdict.holds_reservation(self.reserved_w)
    }

    /// The frequency (GHz) this node should run at, or `None` to leave it alone.
    pub fn freq_for(&self, node: &str) -> Option<f64> {
        self.applied_plan()?
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.freq_ghz.0)
    }

    /// The plan the nodes apply, if the verdict applies one.
    pub fn applied_plan(&self) -> Option<&Plan> {
        self.plan.as_ref().filter(|_| self.verdict.applies_plan())
    }

    /// Whether greenup keeps this run as its application's measured baseline: a monitor
    /// decision (a monitor policy, a baseline sample, a held policy) that names a profile,
    /// and is no clock sample (whose nodes ran below f_max).
    pub fn measured_baseline(&self) -> bool {
        // The same rule as the store's `baseline_rate` and `app_history` queries.
        self.monitor && !self.clock_sample && self.profile.is_some()
    }

    /// The profile version's number (`3` for `"3"` or `"v3"`); 0, the admin's file,
    /// when the decision names none.
    pub fn profile_version_number(&self) -> u32 {
        self.profile_version
            .as_deref()
            .and_then(|v| v.trim_start_matches('v').parse().ok())
            .unwrap_or(0)
    }
}

/// The meter a node's energy came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "&'static str")]
pub enum Source {
    /// The node's RAPL counters (powercap energy_uj), counted through every wrap.
    Rapl,
    /// Slurm's accounting (ConsumedEnergy from the acct_gather_energy plugin).
    Slurm,
    /// SimGrid's host energy plugin, for a job run on a simulated platform (tests/simgrid).
    Simgrid,
    /// No meter, a model's estimate, or a meter this version does not know: not a measurement.
    Unmeasured,
}

impl Source {
    /// The name sent on the wire, stored and printed in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Rapl => "rapl",
            Source::Slurm => "slurm",
            Source::Simgrid => "simgrid",
            Source::Unmeasured => "unmeasured",
        }
    }

    /// Read a meter's name; only RAPL, Slurm's accounting and SimGrid are measurements.
    pub fn parse(s: &str) -> Source {
        match s {
            "rapl" => Source::Rapl,
            "slurm" => Source::Slurm,
            "simgrid" => Source::Simgrid,
            _ => Source::Unmeasured,
        }
    }

    /// Whether the value is a measurement at all.
    pub fn is_measured(self) -> bool {
        self != Source::Unmeasured
    }
}

impl From<String> for Source {
    fn from(s: String) -> Source {
        Source::parse(&s)
    }
}

impl From<&str> for Source {
    fn from(s: &str) -> Source {
        Source::parse(s)
    }
}

impl From<Source> for &'static str {
    fn from(s: Source) -> &'static str {
        s.as_str()
    }
}

/// One node's measured outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeOutcome {
    /// Slurm job id.
    #[serde(deserialize_with = "job_id")]
    pub job_id: u64,
    /// The node reporting.
    pub node: String,
    /// Frequency the node actually ran at, in GHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_ghz: Option<Ghz>,
    /// Measured energy in joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<Joules>,
    /// Measured wall time in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<Seconds>,
    /// Where the energy came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// Whether the node restored its settings cleanly.
    #[serde(default = "yes")]
    pub restored: bool,
    /// Anything the node wants recorded (a warning, a fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the job's MPI ranks on this node measured (compute and communication
    /// seconds, MPI%, time at the lowered frequency), when the runtime ran in them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<greenup_comm::NodeComm>,
    /// What the job's GPUs on this node used, measured through NVML, when it had any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Box<NodeGpu>>,
    /// Whether the node held the RAPL power limit its decision asked for, when it asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<NodePower>,
    /// The run of the job it measured, as [`OpenJob::restart_count`]: so a node of an
    /// earlier run that reports late is never taken for one of the run after a requeue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<u32>,
}

/// A node's RAPL power limit for a job: the watts asked and whether the node held them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePower {
    /// The node's share of the watts Slurm granted the job: the long-term limit asked.
    pub asked_w: Watts,
    /// The long-term limit in force during the job, in watts; None: not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_w: Option<Watts>,
    /// Why it was not held, or how it was lowered to the hardware's maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where a node's GPU figures come from: NVML's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum GpuSource {
    /// `nvmlDeviceGetTotalEnergyConsumption` and the readings of the job's GPUs.
    #[default]
    Nvml,
}

/// The job's GPUs on one node: energy, average power, SM clock and utilization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGpu {
    /// How many of the job's GPUs the node holds (Slurm's `SLURM_JOB_GPUS`).
    pub gpus: u32,
    /// Where the figures come from.
    #[serde(default)]
    pub source: GpuSource,
    /// Joules all of them used, only when every one was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<Joules>,
    /// That energy over the time between the start and end readings, watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_power_w: Option<Watts>,
    /// Mean SM clock while the job ran, MHz (sampled by the meter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz: Option<f64>,
    /// Mean utilization while the job ran, percent (sampled by the meter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
    /// Why something is missing or was not restored, if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

impl NodeOutcome {
    /// The node's energy, only when a meter measured it.
    pub fn measured_energy_j(&self) -> Option<Joules> {
        self.energy_j
            .filter(|_| self.source.is_some_and(Source::is_measured))
    }
}

/// A job as stored: request, decision, outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Slurm job id.
    pub job_id: u64,
    /// The owner's uid.
    pub uid: u32,
    /// The owner's name, when known.
    pub user: Option<String>,
    /// Partition.
    pub partition: Option<String>,
    /// Open, closed or reclaimed.
    pub state: JobState,
    /// How the job ended, once closed.
    pub end: Option<JobEnd>,
    /// Unix seconds the job was opened.
    pub opened_at: i64,
    /// Unix seconds it was closed or reclaimed.
    pub closed_at: Option<i64>,
    /// The request that opened it.
    pub request: OpenJob,
    /// The decision.
    pub decision: Decision,
    /// Outcomes recorded so far, by node name.
    pub outcomes: Vec<NodeOutcome>,
    /// A requeued job's runs before this one, oldest first, each with what its nodes
    /// measured; sent with one job's record only (get_job), empty for a job run once
    /// and from greenupd versions before runs were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_runs: Vec<JobRecord>,
    /// How many runs the job had before this one (Slurm requeued it that often), in
    /// every record greenupd sends, listings included; 0 for a job run once, and from
    /// greenupd versions before runs were kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub earlier_run_count: u32,
    /// The whole joules greenupd wrote into Slurm's accounting as this run's energy
    /// (`daemon.slurm_energy`), when it did: sacct's ConsumedEnergy is then greenup's
    /// measurement, not one of Slurm's own. None from greenupd versions before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_energy_j: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl JobRecord {
    /// How the job stands, in sacct's terms.
    pub fn run_state(&self) -> RunState {
        match self.state {
            JobState::Open => RunState::Running,
            JobState::Reclaimed => RunState::Failed,
            JobState::Closed => match self.end {
                // A close without an end came from a plugin older than end states.
                None | Some(JobEnd::Completed) => RunState::Completed,
                Some(JobEnd::Failed) => RunState::Failed,
                Some(JobEnd::Cancelled) => RunState::Cancelled,
                Some(JobEnd::Timeout) => RunState::Timeout,
                Some(JobEnd::Unknown) => RunState::Unknown,
            },
        }
    }

    /// The longest wall time any node measured.
    pub fn elapsed_s(&self) -> Option<Seconds> {
        self.outcomes
            .iter()
            .filter_map(|o| o.elapsed_s)
            .fold(None, |a: Option<Seconds>, t| {
                Some(a.map_or(t, |a| a.max(t)))
            })
    }
}

/// How a job stands, as Slurm's users know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Still running: nothing is measured yet.
    Running,
    /// Ended with exit code 0, as Slurm's final record confirms.
    Completed,
    /// Ended with a non-zero exit code or a node failure, or vanished without a close.
    Failed,
    /// Cancelled with scancel.
    Cancelled,
    /// Killed at its time limit.
    Timeout,
    /// Ended, but nothing certain says how (Slurm could not confirm it).
    Unknown,
}

impl RunState {
    /// The word sacct users know (`COMPLETED`, `FAILED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "RUNNING",
            RunState::Completed => "COMPLETED",
            RunState::Failed => "FAILED",
            RunState::Cancelled => "CANCELLED",
            RunState::Timeout => "TIMEOUT",
            RunState::Unknown => "UNKNOWN",
        }
    }
}

/// Whether a node ran at the frequency greenup decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Applied {
    /// The decided frequency was set on the node.
    Applied,
    /// The node is shared with other jobs and the site does not allow per-core DVFS.
    SharedNode,
    /// greenupd could not be reached or refused; the node ran unchanged (enforce: open).
    Fallback,
    /// The policy only records (`monitor: true`); nothing was changed.
    Monitor,
    /// Setting the frequency failed; the reason as the node reported it.
    Failed(String),
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Applied::Applied => f.write_str("applied"),
            Applied::SharedNode => f.write_str("not applied: shared node"),
            Applied::Fallback => f.write_str("not applied: fallback, ran unchanged"),
            Applied::Monitor => f.write_str("not applied: monitor policy"),
            Applied::Failed(why) => write!(f, "not applied: {why}"),
        }
    }
}

/// The largest job id greenupd takes: the store keeps ids as signed 64-bit integers.
pub const MAX_JOB_ID: u64 = i64::MAX as u64;

/// The one rule for a job id on the wire: 1 to [`MAX_JOB_ID`], checked as the request
/// is read, so an id the store cannot hold is a `bad_request`, never a store failure.
pub fn job_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let id = u64::deserialize(d)?;
    if (1..=MAX_JOB_ID).contains(&id) {
        Ok(id)
    } else {
        Err(serde::de::Error::custom(format!(
            "job id {id} is out of range: expected a Slurm job id, 1 to {MAX_JOB_ID}"
        )))
    }
}

/// What the plugin knows about a job when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenJob {
    /// Slurm job id.
    #[serde(deserialize_with = "job_id")]
    pub job_id: u64,
    /// The job owner's uid.
    pub uid: u32,
    /// The job owner's name, when known (for listings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Slurm partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Slurm account the job is charged to (for the account's energy budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The allocated nodes, expanded, in Slurm order; empty when `nodelist` names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The allocated nodes as Slurm's compressed hostlist (`SLURM_JOB_NODELIST`, e.g.
    /// `n[1-10000]`), instead of `nodes`; greenupd expands it once per job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
    /// The fewest nodes the job accepts (a shrink never goes below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<usize>,
    /// The job's time limit: seconds, unlimited, or unknown (absent on the wire).
    #[serde(
        rename = "time_limit_s",
        default,
        skip_serializing_if = "TimeLimit::is_unknown"
    )]
    pub time_limit: TimeLimit,
    /// The policy asked for; the site default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The application profile name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The user's energy cap in joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_cap_j: Option<Joules>,
    /// The user's power cap in watts (the ledger may lower it, never raise it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap_w: Option<Watts>,
    /// The watts Slurm granted the job as greenup's licenses (`power.enforce: queue`),
    /// read from the job's licenses by PrologSlurmctld; the job is planned under them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_w: Option<Watts>,
    /// The optimizer; the exact sweep when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<Algorithm>,
    /// How many times Slurm has requeued the job before this run
    /// (`SLURM_JOB_RESTART_COUNT`), where Slurm tells the prolog; absent from older
    /// plugins and Slurms, whose runs greenupd tells apart by their nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<u32>,
}

/// Why a request failed. Clients branch on these; messages are for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON, or not a request object.
    BadJson,
    /// The `v` field is missing or not a version this daemon speaks.
    BadVersion,
    /// Unknown `op`, or a field is missing or has the wrong type.
    BadRequest,
    /// The line is longer than the protocol's `MAX_LINE_BYTES` (greenup-proto).
    TooLong,
    /// No MUNGE credential on a TCP request.
    CredMissing,
    /// The credential has expired.
    CredExpired,
    /// The credential was already used.
    CredReplayed,
    /// The credential is forged, damaged or from another realm.
    CredInvalid,
    /// The credential was made for another request.
    CredMismatch,
    /// MUNGE itself failed (munged down?).
    AuthUnavailable,
    /// The caller may not do this.
    Forbidden,
    /// No such job.
    NotFound,
    /// The job was opened before with different facts, or is already closed.
    Conflict,
    /// The power budget cannot fit the job and the site refuses.
    OverBudget,
    /// The decision could not be made (unknown policy, bad profile...).
    PlanFailed,
    /// The store could not save the change; nothing was acknowledged.
    StoreFailed,
    /// Too many connections; try again.
    Busy,
    /// The client was too slow.
    Timeout,
    /// A fault inside greenupd.
    Internal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_stored_before_its_watts_still_loads_and_new_ones_keep_them() {
        let old = r#"{"job_id": 9, "verdict": "planned", "reason": "", "policy": "min-energy",
            "profile": "lammps", "profile_version": "3", "power_cap_w": null,
            "reserved_w": 500.0, "plan": null, "decided_at": 1795000000}"#;
        let d: Decision = serde_json::from_str(old).unwrap();
        assert!(d.watts.is_empty());
        // Nothing to say is said by absence, so such a decision is stored as before.
        assert!(!serde_json::to_string(&d).unwrap().contains("watts"));

        let watts = |node_type: &str, freq_ghz, busy_w, idle_w, source| TypeWatts {
            node_type: node_type.into(),
            freq_ghz: Ghz(freq_ghz),
            busy_w: Watts(busy_w),
            idle_w: Watts(idle_w),
            source,
            node_factors: BTreeMap::new(),
        };
        let d = Decision {
            watts: vec![
                watts("epyc", 2.2, 233.9, 77.0, PowerSource::Measured { runs: 3 }),
                watts("xeon", 2.0, 192.0, 48.0, PowerSource::SiteScaled),
            ],
            ..d
        };
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            json.contains(r#"{"type":"epyc","freq_ghz":2.2,"busy_w":233.9,"idle_w":77.0,"source":{"kind":"measured","runs":3}}"#),
            "{json}"
        );
        assert!(
            json.contains(r#""source":{"kind":"site_scaled"}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
    }

    #[test]
    fn a_jobs_request_decision_and_measurements_cross_the_wire_as_bare_numbers() {
        let o = NodeOutcome {
            job_id: 31,
            node: "n2".into(),
            freq_ghz: Some(Ghz(2.2)),
            energy_j: Some(Joules(1234.5)),
            elapsed_s: Some(Seconds(10.0)),
            source: Some(Source::Rapl),
            restored: true,
            note: None,
            comm: None,
            gpu: Some(Box::new(NodeGpu {
                gpus: 2,
                source: GpuSource::Nvml,
                energy_j: Some(Joules(2.976e6)),
                avg_power_w: Some(Watts(800.0)),
                sm_mhz: Some(1410.0),
                util_pct: Some(87.5),
                note: None,
            })),
            power: Some(NodePower {
                asked_w: Watts(150.0),
                held_w: Some(Watts(149.75)),
                note: None,
            }),
            restart_count: Some(1),
        };
        let line = r#"{"job_id":31,"node":"n2","freq_ghz":2.2,"energy_j":1234.5,"elapsed_s":10.0,"source":"rapl","restored":true,"gpu":{"gpus":2,"source":"nvml","energy_j":2976000.0,"avg_power_w":800.0,"sm_mhz":1410.0,"util_pct":87.5},"power":{"asked_w":150.0,"held_w":149.75},"restart_count":1}"#;
        assert_eq!(serde_json::to_string(&o).unwrap(), line);
        assert_eq!(serde_json::from_str::<NodeOutcome>(line).unwrap(), o);
        assert_eq!(o.measured_energy_j(), Some(Joules(1234.5)));

        let j = OpenJob {
            job_id: 7,
            uid: 1000,
            user: None,
            partition: Some("debug".into()),
            account: None,
            nodes: vec!["n1".into(), "n2".into()],
            nodelist: None,
            min_nodes: None,
            time_limit: TimeLimit::Seconds(600.0),
            policy: Some("min-energy".into()),
            profile: Some("lammps".into()),
            energy_cap_j: Some(Joules(2e6)),
            power_cap_w: Some(Watts(900.0)),
            granted_w: Some(Watts(640.0)),
            algorithm: None,
            restart_count: None,
        };
        let line = r#"{"job_id":7,"uid":1000,"partition":"debug","nodes":["n1","n2"],"time_limit_s":600.0,"policy":"min-energy","profile":"lammps","energy_cap_j":2000000.0,"power_cap_w":900.0,"granted_w":640.0}"#;
        assert_eq!(serde_json::to_string(&j).unwrap(), line);
        assert_eq!(serde_json::from_str::<OpenJob>(line).unwrap(), j);

        let d = Decision {
            job_id: 7,
            verdict: Verdict::Planned,
            reason: String::new(),
            policy: "min-energy".into(),
            monitor: false,
            baseline_sample: false,
            clock_sample: false,
            profile: Some("lammps".into()),
            profile_version: Some("3".into()),
            power_cap_w: Some(Watts(900.0)),
            reserved_w: Watts(612.5),
            plan: None,
            decided_at: 1_795_000_000,
            refusal: None,
            budgets: vec![],
            comm_dvfs: None,
            grant: None,
            guard: None,
            watts: vec![TypeWatts {
                node_type: "epyc".into(),
                freq_ghz: Ghz(2.2),
                busy_w: Watts(233.9),
                idle_w: Watts(77.0),
                source: PowerSource::Interpolated,
                node_factors: BTreeMap::new(),
            }],
        };
        let line = r#"{"job_id":7,"verdict":"planned","reason":"","policy":"min-energy","profile":"lammps","profile_version":"3","power_cap_w":900.0,"reserved_w":612.5,"plan":null,"decided_at":1795000000,"watts":[{"type":"epyc","freq_ghz":2.2,"busy_w":233.9,"idle_w":77.0,"source":{"kind":"interpolated"}}]}"#;
        assert_eq!(serde_json::to_string(&d).unwrap(), line);
        assert_eq!(serde_json::from_str::<Decision>(line).unwrap(), d);
        assert!(d.holds_reservation());
    }

    #[test]
    fn end_words_round_trip_and_old_words_still_read() {
        for e in [
            JobEnd::Completed,
            JobEnd::Failed,
            JobEnd::Cancelled,
            JobEnd::Timeout,
            JobEnd::Unknown,
        ] {
            let wire = serde_json::to_string(&e).unwrap();
            assert_eq!(wire, format!("\"{}\"", e.as_str()));
            assert_eq!(serde_json::from_str::<JobEnd>(&wire).unwrap(), e);
            assert_eq!(JobEnd::from_stored(e.as_str()), e);
        }
        // What earlier plugins sent and earlier greenupds stored.
        assert_eq!(
            serde_json::from_str::<JobEnd>("\"ended\"").unwrap(),
            JobEnd::Unknown
        );
        assert_eq!(JobEnd::from_stored("ok"), JobEnd::Completed);
        assert_eq!(
            JobEnd::from_stored("vanished or past its time limit"),
            JobEnd::Unknown
        );
        // A word nobody defined is refused on the wire, not stored as free text.
        assert!(serde_json::from_str::<JobEnd>("\"exploded\"").is_err());
    }

    #[test]
    fn only_final_slurm_states_settle_an_end() {
        assert_eq!(
            JobEnd::from_slurm_state("CANCELLED by 1000"),
            Some(JobEnd::Cancelled)
        );
        assert_eq!(
            JobEnd::from_slurm_state("COMPLETED"),
            Some(JobEnd::Completed)
        );
        assert_eq!(
            JobEnd::from_slurm_state("OUT_OF_MEMORY"),
            Some(JobEnd::Failed)
        );
        assert_eq!(JobEnd::from_slurm_state("DEADLINE"), Some(JobEnd::Timeout));
        for live in ["RUNNING", "COMPLETING", "PENDING", "SUSPENDED", ""] {
            assert_eq!(JobEnd::from_slurm_state(live), None, "{live}");
        }
    }

    #[test]
    fn only_rapl_slurm_and_simgrid_are_measurements() {
        assert_eq!(Source::parse("rapl"), Source::Rapl);
        assert_eq!(Source::parse("slurm"), Source::Slurm);
        assert_eq!(Source::parse("simgrid"), Source::Simgrid);
        assert_eq!(Source::Simgrid.as_str(), "simgrid");
        for other in ["model", "nvml", "", "RAPL", "SimGrid"] {
            assert!(!Source::parse(other).is_measured(), "{other}");
        }
        let o: NodeOutcome =
            serde_json::from_str(r#"{"job_id":1,"node":"n1","energy_j":5.0,"source":"model"}"#)
                .unwrap();
        assert_eq!(o.measured_energy_j(), None);
    }
}
