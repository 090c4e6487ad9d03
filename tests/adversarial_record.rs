//! Hostile and unlucky cases of what greenupd records and learns from: a monitoring
//! policy under another name, and a "completed" that Slurm's final record contradicts.

mod daemon_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use daemon_support::*;
use greenup::profile::versions::Versions;
use greenup::record::JobEnd;
use greenup_proto::protocol::OpenJob;

fn job(job_id: u64, policy: &str) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("wrong".into()),
        policy: Some(policy.into()),
        ..open_req(job_id, 0, 2)
    }
}

#[test]
fn a_policy_flagged_monitor_under_another_name_changes_no_frequency() {
    let d = start(2, |dir, s, _| {
        s.profile_dir = wrong_profile_dir(dir);
        let site_policies = dir.join("policies");
        std::fs::create_dir_all(&site_policies).unwrap();
        std::fs::write(
            site_policies.join("watch.yaml"),
            "name: watch\ndescription: records only\nobjective: min_energy\nmonitor: true\n",
        )
        .unwrap();
        s.policy_dirs.push(site_policies);
    });
    let dec = d.tcp_client().open_job(job(1, "watch")).unwrap();
    assert!(dec.monitor, "{dec:?}");
    assert_eq!(
        dec.verdict,
        greenup_proto::protocol::Verdict::Unchanged,
        "{}",
        dec.reason
    );
    for n in ["n1", "n2"] {
        assert_eq!(dec.freq_for(n), None, "{n} would be pinned");
    }
    // The store keeps the flag, which reports and the fallback metrics read: a run
    // under it is monitoring, not a fallback.
    let stored = d.tcp_client().get_job(1).unwrap();
    assert!(
        stored.decision.monitor
            && stored.decision.verdict == greenup_proto::protocol::Verdict::Unchanged
    );
    // The shipped policy named monitor behaves the same way, by its flag.
    let shipped = d.tcp_client().open_job(job(2, "monitor")).unwrap();
    assert!(shipped.monitor && shipped.freq_for("n1").is_none());
}

/// A directory holding a stand-in `scontrol` that prints `state` for any job, and a
/// `sacct` that fails: what greenupd sees of a job Slurm ended that way.
fn slurm_saying(dir: &Path, state: &str) -> std::path::PathBuf {
    let bin = dir.join("slurm-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in [
        (
            "scontrol",
            format!(
                "#!/bin/sh\necho \"JobId=$4 JobName=wrap UserId=u(1) JobState={state} Reason=None ExitCode=0:0\"\n"
            ),
        ),
        ("sacct", "#!/bin/sh\nexit 1\n".to_string()),
        ("squeue", "#!/bin/sh\nexit 1\n".to_string()),
    ] {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

fn run_ended_as(state: &str) -> (Option<JobEnd>, Vec<u64>) {
    let d = start(2, |dir, s, o| {
        s.profile_dir = wrong_profile_dir(dir);
        o.slurm_check = true;
        o.slurm_bin_dir = Some(slurm_saying(dir, state));
    });
    let dec = d.tcp_client().open_job(job(7, "min-energy")).unwrap();
    let predicted = dec.plan.as_ref().expect("a plan").predicted.energy_j.0;
    // The node claims "completed", with measurements a refinement would learn from.
    assert!(finish_planned(&d, &dec, 2.0 * predicted, Some("rapl")));
    wait_for(|| d.tcp_client().get_job(7).unwrap().end != Some(JobEnd::Unknown));
    // Give a refinement, had one been started, time to write its version.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let versions = Versions::for_store(&d.store).list("wrong").unwrap();
    (d.tcp_client().get_job(7).unwrap().end, versions)
}

#[test]
fn a_completion_slurm_says_was_a_cancel_is_stored_cancelled_and_teaches_nothing() {
    let (end, versions) = run_ended_as("CANCELLED");
    assert_eq!(end, Some(JobEnd::Cancelled));
    assert!(
        versions.is_empty(),
        "refined from a cancelled run: {versions:?}"
    );
}

#[test]
fn a_completion_slurm_confirms_is_learned_from() {
    let (end, versions) = run_ended_as("COMPLETED");
    assert_eq!(end, Some(JobEnd::Completed));
    assert_eq!(versions, vec![2]);
}

#[test]
fn node_names_that_could_leave_a_directory_are_refused_on_open_and_outcome() {
    use greenup_proto::client::ClientError;
    use greenup_proto::protocol::{ErrorCode, NodeOutcome};
    let d = start(2, |_, _, _| {});
    let bad = OpenJob {
        restart_count: None,
        nodes: vec!["n1".into(), "../../etc".into()],
        ..open_req(9, 0, 2)
    };
    match d.tcp_client().open_job(bad) {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::BadRequest);
            assert!(e.message.contains("'../../etc'"), "{}", e.message);
        }
        other => panic!("expected bad_request, got {other:?}"),
    }
    d.tcp_client().open_job(open_req(10, 0, 2)).unwrap();
    let outcome = NodeOutcome {
        restart_count: None,
        comm: None,
        job_id: 10,
        node: "n1/../../x".into(),
        freq_ghz: None,
        energy_j: None,
        elapsed_s: None,
        source: None,
        restored: true,
        note: None,
        gpu: None,
        power: None,
    };
    match d.tcp_client().record_outcome(outcome) {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::BadRequest, "{}", e.message),
        other => panic!("expected bad_request, got {other:?}"),
    }
}
