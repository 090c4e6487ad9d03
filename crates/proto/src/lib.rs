//! greenupd's wire protocol and its clients: the one place where the plugin, the CLI,
//! the node meter and greenupd agree on what crosses a socket.
//!
//! The protocol converts to the decision library's types at the edge: its requests
//! carry `greenup::record` and `greenup::query` values, and nothing in the library
//! imports this crate.
#![forbid(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

pub mod client;
pub mod live_power;
pub mod munge;
pub mod protocol;
