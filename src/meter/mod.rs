//! Measuring what a job used on a node. Today: RAPL energy counters through sysfs.
pub mod rapl;

pub use rapl::{Energy, Reading};
