//! greenup's NVML readings and controls against the test-only stand-in library
//! (tests/nvml/standin.c). Every expected number comes from the stand-in's closed form
//! (tests/nvml/README.md), written out again here, never from greenup's own code.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use greenup_platform::gpu::hold::{self, Control, Request};
use greenup_platform::gpu::{Code, Nvml, NvmlError, samples};

/// The stand-in is steered by one process-wide variable, and NVML's init is process-wide:
/// one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const CLOCKS: [u32; 4] = [1980, 1600, 1200, 800];
const IDLE_MW: f64 = 70_000.0;
const DYN_MW: f64 = 630_000.0;

#[path = "../../../tests/nvml/build_standin.rs"]
mod nvml_build;

fn standin() -> PathBuf {
    nvml_build::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/nvml/build.sh"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-standin"),
    )
}

/// A node of stand-in GPUs; GPU i (NVML's index) has minor number `minors[i]`.
struct Node {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    lib: PathBuf,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl Node {
    fn new(minors: &[u32]) -> Node {
        let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nvml");
        std::fs::create_dir_all(&dir).unwrap();
        let node = Node {
            dir,
            lib: standin(),
            _tmp: tmp,
            _guard: guard,
        };
        node.put(None, "count", &minors.len().to_string());
        node.put(None, "now_ns", "1000000000000");
        for (i, m) in minors.iter().enumerate() {
            std::fs::create_dir_all(node.dir.join(i.to_string())).unwrap();
            let g = Some(i);
            node.put(g, "minor", &m.to_string());
            node.put(g, "uuid", &format!("GPU-standin-{m}"));
            node.put(g, "name", "Stand-in H100");
            node.put(g, "sm_clocks", &CLOCKS.map(|c| c.to_string()).join(" "));
            node.put(g, "mem_clock", "2619");
            node.put(g, "idle_mw", &IDLE_MW.to_string());
            node.put(g, "dyn_mw", &DYN_MW.to_string());
            node.put(g, "util", "100");
            node.put(g, "limit_mw", "700000");
            node.put(g, "limit_min_mw", "200000");
            node.put(g, "limit_max_mw", "700000");
            node.put(g, "limit_default_mw", "700000");
            node.put(g, "locked", "");
            node.put(g, "energy_mj", "5000");
            node.put(g, "stamp_ns", "1000000000000");
        }
        // SAFETY: tests hold ONE_AT_A_TIME, so no other thread reads the environment now.
        unsafe { std::env::set_var("GREENUP_NVML_STANDIN_DIR", &node.dir) };
        node
    }

    fn file(&self, gpu: Option<usize>, name: &str) -> PathBuf {
        match gpu {
            Some(i) => self.dir.join(i.to_string()).join(name),
            None => self.dir.join(name),
        }
    }

    fn put(&self, gpu: Option<usize>, name: &str, value: &str) {
        std::fs::write(self.file(gpu, name), format!("{value}\n")).unwrap();
    }

