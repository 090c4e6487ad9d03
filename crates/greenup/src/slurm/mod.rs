//! What greenup asks Slurm and what it reads from the answers. The asking itself (a
//! command run under a time bound) is `greenup-host`'s, done by the library's callers.

pub mod job;
pub mod time_limit;
