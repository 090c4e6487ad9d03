//! The job as slurmd and slurmctld describe it to a prolog or an epilog: its id, owner,
//! nodes, options and GPUs, read from the environment once; and where messages go.

use greenup::hostlist::HostlistError;
use greenup::slurm::time_limit::{self, TimeLimit};

use crate::end;
use crate::options::Checked;

/// How loud a message is: warnings reach the slurmd log and the job's stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something the job's owner and the admin should know.
    Warning,
    /// Routine progress, slurmd log only.
    Info,
}

/// Where messages go (Slurm's log in the plugin, a vector in tests).
pub type Log<'a> = &'a dyn Fn(Level, &str);

/// Why the job cannot be read from the environment Slurm gave the prolog or epilog, so
/// greenup leaves the job alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobEnvError {
    /// A variable every job has is missing or not a number.
    #[error("{var} is not set")]
    Unset {
        /// The variable.
        var: &'static str,
    },
    /// The job's node list cannot be expanded.
    #[error(transparent)]
    Nodelist(#[from] HostlistError),
    /// The job's node list names no node.
    #[error("SLURM_JOB_NODELIST names no node")]
    NoNode,
}

/// What slurmd tells a job prolog or epilog about the job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEnv {
    /// Slurm job id.
    pub job_id: u32,
    /// The owner's uid.
    pub uid: u32,
    /// The job's gid (`SLURM_JOB_GID`), when slurmd gives it.
    pub gid: Option<u32>,
    /// The owner's name.
    pub user: Option<String>,
    /// The partition.
    pub partition: Option<String>,
    /// The Slurm account the job is charged to.
    pub account: Option<String>,
    /// This node's name.
    pub node: String,
    /// The job's nodes as slurmd gives them (`SLURM_JOB_NODELIST`, compressed).
    pub nodelist: String,
    /// The job's nodes, expanded.
    pub nodes: Vec<String>,
    /// `SLURM_JOB_CPUS_PER_NODE`.
    pub cpus_per_node: Option<String>,
    /// The options given at submission (from `SPANK_GREENUP_*`).
    pub options: Checked,
    /// The batch script's `exit:signal` as the epilog's environment gives it.
    pub exit: Option<(u32, u32)>,
    /// `SLURM_JOB_GPUS`: the job's GPUs on this node by /dev/nvidiaN number, if it has any.
    pub gpus: Option<String>,
    /// The job's time limit, where Slurm puts it in the prolog's environment (23.02 and
    /// later); unknown otherwise, and greenupd asks slurmctld.
    pub time_limit: TimeLimit,
    /// The job's licenses (`SLURM_JOB_LICENSES`), which slurmctld gives PrologSlurmctld
    /// and slurmd does not give a node's prolog: the watts the job holds under
    /// `power.enforce: queue`.
    pub licenses: Option<String>,
    /// How many times Slurm has requeued the job before this run
    /// (`SLURM_JOB_RESTART_COUNT`, which slurmd gives its prologs and epilogs from the
    /// job's credential); unknown where Slurm does not say.
    pub restart_count: Option<u32>,
}

impl JobEnv {
    /// Read the job from variables looked up by `get`, as the Slurm this plugin was
    /// built for sets them.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<JobEnv, JobEnvError> {
        JobEnv::from_slurm_vars(get, crate::SLURM_PLUGIN_VERSION)
    }

    /// Read the job from variables looked up by `get`, as Slurm release `slurm_version`
    /// (`SLURM_VERSION_NUMBER`) sets them.
    pub fn from_slurm_vars(
        get: impl Fn(&str) -> Option<String>,
        slurm_version: u32,
    ) -> Result<JobEnv, JobEnvError> {
        let node = get("SLURMD_NODENAME").ok_or(JobEnvError::Unset {
            var: "SLURMD_NODENAME",
        })?;
        let nodelist = get("SLURM_JOB_NODELIST")
            .or_else(|| get("SLURM_NODELIST"))
            .unwrap_or_else(|| node.clone());
        JobEnv::read(get, slurm_version, node, nodelist)
    }

    /// Read the job as slurmctld describes it to PrologSlurmctld (same variables, no node
    /// of its own): it speaks for the job's first node, as that node's prolog would.
    pub fn from_controller_vars(
        get: impl Fn(&str) -> Option<String>,
        slurm_version: u32,
    ) -> Result<JobEnv, JobEnvError> {
        let nodelist = get("SLURM_JOB_NODELIST").ok_or(JobEnvError::Unset {
            var: "SLURM_JOB_NODELIST",
        })?;
        let first = greenup::hostlist::expand(&nodelist)?
            .into_iter()
            .next()
            .ok_or(JobEnvError::NoNode)?;
        JobEnv::read(get, slurm_version, first, nodelist)
    }

    fn read(
        get: impl Fn(&str) -> Option<String>,
        slurm_version: u32,
        node: String,
        nodelist: String,
    ) -> Result<JobEnv, JobEnvError> {
        let num = |k: &'static str| {
            get(k)
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or(JobEnvError::Unset { var: k })
        };
        let nodes = greenup::hostlist::expand(&nodelist)?;
        Ok(JobEnv {
            job_id: num("SLURM_JOB_ID")?,
            uid: num("SLURM_JOB_UID")?,
            gid: get("SLURM_JOB_GID").and_then(|g| g.parse().ok()),
            user: get("SLURM_JOB_USER"),
            partition: get("SLURM_JOB_PARTITION"),
            account: get("SLURM_JOB_ACCOUNT"),
            node,
            nodelist,
            nodes,
            cpus_per_node: get("SLURM_JOB_CPUS_PER_NODE"),
            options: Checked::from_env(|k| get(&format!("SPANK_{k}"))),
            exit: end::exit_from_env(&get),
            gpus: get("SLURM_JOB_GPUS"),
            time_limit: time_limit::from_prolog_env(&get, slurm_version),
            licenses: get("SLURM_JOB_LICENSES").filter(|l| !l.is_empty()),
            restart_count: get("SLURM_JOB_RESTART_COUNT").and_then(|c| c.parse().ok()),
        })
    }

    /// Read the job from this process's environment.
    pub fn from_process() -> Result<JobEnv, JobEnvError> {
        JobEnv::from_vars(|k| std::env::var(k).ok())
    }
}
