//! greenup's shared vocabulary, used by every other greenup crate: energy, power and
//! time as people write them, and the safe file writes that root-owned state needs.
#![deny(missing_docs)]

pub mod fs;
pub mod units;
pub mod utc;
