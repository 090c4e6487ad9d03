//! greenupd's wire protocol and its clients: the one place where the plugin, the CLI,
//! the node meter and greenupd agree on what crosses a socket.
//!
//! The protocol carries the wire vocabulary (`greenup-wire`: a job's record, listings,
//! budgets, grants, a node's settings), which the decision library makes and reads; it
//! links neither the library nor its models, and nothing in the library imports it.

pub mod client;
pub mod live_power;
pub mod munge;
pub mod protocol;
