//! NVIDIA GPUs through NVML: read each GPU's energy counter, power, SM clock and
//! utilization, and hold a job's GPUs at a power limit and locked SM clocks, restoring
//! exactly what was there at the job's end. A node without NVML or without GPUs has
//! nothing here to do.
//!
//! Clocks are held with locked clocks (`nvmlDeviceSetGpuLockedClocks`, as `nvidia-smi
//! -lgc`), not application clocks: a lock bounds the SM clock to a range the driver keeps
//! under any load, while an application clock is one target pair (memory and SM) that
//! boost may leave and that some products refuse. NVML has no call that reads a lock
//! back, so greenup knows a lock only when greenup set it (see [`hold`]).

pub mod error;
pub mod handoff;
pub mod hold;
pub mod nvml;
pub mod reading;
pub mod samples;
pub mod start;

pub use error::{Code, NvmlError};
pub use hold::{Control, GpuRecord, Request, SavedGpu};
pub use nvml::{Gpu, LimitRange, Nvml};
pub use reading::{GpuReading, parse_job_gpus};
