//! The layers hold: `scripts/imports.py` finds no circle of imports in any crate and no
//! import up the decision library's layers (docs/architecture.md). The crates' own
//! boundaries are Cargo's to hold; this holds the ones inside a crate.

use std::process::Command;

#[test]
fn no_crate_has_an_import_circle_or_an_import_up_its_layers() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/imports.py"))
        .output()
        .expect("run python3 scripts/imports.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The library's layers were checked, not skipped.
    assert!(text.contains(" up the layers"), "{text}");
}
