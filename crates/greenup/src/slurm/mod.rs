//! Asking Slurm: its commands, each run under a time bound, and the facts greenup reads
//! from them.

pub mod command;
pub mod job;
pub mod time_limit;
