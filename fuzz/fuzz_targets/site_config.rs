//! Any bytes given to the site config parser give a site or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Err(e) = greenup::site::parse("fuzz/greenup.yaml", text)
    {
        assert!(!e.to_string().contains('\n'), "error spans lines: {e}");
    }
});
