//! Random and mutated YAML never panics the profile parser or the models it builds.

mod models_common;

use std::path::Path;

use greenup::model::{Config, NodeSetting};
use greenup::profile::Profile;
use models_common::*;
use proptest::prelude::*;

fn shipped() -> Vec<String> {
    [
        "ep.yaml",
        "ft.yaml",
        "cg.yaml",
        "hetero-table1.yaml",
        "lammps.yaml",
        "stream-i7.yaml",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(profiles_dir().join(f)).unwrap())
    .collect()
}

/// Parse, and when the profile is accepted, predict with it: neither may panic.
fn exercise(text: &str) {
    let Ok(p) = Profile::from_str(Path::new("fuzz.yaml"), text) else {
        return;
    };
    let site = table1_site(1);
    for model in p.models() {
        let Ok(pred) = p.predictor_for(model, &site) else {
            continue;
        };
        for f in [0.0, 1.2, 2.5, f64::NAN] {
            let cfg = Config {
                nodes: ["n1", "n2", "n3"]
                    .iter()
                    .enumerate()
                    .map(|(i, n)| NodeSetting {
                        gpu_mhz: None,
                        name: n.to_string(),
                        node_type: format!("type{}", i + 1),
                        freq_ghz: f,
                    })
                    .collect(),
            };
            if let Ok(out) = pred.predict(&cfg) {
                let _ = pred.efficiency(&cfg, &out);
            }
        }
        let _ = pred.table(&slots(&site, &["n1", "n2", "n3", "n4"]));
    }
    if let Some(iso) = p.iso_energy() {
        let _ = iso.ee_row(iso.n, 0, 2.0);
        let _ = iso.ee_row(-1.0, 4, -2.0);
    }
    let _ = p.to_yaml();
}

/// Fragments that are likely to break things in interesting ways.
const PIECES: &[&str] = &[
    "",
    " ",
    "\n",
    ":",
    "- ",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "#",
    "&a",
    "*a",
    "<<: *a",
    "!!str",
    "~",
    "null",
    "-1",
    "1e308",
    "1e-308",
    ".inf",
    ".nan",
    "0",
    "n / 0",
    "p^1e6",
    "log2(0)",
    "f^-3",
    "ln(-1)",
    "q",
    "((",
    "1 +",
    "a = 1",
    "true",
    "0x10",
    "  ",
    "\t",
    "version: 1",
    "name: x",
    "hetero:",
    "iterations: 0",
    "law: log",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        exercise(&text);
    }

    #[test]
    fn mutated_profiles_never_panic(
        which in 0usize..6,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..4, 0usize..PIECES.len()), 1..6),
    ) {
        let mut text = shipped()[which].clone();
        for (at, kind, piece) in edits {
            let mut cut = at.index(text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            match kind {
                // Insert a fragment.
                0 => text.insert_str(cut, PIECES[piece]),
                // Delete up to 8 bytes.
                1 => {
                    let mut end = (cut + 8).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.replace_range(cut..end, "");
                }
                // Replace the value after the next colon.
                2 => {
                    if let Some(colon) = text[cut..].find(':') {
                        let start = cut + colon + 1;
                        let end = text[start..].find('\n').map_or(text.len(), |e| start + e);
                        text.replace_range(start..end, &format!(" {}", PIECES[piece]));
                    }
                }
                // Duplicate a line.
                _ => {
                    let start = text[..cut].rfind('\n').map_or(0, |s| s + 1);
                    let end = text[cut..].find('\n').map_or(text.len(), |e| cut + e);
                    let line = format!("{}\n", &text[start..end]);
                    text.insert_str(start, &line);
                }
            }
        }
        exercise(&text);
    }
}
