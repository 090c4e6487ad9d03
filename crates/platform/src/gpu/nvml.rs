//! NVML, loaded at run time from the path the site config gives, never from a path a job's
//! environment could choose (the prolog runs as root). Only the calls greenup uses are
//! bound; each failure names NVML's return code.

use std::ffi::{CStr, c_char, c_uint, c_ulonglong, c_void};
use std::path::{Path, PathBuf};

use super::error::{Code, NvmlError};

type Ret = c_uint;
type Handle = *mut c_void;

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

/// `NVML_CLOCK_SM` in `nvmlClockType_t`.
const CLOCK_SM: c_uint = 1;
/// Buffer sizes of nvml.h (`NVML_DEVICE_UUID_V2_BUFFER_SIZE`, `NVML_DEVICE_NAME_V2_BUFFER_SIZE`).
const TEXT_BUFFER: usize = 96;
/// More clocks than any NVIDIA GPU lists (an H100 offers about 100 SM clocks per memory clock).
const MAX_CLOCKS: usize = 512;

struct Fns {
    init: unsafe extern "C" fn() -> Ret,
    shutdown: unsafe extern "C" fn() -> Ret,
    error_string: unsafe extern "C" fn(Ret) -> *const c_char,
    count: unsafe extern "C" fn(*mut c_uint) -> Ret,
    by_index: unsafe extern "C" fn(c_uint, *mut Handle) -> Ret,
    minor: unsafe extern "C" fn(Handle, *mut c_uint) -> Ret,
    uuid: unsafe extern "C" fn(Handle, *mut c_char, c_uint) -> Ret,
    name: unsafe extern "C" fn(Handle, *mut c_char, c_uint) -> Ret,
    energy: unsafe extern "C" fn(Handle, *mut c_ulonglong) -> Ret,
    power: unsafe extern "C" fn(Handle, *mut c_uint) -> Ret,
    clock: unsafe extern "C" fn(Handle, c_uint, *mut c_uint) -> Ret,
    utilization: unsafe extern "C" fn(Handle, *mut Utilization) -> Ret,
    limit: unsafe extern "C" fn(Handle, *mut c_uint) -> Ret,
    limit_range: unsafe extern "C" fn(Handle, *mut c_uint, *mut c_uint) -> Ret,
    limit_default: unsafe extern "C" fn(Handle, *mut c_uint) -> Ret,
    set_limit: unsafe extern "C" fn(Handle, c_uint) -> Ret,
    mem_clocks: unsafe extern "C" fn(Handle, *mut c_uint, *mut c_uint) -> Ret,
    sm_clocks: unsafe extern "C" fn(Handle, c_uint, *mut c_uint, *mut c_uint) -> Ret,
    lock_clocks: unsafe extern "C" fn(Handle, c_uint, c_uint) -> Ret,
    unlock_clocks: unsafe extern "C" fn(Handle) -> Ret,
}

/// NVML, loaded and initialised; shut down when dropped.
pub struct Nvml {
    fns: Fns,
    path: PathBuf,
    // Keeps the function pointers above valid; dropped last.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Nvml({})", self.path.display())
    }
}

/// One GPU of the node, valid while its [`Nvml`] is.
#[derive(Debug, Clone, Copy)]
pub struct Gpu<'a> {
    nvml: &'a Nvml,
    handle: Handle,
    /// NVML's index of the GPU (the order NVML enumerates, not necessarily /dev/nvidiaN).
    pub index: u32,
}

/// A GPU asked for by its minor number, and the GPU or why it was not found.
pub type Found<'a> = (u32, Result<Gpu<'a>, NvmlError>);

/// The power limits a GPU accepts, in milliwatts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LimitRange {
    /// The lowest limit that may be set.
    pub min_mw: u32,
    /// The highest limit that may be set.
    pub max_mw: u32,
}

