//! Small helpers for reading and writing sysfs attribute files under an injectable root.

use std::path::{Path, PathBuf};

/// A sysfs read or write that failed, or a value that did not parse.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    /// The file could not be read or written.
    #[error("{path}: {op} failed: {source}")]
    Io {
        /// The attribute file.
        path: PathBuf,
        /// `read` or `write`.
        op: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file held something other than what the kernel writes there.
    #[error("{path}: unexpected content '{value}': expected {expected}")]
    Parse {
        /// The attribute file.
        path: PathBuf,
        /// What it held.
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
}

/// Read an attribute file, without its trailing newline.
pub fn read(path: &Path) -> Result<String, SysfsError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| SysfsError::Io {
            path: path.to_path_buf(),
            op: "read",
            source,
        })
}

/// Read an attribute file holding one unsigned integer.
pub fn read_u64(path: &Path) -> Result<u64, SysfsError> {
    let value = read(path)?;
    value.parse::<u64>().map_err(|_| SysfsError::Parse {
        path: path.to_path_buf(),
        value,
        expected: "an unsigned integer",
    })
}

/// Read an attribute file holding a whitespace-separated list of words.
pub fn read_words(path: &Path) -> Result<Vec<String>, SysfsError> {
    Ok(read(path)?.split_whitespace().map(str::to_string).collect())
}

/// Write one value to an attribute file the way the kernel expects (a single write, no temp file).
pub fn write(path: &Path, value: &str) -> Result<(), SysfsError> {
    std::fs::write(path, format!("{value}\n")).map_err(|source| SysfsError::Io {
        path: path.to_path_buf(),
        op: "write",
        source,
    })
}

/// Parse a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(path: &Path, text: &str) -> Result<Vec<u32>, SysfsError> {
    let bad = || SysfsError::Parse {
        path: path.to_path_buf(),
        value: text.to_string(),
        expected: "a CPU list like 0-3,8",
    };
    let mut cpus = Vec::new();
    for part in text
        .split([',', ' '])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (
                    a.parse::<u32>().map_err(|_| bad())?,
                    b.parse::<u32>().map_err(|_| bad())?,
                );
                if a > b || b - a > 65_536 {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse::<u32>().map_err(|_| bad())?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_expand_ranges_and_singles() {
        let p = Path::new("x");
        assert_eq!(
            parse_cpu_list(p, "0-3,8,10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list(p, "5").unwrap(), vec![5]);
        assert_eq!(parse_cpu_list(p, "2 0").unwrap(), vec![0, 2]);
        assert!(parse_cpu_list(p, "3-1").is_err());
        assert!(parse_cpu_list(p, "a").is_err());
    }
}
