//! Per-application profiles (`etc/profiles/NAME.yaml`): the parameters of one
//! or more models for one application. Owner: models/profile work.
pub mod refine;
