//! The prolog's GPU work done by its worker (issue 25, the prolog's cost): the prolog
//! posts the job's GPU start to a file and `greenup gpu start-job FILE` does it, started
//! as the prolog starts it, with no environment; the epilog settles the file. Checked
//! against the NVML stand-in (tests/nvml), whose state the worker finds beside the
//! library: only the job's GPUs are saved and set, each to its part, and only once; an
//! epilog that comes first leaves the worker nothing to do; a file anyone may write is
//! refused. Expected limits are the parts given, in milliwatts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use greenup::power::split::GpuPart;
use greenup_core::quantity::Watts;
use greenup_platform::gpu::handoff::{self, Settled};
use greenup_platform::gpu::hold;
use greenup_platform::gpu::start::GpuStart;

#[path = "nvml/build_standin.rs"]
mod nvml_build;

fn get(dir: &Path, gpu: u32, file: &str) -> String {
    std::fs::read_to_string(dir.join(gpu.to_string()).join(file))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The stand-in copied into `t`, with its four GPUs' state named beside it (`.dir`), so
/// that a process without the test's environment finds them (tests/nvml/build_standin.rs:
/// each GPU at its 700 W default, limits 200-700 W).
fn standin(t: &Path) -> (PathBuf, PathBuf) {
    let built = nvml_build::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml/build.sh"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-standin"),
    );
    let lib = t.join("libnvidia-ml.so.1");
    std::fs::copy(&built, &lib).unwrap();
    let state = t.join("gpus");
    std::fs::write(t.join("libnvidia-ml.so.1.dir"), state.to_str().unwrap()).unwrap();
    nvml_build::gpus(&state, "worker");
    (lib, state)
}

/// Job 41's start on n1 with GPUs 1 and 3, each given a 350 W part.
fn ask(t: &Path, lib: &Path) -> GpuStart {
    GpuStart {
        job_id: 41,
        node: "n1".into(),
        gpus: "1,3".into(),
        library: lib.to_path_buf(),
        run_dir: t.join("run"),
        power: Some(GpuPart {
            part_w: Watts(350.0),
            limit_w: Watts(350.0),
        }),
        lock_mhz: None,
    }
}

fn post(a: &GpuStart) -> PathBuf {
    let dir = a.run_dir.join(a.job_id.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}.gpu-start.json", a.node));
    handoff::post(&file, a).unwrap();
    file
}

/// `greenup gpu start-job FILE` with no environment, as the prolog starts it.
fn worker(file: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_greenup"))
        .args(["gpu", "start-job"])
        .arg(file)
        .env_clear()
        .output()
        .unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn the_worker_saves_and_sets_only_the_jobs_gpus_once_and_the_epilog_reads_what_it_did() {
    let t = tempfile::tempdir().unwrap();
    let (lib, state) = standin(t.path());
    let a = ask(t.path(), &lib);
    let file = post(&a);
    let out = worker(&file);
    if !is_root() {
        // Only root may act on a prolog's handoff; nothing is changed.
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("only root changes GPU settings"));
        assert_eq!(get(&state, 1, "limit_mw"), "700000");
        return;
    }
    assert!(out.status.success(), "{out:?}");
    // The job's GPUs at their part, the others untouched.
    let limits: Vec<String> = (0..4).map(|i| get(&state, i, "limit_mw")).collect();
    assert_eq!(limits, ["700000", "350000", "700000", "350000"]);
    assert_eq!(get(&state, 0, "writes"), "");
    assert_eq!(get(&state, 2, "writes"), "");
    let rec = hold::load(&hold::record_path(&a.run_dir, 41, "n1"))
        .unwrap()
        .expect("the GPUs' record");
    let saved: Vec<(u32, u32)> = rec
        .gpus
        .iter()
        .map(|g| (g.minor, g.power_limit_mw))
        .collect();
    assert_eq!(saved, [(1, 700_000), (3, 700_000)]);
    // A second start (a retried worker) finds the work done and changes nothing.
    let writes = get(&state, 1, "writes");
    assert!(worker(&file).status.success());
    assert_eq!(get(&state, 1, "writes"), writes);
    // The epilog reads what the worker did, then the file is gone.
    match handoff::settle(&file, Duration::from_secs(5)).unwrap() {
        Settled::Done(o) => {
            let note = o.note.unwrap_or_default();
            assert!(note.contains("GPU power limit 350.0 W each"), "{note}");
            assert_eq!(o.warning, None);
        }
        other => panic!("{other:?}"),
    }
    assert!(!file.exists());
}

#[test]
fn a_worker_started_after_the_epilog_changes_nothing() {
    if !is_root() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (lib, state) = standin(t.path());
    let a = ask(t.path(), &lib);
    let file = post(&a);
    assert_eq!(
        handoff::settle(&file, Duration::from_secs(5)).unwrap(),
        Settled::NotStarted
    );
    let out = worker(&file);
    // The file is gone: an error naming it, and no GPU read or set.
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("gpu-start.json"));
    for i in 0..4 {
        assert_eq!(get(&state, i, "limit_mw"), "700000");
        assert_eq!(get(&state, i, "writes"), "");
    }
    assert!(!hold::record_path(&a.run_dir, 41, "n1").exists());
}

#[test]
fn a_handoff_anyone_may_write_is_refused_in_one_line() {
    if !is_root() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let (lib, state) = standin(t.path());
    let file = post(&ask(t.path(), &lib));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = worker(&file);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a prolog's handoff"), "{err}");
    assert_eq!(get(&state, 1, "limit_mw"), "700000");
}

#[test]
fn a_job_whose_gpus_cannot_be_measured_warns_its_owner_through_the_worker() {
    if !is_root() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (lib, state) = standin(t.path());
    // GPU 3 refuses a power limit, as a VM may.
    nvml_build::put(&state.join("3"), "refuse_power_limit", "NO_PERMISSION");
    let a = ask(t.path(), &lib);
    let file = post(&a);
    assert!(worker(&file).status.success());
    let warning =
        std::fs::read_to_string(a.run_dir.join("41").join("n1.warning")).unwrap_or_default();
    assert!(
        warning.starts_with("greenup: job 41 on n1: GPUs not all measured or held: /dev/nvidia3: power limit not set"),
        "{warning}"
    );
    assert_eq!(get(&state, 1, "limit_mw"), "350000");
    assert_eq!(get(&state, 3, "limit_mw"), "700000");
    match handoff::settle(&file, Duration::from_secs(5)).unwrap() {
        Settled::Done(o) => assert!(o.warning.is_some()),
        other => panic!("{other:?}"),
    }
}
