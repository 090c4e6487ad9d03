//! greenup: choose node counts and per-node CPU frequencies that meet a site's
//! power cap and a user's energy cap, apply them, measure, and learn.
//!
//! The library decides and explains: it holds the models, the optimizers, the
//! policies, the profiles, the site config, budgets, plans, the records of jobs and
//! their reports. The SPANK plugin, the daemon (`greenupd`, in `greenup-daemon`) and
//! the CLI (`greenup`) only translate between it and the outside world; they talk to
//! each other through `greenup-proto`, which this library never imports.

pub mod budget;
pub mod comm;
pub mod hostlist;
pub mod input;
pub mod model;
pub mod names;
pub mod optimize;
pub mod plan;
pub mod policy;
pub mod power;
pub mod profile;
pub mod query;
pub mod record;
pub mod site;
pub mod slurm;
pub use greenup_core::units;

pub mod expr;

pub mod report;
