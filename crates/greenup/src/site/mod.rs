//! The site config (`/etc/slurm/greenup.yaml`): node types and their power,
//! which nodes have which type, power and energy caps, policies, enforcement,
//! and where greenupd listens and stores its state.
//!
//! [`load`] reads and checks the file (schema: docs/site-config.md); these
//! types are what the rest of greenup reads.

mod budgets;
mod check;
mod forced;
mod gpu;
mod load;
pub mod node;
mod power;
pub mod roles;

pub use forced::{ForcedPolicyError, add_forced};
pub use power::{PowerEnforce, PowerSettings, REPORT_PERIOD_S, Rack, SampleClocks};

pub use load::{
    DEFAULT_LISTEN, DEFAULT_PATH, DEFAULT_POLICY, DEFAULT_POLICY_DIRS, DEFAULT_PROFILE_DIR,
    DEFAULT_RUN_DIR, DEFAULT_SOCKET, DEFAULT_STORE, load, parse,
};

/// The repository's example site config (etc/greenup.yaml), which the library's unit
/// tests read: the one place that knows where it lies from this crate.
#[cfg(test)]
pub(crate) fn example() -> Site {
    load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../etc/greenup.yaml"
    ))
    .unwrap()
}

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::model::node_type::{NodeType, PowerModel};

/// A Slurm partition as greenup sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Partition {
    /// Node names in the partition, expanded from hostlist syntax.
    pub nodes: Vec<String>,
    /// The partition's power cap in watts, if any.
    pub power_cap_w: Option<f64>,
}

/// What the plugin does when greenup cannot decide or apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Enforce {
    /// Run the job unchanged and log why (the default).
    #[default]
    Open,
    /// Fail the job with a clear message.
    Strict,
}

/// What greenupd does when even the lowest-power configuration does not fit the budget left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OverBudget {
    /// Run at the lowest power and record that the job was budget-limited (the default).
    #[default]
    Lowest,
    /// Run the job unchanged and record it.
    Unchanged,
    /// Refuse the decision; the plugin then follows `enforce`.
    Refuse,
}

/// Where greenupd listens and keeps its state, and who may do what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonSettings {
    /// TCP address for the nodes, e.g. `127.0.0.1:7470`.
    pub listen: String,
    /// Unix socket for the local CLI.
    pub socket: PathBuf,
    /// SQLite database file.
    pub store: PathBuf,
    /// The Slurm user (besides root) that may open, record and close jobs.
    pub slurm_user: String,
    /// Users who may read every job.
    pub admins: Vec<String>,
    /// Milliseconds the plugin waits for greenupd before it fails open.
    pub timeout_ms: u64,
    /// Seconds past a job's time limit before its reservation expires.
    pub grace_s: u64,
    /// Optional Prometheus listener, e.g. `127.0.0.1:7471`.
    pub metrics_listen: Option<String>,
    /// What happens when the budget cannot fit a job.
    pub over_budget: OverBudget,
    /// Where each node keeps outcomes greenupd could not take yet (`%n` is the node's name).
    pub spool_dir: PathBuf,
    /// How much any one request or caller may take of greenupd.
    pub limits: DaemonLimits,
    /// Write each finished job's measured energy into Slurm's accounting (its
    /// ConsumedEnergy, through `sacctmgr`; Slurm 25.11 and later); off by default, since
    /// it replaces what Slurm's own energy plugin recorded.
    #[serde(default)]
    pub slurm_energy: bool,
}

/// Bounds on what one job's request and one caller's connections may take of greenupd,
/// so no user can crowd out the nodes. docs/failure-and-security.md says what each
/// protects against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonLimits {
    /// The most nodes one open_job may name.
    pub max_job_nodes: usize,
    /// The most connections one ordinary user (not root, not SlurmUser) holds on each listener.
    pub user_connections: usize,
    /// The most connections all ordinary users together hold on each listener.
    pub users_connections: usize,
    /// The most TCP connections not yet authenticated; the oldest idle one is shed for a new
    /// one. Every node of a starting job connects at once and greenupd reads their first
    /// lines in turn, so this is sized like `max_job_nodes`.
    pub unauthenticated: usize,
}

