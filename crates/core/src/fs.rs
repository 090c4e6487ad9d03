//! Files written and read as root where users may also write: atomic replacement,
//! private modes from the first byte, and reads that never follow a link.

use std::path::{Path, PathBuf};

/// Open `path` for reading without following a link, refusing anything but a directory
/// (`dir`) or a regular file, so that root reading where a user can write is never
/// turned onto another file (or held up by a FIFO). The error does not name the path:
/// the caller does.
pub fn open_no_link(path: &Path, dir: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let kind = if dir {
        libc::O_DIRECTORY
    } else {
        libc::O_NONBLOCK
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | kind)
        .open(path)?;
    let meta = f.metadata()?;
    if (dir && !meta.is_dir()) || (!dir && !meta.is_file()) {
        let what = if dir { "a directory" } else { "a regular file" };
        return Err(std::io::Error::other(format!("not {what}")));
    }
    Ok(f)
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o666)
}

/// [`write_atomic`], with the new file created with permission bits `mode` (before the umask),
/// so a private file (0600) is never readable by others, not even for a moment.
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    replace(path, bytes, mode, true)
}

/// [`write_atomic_mode`] without the fsync, for a file that a reboot clears anyway: the
/// run directory (`/run`, a tmpfs) and caches. The rename still shows a reader the old
/// file or the new one, never half of one, and a crash of the writer leaves either; only
/// a crash of the host could lose the new one, and that takes the run directory with it.
/// A job start writes several such files, and on a node whose `/run` is a disk each fsync
/// would cost a job start its time for nothing.
pub fn write_atomic_volatile(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    replace(path, bytes, mode, false)
}

/// A temporary file in `path`'s directory, written whole (and synced with `sync`), then
/// renamed over `path`.
fn replace(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A file a decision asks to be written whole, as plain data: the library says what to
/// write, and greenupd or a command writes it ([`write_files`]), so that the library
/// itself never touches a disk.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a FileWrite writes nothing until write_files writes it"]
pub struct FileWrite {
    /// Where the file goes; its directory is made if missing.
    pub path: PathBuf,
    /// Its whole content.
    pub bytes: Vec<u8>,
}

/// Write each of `writes` whole ([`write_atomic`]), in order, making each one's
/// directory first. The order is the caller's promise to readers: a file that makes
/// others count (a profile version) comes after the files it points at. Stops at the
/// first failure, whose message names its path.
pub fn write_files(writes: &[FileWrite]) -> std::io::Result<()> {
    let named = |path: &Path, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    };
    for w in writes {
        if let Some(dir) = w.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| named(dir, e))?;
        }
        write_atomic(&w.path, &w.bytes).map_err(|e| named(&w.path, e))?;
    }
    Ok(())
}

/// Remove `path`; one already gone counts as removed.
pub fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn write_files_makes_directories_writes_in_order_and_names_the_path_that_failed() {
        let dir = std::env::temp_dir().join(format!("greenup-fs-files-{}", std::process::id()));
        let a = dir.join("app").join("v2.fit.json");
        let b = dir.join("app").join("v2.yaml");
        write_files(&[
            FileWrite {
                path: a.clone(),
                bytes: b"{}".to_vec(),
            },
            FileWrite {
                path: b.clone(),
                bytes: b"name: app\n".to_vec(),
            },
        ])
        .unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"{}");
        assert_eq!(std::fs::read(&b).unwrap(), b"name: app\n");
        // A directory where a file's directory should be: the first write fails, so the
        // second, which readers would take as the first's, is never made.
        let blocked = dir.join("blocked");
        std::fs::write(&blocked, b"").unwrap();
        let c = dir.join("c.yaml");
        let e = write_files(&[
            FileWrite {
                path: blocked.join("f.json"),
                bytes: b"{}".to_vec(),
            },
            FileWrite {
                path: c.clone(),
                bytes: b"x".to_vec(),
            },
        ])
        .unwrap_err();
        assert!(
            e.to_string().starts_with(&blocked.display().to_string()),
            "{e}"
        );
        assert!(!c.exists());
        remove_if_present(&b).unwrap();
        remove_if_present(&b).unwrap();
        assert!(!b.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn both_writes_replace_a_file_whole_with_its_mode_and_leave_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("greenup-fs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, volatile) in [false, true].into_iter().enumerate() {
            let file = dir.join(format!("f{i}.json"));
            std::fs::write(&file, b"an older and longer content").unwrap();
            let write = if volatile {
                write_atomic_volatile
            } else {
                write_atomic_mode
            };
            write(&file, b"{}", 0o600).unwrap();
            assert_eq!(std::fs::read(&file).unwrap(), b"{}");
            // The mode is the new file's own (a rename), not the old one's 0644.
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "volatile: {volatile}");
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
        // A write into a directory that does not exist fails and creates nothing.
        let missing = dir.join("no-such-dir").join("f.json");
        assert!(write_atomic_volatile(&missing, b"{}", 0o600).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
