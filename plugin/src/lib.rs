//! spank_greenup: greenup's SPANK plugin. It checks the job's energy options at
//! submission, asks greenupd for the job's decision when the job starts, applies and
//! restores each node's frequency, and reports what the job used. It holds no model
//! logic: the greenup library decides, greenupd stores, this plugin translates.
//!
//! It never panics into Slurm, starts no threads, and fails open: if anything goes
//! wrong the job runs unchanged with one warning, unless the site says `enforce: strict`.

pub mod args;
pub mod command;
pub mod controller;
pub mod end;
pub mod epilog;
pub mod gpu;
pub mod job_env;
pub mod node;
pub mod options;
pub mod phases;
pub mod prolog;
pub mod slurm_env;
pub mod spool;
pub mod step;

#[cfg(not(test))]
mod spank;

include!(concat!(env!("OUT_DIR"), "/slurm_version.rs"));
