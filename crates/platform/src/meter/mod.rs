//! Measuring what a job used on a node. Today: RAPL energy counters through sysfs.
pub mod rapl;
pub mod tally;

pub use rapl::{Energy, Reading};
pub use tally::Tally;
