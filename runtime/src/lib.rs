//! libgreenup_mpi: greenup's in-job MPI runtime, preloaded into a job's tasks by the SPANK
//! plugin when the job's policy asks for communication-phase DVFS (docs/runtime.md).
//!
//! It intercepts MPI calls through the PMPI profiling interface, lowers the calling core's
//! frequency while a large transfer or a long blocking call is under way (paper 002,
//! with COUNTDOWN's timeout), raises a leading rank's core to f_max when the run is on
//! course to break its policy's `max_slowdown` (the in-job guard, `guard`), and writes
//! what each rank measured for the epilog (`greenup_comm`). It starts no threads, never panics across the C boundary, and never
//! fails an MPI call: whatever goes wrong in greenup is counted and the call goes ahead.

mod clock;
mod cpufreq;
mod guard;
mod hooks;
mod rank;
mod requests;
mod shim;
