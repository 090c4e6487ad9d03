//! GPU node types in the site config (`node_types.T.gpus`, `dvfs.nvml_library`): what a
//! good section gives, and one error line at the bad value's line and column for each
//! kind of mistake.

mod site_common;

use std::path::Path;

use greenup::site::GpuType;
use site_common::{bad, parse};

const GPU_SITE: &str = "\
node_types:
  cpu:
    frequencies: [1.0, 2.0]
    power: {dynamic_w: 10, static_w: 2}
  h100:
    frequencies: [1.0, 2.0]
    power: {dynamic_w: 10, static_w: 2}
    gpus:
      count: 4
      clocks_mhz: {min: 345, max: 1980}
      power_limit: {min: 200W, max: 0.7kW}
      power: {dynamic_w: 630, static_w: 70}
nodes:
  cpu: n[1-2]
  h100: g[1-2]
dvfs:
  nvml_library: /usr/local/nvidia/lib64/libnvidia-ml.so.1
";

#[test]
fn a_gpu_node_type_reads_back_as_written() {
    let site = parse(GPU_SITE).unwrap();
    assert_eq!(
        site.gpu_types.get("h100"),
        Some(&GpuType {
            count: 4,
            clocks_mhz: Some((345, 1980)),
            clock_step_mhz: None,
            power_limit_w: Some((200.0, 700.0)),
            dynamic_w: 630.0,
            static_w: 70.0,
            gamma: 3.0,
        })
    );
    assert!(!site.gpu_types.contains_key("cpu"));
    assert_eq!(
        site.dvfs.nvml_library,
        Path::new("/usr/local/nvidia/lib64/libnvidia-ml.so.1")
    );
}

#[test]
fn what_an_admin_leaves_out_is_left_to_nvml() {
    let text = GPU_SITE
        .replace("      clocks_mhz: {min: 345, max: 1980}\n", "")
        .replace("      power_limit: {min: 200W, max: 0.7kW}\n", "")
        .replace(
            "dvfs:\n  nvml_library: /usr/local/nvidia/lib64/libnvidia-ml.so.1\n",
            "",
        );
    let site = parse(&text).unwrap();
    let g = &site.gpu_types["h100"];
    assert_eq!((g.clocks_mhz, g.power_limit_w), (None, None));
    // The loader's own search, never a path from a job's environment.
    assert_eq!(site.dvfs.nvml_library, Path::new("libnvidia-ml.so.1"));
}

#[test]
fn each_bad_gpu_value_is_one_line_at_its_place() {
    bad(
        &GPU_SITE.replace("count: 4", "count: 0"),
        9,
        14,
        &["node_types.h100.gpus.count", "'0'", "1-64"],
    );
    bad(
        &GPU_SITE.replace("count: 4", "count: four"),
        9,
        14,
        &["'four'", "a number of GPUs per node"],
    );
    bad(
        &GPU_SITE.replace("{min: 345, max: 1980}", "{min: 1980, max: 345}"),
        10,
        36,
        &[
            "node_types.h100.gpus.clocks_mhz.max",
            "'345'",
            "at least clocks_mhz.min (1980 MHz)",
        ],
    );
    bad(
        &GPU_SITE.replace("{min: 345, max: 1980}", "{min: 1.5, max: 1980}"),
        10,
        25,
        &["clocks_mhz.min", "'1.5'", "whole number"],
    );
    bad(
        &GPU_SITE.replace("{min: 200W, max: 0.7kW}", "{min: 800W, max: 0.7kW}"),
        11,
        37,
        &[
            "power_limit.max",
            "'0.7kW'",
            "at least power_limit.min (800 W)",
        ],
    );
    bad(
        &GPU_SITE.replace("{min: 200W, max: 0.7kW}", "{min: 0W, max: 0.7kW}"),
        11,
        26,
        &["power_limit.min", "'0W'", "above 0"],
    );
    bad(
        &GPU_SITE.replace("dynamic_w: 630", "dynamic_w: -5"),
        12,
        26,
        &["node_types.h100.gpus.power.dynamic_w", "'-5'", "at least 0"],
    );
    bad(
        &GPU_SITE.replace("{min: 345, max: 1980}", "{min: 345, top: 1980}"),
        10,
        30,
        &["unknown field `top`", "min, max"],
    );
}

#[test]
fn a_bad_nvml_path_is_one_line_at_its_place() {
    for bad_path in [
        "nvidia/libnvidia-ml.so.1",
        "'libnvidia-ml.so.1 --x'",
        "nvml",
    ] {
        bad(
            &GPU_SITE.replace("/usr/local/nvidia/lib64/libnvidia-ml.so.1", bad_path),
            17,
            17,
            &["dvfs.nvml_library", "an absolute path"],
        );
    }
}

#[test]
fn a_gpu_types_gears_run_down_from_its_top_clock_by_the_step_to_its_lowest() {
    let with = |clocks: &str| {
        let site = parse(&GPU_SITE.replace("{min: 345, max: 1980}", clocks)).unwrap();
        site.gpu_types["h100"].gears_mhz()
    };
    // 1980 down by 400: 1580, 1180, 780, 380, then the range's lowest, 345.
    assert_eq!(
        with("{min: 345, max: 1980, step: 400}"),
        [345, 380, 780, 1180, 1580, 1980]
    );
    // No step: eight clocks, 1980 down by ceil(1635 / 7) = 234 to 345.
    assert_eq!(
        with("{min: 345, max: 1980}"),
        [345, 576, 810, 1044, 1278, 1512, 1746, 1980]
    );
    assert_eq!(with("{min: 1980, max: 1980}"), [1980]);
    // Without a range the top clock is unknown: none is chosen.
    let site = parse(&GPU_SITE.replace("      clocks_mhz: {min: 345, max: 1980}\n", "")).unwrap();
    assert!(site.gpu_types["h100"].gears_mhz().is_empty());
    bad(
        &GPU_SITE.replace("{min: 345, max: 1980}", "{min: 345, max: 1980, step: 0}"),
        10,
        47,
        &[
            "node_types.h100.gpus.clocks_mhz.step",
            "'0'",
            "the step between the clocks chosen in MHz",
        ],
    );
    bad(
        &GPU_SITE.replace("dynamic_w: 630", "dynamic_w: 630, gamma: 0"),
        12,
        38,
        &[
            "node_types.h100.gpus.power.gamma",
            "'0'",
            "a number in (0, 10]",
        ],
    );
}
