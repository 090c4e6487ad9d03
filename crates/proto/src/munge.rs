//! MUNGE credentials through libmunge, loaded at run time with libloading.
//!
//! Loading at run time keeps greenup free of a link-time dependency on munge:
//! a node without libmunge gets a clear error instead of a binary that will not start.
//! Both calls use munge's default context (the local munged socket).

use std::ffi::{CStr, CString, c_char, c_int, c_void};

/// The library file greenup loads.
pub const LIBRARY: &str = "libmunge.so.2";

type EncodeFn = unsafe extern "C" fn(*mut *mut c_char, *mut c_void, *const c_void, c_int) -> c_int;
type DecodeFn = unsafe extern "C" fn(
    *const c_char,
    *mut c_void,
    *mut *mut c_void,
    *mut c_int,
    *mut libc::uid_t,
    *mut libc::gid_t,
) -> c_int;
type StrerrorFn = unsafe extern "C" fn(c_int) -> *const c_char;
type CtxCreateFn = unsafe extern "C" fn() -> *mut c_void;
type CtxSetFn = unsafe extern "C" fn(*mut c_void, c_int, ...) -> c_int;
type CtxDestroyFn = unsafe extern "C" fn(*mut c_void);

/// `MUNGE_OPT_ZIP_TYPE` and `MUNGE_ZIP_NONE` from munge.h.
const OPT_ZIP_TYPE: c_int = 2;
const ZIP_NONE: c_int = 0;

/// Why MUNGE refused or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MungeFailure {
    /// libmunge could not be loaded or lacks a symbol.
    Unavailable,
    /// munged could not be reached or failed (socket, memory, internal error).
    Daemon,
    /// The credential's time-to-live has passed.
    Expired,
    /// The credential was decoded before.
    Replayed,
    /// The credential's time is in the future (clock skew).
    Rewound,
    /// Malformed, forged, tampered with, or from another key or realm.
    Invalid,
    /// The payload is too long or an argument is bad.
    BadArgument,
}

/// A MUNGE error with munge's own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("munge: {message} (code {code})")]
pub struct MungeError {
    /// The class of failure.
    pub kind: MungeFailure,
    /// munge's error number (`munge_err_t`), or -1 when the library is missing.
    pub code: i32,
    /// munge_strerror's text, or why the library could not be loaded.
    pub message: String,
}

impl MungeError {
    fn from_code(code: c_int, message: String) -> Self {
        let kind = match code {
            15 => MungeFailure::Expired,
            17 => MungeFailure::Replayed,
            16 => MungeFailure::Rewound,
            8..=14 | 18 => MungeFailure::Invalid,
            2..=4 => MungeFailure::BadArgument,
            _ => MungeFailure::Daemon,
        };
        MungeError {
            kind,
            code,
            message,
        }
    }
}

/// A decoded credential: who made it and what it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The uid of the process that made the credential.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

/// libmunge, loaded.
pub struct Munge {
    encode: EncodeFn,
    decode: DecodeFn,
    strerror: StrerrorFn,
    ctx_create: CtxCreateFn,
    ctx_set: CtxSetFn,
    ctx_destroy: CtxDestroyFn,
    // Keeps the function pointers above valid; dropped last.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Munge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Munge")
    }
}

impl Munge {
    /// Load libmunge.so.2.
    pub fn load() -> Result<Munge, MungeError> {
        let unavailable = |e: libloading::Error| MungeError {
            kind: MungeFailure::Unavailable,
            code: -1,
            message: format!("cannot load {LIBRARY}: {e} (install the libmunge2 package)"),
        };
        // SAFETY: loading libmunge runs no initialisers with preconditions, and the
        // symbol types match munge.h (munge 0.5.x, soname 2).
        unsafe {
            let lib = libloading::Library::new(LIBRARY).map_err(unavailable)?;
            let encode = *lib
                .get::<EncodeFn>(b"munge_encode\0")
                .map_err(unavailable)?;
            let decode = *lib
                .get::<DecodeFn>(b"munge_decode\0")
                .map_err(unavailable)?;
            let strerror = *lib
                .get::<StrerrorFn>(b"munge_strerror\0")
                .map_err(unavailable)?;
            let ctx_create = *lib
                .get::<CtxCreateFn>(b"munge_ctx_create\0")
                .map_err(unavailable)?;
            let ctx_set = *lib
                .get::<CtxSetFn>(b"munge_ctx_set\0")
                .map_err(unavailable)?;
            let ctx_destroy = *lib
                .get::<CtxDestroyFn>(b"munge_ctx_destroy\0")
                .map_err(unavailable)?;

            Ok(Munge {
                encode,
                decode,
                strerror,
                ctx_create,
                ctx_set,
                ctx_destroy,
                _lib: lib,
            })
        }
    }

