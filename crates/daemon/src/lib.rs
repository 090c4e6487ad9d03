//! greenupd: the one-per-cluster daemon that owns the site power budget and every
//! job's decision and outcome.
//!
//! It decides with the `greenup` library, speaks `greenup-proto` on its sockets, and
//! keeps what it learns in SQLite (`store`). Only greenupd's `main` (the root package's
//! `greenupd` binary) and tests link it: the plugin and the CLI reach it only through
//! the protocol.

pub mod auth;
pub mod baseline;
pub mod clock_sample;
pub mod decide;
pub mod ledger;
pub mod metrics_http;
pub mod plan_cache;
pub mod run;
pub mod server;
pub mod settle;
pub mod slurm_energy;
pub mod store;
pub mod store_thread;
pub mod time_limit;
