//! greenupd: the one-per-cluster daemon that owns the site power budget and
//! every job's decision and outcome.
//!
//! `protocol`, `client` and `munge` build without the `daemon` feature so the
//! SPANK plugin can talk to greenupd; the server side needs the feature.

pub mod client;
pub mod live_power;
pub mod munge;
pub mod protocol;

#[cfg(feature = "daemon")]
pub mod auth;
#[cfg(feature = "daemon")]
pub mod baseline;
#[cfg(feature = "daemon")]
pub mod decide;
#[cfg(feature = "daemon")]
pub mod ledger;
#[cfg(feature = "daemon")]
pub mod metrics_http;
#[cfg(feature = "daemon")]
pub mod plan_cache;
#[cfg(feature = "daemon")]
pub mod server;
#[cfg(feature = "daemon")]
pub mod settle;
#[cfg(feature = "daemon")]
pub mod store_thread;
#[cfg(feature = "daemon")]
pub mod time_limit;
