//! The part of the site config that the plugin reads on a compute node at every job
//! start, step and end, and a root-only copy of it kept as JSON beside the identity of
//! the YAML file it came from. Each of those Slurm processes is short-lived and new, and
//! parsing the whole YAML file costs about half a millisecond in a fresh process; reading
//! the copy costs a few microseconds. An edited, replaced or touched site config has a
//! new identity, so the next process reads the YAML again and refreshes the copy.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
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

/// The copy as stored: the settings and the identity of the file they were read from.
#[derive(Serialize, Deserialize)]
struct Copy {
    identity: String,
    settings: NodeConfig,
}

/// What changes whenever the file's contents, owner, mode or place change: device,
/// inode, size, and modification and change times to the nanosecond.
fn identity(meta: &std::fs::Metadata) -> String {
    format!(
        "{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

/// The copy's file name: one per site config path.
fn copy_path(cache_dir: &Path, config: &Path) -> PathBuf {
    // FNV-1a: stable across builds, so an upgraded plugin finds the same file.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in config.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    cache_dir.join(format!("{h:016x}.json"))
}

/// Trust a file only if this process's user owns it and nobody else may write it: the
/// copy decides where a root process connects and which files it writes.
fn trusted(meta: &std::fs::Metadata) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    meta.uid() == me && meta.mode() & 0o022 == 0
}

fn read_copy(file: &Path, cache_dir: &Path, identity: &str) -> Option<NodeConfig> {
    if !trusted(&std::fs::metadata(cache_dir).ok()?) || !trusted(&std::fs::metadata(file).ok()?) {
        return None;
    }
    let copy: Copy = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    (copy.identity == identity).then_some(copy.settings)
}

/// The node's settings from the site config at `config`, through the copy in `cache_dir`
/// when it is current; otherwise the YAML file is read and checked in full and the copy
/// refreshed. A copy that cannot be written only costs the next process a full read.
pub fn load_cached(config: &Path, cache_dir: &Path) -> Result<NodeConfig, InputError> {
    let Ok(meta) = std::fs::metadata(config) else {
        // Let the full load name the problem.
        return super::load(config).map(|s| NodeConfig::from_site(&s));
    };
    let id = identity(&meta);
    let file = copy_path(cache_dir, config);
    if let Some(settings) = read_copy(&file, cache_dir, &id) {
        return Ok(settings);
    }
    let settings = NodeConfig::from_site(&super::load(config)?);
    let copy = Copy {
        identity: id,
        settings,
    };
    if let Ok(json) = serde_json::to_vec(&copy) {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cache_dir);
        let _ = crate::input::write_atomic_mode(&file, &json, 0o600);
    }
    Ok(copy.settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SITE: &str = "node_types:\n  a:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 20, gamma: 3}\nnodes:\n  a: \"n[1-2]\"\ndefault_policy: monitor\nenforce: strict\ndaemon:\n  listen: 127.0.0.1:7999\n  timeout_ms: 700\n  spool_dir: /var/spool/x/%n\ndvfs:\n  run_dir: /run/x\n  per_core_shared: true\n";

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("greenup.yaml");
        std::fs::write(&config, SITE).unwrap();
        let cache = dir.path().join("cache");
        (dir, config, cache)
    }

    #[test]
    fn the_copy_holds_what_the_full_load_gives() {
        let (_d, config, cache) = setup();
        let want = NodeConfig::from_site(&crate::site::load(&config).unwrap());
        assert_eq!(want.enforce, Enforce::Strict);
        assert_eq!(want.daemon.listen, "127.0.0.1:7999");
        assert_eq!(load_cached(&config, &cache).unwrap(), want);
        let file = copy_path(&cache, &config);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the copy is root-only");
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Read back from the copy: the same settings.
        assert_eq!(load_cached(&config, &cache).unwrap(), want);
    }

    #[test]
    fn a_current_copy_is_used_without_reading_the_yaml() {
        let (_d, config, cache) = setup();
        load_cached(&config, &cache).unwrap();
        let file = copy_path(&cache, &config);
        // Change the copy only: if the YAML were read, this value would not come back.
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace("127.0.0.1:7999", "127.0.0.1:1234")).unwrap();
        assert_eq!(
            load_cached(&config, &cache).unwrap().daemon.listen,
            "127.0.0.1:1234"
        );
    }

    #[test]
    fn an_edited_config_is_read_again_and_the_copy_refreshed() {
        let (_d, config, cache) = setup();
        load_cached(&config, &cache).unwrap();
        // A different size is a different identity, even within the same timestamp tick.
        std::fs::write(&config, SITE.replace("timeout_ms: 700", "timeout_ms: 4500")).unwrap();
        assert_eq!(
            load_cached(&config, &cache).unwrap().daemon.timeout_ms,
            4500
        );
        let text = std::fs::read_to_string(copy_path(&cache, &config)).unwrap();
        assert!(text.contains("4500"), "copy refreshed: {text}");
    }

    #[test]
    fn a_broken_or_foreign_copy_is_not_trusted() {
        let (_d, config, cache) = setup();
        load_cached(&config, &cache).unwrap();
        let file = copy_path(&cache, &config);
        std::fs::write(&file, b"{ not json").unwrap();
        assert_eq!(
            load_cached(&config, &cache).unwrap().daemon.listen,
            "127.0.0.1:7999"
        );
        // A copy others may write is read as absent, then replaced by a private one.
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("127.0.0.1:7999", "10.0.0.66:1");
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            load_cached(&config, &cache).unwrap().daemon.listen,
            "127.0.0.1:7999"
        );
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn without_a_usable_cache_dir_the_yaml_is_read_each_time() {
        let (d, config, _) = setup();
        let blocker = d.path().join("file");
        std::fs::write(&blocker, b"").unwrap();
        let cache = blocker.join("cache");
        assert_eq!(load_cached(&config, &cache).unwrap().daemon.timeout_ms, 700);
        assert!(!cache.exists());
    }

    #[test]
    fn a_bad_config_reports_the_full_load_error() {
        let (d, config, cache) = setup();
        std::fs::write(&config, "node_types: [\n").unwrap();
        let e = load_cached(&config, &cache).unwrap_err().to_string();
        assert!(e.contains("greenup.yaml"), "{e}");
        let missing = d.path().join("absent.yaml");
        let e = load_cached(&missing, &cache).unwrap_err().to_string();
        assert!(
            e.contains("absent.yaml") && e.contains("cannot read"),
            "{e}"
        );
        assert!(!copy_path(&cache, &config).exists());
    }
}
