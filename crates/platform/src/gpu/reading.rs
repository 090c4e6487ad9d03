//! One GPU's signals at one moment, and which GPUs Slurm gave a job.

use serde::{Deserialize, Serialize};

use super::error::NvmlError;
use super::nvml::Gpu;

/// What one GPU reported at one moment; a signal the GPU could not give is None.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    /// `/dev/nvidia{minor}`.
    pub minor: u32,
    /// The GPU's UUID.
    pub uuid: String,
    /// Seconds since the Unix epoch when it was read.
    pub unix_s: f64,
    /// Energy counter, millijoules since the driver loaded.
    pub energy_mj: Option<u64>,
    /// Power now, milliwatts.
    pub power_mw: Option<u32>,
    /// SM clock now, MHz.
    pub sm_mhz: Option<u32>,
    /// Percent of the last sample period with a kernel running.
    pub util_pct: Option<u32>,
    /// The first signal that could not be read, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Seconds since the Unix epoch now.
pub fn now_unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl GpuReading {
    /// Read only the energy counter of `gpu` (known as `minor`, `uuid`): what a job's start
    /// and end need.
    pub fn counter(gpu: &Gpu<'_>, minor: u32, uuid: String) -> GpuReading {
        let unix_s = now_unix_s();
        let (energy_mj, problem) = match gpu.energy_mj() {
            Ok(e) => (Some(e), None),
            Err(e) => (None, Some(e.to_string())),
        };
        GpuReading {
            minor,
            uuid,
            unix_s,
            energy_mj,
            power_mw: None,
            sm_mhz: None,
            util_pct: None,
            problem,
        }
    }

    /// Read every signal of `gpu`; a signal that fails is None and the first failure is kept.
    pub fn read(gpu: &Gpu<'_>) -> Result<GpuReading, NvmlError> {
        let mut problem = None;
        let mut keep = |e: NvmlError| {
            problem.get_or_insert(e.to_string());
        };
        let minor = gpu.minor()?;
        let uuid = gpu.uuid()?;
        let unix_s = now_unix_s();
        let energy_mj = gpu.energy_mj().map_err(&mut keep).ok();
        let power_mw = gpu.power_mw().map_err(&mut keep).ok();
        let sm_mhz = gpu.sm_mhz().map_err(&mut keep).ok();
        let util_pct = gpu.utilization_pct().map_err(&mut keep).ok();
        Ok(GpuReading {
            minor,
            uuid,
            unix_s,
            energy_mj,
            power_mw,
            sm_mhz,
            util_pct,
            problem,
        })
    }
}

/// Why `SLURM_JOB_GPUS` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SLURM_JOB_GPUS: invalid value '{value}': expected GPU numbers like 0,1,3 or 0-3")]
pub struct JobGpusError {
    /// The value as Slurm gave it.
    pub value: String,
}

/// The GPUs' minor numbers in Slurm's `SLURM_JOB_GPUS` (`0,1,3`, ranges `0-3` too),
/// ascending without repeats; an empty value is no GPUs.
pub fn parse_job_gpus(value: &str) -> Result<Vec<u32>, JobGpusError> {
    let bad = || JobGpusError {
        value: value.to_string(),
    };
    let mut out = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (part.parse::<u32>(), part.parse::<u32>()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        // A node has at most a few dozen GPUs; a huge range is a wrong value, not a job.
        if hi < lo || hi - lo > 1024 {
            return Err(bad());
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_gpus_lists_and_ranges() {
        assert_eq!(parse_job_gpus("0,1,3").unwrap(), vec![0, 1, 3]);
        assert_eq!(parse_job_gpus("2-3,0").unwrap(), vec![0, 2, 3]);
        assert_eq!(parse_job_gpus("").unwrap(), Vec::<u32>::new());
        assert!(parse_job_gpus("1,x").is_err());
        assert!(parse_job_gpus("3-1").is_err());
        assert!(parse_job_gpus("0-4000000000").is_err());
    }
}
