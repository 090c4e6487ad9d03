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
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