impl Default for DaemonLimits {
    fn default() -> Self {
        DaemonLimits {
            max_job_nodes: 16_384,
            user_connections: 16,
            users_connections: 128,
            unauthenticated: 16_384,
        }
    }
}

/// How frequencies are applied on the nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DvfsSettings {
    /// Root of the sysfs tree (`/sys`); tests point each node at its own tree.
    pub sysfs_root: PathBuf,
    /// Where each node saves the settings it must restore (`/run/greenup`).
    pub run_dir: PathBuf,
    /// Whether a job that shares a node may set its own cores' frequency.
    pub per_core_shared: bool,
    /// The in-job MPI runtime preloaded into MPI steps whose job asks for
    /// communication-phase DVFS, is guarded, or is a measured baseline (`libgreenup_mpi.so`).
    #[serde(default = "default_mpi_runtime")]
    pub mpi_runtime: PathBuf,
    /// Whether a measured baseline's MPI steps run the runtime measuring only
    /// (`dvfs.measure_baselines`): the in-job guard's baseline rate comes from them.
    #[serde(default = "measure_baselines_by_default")]
    pub measure_baselines: bool,
    /// Where each node loads NVML from (`libnvidia-ml.so.1`): the site's path, never the job's.
    #[serde(default = "default_nvml_library")]
    pub nvml_library: PathBuf,
}

fn default_mpi_runtime() -> PathBuf {
    PathBuf::from(load::DEFAULT_MPI_RUNTIME)
}

fn measure_baselines_by_default() -> bool {
    true
}

/// Where greenup loads NVML from when the site config's `dvfs.nvml_library` names no
/// other path: the library's name, which the loader looks up.
pub const DEFAULT_NVML_LIBRARY: &str = "libnvidia-ml.so.1";

fn default_nvml_library() -> PathBuf {
    PathBuf::from(DEFAULT_NVML_LIBRARY)
}

/// The GPUs of one node type (`node_types.T.gpus`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuType {
    /// GPUs per node.
    pub count: u32,
    /// The SM clock range greenup may lock within, in MHz (None: what NVML offers).
    pub clocks_mhz: Option<(u32, u32)>,
    /// The step between the SM clocks a decision may choose, in MHz (`clocks_mhz.step`;
    /// None: eight clocks spread evenly over the range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_step_mhz: Option<u32>,
    /// The power limits greenup may set, in watts (None: what NVML accepts).
    pub power_limit_w: Option<(f64, f64)>,
    /// Dynamic power of one GPU at its top clock, fully busy, in watts.
    pub dynamic_w: f64,
    /// Static power of one GPU, in watts.
    pub static_w: f64,
    /// The exponent of the clock's share of the top clock in the dynamic power
    /// (`power.gamma`; 3, the cube law, when not given).
    #[serde(default = "cube")]
    pub gamma: f64,
}

fn cube() -> f64 {
    3.0
}

/// How many SM clocks a decision may choose among when the site gives no step.
const DEFAULT_GPU_GEARS: u32 = 8;

impl GpuType {
    /// One GPU fully busy at `mhz` (its top clock when None, or when the site gives no
    /// clock range, so the top clock is unknown): static power plus the dynamic power at
    /// the top clock scaled by the clock's share of it to the power `gamma`.
    pub fn busy_w(&self, mhz: Option<u32>) -> f64 {
        let dynamic_w = match (mhz, self.clocks_mhz) {
            (Some(f), Some((_, top))) => {
                crate::model::gpus::dynamic_at_w(self.dynamic_w, f, top, self.gamma)
            }
            _ => self.dynamic_w,
        };
        self.static_w + dynamic_w
    }

    /// The SM clocks a decision may choose, ascending, the top one last: from
    /// `clocks_mhz.max` down by the step to `clocks_mhz.min`, which is always one (none
    /// without a clock range: the top clock is then unknown, so no clock is chosen).
    pub fn gears_mhz(&self) -> Vec<u32> {
        let Some((lo, hi)) = self.clocks_mhz else {
            return Vec::new();
        };
        let step = self
            .clock_step_mhz
            .unwrap_or_else(|| (hi - lo).div_ceil(DEFAULT_GPU_GEARS - 1))
            .max(1);
        let mut gears: Vec<u32> = (0..)
            .map(|k| hi.saturating_sub(k * step))
            .take_while(|&m| m > lo)
            .collect();
        gears.push(lo);
        gears.reverse();
        gears.dedup();
        gears
    }
}

