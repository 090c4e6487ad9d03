//! greenup's actions on a host's operating system, apart from a node's hardware (that is
//! `greenup-platform`'s): running Slurm's commands under a time bound (`command`) and
//! asking the system's user database who a user is (`users`), and keeping a root-only
//! copy of what is derived from a file, such as a node's site settings (`cache`). The decision library never
//! links this crate, so it stays a set of pure rules: it says what to ask and reads the
//! answers, and the plugin, greenupd and the CLI do the asking here.

pub mod cache;
pub mod command;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod users;
