//! Why an NVML call failed, with NVML's own code named in the text.

use std::path::PathBuf;

/// An NVML return code (`nvmlReturn_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(pub u32);

impl Code {
    /// `NVML_ERROR_NOT_SUPPORTED`: the device has no such control or counter.
    pub const NOT_SUPPORTED: Code = Code(3);
    /// `NVML_ERROR_NO_PERMISSION`: the caller may not change this (not root, or a VM forbids it).
    pub const NO_PERMISSION: Code = Code(4);

    /// NVML's name for the code, as in nvml.h.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "NVML_SUCCESS",
            1 => "NVML_ERROR_UNINITIALIZED",
            2 => "NVML_ERROR_INVALID_ARGUMENT",
            3 => "NVML_ERROR_NOT_SUPPORTED",
            4 => "NVML_ERROR_NO_PERMISSION",
            5 => "NVML_ERROR_ALREADY_INITIALIZED",
            6 => "NVML_ERROR_NOT_FOUND",
            7 => "NVML_ERROR_INSUFFICIENT_SIZE",
            8 => "NVML_ERROR_INSUFFICIENT_POWER",
            9 => "NVML_ERROR_DRIVER_NOT_LOADED",
            10 => "NVML_ERROR_TIMEOUT",
            11 => "NVML_ERROR_IRQ_ISSUE",
            12 => "NVML_ERROR_LIBRARY_NOT_FOUND",
            13 => "NVML_ERROR_FUNCTION_NOT_FOUND",
            14 => "NVML_ERROR_CORRUPTED_INFOROM",
            15 => "NVML_ERROR_GPU_IS_LOST",
            16 => "NVML_ERROR_RESET_REQUIRED",
            17 => "NVML_ERROR_OPERATING_SYSTEM",
            18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
            19 => "NVML_ERROR_IN_USE",
            20 => "NVML_ERROR_MEMORY",
            21 => "NVML_ERROR_NO_DATA",
            22 => "NVML_ERROR_VGPU_ECC_NOT_ENABLED",
            23 => "NVML_ERROR_INSUFFICIENT_RESOURCES",
            24 => "NVML_ERROR_FREQ_NOT_SUPPORTED",
            25 => "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
            26 => "NVML_ERROR_DEPRECATED",
            27 => "NVML_ERROR_NOT_READY",
            28 => "NVML_ERROR_GPU_NOT_FOUND",
            29 => "NVML_ERROR_INVALID_STATE",
            999 => "NVML_ERROR_UNKNOWN",
            _ => "NVML_ERROR_(unlisted)",
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// Why greenup could not use NVML, or why one NVML call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlError {
    /// The library could not be loaded (no driver on this node, or a wrong path in the site config).
    #[error("cannot load NVML from {path}: {reason}")]
    Load {
        /// The path the site config gave.
        path: PathBuf,
        /// What the loader said.
        reason: String,
    },
    /// The library lacks a function greenup needs (a driver older than greenup supports).
    #[error("NVML at {path} has no {symbol} (driver too old for greenup?)")]
    Missing {
        /// The path the site config gave.
        path: PathBuf,
        /// The missing function.
        symbol: &'static str,
    },
    /// An NVML function returned an error.
    #[error("{call}: {code}: {text}")]
    Call {
        /// The NVML function, e.g. `nvmlDeviceSetGpuLockedClocks`.
        call: &'static str,
        /// NVML's return code.
        code: Code,
        /// `nvmlErrorString` for the code.
        text: String,
    },
    /// No GPU on this node has the minor number (`/dev/nvidiaN`) Slurm gave the job.
    #[error("no GPU with minor number {minor} (/dev/nvidia{minor}) on this node")]
    NoSuchMinor {
        /// The minor number asked for.
        minor: u32,
    },
}

impl NvmlError {
    /// NVML's return code, when the error came from a call.
    pub fn code(&self) -> Option<Code> {
        match self {
            NvmlError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the device refused the call (no permission, or not supported) rather than failed.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.code(),
            Some(Code::NO_PERMISSION) | Some(Code::NOT_SUPPORTED)
        )
    }
}