    fn get(&self, gpu: usize, name: &str) -> String {
        std::fs::read_to_string(self.file(Some(gpu), name))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn advance_s(&self, s: u64) {
        let now: u64 = std::fs::read_to_string(self.file(None, "now_ns"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        self.put(None, "now_ns", &(now + s * 1_000_000_000).to_string());
    }

    fn open(&self) -> Nvml {
        Nvml::open(&self.lib).unwrap()
    }
}

/// The stand-in's closed form: the clock a busy GPU runs at, and its power in mW.
fn expected(util_pct: u32, limit_mw: f64, lock: Option<(u32, u32)>) -> (u32, u32) {
    let fmax = 1980.0;
    let (lo, hi) = lock.unwrap_or((800, 1980));
    let p =
        |f: u32| IDLE_MW + DYN_MW * (f64::from(util_pct) / 100.0) * (f64::from(f) / fmax).powi(3);
    let allowed: Vec<u32> = CLOCKS
        .iter()
        .copied()
        .filter(|c| (lo..=hi).contains(c))
        .collect();
    let lowest = *allowed.iter().min().unwrap();
    let clock = if util_pct == 0 {
        lowest
    } else {
        allowed
            .iter()
            .copied()
            .filter(|c| p(*c) <= limit_mw)
            .max()
            .unwrap_or(lowest)
    };
    (clock, p(clock).round() as u32)
}

#[test]
fn readings_follow_clock_utilization_and_time() {
    let node = Node::new(&[0, 1]);
    node.put(Some(1), "util", "40");
    let nvml = node.open();
    assert_eq!(nvml.count().unwrap(), 2);
    let g0 = nvml.gpu(0).unwrap();
    let g1 = nvml.gpu(1).unwrap();
    assert_eq!(g0.name().unwrap(), "Stand-in H100");
    assert_eq!(g1.uuid().unwrap(), "GPU-standin-1");
    // Fully busy at the top clock: 70 W + 630 W.
    assert_eq!(
        (g0.sm_mhz().unwrap(), g0.power_mw().unwrap()),
        expected(100, 700_000.0, None)
    );
    assert_eq!(g0.power_mw().unwrap(), 700_000);
    assert_eq!(
        (g1.sm_mhz().unwrap(), g1.power_mw().unwrap()),
        expected(40, 700_000.0, None)
    );
    assert_eq!(g1.utilization_pct().unwrap(), 40);
    // The counter advances by power x time: 10 s at 700 W is 7,000,000 mJ.
    let e0 = g0.energy_mj().unwrap();
    node.advance_s(10);
    assert_eq!(g0.energy_mj().unwrap() - e0, 7_000_000);
    let (_, p1) = expected(40, 700_000.0, None);
    let e1 = g1.energy_mj().unwrap();
    node.advance_s(3);
    assert_eq!(g1.energy_mj().unwrap() - e1, u64::from(p1) * 3);
    assert_eq!(g0.power_limit_mw().unwrap(), 700_000);
    let range = g0.power_limit_range().unwrap();
    assert_eq!((range.min_mw, range.max_mw), (200_000, 700_000));
    assert_eq!(g0.default_power_limit_mw().unwrap(), 700_000);
    assert_eq!(g0.supported_sm_mhz().unwrap(), CLOCKS.to_vec());
}

#[test]
fn a_power_limit_and_a_clock_lock_slow_the_gpu_as_the_closed_form_says() {
    let node = Node::new(&[0]);
    let nvml = node.open();
    let g = nvml.gpu(0).unwrap();
    g.set_power_limit_mw(400_000).unwrap();
    assert_eq!(g.power_limit_mw().unwrap(), 400_000);
    let want = expected(100, 400_000.0, None);
    assert_eq!((g.sm_mhz().unwrap(), g.power_mw().unwrap()), want);
    // 1600 MHz would draw 70 + 630 (1600/1980)^3 = 402.4 W: over 400 W, so 1200 MHz.
    assert_eq!(want.0, 1200);
    g.set_power_limit_mw(700_000).unwrap();
    g.lock_clocks(800, 1600).unwrap();
    assert_eq!(
        (g.sm_mhz().unwrap(), g.power_mw().unwrap()),
        expected(100, 700_000.0, Some((800, 1600)))
    );
    // The energy counter takes the power in force in each interval.
    let e0 = g.energy_mj().unwrap();
    node.advance_s(2);
    let (_, p_locked) = expected(100, 700_000.0, Some((800, 1600)));
    assert_eq!(g.energy_mj().unwrap() - e0, 2 * u64::from(p_locked));
    g.unlock_clocks().unwrap();
    assert_eq!(g.sm_mhz().unwrap(), 1980);
    // An idle GPU sits at its lowest allowed clock and draws its idle power.
    node.put(Some(0), "util", "0");
    assert_eq!((g.sm_mhz().unwrap(), g.power_mw().unwrap()), (800, 70_000));
}

#[test]
fn each_failure_names_the_nvml_code() {
    let node = Node::new(&[0]);
    let nvml = node.open();
    let g = nvml.gpu(0).unwrap();
    let err = g.set_power_limit_mw(100_000).unwrap_err();
    assert_eq!(err.code(), Some(Code(2)));
    assert!(
        err.to_string()
            .contains("nvmlDeviceSetPowerManagementLimit: NVML_ERROR_INVALID_ARGUMENT (2)"),
        "{err}"
    );
    node.put(Some(0), "refuse_locked_clocks", "NO_PERMISSION");
    let err = g.lock_clocks(800, 1200).unwrap_err();
    assert!(err.is_refusal());
    assert!(
        err.to_string().contains("NVML_ERROR_NO_PERMISSION (4)"),
        "{err}"
    );
    node.put(Some(0), "refuse_energy", "NOT_SUPPORTED");
    assert_eq!(g.energy_mj().unwrap_err().code(), Some(Code::NOT_SUPPORTED));
    assert!(matches!(
        nvml.gpu_by_minor(9),
        Err(NvmlError::NoSuchMinor { minor: 9 })
    ));
}

#[test]
fn a_node_without_nvml_or_without_the_driver_says_so() {
    let node = Node::new(&[0]);
    let err = Nvml::open(Path::new("/nonexistent/libnvidia-ml.so.1")).unwrap_err();
    assert!(matches!(err, NvmlError::Load { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot load NVML from /nonexistent/libnvidia-ml.so.1"),
        "{err}"
    );
    std::fs::remove_file(node.file(None, "count")).unwrap();
    let err = Nvml::open(&node.lib).unwrap_err();
    assert!(
        err.to_string()
            .contains("nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED (9)"),
        "{err}"
    );
}

fn run_dir(node: &Node) -> PathBuf {
    node._tmp.path().join("run")
}

#[test]
fn a_job_holds_only_its_own_gpus_and_the_end_restores_them_exactly() {
    // NVML's order is not the device numbering: minor 2 is NVML's GPU 1.
    let node = Node::new(&[0, 2, 1, 3]);
    node.put(Some(1), "limit_mw", "650000");
    let before: Vec<(String, String, String)> = (0..4)
        .map(|i| {
            (
                node.get(i, "limit_mw"),
                node.get(i, "locked"),
                node.get(i, "energy_mj"),
            )
        })
        .collect();
    let file = hold::record_path(&run_dir(&node), 77, "n1");
    let req = Request {
        power_limit_mw: Some(300_000),
        lock_mhz: Some((800, 1200)),
    };
    let nvml = node.open();
    // SLURM_JOB_GPUS=2,3: NVML's GPUs 1 and 3.
    let rec = hold::begin(&nvml, &file, 77, &[2, 3], req, |_| None).unwrap();
    assert_eq!(
        rec.gpus.iter().map(|g| g.minor).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(rec.gpus[0].power_limit_mw, 650_000);
    assert!(
        rec.gpus
            .iter()
            .all(|g| g.power_limit == Control::Held && g.clocks == Control::Held)
    );
    assert_eq!(node.get(1, "limit_mw"), "300000");
    assert_eq!(node.get(3, "locked"), "800 1200");
    // The other job's GPUs (minors 0 and 1: NVML's 0 and 2) were neither set nor read.
    for i in [0, 2] {
        assert_eq!(
            (
                node.get(i, "limit_mw"),
                node.get(i, "locked"),
                node.get(i, "energy_mj")
            ),
            before[i]
        );
        assert!(!node.file(Some(i), "writes").exists());
    }
    node.advance_s(20);
    let ends = hold::end(&nvml, &file).unwrap().unwrap();
    // Held at 300 W with clocks in [800, 1200]: the closed form's power for 20 s.
    let (clock, p) = expected(100, 300_000.0, Some((800, 1200)));
    assert_eq!(clock, 1200);
    for e in &ends {
        assert_eq!(e.energy_j(), Some(f64::from(p) * 20.0 / 1000.0));
        assert_eq!(e.restore_error, None);
    }
    for (i, (limit, locked, _)) in before.iter().enumerate() {
        assert_eq!(
            (&node.get(i, "limit_mw"), &node.get(i, "locked")),
            (limit, locked)
        );
    }
    assert_eq!(
        node.get(1, "writes"),
        "power_limit 300000\nlock 800 1200\npower_limit 650000\nunlock"
    );
    assert!(!file.exists());
    assert!(!file.parent().unwrap().exists());
    assert!(hold::end(&nvml, &file).unwrap().is_none());
}

#[test]
fn a_refused_control_is_reported_as_not_held_and_not_restored() {
    let node = Node::new(&[0]);
    node.put(Some(0), "refuse_locked_clocks", "NOT_SUPPORTED");
    let file = hold::record_path(&run_dir(&node), 5, "n1");
    let nvml = node.open();
    let req = Request {
        power_limit_mw: Some(500_000),
        lock_mhz: Some((1200, 1600)),
    };
    let rec = hold::begin(&nvml, &file, 5, &[0], req, |_| None).unwrap();
    assert_eq!(rec.gpus[0].power_limit, Control::Held);
    match &rec.gpus[0].clocks {
        Control::NotHeld(why) => assert!(why.contains("NVML_ERROR_NOT_SUPPORTED"), "{why}"),
        other => panic!("{other:?}"),
    }
    let ends = hold::end(&nvml, &file).unwrap().unwrap();
    assert_eq!(ends[0].restore_error, None);
    assert_eq!(node.get(0, "limit_mw"), "700000");
    // Nothing was locked, so nothing was unlocked.
    assert_eq!(
        node.get(0, "writes"),
        "power_limit 500000\npower_limit 700000"
    );
}

#[test]
fn after_a_crash_a_later_end_finds_the_record_and_restores() {
    let node = Node::new(&[0, 1]);
    let run = run_dir(&node);
    let req = Request {
        power_limit_mw: Some(250_000),
        lock_mhz: None,
    };
    {
        let nvml = node.open();
        hold::begin(
            &nvml,
            &hold::record_path(&run, 9, "n1"),
            9,
            &[1],
            req,
            |_| None,
        )
        .unwrap();
        // A retried prolog keeps the first record: "before" stays the GPU's own 700 W.
        let again = hold::begin(
            &nvml,
            &hold::record_path(&run, 9, "n1"),
            9,
            &[1],
            req,
            |_| None,
        )
        .unwrap();
        assert_eq!(again.gpus[0].power_limit_mw, 700_000);
        // The epilog never runs: NVML is let go with the GPU still held.
    }
    assert_eq!(node.get(1, "limit_mw"), "250000");
    assert_eq!(hold::leftover_jobs(&run, "n1"), vec![9]);
    assert!(hold::leftover_jobs(&run, "n2").is_empty());
    let nvml = node.open();
    for job in hold::leftover_jobs(&run, "n1") {
        hold::end(&nvml, &hold::record_path(&run, job, "n1")).unwrap();
    }
    assert_eq!(node.get(1, "limit_mw"), "700000");
    assert!(hold::leftover_jobs(&run, "n1").is_empty());
}

#[test]
fn a_lock_greenup_set_outside_the_job_comes_back_after_it() {
    let node = Node::new(&[0]);
    let run = run_dir(&node);
    let nvml = node.open();
    let admin = Request {
        power_limit_mw: None,
        lock_mhz: Some((800, 1600)),
    };
    hold::begin(&nvml, &hold::admin_path(&run), 0, &[0], admin, |_| None).unwrap();
    assert_eq!(hold::admin_lock(&run, "GPU-standin-0"), Some((800, 1600)));
    let job = Request {
        power_limit_mw: None,
        lock_mhz: Some((1200, 1200)),
    };
    let file = hold::record_path(&run, 12, "n1");
    let rec = hold::begin(&nvml, &file, 12, &[0], job, |u| hold::admin_lock(&run, u)).unwrap();
    assert_eq!(rec.gpus[0].lock_before_mhz, Some((800, 1600)));
    assert_eq!(node.get(0, "locked"), "1200 1200");
    hold::end(&nvml, &file).unwrap();
    assert_eq!(node.get(0, "locked"), "800 1600");
    hold::end(&nvml, &hold::admin_path(&run)).unwrap();
    assert_eq!(node.get(0, "locked"), "");
}

#[test]
fn a_gpu_slurm_named_that_the_node_lacks_is_listed_not_invented() {
    let node = Node::new(&[0]);
    let nvml = node.open();
    let file = hold::record_path(&run_dir(&node), 3, "n1");
    let rec = hold::begin(&nvml, &file, 3, &[0, 5], Request::default(), |_| None).unwrap();
    assert_eq!(rec.gpus.len(), 1);
    assert_eq!(
        rec.missing,
        vec!["/dev/nvidia5: no GPU with minor number 5 (/dev/nvidia5) on this node".to_string()]
    );
    assert!(!node.file(Some(0), "writes").exists());
}

#[test]
fn the_meter_keeps_the_means_of_the_held_gpus_only() {
    let node = Node::new(&[0, 1]);
    let run = run_dir(&node);
    let nvml = node.open();
    let file = hold::record_path(&run, 21, "n1");
    let rec = hold::begin(&nvml, &file, 21, &[1], Request::default(), |_| None).unwrap();
    let out = hold::samples_path(&run, 21, "n1");
    // Busy at 1980 MHz, then idle (the lowest clock, 800 MHz, 0%): means 1390 MHz, 50%.
    samples::sample(&nvml, &rec, &out).unwrap();
    node.put(Some(1), "util", "0");
    // GPU 0 is not the job's: whatever it does is not counted.
    node.put(Some(0), "util", "0");
    let s = samples::sample(&nvml, &rec, &out).unwrap();
    assert_eq!((s.sm_n, s.util_n), (2, 2));
    assert_eq!(s.sm_mhz(), Some((1980.0 + 800.0) / 2.0));
    assert_eq!(s.util_pct(), Some(50.0));
    assert_eq!(samples::load(&out).unwrap(), Some(s));
}

#[test]
fn the_live_power_of_a_jobs_gpus_is_their_counters_over_the_interval() {
    let node = Node::new(&[0, 1, 2]);
    let run = run_dir(&node);
    let nvml = node.open();
    let file = hold::record_path(&run, 22, "n1");
    let rec = hold::begin(&nvml, &file, 22, &[0, 2], Request::default(), |_| None).unwrap();
    let from = samples::energy_mj(&nvml, &rec).unwrap();
    // Both of the job's GPUs fully busy at the top clock: IDLE_MW + DYN_MW each, for 5 s.
    node.advance_s(5);
    // GPU 1 is not the job's: its counter is never read.
    let to = samples::energy_mj(&nvml, &rec).unwrap();
    let each_w = (IDLE_MW + DYN_MW) / 1e3;
    let w = samples::mean_power_w(from, to, 5.0).unwrap();
    assert!((w - 2.0 * each_w).abs() < 1e-3, "{w}");
    assert_eq!(node.get(1, "energy_mj"), "5000");
    assert_eq!(samples::mean_power_w(to, from, 5.0), None);
    assert_eq!(samples::mean_power_w(from, to, 0.0), None);
    // A counter that cannot be read: no figure at all.
    node.put(Some(2), "refuse_energy", "NOT_SUPPORTED");
    assert_eq!(samples::energy_mj(&nvml, &rec), None);
}
