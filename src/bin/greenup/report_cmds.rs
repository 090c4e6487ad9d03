//! `greenup report JOBID`, `greenup app NAME` and `greenup profile pin NAME VERSION`:
//! fetch what greenupd stored, add the profile version's predictor and
//! confidence, and print it through the library's renderers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use greenup::model::{NodeSlot, Predictor};
use greenup::profile::Profile;
use greenup::profile::locate::admin_file;
use greenup::profile::refine::{check, outcome_from_record};
use greenup::profile::versions::{InUse, Versions};
use greenup::report::accounting::{self, SlurmEnergy};
use greenup::report::landscape::{self, EeCurves, Landscape};
use greenup::report::record::{Context, from_record};
use greenup::report::{
    AppHistory, Confidence, JobReport, JobRow, ReportError, VersionInfo, svg, table, text,
};
use greenup::site::Site;
use greenup_core::fs::write_atomic;
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::{JobRecord, ListRecords};

use crate::{Failure, Outcome, emit, site_path};

/// Options of `greenup report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Slurm job id.
    job_id: u64,
    /// Print JSON.
    #[arg(long, conflicts_with_all = ["csv"])]
    json: bool,
    /// Print CSV, one row per node.
    #[arg(long)]
    csv: bool,
    /// Also draw the landscape the policy searched into FILE.svg (and EE against
    /// node count into FILE-ee.svg when the model defines EE).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Site config (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// Options of `greenup jobs`.
