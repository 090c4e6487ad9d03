//! Named policies: an objective plus constraints, loaded from `policies/*.yaml`.
//! Owner: optimize/policy work.
