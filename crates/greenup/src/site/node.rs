//! The part of the site config that the plugin reads on a compute node at every job
//! start, step and end. The plugin keeps it in a root-only JSON copy
//! (`greenup_host::cache`), because each of those Slurm processes is new and parsing the
//! whole YAML file costs about half a millisecond where reading the copy costs a few
//! microseconds; so it serializes to JSON and back unchanged.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DaemonSettings, DvfsSettings, Enforce, PowerSettings, Site};
use crate::input::InputError;

/// Where the plugin keeps its copies unless told otherwise (tmpfs: gone at reboot).
pub const DEFAULT_CACHE_DIR: &str = "/run/greenup/site";

/// What a compute node needs from the site config: the default policy, enforcement,
/// how to reach greenupd and where to spool, and the DVFS settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// The site config file these settings came from.
    pub path: PathBuf,
    /// The policy used when a job names none.
    pub default_policy: String,
    /// Fail open or strict.
    pub enforce: Enforce,
    /// greenupd settings.
    pub daemon: DaemonSettings,
    /// DVFS settings.
    pub dvfs: DvfsSettings,
    /// How power caps are held, and how often the node reports its power.
    #[serde(default)]
    pub power: PowerSettings,
}

impl NodeConfig {
    /// The node's part of a loaded site config.
    pub fn from_site(site: &Site) -> NodeConfig {
        NodeConfig {
            path: site.path.clone(),
            default_policy: site.default_policy.clone(),
            enforce: site.enforce,
            daemon: site.daemon.clone(),
            dvfs: site.dvfs.clone(),
            power: site.power.clone(),
        }
    }
}

/// The node's settings read from the site config at `config`, checked in full (the
/// plugin keeps them in a root-only copy, through `greenup-host`'s cache).
pub fn load(config: &Path) -> Result<NodeConfig, InputError> {
    super::load(config).map(|s| NodeConfig::from_site(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: &str = "node_types:\n  a:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 20, gamma: 3}\nnodes:\n  a: \"n[1-2]\"\ndefault_policy: monitor\nenforce: strict\ndaemon:\n  listen: 127.0.0.1:7999\n  timeout_ms: 700\n  spool_dir: /var/spool/x/%n\ndvfs:\n  run_dir: /run/x\n  per_core_shared: true\n";

    #[test]
    fn the_settings_survive_their_json_copy() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("greenup.yaml");
        std::fs::write(&config, SITE).unwrap();
        let want = load(&config).unwrap();
        assert_eq!(want.enforce, Enforce::Strict);
        assert_eq!(want.daemon.listen, "127.0.0.1:7999");
        let json = serde_json::to_vec(&want).unwrap();
        assert_eq!(serde_json::from_slice::<NodeConfig>(&json).unwrap(), want);
    }
}