#[derive(Args, Debug)]
pub struct JobsArgs {
    /// Only this user's jobs (ordinary users see only their own anyway).
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Only jobs of this application profile.
    #[arg(long, value_name = "NAME")]
    app: Option<String>,
    /// Only jobs that ended at or after DATE (YYYY-MM-DD[THH:MM[:SS]], UTC).
    #[arg(long, value_name = "DATE", value_parser = date)]
    since: Option<i64>,
    /// Only jobs that ended before DATE (YYYY-MM-DD[THH:MM[:SS]], UTC).
    #[arg(long, value_name = "DATE", value_parser = date)]
    until: Option<i64>,
    /// Show at most this many jobs: the newest that match.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
    /// Print JSON.
    #[arg(long, conflicts_with_all = ["csv"])]
    json: bool,
    /// Print CSV.
    #[arg(long)]
    csv: bool,
    /// Site config (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

fn date(s: &str) -> Result<i64, String> {
    text::parse_utc(s)
        .ok_or_else(|| "expected a UTC date YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS]".to_string())
}

/// Run `greenup jobs`: one row per job, oldest first, in eacct/sacct-style columns.
pub fn jobs(args: JobsArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    // A number is a uid; anything else a user name.
    let (uid, user) = match args.user.as_deref().map(|u| (u.parse::<u32>().ok(), u)) {
        Some((Some(uid), _)) => (Some(uid), None),
        Some((None, name)) => (None, Some(name.to_string())),
        None => (None, None),
    };
    let filter = ListRecords {
        uid,
        user,
        profile: args.app.clone(),
        closed_since: args.since,
        closed_before: args.until,
        ..ListRecords::default()
    };
    let recs = connect(&site)?
        .records(filter, args.limit as usize)
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    let rows: Vec<JobRow> = recs
        .iter()
        .rev()
        .map(|rec| JobRow::from(&from_record(rec, &Context::default())))
        .collect();
    print_as(
        args.json,
        args.csv,
        &rows[..],
        table::jobs_json,
        table::jobs_csv,
        text::jobs_table,
    )?;
    Ok(())
}

/// Options of `greenup app`.
#[derive(Args, Debug)]
pub struct AppArgs {
    /// Application profile name.
    name: String,
    /// Print JSON.
    #[arg(long, conflicts_with_all = ["csv"])]
    json: bool,
    /// Print CSV, one row per profile version.
    #[arg(long)]
    csv: bool,
    /// Site config (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// Options of `greenup profile pin`.
#[derive(Args, Debug)]
pub struct PinArgs {
    /// Application profile name.
    name: String,
    /// Version to use from now on; the admin file's own version rolls back to it.
    /// `latest` removes the pin.
    version: String,
    /// Site config (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// Options of `greenup profile learn`.
#[derive(Args, Debug)]
pub struct LearnArgs {
    /// Application profile name (the --energy-profile its monitor runs gave).
    name: String,
    /// The model to learn: hetero (per node type), amdahl (across node counts) or iso_energy (paper 000).
    #[arg(long, value_name = "MODEL", value_parser = ["hetero", "amdahl", "iso_energy"])]
    model: String,
    /// hetero: the node count the profile is for (default: the largest among the runs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    nodes: Option<u32>,
    /// Write the profile here (`-`: standard output) instead of the site's profile directory.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace a profile file that already exists.
    #[arg(long)]
    force: bool,
    /// Site config (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// The most stored runs `greenup profile learn` reads, newest first.
const LEARN_MAX_RUNS: usize = 1_000;

/// Run `greenup profile learn NAME --model MODEL`.
pub fn learn(args: LearnArgs) -> Outcome {
    use greenup::profile::learn::{Model, learn as learn_profile};
    let site = greenup::site::load(site_path(&args.site))?;
    if !greenup::names::is_name(&args.name) {
        return Err(greenup::profile::locate::bad_name(&args.name, profile_option()).into());
    }
    let to_stdout = args.out.as_deref() == Some(Path::new("-"));
    let dest = match &args.out {
        Some(p) => p.clone(),
        None => site.profile_dir.join(format!("{}.yaml", args.name)),
    };
    // What a job reads is root's or the SlurmUser's to write; say so before reading
    // anything (the file system would refuse too, with a less helpful line).
    if !to_stdout && feeds_jobs(&site, &dest) {
        let (roles, _) = greenup::site::roles::Roles::from_site(&site, greenup_host::users::uid_of);
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        if !roles.may_write(uid) {
            return Err(Failure::Runtime(format!(
                "profile learn: only root or the SlurmUser ({}) may write {}, which jobs read; use --out FILE to write it elsewhere",
                site.daemon.slurm_user,
                dest.display()
            )));
        }
    }
    if !to_stdout && !args.force && std::fs::symlink_metadata(&dest).is_ok() {
        return Err(Failure::option(
            "--out",
            dest.display(),
            "a file that does not exist yet, or --force to replace it",
        ));
    }
    let filter = ListRecords {
        profile: Some(args.name.clone()),
        state: Some(greenup::record::JobState::Closed),
        ..ListRecords::default()
    };
    let records = connect(&site)?
        .records(filter, LEARN_MAX_RUNS)
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    let model = match args.model.as_str() {
        "amdahl" => Model::Amdahl,
        "iso_energy" => Model::IsoEnergy,
        _ => Model::Hetero,
    };
    let learned = learn_profile(
        &site,
        &args.name,
        model,
        &records,
        args.nodes.map(|n| n as usize),
    )
    .map_err(|e| Failure::Runtime(format!("profile learn {}: {e}", args.name)))?;
    let yaml = serde_saphyr::to_string(&learned.file)
        .map_err(|e| Failure::Runtime(format!("cannot write the profile: {e}")))?;
    let note = |line: &str| {
        if to_stdout {
            crate::complain(line)
        } else {
            emit(line)
        }
    };
    for line in &learned.notes {
        note(&format!("{}: {line}", args.name));
    }
    if to_stdout {
        emit(yaml.trim_end());
        return Ok(());
    }
    write_atomic(&dest, yaml.as_bytes())
        .map_err(|e| Failure::Runtime(format!("{}: {e}", dest.display())))?;
    note(&format!(
        "{}: {} version 1 written to {} from {} run(s); greenupd refines it from every run after",
        args.name,
        model.name(),
        dest.display(),
        learned.jobs.len()
    ));
    let refined = Versions::for_store(&site.daemon.store).list(&args.name)?;
    if let (Some(last), None) = (refined.last(), args.out.as_ref()) {
        note(&format!(
            "{}: decisions keep using refined version {last} until you pin this one: greenup profile pin {} 1",
            args.name, args.name
        ));
    }
    Ok(())
}

/// Whether a file at `dest` is one jobs read: in the site's profile directory or among
/// greenupd's refined versions.
fn feeds_jobs(site: &Site, dest: &Path) -> bool {
    let dir = |p: &Path| {
        p.parent()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .and_then(|d| std::fs::canonicalize(d).ok())
    };
    let Some(parent) = dir(dest) else {
        return false;
    };
    let versions = std::fs::canonicalize(Versions::for_store(&site.daemon.store).root()).ok();
    std::fs::canonicalize(&site.profile_dir).is_ok_and(|d| parent == d)
        || versions.is_some_and(|v| parent.starts_with(v))
}

/// A connection to greenupd's local socket.
pub(crate) fn connect(site: &Site) -> Result<Client, Failure> {
    let timeout = Duration::from_millis(site.daemon.timeout_ms.max(2_000));
    Client::connect(&Endpoint::Unix(site.daemon.socket.clone()), timeout)
        .map_err(|e| Failure::Runtime(e.to_string()))
}

/// Where a profile named on the command line came from, for errors.
fn profile_option() -> greenup::input::Origin {
    greenup::input::Origin::Option("NAME".into())
}

/// The profile version a job's decision used, with its fit record.
fn profile_version(site: &Site, name: &str, version: u64) -> Option<(Profile, Confidence)> {
    let versions = Versions::for_store(&site.daemon.store);
    if let Ok(path) = versions.path(name, version)
        && path.exists()
    {
        let p = Profile::load(&path).ok()?;
        let c = versions
            .fit(name, version)
            .map(|f| Confidence {
                samples: f.samples,
                residual: Some(f.residual),
            })
            .unwrap_or_default();
        return Some((p, c));
    }
    let admin = Profile::load(&admin_file(&site.profile_dir, name, profile_option()).ok()?).ok()?;
    (admin.version() == version || version == 0).then_some((admin, Confidence::default()))
}

/// A job's report; `slurm` is Slurm accounting's figure when the caller asked sacct for it.
fn build(
    site: &Site,
    rec: &JobRecord,
    slurm: SlurmEnergy,
) -> (JobReport, Option<Box<dyn Predictor + Send + Sync>>) {
    let d = &rec.decision;
    let version = d
        .profile_version
        .as_deref()
        .and_then(|v| v.trim_start_matches('v').parse().ok())
        .unwrap_or(0);
    let loaded = d
        .profile
        .as_deref()
        .and_then(|name| profile_version(site, name, version));
    let predictor = loaded.as_ref().and_then(|(p, _)| p.predictor(site).ok());
    let ctx = Context {
        predictor: predictor.as_deref().map(|p| p as &dyn Predictor),
        site: Some(site),
        model: loaded.as_ref().map(|(p, _)| p.chosen_model().to_string()),
        confidence: loaded.as_ref().map(|(_, c)| *c).unwrap_or_default(),
        slurm_energy: slurm,
        // Only a job that names an application can teach its profile.
        not_refined: outcome_from_record(rec, site)
            .filter(|o| d.profile.is_some() && o.state != greenup::record::RunState::Running)
            .and_then(|o| check(&o).err())
            .map(|why| why.to_string()),
    };
    (from_record(rec, &ctx), predictor)
}

/// Run `greenup report JOBID`.
pub fn report(args: ReportArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    let rec = connect(&site)?
        .get_job(args.job_id)
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    let slurm = crate::sacct::query(rec.job_id, accounting::SACCT_TIMEOUT);
    let (mut r, predictor) = build(&site, &rec, slurm);
    r.against_measured = against_measured(&site, &r);
    print_as(
        args.json,
        args.csv,
        &r,
        table::job_json,
        table::job_csv,
        text::job_report,
    )?;
    if let Some(file) = &args.plot {
        let pred = predictor.ok_or_else(|| {
            Failure::Runtime(format!(
                "job {}: its profile version is not available to plot",
                r.job_id
            ))
        })?;
        plot(&site, &rec, &r, pred.as_ref(), file)?;
    }
    Ok(())
}

/// The newest runs of an application a report looks for measured baselines in.
const BASELINE_RUNS_READ: usize = 1_000;

/// Job `r` against the measured baselines of its application and allocation among the
/// runs the asker may read; `None` when there are none (or greenupd could not list them:
/// the rest of the report stands without it).
fn against_measured(site: &Site, r: &JobReport) -> Option<greenup::report::measured::Against> {
    use greenup::report::measured;
    if r.baseline_run || r.app == "-" {
        return None;
    }
    let filter = ListRecords {
        profile: Some(r.app.clone()),
        ..ListRecords::default()
    };
    let runs: Vec<JobReport> = connect(site)
        .ok()?
        .records(filter, BASELINE_RUNS_READ)
        .ok()?
        .iter()
        .filter(|rec| rec.decision.measured_baseline())
        .map(|rec| {
            from_record(
                rec,
                &Context {
                    site: Some(site),
                    ..Context::default()
                },
            )
        })
        .collect();
    let bases = measured::baselines(&runs);
    measured::against(r, bases.get(&r.shape)?)
}

fn plot(site: &Site, rec: &JobRecord, r: &JobReport, pred: &dyn Predictor, file: &Path) -> Outcome {
    let slots: Vec<NodeSlot> = rec
        .request
        .nodes
        .iter()
        .filter_map(|n| {
            let ty = site.nodes.get(n)?;
            let nt = site.node_types.get(ty)?;
            Some(NodeSlot {
                name: n.clone(),
                node_type: ty.clone(),
                freqs_ghz: nt.freqs_ghz.clone(),
            })
        })
        .collect();
    let lo = rec
        .request
        .min_nodes
        .unwrap_or(slots.len())
        .clamp(1, slots.len().max(1));
    // At most a dozen node counts, always the smallest, the largest and the decision's,
    // so a wide range still gives a plot a browser can open.
    let span = slots.len().saturating_sub(lo);
    let mut counts: Vec<usize> = (0..=11).map(|k| lo + span * k / 11).collect();
    counts.push(r.nodes.len());
    counts.retain(|n| (lo..=slots.len()).contains(n));
    counts.sort_unstable();
    counts.dedup();
    let fail = |e: &dyn std::fmt::Display| {
        Failure::Runtime(format!("cannot draw {}: {e}", file.display()))
    };
    let candidates =
        landscape::candidates(pred, &slots, counts.iter().copied()).map_err(|e| fail(&e))?;
    let l = Landscape {
        title: format!(
            "job {}: {} v{}, {}",
            r.job_id, r.app, r.profile_version, r.policy
        ),
        candidates,
        energy_cap_j: r.caps.energy_j,
        power_cap_w: r.caps.power_w,
        chosen: r
            .predicted
            .time_s
            .0
            .is_finite()
            .then_some((r.predicted.time_s.0, r.predicted.energy_j.0)),
        baseline: r
            .baseline
            .time_s
            .0
            .is_finite()
            .then_some((r.baseline.time_s.0, r.baseline.energy_j.0)),
    };
    let doc = svg::landscape(&l).map_err(|e| fail(&e))?;
    write_atomic(file, doc.as_bytes()).map_err(|e| fail(&e))?;
    let points =
        landscape::ee_points(pred, &slots, counts.iter().copied()).map_err(|e| fail(&e))?;
    if !points.is_empty() {
        let ee_file = file.with_file_name(format!(
            "{}-ee.svg",
            file.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "plot".into())
        ));
        let curves = EeCurves {
            title: format!("job {}: {} EE against node count", r.job_id, r.app),
            points,
            chosen: r.ee.map(|ee| (r.nodes.len(), ee)),
        };
        let doc = svg::ee_vs_nodes(&curves).map_err(|e| fail(&e))?;
        write_atomic(&ee_file, doc.as_bytes()).map_err(|e| fail(&e))?;
    }
    Ok(())
}

/// The most runs `greenup app NAME` summarises, newest first.
const APP_MAX_RUNS: usize = 10_000;

/// Run `greenup app NAME`.
pub fn app(args: AppArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    let filter = ListRecords {
        profile: Some(args.name.clone()),
        ..ListRecords::default()
    };
    let reports: Vec<JobReport> = connect(&site)?
        .records(filter, APP_MAX_RUNS)
        .map_err(|e| Failure::Runtime(e.to_string()))?
        .iter()
        .map(|rec| build(&site, rec, SlurmEnergy::NotAsked).0)
        .collect();
    let versions = Versions::for_store(&site.daemon.store);
    let pinned = versions.pinned(&args.name)?;
    let admin_version = admin_file(&site.profile_dir, &args.name, profile_option())
        .and_then(|p| Profile::load(&p))
        .map(|p| p.version())
        .unwrap_or(1);
    let mut infos = vec![VersionInfo {
        version: admin_version as u32,
        samples: 0,
        residual: None,
        pinned: pinned == Some(admin_version),
    }];
    for v in versions.list(&args.name)? {
        let fit = versions.fit(&args.name, v);
        infos.push(VersionInfo {
            version: v as u32,
            samples: fit.as_ref().map_or(0, |f| f.samples),
            residual: fit.map(|f| f.residual),
            pinned: pinned == Some(v),
        });
    }
    let policies = greenup::policy::PolicySet::load(&site.policy_dirs).ok();
    let h = AppHistory::build(&args.name, &reports, &infos).measure(&reports, |p| {
        policies
            .as_ref()
            .and_then(|set| set.get(p))
            .and_then(|p| p.constraints.max_slowdown)
    });
    print_as(
        args.json,
        args.csv,
        &h,
        table::app_json,
        table::app_csv,
        text::app_history,
    )?;
    Ok(())
}

/// Print `value` as JSON, CSV or text, whichever the user asked for.
fn print_as<T: ?Sized>(
    json: bool,
    csv: bool,
    value: &T,
    as_json: fn(&T) -> Result<String, ReportError>,
    as_csv: fn(&T) -> Result<String, ReportError>,
    as_text: fn(&T) -> String,
) -> Outcome {
    let out = if json {
        as_json(value)
    } else if csv {
        as_csv(value)
    } else {
        Ok(as_text(value))
    }
    .map_err(|e| Failure::Runtime(e.to_string()))?;
    emit(out.trim_end());
    Ok(())
}

/// Run `greenup profile pin NAME VERSION`.
pub fn pin(args: PinArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    let versions = Versions::for_store(&site.daemon.store);
    if args.version == "latest" {
        let pin = versions.pin_path(&args.name)?;
        greenup_core::fs::remove_if_present(&pin)
            .map_err(|e| Failure::Runtime(format!("cannot unpin {}: {e}", pin.display())))?;
    } else {
        let v: u64 = args.version.parse().map_err(|_| {
            Failure::option("VERSION", &args.version, "a version number or 'latest'")
        })?;
        let admin = Profile::load(&admin_file(
            &site.profile_dir,
            &args.name,
            profile_option(),
        )?)?;
        let pin = versions.pin(&args.name, v, admin.version())?;
        greenup_core::fs::write_files(std::slice::from_ref(&pin))
            .map_err(|e| Failure::Runtime(format!("cannot pin: {e}")))?;
    }
    let now = match versions.in_use(&args.name)? {
        InUse::Admin => "the admin's file".to_string(),
        InUse::Refined { version, .. } => format!("refined version {version}"),
    };
    crate::say!("{}: decisions now use {now}", args.name);
    Ok(())
}
