//! The SM clock and utilization of a job's GPUs while it runs: a meter reads them every
//! few seconds into running sums, so the job's end can report their means (a reading at
//! the end sees an idle GPU).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::hold::{self, GpuRecord, HoldError};
use super::nvml::Nvml;

/// Running sums over every reading of every held GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// Readings of the SM clock counted.
    pub sm_n: u64,
    /// Sum of those readings, MHz.
    pub sm_sum_mhz: f64,
    /// Readings of utilization counted.
    pub util_n: u64,
    /// Sum of those readings, percent.
    pub util_sum_pct: f64,
}

impl Samples {
    /// The mean SM clock, MHz, when any reading was counted.
    pub fn sm_mhz(&self) -> Option<f64> {
        (self.sm_n > 0).then(|| self.sm_sum_mhz / self.sm_n as f64)
    }

    /// The mean utilization, percent, when any reading was counted.
    pub fn util_pct(&self) -> Option<f64> {
        (self.util_n > 0).then(|| self.util_sum_pct / self.util_n as f64)
    }
}

/// Read the samples file; Ok(None) when there is none.
pub fn load(file: &Path) -> Result<Option<Samples>, HoldError> {
    match std::fs::read(file) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| HoldError::Record {
                path: file.to_path_buf(),
                source: std::io::Error::other(e),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(HoldError::Record {
            path: file.to_path_buf(),
            source: e,
        }),
    }
}

/// Add one reading of each GPU in `rec` to the sums in `file` (written through a rename).
pub fn sample(nvml: &Nvml, rec: &GpuRecord, file: &Path) -> Result<Samples, HoldError> {
    let mut s = load(file)?.unwrap_or_default();
    let minors: Vec<u32> = rec.gpus.iter().map(|g| g.minor).collect();
    for (_, g) in nvml.gpus_by_minor(&minors)? {
        let Ok(g) = g else { continue };
        if let Ok(mhz) = g.sm_mhz() {
            s.sm_n += 1;
            s.sm_sum_mhz += f64::from(mhz);
        }
        if let Ok(u) = g.utilization_pct() {
            s.util_n += 1;
            s.util_sum_pct += f64::from(u);
        }
    }
    hold::write_json(file, &s)?;
    Ok(s)
}

/// The sum of the energy counters of the GPUs in `rec` now, in mJ: what a live power
/// figure takes the GPUs' part from. None when one of them cannot be read, so a figure
/// is never short of a GPU without saying so.
pub fn energy_mj(nvml: &Nvml, rec: &GpuRecord) -> Option<u64> {
    let minors: Vec<u32> = rec.gpus.iter().map(|g| g.minor).collect();
    let mut sum = 0u64;
    for (_, g) in nvml.gpus_by_minor(&minors).ok()? {
        sum = sum.checked_add(g.ok()?.energy_mj().ok()?)?;
    }
    Some(sum)
}

/// The GPUs' mean power, in watts, between two sums of their counters `span_s` apart;
/// None when the counters went back (the driver was reloaded) or no time passed.
pub fn mean_power_w(from_mj: u64, to_mj: u64, span_s: f64) -> Option<f64> {
    (to_mj >= from_mj && span_s > 0.0).then(|| (to_mj - from_mj) as f64 / 1e3 / span_s)
}
