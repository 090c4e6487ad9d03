//! greenupd: greenup's decision daemon. One per cluster, usually on the controller.
//!
//! It answers the nodes' requests on TCP (MUNGE-authenticated) and the local CLI's
//! on a Unix socket, keeps the site power budget and stores every decision and
//! outcome in SQLite. SIGHUP reloads the config; SIGTERM stops it cleanly.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use greenup_daemon::server::{Options, SiteLoader, check_config, serve};

/// greenup's decision daemon.
#[derive(Debug, Parser)]
#[command(name = "greenupd", version, about)]
struct Args {
    /// The site config file.
    #[arg(long, value_name = "FILE", default_value = greenup::site::DEFAULT_PATH)]
    config: PathBuf,
    /// Check the config (and the policies and users it names), print any problem, and exit.
    #[arg(long)]
    check_config: bool,
    /// Most connections from root and SlurmUser (the nodes) served at once; more get a
    /// `busy` reply. Every node of a starting job connects at once, so this is sized for
    /// the largest job (`daemon.max_job_nodes`). Users' connections have their own limits
    /// in the site config.
    #[arg(long, value_name = "N", default_value_t = 16_384, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_connections: u32,
    /// Milliseconds a client may take to send a whole request line.
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    idle_timeout_ms: u64,
    /// Seconds between checks for jobs that vanished or ran past their time limit.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    reclaim_every: u64,
    /// Do not ask Slurm (squeue) whether open jobs still exist; reclaim by time limit only.
    #[arg(long)]
    no_slurm_check: bool,
    /// Seconds a job must have been open before it is reclaimed for missing from Slurm.
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    reclaim_min_age: u64,
    /// Where Slurm's commands (squeue, scontrol, sacct) are, when not on greenupd's PATH.
    #[arg(long, value_name = "DIR")]
    slurm_bin_dir: Option<PathBuf>,
    /// Threads answering requests.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
}

/// Raise the open-file limit to its hard limit, so `connections` sockets fit beside the
/// store and munged's; say so when even that is too few.
fn open_files_for(connections: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write `lim`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    let want = connections as u64 + 64;
    if lim.rlim_cur < want {
        eprintln!(
            "greenupd: warning: the open-file limit is {}, fewer than --max-connections {connections} needs ({want}); raise LimitNOFILE",
            lim.rlim_cur
        );
    }
}

fn loader() -> SiteLoader {
    Arc::new(|p| greenup::site::load(p))
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GREENUP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    if args.check_config {
        return match check_config(&args.config, &loader()) {
            Ok(warnings) => {
                for w in &warnings {
                    eprintln!("greenupd: warning: {w}");
                }
                println!("{}: ok", args.config.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("greenupd: {e}");
                ExitCode::from(2)
            }
        };
    }

    open_files_for(args.max_connections as usize);
    let mut opts = Options::new(args.config);
    opts.max_connections = args.max_connections as usize;
    opts.idle_timeout = Duration::from_millis(args.idle_timeout_ms);
    opts.reclaim_every = Duration::from_secs(args.reclaim_every);
    opts.slurm_check = !args.no_slurm_check;
    opts.min_age_s = args.reclaim_min_age as i64;
    opts.slurm_bin_dir = args.slurm_bin_dir;

    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(args.threads))
        .max_blocking_threads(16)
        .thread_name("greenupd")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("greenupd: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(opts, loader())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("greenupd: {e}");
            ExitCode::FAILURE
        }
    }
}