    fn error(&self, code: c_int) -> MungeError {
        // SAFETY: munge_strerror returns a static string for any code.
        let text = unsafe {
            let p = (self.strerror)(code);
            if p.is_null() {
                String::from("unknown error")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        MungeError::from_code(code, text)
    }

    /// Make a credential carrying `payload`, with munged's default time-to-live.
    pub fn encode(&self, payload: &[u8]) -> Result<String, MungeError> {
        let len = c_int::try_from(payload.len()).map_err(|_| MungeError {
            kind: MungeFailure::BadArgument,
            code: 3,
            message: format!("payload of {} bytes is too long", payload.len()),
        })?;
        let mut cred: *mut c_char = std::ptr::null_mut();
        // A context of our own without compression: greenup's payloads are short JSON,
        // and compressing them costs munged more than it saves. One per call, because
        // munge writes error text into the context and calls may run on many threads.
        // SAFETY: the context is created, used and destroyed here only; cred is an out
        // pointer; payload is valid for len bytes; a NULL context means munge's defaults.
        let rc = unsafe {
            let ctx = (self.ctx_create)();
            if !ctx.is_null() && (self.ctx_set)(ctx, OPT_ZIP_TYPE, ZIP_NONE) != 0 {
                (self.ctx_destroy)(ctx);
                return Err(MungeError::from_code(
                    1,
                    "cannot set up a munge context".into(),
                ));
            }
            let rc = (self.encode)(&mut cred, ctx, payload.as_ptr().cast(), len);
            if !ctx.is_null() {
                (self.ctx_destroy)(ctx);
            }
            rc
        };
        if rc != 0 {
            if !cred.is_null() {
                // SAFETY: libmunge allocates with malloc.
                unsafe { libc::free(cred.cast()) };
            }
            return Err(self.error(rc));
        }
        if cred.is_null() {
            return Err(MungeError::from_code(
                1,
                "munge_encode returned no credential".into(),
            ));
        }
        // SAFETY: on success cred is a NUL-terminated malloc'd string we now own.
        let text = unsafe {
            let s = CStr::from_ptr(cred).to_string_lossy().into_owned();
            libc::free(cred.cast());
            s
        };
        Ok(text)
    }

    /// Check a credential and return its maker and payload.
    pub fn decode(&self, cred: &str) -> Result<Decoded, MungeError> {
        let c = CString::new(cred).map_err(|_| MungeError {
            kind: MungeFailure::Invalid,
            code: 8,
            message: "credential contains a NUL byte".into(),
        })?;
        let mut buf: *mut c_void = std::ptr::null_mut();
        let mut len: c_int = 0;
        let mut uid: libc::uid_t = 0;
        let mut gid: libc::gid_t = 0;
        // SAFETY: all out pointers are valid; NULL ctx = defaults.
        let rc = unsafe {
            (self.decode)(
                c.as_ptr(),
                std::ptr::null_mut(),
                &mut buf,
                &mut len,
                &mut uid,
                &mut gid,
            )
        };
        // munge allocates the payload even for some failures (expired, replayed).
        let payload = if buf.is_null() {
            Vec::new()
        } else {
            let n = usize::try_from(len).unwrap_or(0);
            // SAFETY: buf holds len bytes allocated by libmunge with malloc.
            unsafe {
                let v = std::slice::from_raw_parts(buf.cast::<u8>(), n).to_vec();
                libc::free(buf);
                v
            }
        };
        if rc != 0 {
            return Err(self.error(rc));
        }
        Ok(Decoded { uid, gid, payload })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_classes() {
        assert_eq!(
            MungeError::from_code(15, String::new()).kind,
            MungeFailure::Expired
        );
        assert_eq!(
            MungeError::from_code(17, String::new()).kind,
            MungeFailure::Replayed
        );
        assert_eq!(
            MungeError::from_code(11, String::new()).kind,
            MungeFailure::Invalid
        );
        assert_eq!(
            MungeError::from_code(6, String::new()).kind,
            MungeFailure::Daemon
        );
    }
}
