//! The layers hold: `scripts/imports.py` finds no circle of imports in any crate, no
//! import up the decision library's layers, and no file write or process started by the
//! library outside its tests (docs/architecture.md). The crates' own
//! boundaries are Cargo's to hold; this holds the ones inside a crate.
//!
//! The check is itself checked: a back-import planted in a copy of a crate, in each of
//! the forms Rust lets one be written, must fail it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn imports(args: &[&Path]) -> Output {
    Command::new("python3")
        .arg(root().join("scripts/imports.py"))
        .args(args)
        .output()
        .expect("run python3 scripts/imports.py")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn no_crate_has_an_import_circle_or_an_import_up_its_layers() {
    let out = imports(&[]);
    let text = text(&out);
    assert!(out.status.success(), "{text}");
    // The library's layers were checked, not skipped.
    assert!(text.contains(" up the layers"), "{text}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A copy of `crate_src` (e.g. `crates/greenup/src`) at the same relative path under a
/// temporary directory, so that the script knows it by its path (the library's layers).
fn copy_of(tmp: &Path, crate_src: &str) -> PathBuf {
    let to = tmp.join(crate_src);
    copy_dir(&root().join(crate_src), &to);
    to
}

fn append(file: &Path, code: &str) {
    let mut s = std::fs::read_to_string(file).unwrap();
    s.push_str(code);
    std::fs::write(file, s).unwrap();
}

fn prepend(file: &Path, code: &str) {
    let s = std::fs::read_to_string(file).unwrap();
    std::fs::write(file, format!("{code}{s}")).unwrap();
}

/// The library's copy with `plant` done to it: the script's exit and output.
fn planted_library(plant: impl FnOnce(&Path)) -> (bool, String) {
    let tmp = tempfile::tempdir().unwrap();
    let src = copy_of(tmp.path(), "crates/greenup/src");
    plant(&src);
    let out = imports(&[&src]);
    (out.status.success(), text(&out))
}

#[test]
fn a_back_import_planted_in_a_copy_of_the_library_fails_the_check_in_every_form() {
    // The copy as it is passes: what fails below is the plant.
    let (ok, text) = planted_library(|_| {});
    assert!(ok, "{text}");

    // `use crate::{a, b::{c}}`, nested: the bottom layer's expr reaches the top's report.
    let (ok, text) = planted_library(|src| {
        prepend(
            &src.join("expr.rs"),
            "#[allow(unused_imports)]\nuse crate::{hostlist, report::{text}};\n",
        )
    });
    assert!(!ok, "{text}");
    assert!(text.contains("expr -> report"), "{text}");

    // A path written inline, below the file's first `#[cfg(test)]` module (site/mod.rs's
    // tests sit at line 27 of 321): the whole file is read.
    let (ok, text) = planted_library(|src| {
        append(
            &src.join("site/mod.rs"),
            "\n/// Planted.\npub fn planted() -> usize {\n    std::mem::size_of_val(&crate::plan::check_cap)\n}\n",
        )
    });
    assert!(!ok, "{text}");
    assert!(text.contains("site -> plan"), "{text}");

    // `pub use super::super::…` from a module's child.
    let (ok, text) = planted_library(|src| {
        prepend(
            &src.join("model/amdahl.rs"),
            "pub use super::super::profile::{self as planted};\n",
        )
    });
    assert!(!ok, "{text}");
    assert!(text.contains("model -> profile"), "{text}");

    // The same import inside a `#[cfg(test)]` module is a test's, and tests may reach
    // anywhere; a brace in a string or a comment there does not end the module early.
    let (ok, text) = planted_library(|src| {
        append(
            &src.join("expr.rs"),
            "\n#[cfg(test)]\nmod planted {\n    // }\n    const BRACE: &str = \"}\";\n    const CH: char = '}';\n    #[allow(unused_imports)]\n    use crate::report::text;\n}\n",
        )
    });
    assert!(ok, "{text}");
}

#[test]
fn a_file_write_or_a_process_planted_in_the_library_fails_the_check_outside_its_tests() {
    // The library decides; greenupd and the commands act. A write, a removal and a
    // process, each spelled as code does, fail the check with the file and line.
    for (plant, named) in [
        ("std::fs::write(\"x\", b\"\")", "fs::write"),
        ("std :: fs :: remove_file(\"x\")", "fs::remove_file"),
        ("greenup_core::fs::write_files(&[])", "write_files"),
        (
            "std::process::Command::new(\"sacct\").status()",
            "Command::new",
        ),
    ] {
        let (ok, text) = planted_library(|src| {
            append(
                &src.join("report/mod.rs"),
                &format!("\n/// Planted.\npub fn planted() {{\n    let _ = {plant};\n}}\n"),
            )
        });
        assert!(!ok, "{plant}: {text}");
        assert!(
            text.contains("report/mod.rs:") && text.contains(named),
            "{plant}: {text}"
        );
    }
    // The same in a test module, or in a comment or a string, is no act of the library's.
    let (ok, text) = planted_library(|src| {
        append(
            &src.join("report/mod.rs"),
            "\n// std::fs::write\n/// Planted.\npub const PLANTED: &str = \"fs::write\";\n#[cfg(test)]\nmod planted {\n    #[test]\n    fn t() {\n        std::fs::write(\"/dev/null\", b\"\").unwrap();\n    }\n}\n",
        )
    });
    assert!(ok, "{text}");
}

#[test]
fn a_circle_planted_in_a_copy_of_a_crate_fails_the_check() {
    // The protocol's client uses its protocol module; the protocol using the client back
    // closes a circle.
    let tmp = tempfile::tempdir().unwrap();
    let src = copy_of(tmp.path(), "crates/proto/src");
    let ok = imports(&[&src]);
    assert!(ok.status.success(), "{}", text(&ok));
    prepend(
        &src.join("protocol.rs"),
        "#[allow(unused_imports)]\nuse crate::client::Client;\n",
    );
    let out = imports(&[&src]);
    let text = text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("circle: client <-> protocol"), "{text}");
}

/// Each workspace crate's dependencies on the others, from `cargo metadata` (normal
/// dependencies; dev-dependencies are the tests' own).
fn workspace_dependencies() -> std::collections::BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "{}", text(&out));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = m["packages"].as_array().unwrap();
    let names: std::collections::BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(String::from)
                .collect();
            deps.sort();
            deps.dedup();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

