//! Files written and read as root where users may also write: atomic replacement,
//! private modes from the first byte, and reads that never follow a link.

use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
