//! Any bytes given to the profile parser give a profile or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = greenup::profile::Profile::from_str(std::path::Path::new("fuzz/profile.yaml"), text);
    }
});
