//! greenup's shared vocabulary, used by every other greenup crate: a decision's plan,
//! energy, power and time as people write them, UTC dates, the safe file writes that
//! root-owned state needs, and one-line messages from a command's output.

pub mod fs;
pub mod plan;
pub mod quantity;
pub mod stats;
pub mod text;
pub mod time_limit;
pub mod units;
pub mod utc;
