//! What a node's job prolog and epilog share: the site config's node settings, the
//! node's paths, greenupd's connection, the spool, and warnings for the job's owner. The
//! prolog is [`crate::prolog`], the epilog [`crate::epilog`], the job's environment
//! [`crate::job_env`]. Nothing here fails a prolog, so greenup never drains a node.

use std::path::Path;
use std::time::Duration;

use greenup::site::node::NodeConfig;
use greenup_platform::dvfs::job::NodePaths;
use greenup_platform::dvfs::run_dir::JobDir;
use greenup_proto::client::{Client, ClientError, Endpoint};
use greenup_proto::protocol::NodeSettings;

use crate::args::Args;
use crate::spool;

pub use crate::job_env::{JobEnv, Level, Log};

/// The site config's node settings, through this node's copy when it is current.
pub fn settings(args: &Args) -> Result<NodeConfig, greenup::input::InputError> {
    greenup_host::cache::load_cached(&args.config, &args.site_cache, greenup::site::node::load)
}

/// The node settings for a job's prolog or epilog; when the site config is unusable,
/// one warning saying so and what follows for the job (`then`).
pub(crate) fn settings_for(args: &Args, job: &JobEnv, then: &str, log: Log) -> Option<NodeConfig> {
    settings(args)
        .map_err(|e| {
            log(
                Level::Warning,
                &format!(
                    "greenup: job {}: site config unusable, {then}: {e}",
                    job.job_id
                ),
            )
        })
        .ok()
}

/// Where this node keeps greenup's files for a job.
pub fn node_paths(args: &Args, site: &NodeConfig, node: &str) -> NodePaths {
    NodePaths {
        sysfs_root: args
            .sysfs_root_for(node)
            .unwrap_or_else(|| site.dvfs.sysfs_root.clone()),
        run_dir: site.dvfs.run_dir.clone(),
    }
}

pub(crate) fn warn(log: Log, run_dir: &Path, job: &JobEnv, message: &str) {
    let line = format!("greenup: job {} on {}: {message}", job.job_id, job.node);
    log(Level::Warning, &line);
    let _ = JobDir::new(run_dir, job.job_id).add_warning(&job.node, &line);
}

/// How long the plugin waits for greenupd in each call: the site's `daemon.timeout_ms`,
/// kept between 50 ms and a minute.
pub(crate) fn site_timeout(site: &NodeConfig) -> Duration {
    Duration::from_millis(site.daemon.timeout_ms.clamp(50, 60_000))
}

/// The daemon client, connected with the site's timeout.
pub fn connect(site: &NodeConfig) -> Result<Client, ClientError> {
    Client::connect(&Endpoint::parse(&site.daemon.listen), site_timeout(site))
}

