//! Read the installed Slurm's version from its headers, so the plugin declares the
//! plugin_version of the Slurm it will load into (Slurm refuses a mismatch).

use std::path::PathBuf;

const HEADER: &str = "/usr/include/slurm/slurm_version.h";

fn main() {
    let header = std::env::var("GREENUP_SLURM_VERSION_H").unwrap_or_else(|_| HEADER.to_string());
    println!("cargo:rerun-if-changed={header}");
    println!("cargo:rerun-if-env-changed=GREENUP_SLURM_VERSION_H");
    let text = match std::fs::read_to_string(&header) {
        Ok(t) => t,
        Err(e) => {
            println!("cargo:warning={header}: {e}; install libslurm-dev (Debian) or slurm-devel");
            std::process::exit(1);
        }
    };
    let number = text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("#define"), Some("SLURM_VERSION_NUMBER"), Some(v)) => {
                u32::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
            }
            _ => None,
        }
    });
    let Some(number) = number else {
        println!("cargo:warning={header}: no '#define SLURM_VERSION_NUMBER 0x......' line");
        std::process::exit(1);
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()))
        .join("slurm_version.rs");
    let code = format!(
        "/// The Slurm release this plugin was built for ({}.{}.{}), from {header}.\npub const SLURM_PLUGIN_VERSION: u32 = {number:#08x};\n",
        number >> 16,
        (number >> 8) & 0xff,
        number & 0xff
    );
    if let Err(e) = std::fs::write(&out, code) {
        println!("cargo:warning={}: {e}", out.display());
        std::process::exit(1);
    }
}