/// What greenupd does when a policy's measured slowdown for an application exceeds
/// the policy's `max_slowdown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnMiss {
    /// Say so in `greenup app` and reports, and keep applying the policy (the default).
    #[default]
    Report,
    /// Also stop applying the policy to that application: its jobs run as under
    /// `monitor` until an admin clears the hold (`greenup policy clear`).
    Monitor,
}

/// The site's `baseline:` section: a share of each application's jobs runs with every
/// node at its highest frequency, recorded as monitor, so savings are measured against
/// measured runs rather than against the model's prediction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaselineSettings {
    /// Share of jobs (0-1) sampled, chosen by a hash of the job id.
    pub fraction: f64,
    /// Every job of an application is sampled until it has this many measured
    /// baseline (monitor) runs.
    pub min_runs: u32,
    /// What a policy that misses its `max_slowdown` leads to.
    pub on_miss: OnMiss,
}

impl BaselineSettings {
    /// `baseline.fraction` when the section omits it.
    pub const DEFAULT_FRACTION: f64 = 0.05;
    /// `baseline.min_runs` when the section omits it.
    pub const DEFAULT_MIN_RUNS: u32 = 3;
}

/// The whole site config.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    /// The file it was read from.
    pub path: PathBuf,
    /// Node types by name.
    pub node_types: BTreeMap<String, NodeType>,
    /// The GPUs of the node types that have them, by node type name.
    pub gpu_types: BTreeMap<String, GpuType>,
    /// Node name -> node type name.
    pub nodes: BTreeMap<String, String>,
    /// Partitions by name.
    pub partitions: BTreeMap<String, Partition>,
    /// The site's total power cap in watts.
    pub power_cap_w: Option<f64>,
    /// The largest energy cap a job may ask for, and the default cap, in joules.
    pub job_energy_limit_j: Option<f64>,
    /// The policy used when a job names none.
    pub default_policy: String,
    /// Policies users may ask for; empty means every loaded policy.
    pub allowed_policies: Vec<String>,
    /// Directories holding policy YAML files, searched in order.
    pub policy_dirs: Vec<PathBuf>,
    /// Directory holding application profiles (`NAME.yaml`).
    pub profile_dir: PathBuf,
    /// Fail open or strict.
    pub enforce: Enforce,
    /// greenupd settings.
    pub daemon: DaemonSettings,
    /// DVFS settings.
    pub dvfs: DvfsSettings,
    /// Energy budgets over a period (site, partitions, accounts), site first.
    pub budgets: Vec<crate::budget::Budget>,
    /// Measured baselines: which jobs run at f_max to measure savings against
    /// (`None`: none are sampled; monitor runs are still baselines).
    pub baseline: Option<BaselineSettings>,
    /// How the power caps are held, and how often nodes report measured power.
    pub power: PowerSettings,
}

impl Site {
    /// The nodes a job in `partition` may run on, in the site's order (every node the
    /// site types when none is named); `None` for a partition the site does not have.
    pub fn pool(&self, partition: Option<&str>) -> Option<Vec<String>> {
        match partition {
            Some(p) => self.partitions.get(p).map(|part| part.nodes.clone()),
            None => Some(self.nodes.keys().cloned().collect()),
        }
    }

    /// What a valid partition name is here, for error messages.
    pub fn partitions_valid(&self) -> String {
        let known: Vec<&str> = self.partitions.keys().map(String::as_str).collect();
        if known.is_empty() {
            "one of the site's partitions: none are configured".into()
        } else {
            format!("one of the site's partitions: {}", known.join(", "))
        }
    }

    /// The type of node `name`, if the site knows it.
    pub fn node_type_of(&self, name: &str) -> Option<&NodeType> {
        self.nodes.get(name).and_then(|t| self.node_types.get(t))
    }
}
