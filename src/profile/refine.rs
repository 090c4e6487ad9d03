//! Refining profiles from measured outcomes. Owner: reports work.
