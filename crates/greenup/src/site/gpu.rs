//! Reading a node type's `gpus:` section and `dvfs.nvml_library` of the site config.
//! Every error names the file, line, key and value, and says what is valid.

use serde::Deserialize;
use serde_json::Value;

use super::check::{Checker, shown};
use super::{DEFAULT_NVML_LIBRARY, GpuType};
use crate::input::{InputError, Spanned};
use crate::units;

/// Most GPUs one node may have; more is a typo.
const MAX_GPUS: u64 = 64;
/// Highest SM clock accepted, in MHz; NVIDIA's GPUs run below 3.5 GHz.
const MAX_MHZ: u64 = 10_000;

/// `node_types.T.gpus` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGpus {
    count: Spanned<Value>,
    #[serde(default)]
    clocks_mhz: Option<Spanned<RawClocks>>,
    #[serde(default)]
    power_limit: Option<Spanned<RawRange>>,
    power: Spanned<RawGpuPower>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRange {
    min: Spanned<Value>,
    max: Spanned<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClocks {
    min: Spanned<Value>,
    max: Spanned<Value>,
    #[serde(default)]
    step: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpuPower {
    dynamic_w: Spanned<Value>,
    static_w: Spanned<Value>,
    #[serde(default)]
    gamma: Option<Spanned<Value>>,
}

impl Checker<'_> {
    /// Node type `name`'s GPUs.
    pub(super) fn gpus(&self, name: &str, g: Spanned<RawGpus>) -> Result<GpuType, InputError> {
        let key = |k: &str| format!("node_types.{name}.gpus.{k}");
        let g = g.value;
        let count = g
            .count
            .value
            .as_u64()
            .filter(|c| (1..=MAX_GPUS).contains(c))
            .ok_or_else(|| {
                self.err(
                    &g.count,
                    &key("count"),
                    shown(&g.count.value),
                    format!("a number of GPUs per node in 1-{MAX_GPUS}"),
                )
            })? as u32;
        let clocks_mhz = match &g.clocks_mhz {
            Some(r) => {
                let mhz = |v: &Spanned<Value>, k: &str, what: &str| {
                    v.value
                        .as_u64()
                        .filter(|m| (1..=MAX_MHZ).contains(m))
                        .map(|m| m as u32)
                        .ok_or_else(|| {
                            self.err(
                                v,
                                &key(k),
                                shown(&v.value),
                                format!("{what} in MHz, a whole number in 1-{MAX_MHZ}"),
                            )
                        })
                };
                let lo = mhz(&r.value.min, "clocks_mhz.min", "an SM clock")?;
                let hi = mhz(&r.value.max, "clocks_mhz.max", "an SM clock")?;
                if lo > hi {
                    return Err(self.err(
                        &r.value.max,
                        &key("clocks_mhz.max"),
                        hi,
                        format!("at least clocks_mhz.min ({lo} MHz)"),
                    ));
                }
                let step = match &r.value.step {
                    Some(v) => Some(mhz(
                        v,
                        "clocks_mhz.step",
                        "the step between the clocks chosen",
                    )?),
                    None => None,
                };
                Some(((lo, hi), step))
            }
            None => None,
        };
        let (clocks_mhz, clock_step_mhz) = match clocks_mhz {
            Some((range, step)) => (Some(range), step),
            None => (None, None),
        };
        let power_limit_w = match &g.power_limit {
            Some(r) => {
                let lo = self.gpu_watts(&r.value.min, &key("power_limit.min"), false)?;
                let hi = self.gpu_watts(&r.value.max, &key("power_limit.max"), false)?;
                if lo > hi {
                    return Err(self.err(
                        &r.value.max,
                        &key("power_limit.max"),
                        shown(&r.value.max.value),
                        format!("at least power_limit.min ({lo} W)"),
                    ));
                }
                Some((lo, hi))
            }
            None => None,
        };
        let p = &g.power.value;
        Ok(GpuType {
            count,
            clocks_mhz,
            clock_step_mhz,
            power_limit_w,
            dynamic_w: self.gpu_watts(&p.dynamic_w, &key("power.dynamic_w"), true)?,
            static_w: self.gpu_watts(&p.static_w, &key("power.static_w"), true)?,
            gamma: match &p.gamma {
                Some(v) => v
                    .value
                    .as_f64()
                    .filter(|g| *g > 0.0 && *g <= 10.0)
                    .ok_or_else(|| {
                        self.err(
                            v,
                            &key("power.gamma"),
                            shown(&v.value),
                            "a number in (0, 10]; 3 is the cube law, about 2 fits a power-bound H100",
                        )
                    })?,
                None => 3.0,
            },
        })
    }

    /// Watts of one GPU: a number or a power with a unit, above 0 (or 0 when `zero_ok`).
    fn gpu_watts(&self, v: &Spanned<Value>, key: &str, zero_ok: bool) -> Result<f64, InputError> {
        let w = match &v.value {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => units::parse_power(s).ok(),
            _ => None,
        };
        let floor = if zero_ok { "at least 0" } else { "above 0" };
        w.filter(|w| w.is_finite() && (*w > 0.0 || (zero_ok && *w == 0.0)))
            .ok_or_else(|| {
                self.err(
                    v,
                    key,
                    shown(&v.value),
                    format!("the watts of one GPU, {floor}, such as 350W or 700 (watts)"),
                )
            })
    }

    /// `dvfs.nvml_library`: an absolute path, or a bare library name the loader finds.
    pub(super) fn nvml_library(
        &self,
        v: &Option<Spanned<Value>>,
    ) -> Result<std::path::PathBuf, InputError> {
        const KEY: &str = "dvfs.nvml_library";
        const VALID: &str = "an absolute path such as /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1, or a library name the loader finds, such as libnvidia-ml.so.1";
        let Some(v) = v else {
            return Ok(DEFAULT_NVML_LIBRARY.into());
        };
        let p = self.text(v, KEY, VALID)?;
        let bare = !p.contains('/') && p.starts_with("lib") && p.contains(".so");
        if p.contains('\0') || p.contains(char::is_whitespace) || !(bare || p.starts_with('/')) {
            return Err(self.err(v, KEY, &p, VALID));
        }
        Ok(p.into())
    }
}
