//! Job steps on the nodes (slurmstepd, remote context): tell the job's owner once
//! about a problem the prolog met, enforce `strict`, shrink a job the decision does
//! not fully use, and on shared nodes set and restore a step's own cores where allowed.

use std::path::Path;

use greenup::site::Enforce;
use greenup::site::node::NodeConfig;
use greenup_platform::dvfs::job::{self as dvfs_job, NodePaths, Scope};
use greenup_platform::dvfs::run_dir::{self, JobDir};
use greenup_platform::dvfs::{state, sysfs};

use crate::node;

/// Slurm's step id of the batch script.
pub const BATCH_STEP: u32 = 0xffff_fffb;
/// Slurm's step ids from here up are not srun steps (batch, extern, interactive, pending).
const FIRST_SPECIAL_STEP: u32 = 0xffff_fff0;

/// This node's name for a step. An srun step's environment carries the batch node's
/// `SLURMD_NODENAME` (srun passes the submitting environment on), so for those the
/// node is found by its index (`S_JOB_NODEID`) in the step's nodes
/// (`SLURM_STEP_NODELIST`, which srun sets for every step); other steps use `named`.
pub fn node_name(
    step_id: u32,
    step_nodes_and_index: Option<(String, u32)>,
    named: Option<String>,
) -> Option<String> {
    let indexed = step_nodes_and_index
        .filter(|_| step_id < FIRST_SPECIAL_STEP)
        .and_then(|(list, i)| {
            greenup::hostlist::expand(&list)
                .ok()?
                .into_iter()
                .nth(i as usize)
        });
    indexed.or(named)
}

/// Whether a step runs MPI ranks: an srun step (not the batch script, the extern or the
/// interactive step) started with an MPI plugin, which srun names in the step's
/// `SLURM_MPI_TYPE` (`--mpi=pmix`, or the site's `MpiDefault`); `none` or unset is not MPI.
/// An `mpirun` inside the batch script is not seen here: its ranks start from the batch
/// step, whose environment greenup leaves alone.
pub fn is_mpi_step(step_id: u32, mpi_type: Option<&str>) -> bool {
    step_id < FIRST_SPECIAL_STEP
        && mpi_type.is_some_and(|t| !t.trim().is_empty() && t.trim() != "none")
}

/// Why an MPI step runs without greenup's runtime; the job's owner is told, the step runs.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeEnvError {
    /// The settings the prolog saved for the runtime could not be read.
    #[error("{path}: {source}")]
    Settings {
        /// The settings file.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The runtime library the site names is not on this node.
    #[error("{lib} is not installed (dvfs.mpi_runtime); the step runs without it")]
    NotInstalled {
        /// The library (`dvfs.mpi_runtime`).
        lib: std::path::PathBuf,
    },
}

/// The variables an MPI step's tasks get so the runtime runs in them: the library
/// appended to the user's own `LD_PRELOAD` (never replacing it), the measurement
/// directory, the settings, the sysfs root and, when the prolog saved them, the in-job
/// guard's settings (`GREENUP_GUARD`). `Ok(None)`: the job did not ask for it
/// (no settings saved for this node), so the step is left untouched.
pub fn runtime_env(
    site: &NodeConfig,
    paths: &NodePaths,
    step: &StepInfo,
    user_preload: Option<&str>,
) -> Result<Option<Vec<(&'static str, String)>>, RuntimeEnvError> {
    let dir = JobDir::new(&paths.run_dir, step.job_id);
    let settings = match std::fs::read_to_string(dir.comm(&step.node)) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RuntimeEnvError::Settings {
                path: dir.comm(&step.node),
                source,
            });
        }
    };
    let lib = &site.dvfs.mpi_runtime;
    if !lib.is_file() {
        return Err(RuntimeEnvError::NotInstalled {
            lib: lib.to_path_buf(),
        });
    }
    // The guard's settings, when the prolog saved them: a file that cannot be read
    // leaves the step unguarded, never unmeasured.
    let guard = std::fs::read_to_string(dir.guard(&step.node))
        .ok()
        .map(|g| g.trim().to_string());
    let lib = lib.display().to_string();
    let preload = match user_preload.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) if p.split([' ', ':']).any(|w| w == lib) => p.to_string(),
        Some(p) => format!("{p} {lib}"),
        None => lib,
    };
    let mut env = vec![
        ("LD_PRELOAD", preload),
        (
            greenup::comm::env::DIR,
            dir.mpi_stats(&step.node).display().to_string(),
        ),
        (greenup::comm::env::COMM_DVFS, settings.trim().to_string()),
        (
            greenup::comm::env::SYSFS_ROOT,
            paths.sysfs_root.display().to_string(),
        ),
    ];
    if let Some(g) = guard {
        env.push((greenup::comm::env::GUARD, g));
    }
    Ok(Some(env))
}

