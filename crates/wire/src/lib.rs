//! greenup's wire vocabulary: the values greenupd's protocol carries and its store keeps,
//! as plain data with their serde names, and the few rules that read nothing but them.
//!
//! A job's request, decision, outcomes and record ([`record`]), the filters and rows of a
//! listing ([`query`]), a budget's standing and a job's quote ([`budget`]), a grant of
//! watts and a GPU's part of it ([`power`]), and what one node is told ([`settings`]).
//! The decision library makes and reads them, and re-exports each at its old path
//! (`greenup::record`, `greenup::query`, ...); the protocol, the plugin and the CLI
//! speak them without linking the library's models, optimizers or reports.

pub mod budget;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod power;
pub mod query;
pub mod record;
pub mod settings;