impl Nvml {
    /// Load NVML from `path` (the site config's `dvfs.nvml_library`) and initialise it.
    pub fn open(path: &Path) -> Result<Nvml, NvmlError> {
        let load = |e: libloading::Error| NvmlError::Load {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        // SAFETY: loading NVML runs only its own initialisers; each symbol's type below
        // matches nvml.h (the _v2 entry points exist since driver 325).
        unsafe {
            let lib = libloading::Library::new(path).map_err(load)?;
            macro_rules! sym {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes())
                        .map_err(|_| NvmlError::Missing {
                            path: path.to_path_buf(),
                            symbol: $name,
                        })?
                };
            }
            let fns = Fns {
                init: sym!("nvmlInit_v2"),
                shutdown: sym!("nvmlShutdown"),
                error_string: sym!("nvmlErrorString"),
                count: sym!("nvmlDeviceGetCount_v2"),
                by_index: sym!("nvmlDeviceGetHandleByIndex_v2"),
                minor: sym!("nvmlDeviceGetMinorNumber"),
                uuid: sym!("nvmlDeviceGetUUID"),
                name: sym!("nvmlDeviceGetName"),
                energy: sym!("nvmlDeviceGetTotalEnergyConsumption"),
                power: sym!("nvmlDeviceGetPowerUsage"),
                clock: sym!("nvmlDeviceGetClockInfo"),
                utilization: sym!("nvmlDeviceGetUtilizationRates"),
                limit: sym!("nvmlDeviceGetPowerManagementLimit"),
                limit_range: sym!("nvmlDeviceGetPowerManagementLimitConstraints"),
                limit_default: sym!("nvmlDeviceGetPowerManagementDefaultLimit"),
                set_limit: sym!("nvmlDeviceSetPowerManagementLimit"),
                mem_clocks: sym!("nvmlDeviceGetSupportedMemoryClocks"),
                sm_clocks: sym!("nvmlDeviceGetSupportedGraphicsClocks"),
                lock_clocks: sym!("nvmlDeviceSetGpuLockedClocks"),
                unlock_clocks: sym!("nvmlDeviceResetGpuLockedClocks"),
            };
            let nvml = Nvml {
                fns,
                path: path.to_path_buf(),
                _lib: lib,
            };
            nvml.check("nvmlInit_v2", (nvml.fns.init)())?;
            Ok(nvml)
        }
    }

    /// The library path this was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check(&self, call: &'static str, ret: Ret) -> Result<(), NvmlError> {
        if ret == 0 {
            return Ok(());
        }
        // SAFETY: nvmlErrorString returns a static string for any code (or null).
        let text = unsafe {
            let p = (self.fns.error_string)(ret);
            if p.is_null() {
                String::from("no description")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Err(NvmlError::Call {
            call,
            code: Code(ret),
            text,
        })
    }

    /// How many GPUs NVML sees on this node.
    pub fn count(&self) -> Result<u32, NvmlError> {
        let mut n: c_uint = 0;
        // SAFETY: writes one unsigned int.
        self.check("nvmlDeviceGetCount_v2", unsafe { (self.fns.count)(&mut n) })?;
        Ok(n)
    }

    /// The GPU at NVML's `index`.
    pub fn gpu(&self, index: u32) -> Result<Gpu<'_>, NvmlError> {
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.check("nvmlDeviceGetHandleByIndex_v2", unsafe {
            (self.fns.by_index)(index, &mut handle)
        })?;
        Ok(Gpu {
            nvml: self,
            handle,
            index,
        })
    }

    /// Every GPU NVML sees, in its index order.
    pub fn gpus(&self) -> Result<Vec<Gpu<'_>>, NvmlError> {
        (0..self.count()?).map(|i| self.gpu(i)).collect()
    }

    /// The GPUs whose device files are `/dev/nvidia{minor}` for each of `minors`, in that
    /// order, each found or not; one pass over the node's GPUs, reading only their minors.
    pub fn gpus_by_minor(&self, minors: &[u32]) -> Result<Vec<Found<'_>>, NvmlError> {
        let mut all = Vec::new();
        for g in self.gpus()? {
            all.push((g.minor(), g));
        }
        Ok(minors
            .iter()
            .map(|&m| {
                let found = all
                    .iter()
                    .find(|(got, _)| got.as_ref().ok() == Some(&m))
                    .map(|(_, g)| *g)
                    .ok_or(NvmlError::NoSuchMinor { minor: m });
                (m, found)
            })
            .collect())
    }

    /// The GPU whose device file is `/dev/nvidia{minor}`: Slurm's gres/gpu index
    /// (`SLURM_JOB_GPUS`) names GPUs by this number, not by NVML's index.
    pub fn gpu_by_minor(&self, minor: u32) -> Result<Gpu<'_>, NvmlError> {
        for g in self.gpus()? {
            if g.minor()? == minor {
                return Ok(g);
            }
        }
        Err(NvmlError::NoSuchMinor { minor })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balances the nvmlInit_v2 of open; handles die with this value.
        unsafe {
            (self.fns.shutdown)();
        }
    }
}