/// What a step knows about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepInfo {
    /// Slurm job id.
    pub job_id: u32,
    /// Slurm step id.
    pub step_id: u32,
    /// This node's name.
    pub node: String,
}

/// The warning the prolog left for this job on this node, the first time a step asks.
pub fn take_warning(run_dir: &Path, step: &StepInfo) -> Option<String> {
    let dir = JobDir::new(run_dir, step.job_id);
    let text = std::fs::read_to_string(dir.warning(&step.node)).ok()?;
    let marker = dir.warned(&step.node);
    // create_new: only one step of the job prints it, even when steps start together.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)
        .ok()?;
    Some(text.trim().to_string())
}

/// The step fails because the site requires greenup's decision and the prolog could not
/// apply it (`enforce: strict`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("greenup: job {job_id}: greenup could not apply its decision and the site requires it")]
pub struct NotEnforcedError {
    /// Slurm job id.
    pub job_id: u32,
}

/// Under `enforce: strict`, fail the step when the prolog could not apply the decision.
pub fn enforce(site: &NodeConfig, step: &StepInfo) -> Result<(), NotEnforcedError> {
    let failed = JobDir::new(&site.dvfs.run_dir, step.job_id)
        .warning(&step.node)
        .exists();
    if failed && site.enforce == Enforce::Strict {
        return Err(NotEnforcedError {
            job_id: step.job_id,
        });
    }
    Ok(())
}

/// The nodes the decision keeps when it uses fewer than the job holds, in Slurm form.
pub fn shrink_target(site: &NodeConfig, step: &StepInfo, allocated: usize) -> Option<String> {
    // greenupd hands the used nodes to the job's first node only, where the batch step runs.
    let s = node::saved_decision(&site.dvfs.run_dir, step.job_id, &step.node)?;
    let used = s.used_nodes?;
    if !s.used || s.node_count == 0 || s.node_count >= allocated {
        return None;
    }
    Some(used)
}

/// The record key of one step's own cores on a shared node.
pub fn step_key(step: &StepInfo) -> String {
    run_dir::step_key(&step.node, step.step_id)
}

/// On a shared node where the site allows per-core DVFS, set the decided frequency on
/// this step's cores only (`cores` as Slurm lists them, e.g. `0-1`). Returns the note.
pub fn apply_step_cores(
    site: &NodeConfig,
    paths: &NodePaths,
    step: &StepInfo,
    cores: &str,
) -> Option<String> {
    if !site.dvfs.per_core_shared {
        return None;
    }
    let node_rec = state::load(&paths.run_dir, step.job_id, &step.node).ok()??;
    if node_rec.note != "not applied: shared node" {
        return None;
    }
    let khz = node_rec.requested_khz?;
    // Slurm numbers cores; with one thread per core these are the CPU numbers.
    let cpus = sysfs::parse_cpu_list(Path::new("step cores"), cores).ok()?;
    match dvfs_job::begin(
        paths,
        step.job_id,
        &step.node,
        &step_key(step),
        &dvfs_job::Apply::freq(Some(khz)),
        &Scope::Cpus(cpus),
    ) {
        Ok(rec) => Some(format!("step {} cores {cores}: {}", step.step_id, rec.note)),
        Err(e) => Some(format!(
            "step {} cores {cores}: not applied: {e}",
            step.step_id
        )),
    }
}

