//! Any bytes as a profile: parsing, and predicting with whatever parses, never panics.
#![no_main]

use std::path::Path;

use greenup::model::{Config, NodeSetting};
use greenup::profile::Profile;
use libfuzzer_sys::fuzz_target;

/// A small site with two node types, one with power as expressions in f.
const SITE: &str = "
node_types:
  type1: { frequencies: {min: 1.2, max: 2.5, step: 0.1}, power: {dynamic_w: 20, static_w: 4} }
  lab: { frequencies: [1.2, 2.4], power: {dynamic_w: \"12 * (f / 2.4)^2.5\", static_w: \"3 + 0.5 * f\"} }
nodes:
  type1: \"h[1-2]\"
  lab: \"n[1-2]\"
";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(profile) = Profile::from_str(Path::new("fuzz.yaml"), text) else { return };
    let Ok(site) = greenup::site::parse("site.yaml", SITE) else { return };
    let _ = profile.to_yaml();
    for model in profile.models() {
        let Ok(pred) = profile.predictor_for(model, &site) else { continue };
        for f in [1.2, 2.4, 2.5, 0.0] {
            let cfg = Config {
                nodes: [("h1", "type1"), ("n1", "lab"), ("n2", "lab")]
                    .iter()
                    .map(|(n, t)| NodeSetting { name: n.to_string(), node_type: t.to_string(), freq_ghz: f })
                    .collect(),
            };
            if let Ok(out) = pred.predict(&cfg) {
                let _ = pred.efficiency(&cfg, &out);
            }
        }
    }
    if let Some(iso) = profile.iso_energy() {
        for p in [0, 1, 7, 1024] {
            let _ = iso.ee_row(iso.n, p, 2.0);
        }
    }
});
