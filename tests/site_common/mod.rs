//! What the site-config tests share: parse a config as `/etc/slurm/greenup.yaml`, and
//! expect one error line at a given line and column.

use std::path::Path;

use greenup::input::Origin;
use greenup::site;

/// Parse `text` as the site config `/etc/slurm/greenup.yaml`.
pub fn parse(text: &str) -> Result<site::Site, greenup::input::InputError> {
    site::parse("/etc/slurm/greenup.yaml", text)
}

/// Parse `text`, expect an error, and check it points at `line`:`col` and mentions every `words`.
pub fn bad(text: &str, line: u64, col: u64, words: &[&str]) {
    let err = parse(text).expect_err("config should be rejected");
    let msg = err.to_string();
    match &err.origin {
        Origin::File {
            path,
            line: l,
            column: c,
        } => {
            assert_eq!(path, Path::new("/etc/slurm/greenup.yaml"), "{msg}");
            assert_eq!((*l, *c), (line, col), "{msg}");
        }
        other => panic!("no position in {other:?}: {msg}"),
    }
    assert!(
        msg.starts_with(&format!("/etc/slurm/greenup.yaml:{line}:{col}: ")),
        "{msg}"
    );
    for w in words {
        assert!(msg.contains(w), "'{w}' missing from: {msg}");
    }
    assert_eq!(msg.lines().count(), 1, "{msg}");
}