/// Restore what `apply_step_cores` set, when the step ends.
pub fn restore_step_cores(paths: &NodePaths, step: &StepInfo) -> Option<String> {
    match dvfs_job::end(paths, step.job_id, &step_key(step)) {
        Ok(Some(o)) => o.restore_error,
        Ok(None) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn site(lib: PathBuf, run: PathBuf) -> (NodeConfig, NodePaths) {
        let mut site = NodeConfig::from_site(&node::test_cluster_site());
        site.dvfs.mpi_runtime = lib;
        site.dvfs.run_dir = run.clone();
        let paths = NodePaths {
            sysfs_root: "/srv/n1/sys".into(),
            run_dir: run,
        };
        (site, paths)
    }

    #[test]
    fn an_srun_steps_node_is_its_place_in_the_steps_nodes_not_the_batch_nodes_name() {
        let n1 = Some("n1".to_string());
        assert_eq!(
            node_name(0, Some(("n[1-2]".into(), 1)), n1.clone()).as_deref(),
            Some("n2")
        );
        assert_eq!(
            node_name(0, Some(("n[1-2]".into(), 0)), n1.clone()).as_deref(),
            Some("n1")
        );
        // The batch step, or no step list: the name slurmd gives.
        assert_eq!(
            node_name(BATCH_STEP, Some(("n[1-2]".into(), 1)), n1.clone()).as_deref(),
            Some("n1")
        );
        assert_eq!(node_name(0, None, n1.clone()).as_deref(), Some("n1"));
        assert_eq!(
            node_name(0, Some(("n[1-2]".into(), 5)), n1).as_deref(),
            Some("n1")
        );
        assert_eq!(node_name(0, None, None), None);
    }

    #[test]
    fn only_srun_steps_with_an_mpi_plugin_are_mpi_steps() {
        assert!(is_mpi_step(0, Some("pmix")));
        assert!(is_mpi_step(3, Some("pmi2")));
        assert!(!is_mpi_step(0, Some("none")));
        assert!(!is_mpi_step(0, None));
        assert!(!is_mpi_step(0, Some("")));
        assert!(!is_mpi_step(BATCH_STEP, Some("pmix")));
        assert!(!is_mpi_step(0xffff_fffc, Some("pmix")), "the extern step");
    }

    #[test]
    fn the_runtime_is_appended_to_the_users_preload_only_when_the_job_asked() {
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("libgreenup_mpi.so");
        std::fs::write(&lib, "").unwrap();
        let run = t.path().join("run");
        let (site, paths) = site(lib.clone(), run.clone());
        let step = StepInfo {
            job_id: 12,
            step_id: 0,
            node: "n1".into(),
        };
        // No settings saved by the prolog: the job did not ask; nothing is set.
        assert_eq!(
            runtime_env(&site, &paths, &step, Some("/u/mine.so")).unwrap(),
            None
        );
        let dir = JobDir::new(&run, 12);
        dir.create().unwrap();
        std::fs::write(dir.comm("n1"), "{\"enabled\":true}\n").unwrap();
        let env = runtime_env(&site, &paths, &step, Some("/u/mine.so"))
            .unwrap()
            .unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).unwrap().1.clone();
        assert_eq!(get("LD_PRELOAD"), format!("/u/mine.so {}", lib.display()));
        assert_eq!(
            get("GREENUP_MPI_DIR"),
            run.join("12.n1.mpi").display().to_string()
        );
        assert_eq!(get("GREENUP_COMM_DVFS"), "{\"enabled\":true}");
        assert_eq!(get("GREENUP_SYSFS_ROOT"), "/srv/n1/sys");
        assert!(
            env.iter().all(|(n, _)| *n != "GREENUP_GUARD"),
            "no guard saved"
        );
        // Already there: not twice.
        let again = runtime_env(&site, &paths, &step, Some(&get("LD_PRELOAD")))
            .unwrap()
            .unwrap();
        assert_eq!(again[0].1, get("LD_PRELOAD"));
        let alone = runtime_env(&site, &paths, &step, None).unwrap().unwrap();
        assert_eq!(alone[0].1, lib.display().to_string());
        // The guard's settings saved by the prolog reach the tasks as they are.
        let g =
            r#"{"max_slowdown":0.1,"baseline_rate":50.0,"fmax_khz":3000000,"plan_khz":2000000}"#;
        std::fs::write(dir.guard("n1"), format!("{g}\n")).unwrap();
        let guarded = runtime_env(&site, &paths, &step, None).unwrap().unwrap();
        let got = guarded.iter().find(|(n, _)| *n == "GREENUP_GUARD").unwrap();
        assert_eq!(got.1, g);
        assert!(serde_json::from_str::<greenup::comm::Guard>(&got.1).is_ok());
        // A missing library is said, and nothing is preloaded.
        std::fs::remove_file(&lib).unwrap();
        assert!(
            runtime_env(&site, &paths, &step, None)
                .unwrap_err()
                .to_string()
                .contains("is not installed")
        );
    }
}
