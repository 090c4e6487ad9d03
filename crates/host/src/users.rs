//! Who a user is on this system: a user name's uid and a uid's name, from the system's
//! user database (getpwnam_r, getpwuid_r), as Slurm resolves `SlurmUser`.

use std::ffi::{CStr, CString};

/// The uid of a user name (or of a decimal uid written as text).
pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    let c = CString::new(name).ok()?;
    let mut pwd: libc::passwd = unsafe_zeroed_passwd();
    let mut buf = vec![0u8; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives it.
    let rc = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        None
    } else {
        Some(pwd.pw_uid)
    }
}

/// The user name of a uid, when the system knows it.
pub fn name_of(uid: u32) -> Option<String> {
    let mut pwd: libc::passwd = unsafe_zeroed_passwd();
    let mut buf = vec![0u8; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives it.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into buf and is NUL-terminated.
    Some(
        unsafe { CStr::from_ptr(pwd.pw_name) }
            .to_string_lossy()
            .into_owned(),
    )
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: passwd is a plain C struct; all-zero (null pointers) is a valid value.
    unsafe { std::mem::zeroed() }
}