/// The part of a decision a node needs after the prolog, read back from its file.
pub fn saved_decision(run_dir: &Path, job_id: u32, node: &str) -> Option<NodeSettings> {
    let bytes = std::fs::read(JobDir::new(run_dir, job_id).decision(node)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// How many spooled entries a prolog sends along, and within how long: a job waits for this.
pub const PROLOG_SPOOL: (usize, Duration) = (4, Duration::from_millis(100));

/// How many spooled entries an epilog sends along, and within how long (it delays only
/// the node's release).
pub const EPILOG_SPOOL: (usize, Duration) = (16, Duration::from_millis(500));

/// Send pending spool entries of this node on `client`, within `bound` (entries, time).
pub(crate) fn deliver_spool(
    site: &NodeConfig,
    job: &JobEnv,
    client: &mut Client,
    bound: (usize, Duration),
    log: Log,
) {
    let dir = spool::dir_for(&site.daemon.spool_dir, &job.node);
    let d = spool::deliver(&dir, client, bound.0, bound.1);
    if !d.sent.is_empty() {
        let ids: Vec<String> = d.sent.iter().map(u64::to_string).collect();
        log(
            Level::Info,
            &format!(
                "greenup: job {} on {}: delivered spooled outcomes of job(s) {}{}",
                job.job_id,
                job.node,
                ids.join(","),
                if d.more_left { "; more left" } else { "" }
            ),
        );
    }
    for (name, why) in &d.rejected {
        log(
            Level::Warning,
            &format!(
                "greenup: {}: spooled entry {name} refused, kept as {name}.rejected: {why}",
                dir.display()
            ),
        );
    }
    // Restore the site's timeout for anything the caller sends after this.
    let _ = client.set_timeout(site_timeout(site));
}

/// The test cluster's site config, with no policy or profile directories.
#[cfg(test)]
pub(crate) fn test_cluster_site() -> greenup::site::Site {
    let text = include_str!("../../tests/cluster/greenup.yaml")
        .replace("/etc/greenup-test/policies", "/nonexistent")
        .replace("/etc/greenup-test/profiles", "/nonexistent");
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("greenup.yaml");
    std::fs::write(&cfg, text).unwrap();
    greenup::site::load(&cfg).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Checked;
    use crate::prolog::{holds_whole_node, open_request};
    use greenup::site::PowerSettings;
    use greenup::slurm::time_limit::TimeLimit;
    use std::collections::HashMap;

    #[test]
    fn job_env_reads_what_slurmd_passes_to_a_prolog() {
        let vars: HashMap<&str, &str> = [
            ("SLURM_JOB_ID", "17"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURM_JOB_USER", "alice"),
            ("SLURM_JOB_PARTITION", "debug"),
            ("SLURMD_NODENAME", "n2"),
            ("SLURM_NODELIST", "n[1-2],n4"),
            ("SLURM_JOB_CPUS_PER_NODE", "4(x3)"),
            ("SPANK_GREENUP_POLICY", "max-dist"),
            ("SPANK_GREENUP_ENERGY_CAP_J", "1000000"),
        ]
        .into_iter()
        .collect();
        let job = JobEnv::from_vars(|k| vars.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(job.job_id, 17);
        assert_eq!(job.nodes, vec!["n1", "n2", "n4"]);
        assert_eq!(job.options.policy.as_deref(), Some("max-dist"));
        assert_eq!(job.options.energy_cap_j, Some(1.0e6));
        assert_eq!(job.options.profile, None);
        assert!(
            JobEnv::from_vars(|_| None)
                .unwrap_err()
                .to_string()
                .contains("SLURMD_NODENAME")
        );
    }

    #[test]
    fn the_request_carries_the_time_limit_where_slurm_gives_it_to_the_prolog() {
        // Slurm 23.02 and later: the job credential's start and end time, 11 minutes apart.
        let vars: HashMap<&str, &str> = [
            ("SLURM_JOB_ID", "17"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURMD_NODENAME", "n1"),
            ("SLURM_JOB_START_TIME", "1795000000"),
            ("SLURM_JOB_END_TIME", "1795000660"),
        ]
        .into_iter()
        .collect();
        let get = |k: &str| vars.get(k).map(|v| v.to_string());
        let job = JobEnv::from_slurm_vars(get, 0x18_0b_00).unwrap();
        let req = open_request(&job, "min-energy".into(), &PowerSettings::default());
        assert_eq!(req.time_limit, TimeLimit::Seconds(660.0));
        assert_eq!(req.nodelist.as_deref(), Some("n1"));
        // Slurm 22.05 sets neither variable: one there came from elsewhere (the user's
        // own job environment) and is ignored; greenupd asks slurmctld instead.
        let job = JobEnv::from_slurm_vars(get, 0x16_05_08).unwrap();
        assert_eq!(
            open_request(&job, "min-energy".into(), &PowerSettings::default()).time_limit,
            TimeLimit::Unknown
        );
        // An unlimited job's credential ends a year after it starts: sent as unlimited,
        // so greenupd need not ask slurmctld.
        let vars: HashMap<&str, &str> = [
            ("SLURM_JOB_ID", "17"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURMD_NODENAME", "n1"),
            ("SLURM_JOB_START_TIME", "1795000000"),
            ("SLURM_JOB_END_TIME", "1826536000"),
        ]
        .into_iter()
        .collect();
        let get = |k: &str| vars.get(k).map(|v| v.to_string());
        let job = JobEnv::from_slurm_vars(get, 0x18_0b_00).unwrap();
        let req = open_request(&job, "min-energy".into(), &PowerSettings::default());
        assert_eq!(req.time_limit, TimeLimit::Unlimited);
    }

    #[test]
    fn whole_node_means_every_cpu_in_the_tree() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..4 {
            let d = t
                .path()
                .join(format!("devices/system/cpu/cpufreq/policy{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("affected_cpus"), format!("{i}\n")).unwrap();
        }
        let mut job = JobEnv {
            restart_count: None,
            job_id: 1,
            uid: 1,
            gid: None,
            user: None,
            partition: None,
            account: None,
            node: "n2".into(),
            nodelist: "n[1-2]".into(),
            nodes: vec!["n1".into(), "n2".into()],
            cpus_per_node: Some("4,2".into()),
            options: Checked::default(),
            exit: None,
            gpus: None,
            time_limit: TimeLimit::Unknown,
            licenses: None,
        };
        assert!(!holds_whole_node(&job, t.path()));
        job.cpus_per_node = Some("4(x2)".into());
        assert!(holds_whole_node(&job, t.path()));
        job.cpus_per_node = None;
        assert!(!holds_whole_node(&job, t.path()));
    }
}
