//! How stored jobs are asked for: the filters of a job listing or a listing of records,
//! and one listed job's summary. The protocol carries them and the store answers them;
//! they are the wire's ([`greenup_wire::query`]), re-exported here.

pub use greenup_wire::query::*;
