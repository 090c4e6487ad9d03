//! Apply and restore CPU frequencies and power limits through sysfs (cpufreq and
//! powercap) under a configurable root. This code applies what a decision says; it
//! never decides.
pub mod cpufreq;
pub mod job;
pub mod lend;
pub mod powercap;
pub mod run_dir;
pub mod state;

/// The sysfs helpers, where the DVFS code has always offered them.
pub use crate::sysfs;
pub use cpufreq::{Applied, Cpufreq, Method, PolicySettings};
pub use job::{Apply, NodeOutcome, NodePaths, Scope};
pub use powercap::{LimitRequest, PowerHeld, ShortTerm};
