//! Compiles the C shim against the MPI library's own mpi.h, so that every handle type is
//! the one that MPI uses. The compiler wrapper is `$MPICC`, else `mpicc`; Open MPI's
//! `--showme:compile` or MPICH's `-compile_info` says where mpi.h is. Without an MPI, the
//! library builds without interception (and says so), so the workspace builds anywhere.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=shim/greenup_mpi.c");
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rustc-check-cfg=cfg(greenup_shim)");
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    // An MPI installed after the first build must be picked up: a missing path counts as
    // changed, so cargo reruns this script until the wrapper is there.
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rerun-if-changed={}", which(&mpicc));
    let Some(flags) = compile_flags(&mpicc) else {
        println!(
            "cargo:warning=no MPI compiler wrapper ({mpicc}): libgreenup_mpi builds without interception; set MPICC"
        );
        return;
    };
    let mut build = cc::Build::new();
    build
        .file("shim/greenup_mpi.c")
        .warnings(true)
        .extra_warnings(true);
    for flag in flags {
        if let Some(dir) = flag.strip_prefix("-I") {
            build.include(dir);
        } else if let Some(def) = flag.strip_prefix("-D") {
            let (k, v) = def
                .split_once('=')
                .map_or((def, None), |(k, v)| (k, Some(v)));
            build.define(k, v);
        } else if flag == "-pthread" {
            build.flag(&flag);
        }
    }
    build.compile("greenup_mpi_shim");
    println!("cargo:rustc-cfg=greenup_shim");
}

/// Where `program` is on PATH (itself when it names a path or is not found).
fn which(program: &str) -> String {
    if program.contains('/') {
        return program.to_string();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.exists())
        .map_or_else(
            || format!("/usr/bin/{program}"),
            |p| p.display().to_string(),
        )
}

/// The wrapper's compile flags: Open MPI's `--showme:compile`, else MPICH's `-compile_info`
/// (whose first word is the compiler itself).
fn compile_flags(mpicc: &str) -> Option<Vec<String>> {
    let run = |arg: &str| {
        Command::new(mpicc)
            .arg(arg)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if let Some(out) = run("--showme:compile") {
        return Some(out.split_whitespace().map(str::to_string).collect());
    }
    let out = run("-compile_info")?;
    Some(out.split_whitespace().skip(1).map(str::to_string).collect())
}
