//! Any bytes as a site config: parsing never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = greenup::site::parse("fuzz.yaml", text);
    }
});
