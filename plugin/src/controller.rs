//! PrologSlurmctld: slurmctld runs it once per job, as SlurmUser on the controller, after
//! the job is allocated and before any of its nodes runs a prolog (the job stays
//! CONFIGURING until it exits). It asks greenupd for the job's decision with exactly the
//! request the job's first node would send, so the job is decided once, here, and each
//! node's prolog then finds it made and reads only its own settings. A node still decides
//! when this did not (no PrologSlurmctld, greenupd down now and up later).
//!
//! It fails open: a non-zero exit makes slurmctld requeue the job (a batch job) or kill
//! it, so it exits 0 on every failure unless the site says `enforce: strict`.

use std::time::Instant;

use greenup::site::Enforce;
use greenup::site::node::NodeConfig;
use greenup_proto::protocol::Verdict;

use crate::args::Args;
use crate::node::{self, JobEnv, Level, Log};
use crate::prolog;

/// Whether slurmctld should run the job: `false` only for a job without a decision
/// under `enforce: strict`.
pub type RunJob = bool;

/// Decide the job slurmctld describes through `get` (its PrologSlurmctld environment,
/// as Slurm release `slurm_version` sets it), logging what happened through `log`.
pub fn prolog_slurmctld(
    args: &Args,
    get: impl Fn(&str) -> Option<String>,
    slurm_version: u32,
    log: Log,
) -> RunJob {
    let started = Instant::now();
    let job = match JobEnv::from_controller_vars(&get, slurm_version) {
        Ok(j) => j,
        Err(e) => {
            let id = get("SLURM_JOB_ID").unwrap_or_else(|| "?".into());
            log(
                Level::Warning,
                &format!(
                    "greenup: job {id}: not decided at the controller, its nodes will ask: {e}"
                ),
            );
            return true;
        }
    };
    // The full file, read as SlurmUser: the nodes' root-only cache is not for this process.
    let site = match greenup::site::load(&args.config) {
        Ok(s) => NodeConfig::from_site(&s),
        Err(e) => {
            log(
                Level::Warning,
                &format!(
                    "greenup: job {}: site config unusable, not decided at the controller: {e}",
                    job.job_id
                ),
            );
            return true;
        }
    };
    let Some(policy) = prolog::policy_for(&job, &site) else {
        return true;
    };
    let request = prolog::start_request(&job, policy, &site.power);
    let answer = node::connect(&site)
        .map_err(prolog::AskSettingsError::from)
        .and_then(|mut c| prolog::ask_settings(&mut c, &request));
    let ms = started.elapsed().as_secs_f64() * 1e3;
    match answer {
        Ok(s) => {
            // A refusal's reason already says what becomes of the job under `enforce`.
            let what = match s.verdict {
                Verdict::Refused => format!("refused ({})", s.reason),
                v => v.as_str().to_string(),
            };
            log(
                Level::Info,
                &format!(
                    "greenup: job {} decided before its {} nodes start: {what} ({ms:.1} ms)",
                    job.job_id,
                    job.nodes.len()
                ),
            );
            true
        }
        Err(e) => {
            let strict = site.enforce == Enforce::Strict;
            let then = if strict {
                "slurmctld requeues or cancels the job (enforce: strict)"
            } else {
                "its nodes will ask"
            };
            log(
                Level::Warning,
                &format!(
                    "greenup: job {}: no decision from greenupd at the controller, {then}: {e}",
                    job.job_id
                ),
            );
            !strict
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// What slurmctld 22.05 puts in PrologSlurmctld's environment (job_common_env_vars),
    /// with the submission's job-control variables under their `SPANK_` prefix.
    fn controller_vars() -> HashMap<&'static str, &'static str> {
        [
            ("SLURM_JOB_ID", "42"),
            ("SLURM_JOBID", "42"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURM_JOB_USER", "alice"),
            ("SLURM_JOB_GID", "1001"),
            ("SLURM_JOB_ACCOUNT", "physics"),
            ("SLURM_JOB_PARTITION", "debug"),
            ("SLURM_JOB_NODELIST", "n[3-4],n1"),
            ("SLURM_JOB_NUM_NODES", "3"),
            ("SLURM_JOB_CPUS_PER_NODE", "4(x3)"),
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmctld"),
            ("SPANK_GREENUP_POLICY", "max-dist"),
            ("SPANK_GREENUP_ENERGY_CAP_J", "2000000"),
            ("SPANK_GREENUP_MIN_NODES", "2"),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn the_controller_sends_what_the_first_node_would() {
        let ctl = controller_vars();
        let job = JobEnv::from_controller_vars(|k| ctl.get(k).map(|v| v.to_string()), 0x16_05_08)
            .unwrap();
        assert_eq!(job.node, "n3", "Slurm's first node of n[3-4],n1");
        // The first node's prolog: slurmd's variables, the same job-control ones.
        let mut first = ctl.clone();
        first.insert("SLURMD_NODENAME", "n3");
        first.remove("SLURM_SCRIPT_CONTEXT");
        let node =
            JobEnv::from_slurm_vars(|k| first.get(k).map(|v| v.to_string()), 0x16_05_08).unwrap();
        let power = greenup::site::PowerSettings::default();
        let a = prolog::start_request(&job, "max-dist".into(), &power);
        let b = prolog::start_request(&node, "max-dist".into(), &power);
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::to_value(&b).unwrap()
        );
        let text = serde_json::to_string(&a).unwrap();
        for part in [
            "\"nodelist\":\"n[3-4],n1\"",
            "\"energy_cap_j\":2000000",
            "\"min_nodes\":2",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
    }

    #[test]
    fn a_job_without_node_list_or_id_is_left_to_its_nodes() {
        let logged = Mutex::new(Vec::new());
        let log = |_: Level, m: &str| logged.lock().unwrap().push(m.to_string());
        let args = Args::parse([]).unwrap();
        assert!(prolog_slurmctld(&args, |_| None, 0x16_05_08, &log));
        let lines = logged.lock().unwrap();
        assert!(
            lines[0].contains("SLURM_JOB_NODELIST is not set"),
            "{lines:?}"
        );
    }

    /// A site config whose greenupd cannot be reached (a port nothing listens on).
    fn unreachable_site(dir: &std::path::Path, enforce: &str) -> Args {
        let text = include_str!("../../tests/cluster/greenup.yaml")
            .replace("/etc/greenup-test/policies", "/nonexistent")
            .replace("/etc/greenup-test/profiles", "/nonexistent")
            .replace("enforce: open", &format!("enforce: {enforce}"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let text = text.replace("127.0.0.1:17470", &format!("127.0.0.1:{port}"));
        assert!(text.contains(&format!("enforce: {enforce}")));
        let cfg = dir.join(format!("greenup-{enforce}.yaml"));
        std::fs::write(&cfg, text).unwrap();
        Args::parse([format!("config={}", cfg.display()).as_str()]).unwrap()
    }

    #[test]
    fn an_unreachable_greenupd_runs_the_job_unless_the_site_is_strict() {
        let t = tempfile::tempdir().unwrap();
        let ctl = controller_vars();
        let get = |k: &str| ctl.get(k).map(|v| v.to_string());
        let logged = Mutex::new(Vec::new());
        let log = |_: Level, m: &str| logged.lock().unwrap().push(m.to_string());
        assert!(prolog_slurmctld(
            &unreachable_site(t.path(), "open"),
            get,
            0x16_05_08,
            &log
        ));
        assert!(!prolog_slurmctld(
            &unreachable_site(t.path(), "strict"),
            get,
            0x16_05_08,
            &log
        ));
        let lines = logged.lock().unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains(
                "job 42: no decision from greenupd at the controller, its nodes will ask"
            ),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("requeues or cancels the job (enforce: strict)"),
            "{lines:?}"
        );
    }
}
