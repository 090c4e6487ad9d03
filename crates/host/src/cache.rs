//! A root-only JSON copy of what a program derives from a file (the plugin: a compute
//! node's part of the site config), kept beside the identity of the file it came from.
//! Each of Slurm's prolog, step and epilog processes is short-lived and new, and
//! parsing the whole YAML site config costs about half a millisecond in a fresh
//! process; reading the copy costs a few microseconds. An edited, replaced or touched
//! file has a new identity, so the next process reads it again and refreshes the copy.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The copy as stored: the derived value and the identity of the file it came from.
#[derive(Serialize, serde::Deserialize)]
struct Copy<T> {
    identity: String,
    settings: T,
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

/// The copy's file name: one per source file path.
fn copy_path(cache_dir: &Path, source: &Path) -> PathBuf {
    // FNV-1a: stable across builds, so an upgraded plugin finds the same file.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.as_os_str().as_encoded_bytes() {
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

fn read_copy<T: DeserializeOwned>(file: &Path, cache_dir: &Path, identity: &str) -> Option<T> {
    if !trusted(&std::fs::metadata(cache_dir).ok()?) || !trusted(&std::fs::metadata(file).ok()?) {
        return None;
    }
    let copy: Copy<T> = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    (copy.identity == identity).then_some(copy.settings)
}

/// What `load` derives from the file at `source`, through the copy in `cache_dir` when
/// it is current; otherwise `load` reads the file in full and the copy is refreshed. A
/// copy that cannot be written only costs the next process a full read, and a file that
/// cannot be read is `load`'s to name.
pub fn load_cached<T, E>(
    source: &Path,
    cache_dir: &Path,
    load: impl FnOnce(&Path) -> Result<T, E>,
) -> Result<T, E>
where
    T: Serialize + DeserializeOwned,
{
    let Ok(meta) = std::fs::metadata(source) else {
        // Let the full load name the problem.
        return load(source);
    };
    let id = identity(&meta);
    let file = copy_path(cache_dir, source);
    if let Some(settings) = read_copy(&file, cache_dir, &id) {
        return Ok(settings);
    }
    let copy = Copy {
        identity: id,
        settings: load(source)?,
    };
    if let Ok(json) = serde_json::to_vec(&copy) {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cache_dir);
        let _ = greenup_core::fs::write_atomic_volatile(&file, &json, 0o600);
    }
    Ok(copy.settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for the node's settings: two `key: value` lines of the file.
    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Settings {
        listen: String,
        timeout_ms: u64,
    }

    const SITE: &str = "daemon:\n  listen: 127.0.0.1:7999\n  timeout_ms: 700\n";

    /// The full load: every line read, an error naming the file for a bad one.
    fn full(path: &Path) -> Result<Settings, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(": "))
                .map(str::to_string)
                .ok_or(format!("{}: no {key}", path.display()))
        };
        Ok(Settings {
            listen: value("listen")?,
            timeout_ms: value("timeout_ms")?
                .parse()
                .map_err(|e| format!("{}: {e}", path.display()))?,
        })
    }

    fn load(config: &Path, cache: &Path) -> Result<Settings, String> {
        load_cached(config, cache, full)
    }

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
        let want = full(&config).unwrap();
        assert_eq!(want.listen, "127.0.0.1:7999");
        assert_eq!(load(&config, &cache).unwrap(), want);
        let file = copy_path(&cache, &config);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the copy is root-only");
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Read back from the copy: the same settings.
        assert_eq!(load(&config, &cache).unwrap(), want);
    }

    #[test]
    fn a_current_copy_is_used_without_reading_the_file() {
        let (_d, config, cache) = setup();
        load(&config, &cache).unwrap();
        let file = copy_path(&cache, &config);
        // Change the copy only: if the file were read, this value would not come back.
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace("127.0.0.1:7999", "127.0.0.1:1234")).unwrap();
        assert_eq!(load(&config, &cache).unwrap().listen, "127.0.0.1:1234");
    }

    #[test]
    fn an_edited_file_is_read_again_and_the_copy_refreshed() {
        let (_d, config, cache) = setup();
        load(&config, &cache).unwrap();
        // A different size is a different identity, even within the same timestamp tick.
        std::fs::write(&config, SITE.replace("timeout_ms: 700", "timeout_ms: 4500")).unwrap();
        assert_eq!(load(&config, &cache).unwrap().timeout_ms, 4500);
        let text = std::fs::read_to_string(copy_path(&cache, &config)).unwrap();
        assert!(text.contains("4500"), "copy refreshed: {text}");
    }

    #[test]
    fn a_broken_or_foreign_copy_is_not_trusted() {
        let (_d, config, cache) = setup();
        load(&config, &cache).unwrap();
        let file = copy_path(&cache, &config);
        std::fs::write(&file, b"{ not json").unwrap();
        assert_eq!(load(&config, &cache).unwrap().listen, "127.0.0.1:7999");
        // A copy others may write is read as absent, then replaced by a private one.
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("127.0.0.1:7999", "10.0.0.66:1");
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(load(&config, &cache).unwrap().listen, "127.0.0.1:7999");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn without_a_usable_cache_dir_the_file_is_read_each_time() {
        let (d, config, _) = setup();
        let blocker = d.path().join("file");
        std::fs::write(&blocker, b"").unwrap();
        let cache = blocker.join("cache");
        assert_eq!(load(&config, &cache).unwrap().timeout_ms, 700);
        assert!(!cache.exists());
    }

    #[test]
    fn a_bad_file_reports_the_full_load_error() {
        let (d, config, cache) = setup();
        std::fs::write(&config, "daemon: [\n").unwrap();
        let e = load(&config, &cache).unwrap_err();
        assert!(e.contains("greenup.yaml"), "{e}");
        let missing = d.path().join("absent.yaml");
        let e = load(&missing, &cache).unwrap_err();
        assert!(
            e.contains("absent.yaml") && e.contains("cannot read"),
            "{e}"
        );
        assert!(!copy_path(&cache, &config).exists());
    }
}
