//! greenup-prolog-slurmctld: set as slurm.conf's PrologSlurmctld (or called from the
//! site's own), it decides each job once on the controller before its nodes start. Its
//! arguments are the plugin's plugstack.conf words (`config=FILE`); Slurm 22.05 passes
//! none, so a site whose config is not /etc/slurm/greenup.yaml calls it from a script.
//! Messages go to syslog (slurmctld keeps no output of PrologSlurmctld) and to stderr.

use std::ffi::CString;
use std::process::ExitCode;

use spank_greenup::args::Args;
use spank_greenup::controller;
use spank_greenup::node::Level;

fn log(level: Level, message: &str) {
    eprintln!("{message}");
    let priority = match level {
        Level::Warning => libc::LOG_WARNING,
        Level::Info => libc::LOG_INFO,
    };
    if let Ok(text) = CString::new(message) {
        // SAFETY: a constant format string and a NUL-terminated argument.
        unsafe { libc::syslog(priority | libc::LOG_DAEMON, c"%s".as_ptr(), text.as_ptr()) };
    }
}

fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().skip(1).collect();
    let args = match Args::parse(words.iter().map(String::as_str)) {
        Ok(a) => a,
        Err(e) => {
            // A wrong slurm.conf line must not requeue every job: the nodes still decide.
            log(Level::Warning, &format!("greenup-prolog-slurmctld: {e}"));
            return ExitCode::SUCCESS;
        }
    };
    let get = |k: &str| std::env::var(k).ok();
    if controller::prolog_slurmctld(&args, get, spank_greenup::SLURM_PLUGIN_VERSION, &log) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