impl Gpu<'_> {
    fn u32_of(
        &self,
        call: &'static str,
        f: unsafe extern "C" fn(Handle, *mut c_uint) -> Ret,
    ) -> Result<u32, NvmlError> {
        let mut v: c_uint = 0;
        // SAFETY: the handle is live while self.nvml is; f writes one unsigned int.
        self.nvml.check(call, unsafe { f(self.handle, &mut v) })?;
        Ok(v)
    }

    fn text_of(
        &self,
        call: &'static str,
        f: unsafe extern "C" fn(Handle, *mut c_char, c_uint) -> Ret,
    ) -> Result<String, NvmlError> {
        let mut buf = [0 as c_char; TEXT_BUFFER];
        // SAFETY: f writes at most TEXT_BUFFER bytes, NUL-terminated.
        self.nvml.check(call, unsafe {
            f(self.handle, buf.as_mut_ptr(), TEXT_BUFFER as c_uint)
        })?;
        buf[TEXT_BUFFER - 1] = 0;
        // SAFETY: NUL-terminated just above at the latest.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// The GPU's minor number: it is `/dev/nvidia{minor}`.
    pub fn minor(&self) -> Result<u32, NvmlError> {
        self.u32_of("nvmlDeviceGetMinorNumber", self.nvml.fns.minor)
    }

    /// The GPU's UUID (`GPU-...`), stable across reboots and renumbering.
    pub fn uuid(&self) -> Result<String, NvmlError> {
        self.text_of("nvmlDeviceGetUUID", self.nvml.fns.uuid)
    }

    /// The product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> Result<String, NvmlError> {
        self.text_of("nvmlDeviceGetName", self.nvml.fns.name)
    }

    /// Energy used since the driver loaded, in millijoules (Volta and newer).
    pub fn energy_mj(&self) -> Result<u64, NvmlError> {
        let mut v: c_ulonglong = 0;
        // SAFETY: writes one unsigned long long.
        self.nvml
            .check("nvmlDeviceGetTotalEnergyConsumption", unsafe {
                (self.nvml.fns.energy)(self.handle, &mut v)
            })?;
        Ok(v)
    }

    /// Power drawn now, in milliwatts (NVML averages it over about a second).
    pub fn power_mw(&self) -> Result<u32, NvmlError> {
        self.u32_of("nvmlDeviceGetPowerUsage", self.nvml.fns.power)
    }

    /// The SM clock now, in MHz.
    pub fn sm_mhz(&self) -> Result<u32, NvmlError> {
        let mut v: c_uint = 0;
        // SAFETY: writes one unsigned int.
        self.nvml.check("nvmlDeviceGetClockInfo", unsafe {
            (self.nvml.fns.clock)(self.handle, CLOCK_SM, &mut v)
        })?;
        Ok(v)
    }

    /// Percent of the last sample period in which a kernel ran.
    pub fn utilization_pct(&self) -> Result<u32, NvmlError> {
        let mut u = Utilization::default();
        // SAFETY: writes one nvmlUtilization_t.
        self.nvml.check("nvmlDeviceGetUtilizationRates", unsafe {
            (self.nvml.fns.utilization)(self.handle, &mut u)
        })?;
        Ok(u.gpu)
    }

    /// The power limit in force, in milliwatts.
    pub fn power_limit_mw(&self) -> Result<u32, NvmlError> {
        self.u32_of("nvmlDeviceGetPowerManagementLimit", self.nvml.fns.limit)
    }

    /// The power limits the GPU accepts.
    pub fn power_limit_range(&self) -> Result<LimitRange, NvmlError> {
        let (mut min, mut max): (c_uint, c_uint) = (0, 0);
        // SAFETY: writes two unsigned ints.
        self.nvml
            .check("nvmlDeviceGetPowerManagementLimitConstraints", unsafe {
                (self.nvml.fns.limit_range)(self.handle, &mut min, &mut max)
            })?;
        Ok(LimitRange {
            min_mw: min,
            max_mw: max,
        })
    }

    /// The limit the GPU boots with, in milliwatts.
    pub fn default_power_limit_mw(&self) -> Result<u32, NvmlError> {
        self.u32_of(
            "nvmlDeviceGetPowerManagementDefaultLimit",
            self.nvml.fns.limit_default,
        )
    }

    /// Set the power limit (root only; it lasts until changed or the driver reloads).
    pub fn set_power_limit_mw(&self, mw: u32) -> Result<(), NvmlError> {
        // SAFETY: plain call on a live handle.
        self.nvml
            .check("nvmlDeviceSetPowerManagementLimit", unsafe {
                (self.nvml.fns.set_limit)(self.handle, mw)
            })
    }

    /// The SM clocks the GPU offers at its highest memory clock, in MHz, highest first.
    pub fn supported_sm_mhz(&self) -> Result<Vec<u32>, NvmlError> {
        let mut mem = vec![0 as c_uint; MAX_CLOCKS];
        let mut n = MAX_CLOCKS as c_uint;
        // SAFETY: NVML writes at most n values and sets n to how many it wrote.
        self.nvml
            .check("nvmlDeviceGetSupportedMemoryClocks", unsafe {
                (self.nvml.fns.mem_clocks)(self.handle, &mut n, mem.as_mut_ptr())
            })?;
        let top_mem = mem[..(n as usize).min(MAX_CLOCKS)]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        let mut sm = vec![0 as c_uint; MAX_CLOCKS];
        let mut n = MAX_CLOCKS as c_uint;
        // SAFETY: as above.
        self.nvml
            .check("nvmlDeviceGetSupportedGraphicsClocks", unsafe {
                (self.nvml.fns.sm_clocks)(self.handle, top_mem, &mut n, sm.as_mut_ptr())
            })?;
        sm.truncate((n as usize).min(MAX_CLOCKS));
        sm.sort_unstable_by(|a, b| b.cmp(a));
        sm.dedup();
        Ok(sm)
    }

    /// Hold the SM clock between `min_mhz` and `max_mhz` (root only; Volta and newer).
    pub fn lock_clocks(&self, min_mhz: u32, max_mhz: u32) -> Result<(), NvmlError> {
        // SAFETY: plain call on a live handle.
        self.nvml.check("nvmlDeviceSetGpuLockedClocks", unsafe {
            (self.nvml.fns.lock_clocks)(self.handle, min_mhz, max_mhz)
        })
    }

    /// Let the SM clock float again (the driver's default).
    pub fn unlock_clocks(&self) -> Result<(), NvmlError> {
        // SAFETY: plain call on a live handle.
        self.nvml.check("nvmlDeviceResetGpuLockedClocks", unsafe {
            (self.nvml.fns.unlock_clocks)(self.handle)
        })
    }
}