#[test]
fn the_architecture_tables_crates_and_their_dependencies_are_cargos() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let cargo = workspace_dependencies();
    // The table's rows: `| `crate` | path | owns | depends on |`; the workspace crates
    // the last column names in backticks are the crate's dependencies.
    let mut table = std::collections::BTreeMap::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        let name = cells[0].trim().trim_matches('`').to_string();
        if !cargo.contains_key(&name) {
            continue;
        }
        let mut deps: Vec<String> = cells[cells.len() - 1]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|d| cargo.contains_key(*d))
            .map(String::from)
            .collect();
        deps.sort();
        deps.dedup();
        assert!(
            table.insert(name.clone(), deps).is_none(),
            "{name} has two rows"
        );
    }
    assert_eq!(
        table, cargo,
        "docs/architecture.md's table (left) against cargo metadata (right)"
    );
}

#[test]
fn the_plugin_links_no_rendering_crate() {
    // The plugin lives inside slurmstepd: the library's text tables, CSV and plots stay
    // behind its `render` feature, which the plugin's dependency leaves off.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "spank_greenup",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "{}", text(&out));
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.lines().any(|l| l.starts_with("greenup v")), "{tree}");
    for heavy in ["plotters", "comfy-table", "csv"] {
        assert!(
            !tree.lines().any(|l| l.starts_with(&format!("{heavy} v"))),
            "the plugin links {heavy}:\n{tree}"
        );
    }
}
