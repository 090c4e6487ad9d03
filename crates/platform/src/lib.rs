//! greenup's platform layer: the signals it reads on a node (energy counters, clocks,
//! power) and the controls it sets (CPU frequency, power limits, GPU clocks). Nothing
//! here decides: the decision library says what to set, and this crate sets it, saves
//! what was there, and restores it.

pub mod dvfs;
pub mod gpu;
pub mod meter;
pub mod sysfs;
