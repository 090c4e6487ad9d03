//! Reading files and options that people write, with errors that point at the
//! exact file, line, column and key, and say what would be valid.

use std::fmt;
use std::path::{Path, PathBuf};

pub use serde_saphyr::Spanned;

/// Where a value came from: a file position, or a command-line option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A position inside a file the user or admin wrote (1-based line and column).
    File {
        /// The file.
        path: PathBuf,
        /// Line, from 1.
        line: u64,
        /// Column, from 1.
        column: u64,
    },
    /// A whole file, when no position is known (unreadable, empty).
    Path(PathBuf),
    /// A command-line or SPANK option, e.g. `--energy-cap`.
    Option(String),
    /// A field of a request sent to greenupd.
    Request(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line, column } => {
                write!(f, "{}:{}:{}", path.display(), line, column)
            }
            Origin::Path(p) => write!(f, "{}", p.display()),
            Origin::Option(o) => write!(f, "option {o}"),
            Origin::Request(r) => write!(f, "request field {r}"),
        }
    }
}

/// One clear line about bad input: where, which key, which value, and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {}", self.message())]
pub struct InputError {
    /// Where the bad input is.
    pub origin: Origin,
    /// The key or option name, if there is one.
    pub key: Option<String>,
    /// The offending value as written, if there is one.
    pub value: Option<String>,
    /// What went wrong and what would be valid.
    pub expected: String,
}

impl InputError {
    /// An error about `key` = `value` at `origin`; `expected` says what would be valid.
    pub fn new(
        origin: Origin,
        key: impl Into<String>,
        value: impl fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        InputError {
            origin,
            key: Some(key.into()),
            value: Some(value.to_string()),
            expected: expected.into(),
        }
    }

    /// An error about a whole file or option with no single key.
    pub fn bare(origin: Origin, expected: impl Into<String>) -> Self {
        InputError {
            origin,
            key: None,
            value: None,
            expected: expected.into(),
        }
    }

    /// An error about a spanned YAML value in `path`.
    pub fn at<T: fmt::Display>(
        path: &Path,
        span: &Spanned<T>,
        key: &str,
        expected: impl Into<String>,
    ) -> Self {
        Self::new(
            file_origin(path, &span.referenced),
            key,
            &span.value,
            expected,
        )
    }

    /// This error without anything quoted from the file: its position and key only.
    pub fn withheld(self) -> InputError {
        InputError {
            origin: self.origin,
            key: self.key,
            value: None,
            expected: "not valid (details withheld: not every user may read this file; \
                       check it with greenup as a user who can)"
                .into(),
        }
    }

    /// The message without the origin.
    pub fn message(&self) -> String {
        match (&self.key, &self.value) {
            (Some(k), Some(v)) => format!("{k}: invalid value '{v}': expected {}", self.expected),
            (Some(k), None) => format!("{k}: {}", self.expected),
            _ => self.expected.clone(),
        }
    }
}

/// The origin of a YAML location inside `path`.
pub fn file_origin(path: &Path, loc: &serde_saphyr::Location) -> Origin {
    if loc.line() == 0 {
        Origin::Path(path.to_path_buf())
    } else {
        Origin::File {
            path: path.to_path_buf(),
            line: loc.line(),
            column: loc.column(),
        }
    }
}

/// Parse YAML text that came from `path` into `T`, rejecting duplicate keys.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, InputError> {
    serde_saphyr::from_str::<T>(text).map_err(|e| {
        let origin = match e.location() {
            Some(loc) => file_origin(path, &loc),
            None => Origin::Path(path.to_path_buf()),
        };
        InputError::bare(origin, finite_rule(first_line(&e.to_string())))
    })
}

/// The parser refuses `.nan` and `.inf` before any key is checked; say it the way every
/// other bad value is said: the value, then what is valid.
fn finite_rule(msg: String) -> String {
    match msg
        .strip_prefix("non-finite float `")
        .and_then(|r| r.split_once('`'))
    {
        Some((value, _)) => format!("invalid value '{value}': expected a finite number"),
        None => msg,
    }
}

/// Read and parse a YAML file into `T` (see [`check_file`] for what errors may show).
pub fn load_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, InputError> {
    check_file(path, "file", |text| parse_yaml(path, text))
}

/// Read the file at `path` (`what` names it in a read error) and check its text with
/// `check`. greenupd and the plugin's prolog run as root or SlurmUser, and their errors
/// reach users (a job's stderr): when the file is not readable by every user, an error
/// keeps its position and key but never the file's content.
pub fn check_file<T>(
    path: &Path,
    what: &str,
    check: impl FnOnce(&str) -> Result<T, InputError>,
) -> Result<T, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        InputError::bare(
            Origin::Path(path.to_path_buf()),
            format!("cannot read {what}: {e}"),
        )
    })?;
    check(&text).map_err(|e| {
        if readable_by_all(path) {
            e
        } else {
            e.withheld()
        }
    })
}

/// Whether every user may read `path`: the file is world-readable and every directory
/// above it world-searchable.
pub fn readable_by_all(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode());
    if !mode(&real).is_ok_and(|m| m & 0o004 != 0) {
        return false;
    }
    real.ancestors()
        .skip(1)
        .all(|d| mode(d).is_ok_and(|m| m & 0o001 != 0))
}

/// `file` with every link resolved, when it lies inside `dir` (links resolved too); an
/// error naming both when it does not exist or resolves elsewhere. Files that admins put
/// in a directory of theirs are read as root: a link out of it (to /etc/shadow, say)
/// is refused rather than followed.
pub fn inside(dir: &Path, file: &Path) -> Result<PathBuf, InputError> {
    let origin = || Origin::Path(file.to_path_buf());
    let real_dir = std::fs::canonicalize(dir).map_err(|e| {
        InputError::bare(
            Origin::Path(dir.to_path_buf()),
            format!("cannot read directory: {e}"),
        )
    })?;
    let real = std::fs::canonicalize(file)
        .map_err(|e| InputError::bare(origin(), format!("cannot read file: {e}")))?;
    if !real.starts_with(&real_dir) || real == real_dir {
        return Err(InputError::bare(
            origin(),
            format!(
                "resolves outside {}: refused (expected a file in that directory, or a link to one there)",
                dir.display()
            ),
        ));
    }
    Ok(real)
}

/// serde-saphyr's messages can carry a caret snippet and repeat the position
/// (`error: line 4 column 13: ...`); greenup prints one line and gives the position once.
fn first_line(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim();
    let rest = line.strip_prefix("error: ").unwrap_or(line);
    let without_position = rest
        .strip_prefix("line ")
        .and_then(|r| r.split_once(" column "))
        .and_then(|(l, r)| {
            r.split_once(": ")
                .filter(|(c, _)| l.parse::<u64>().is_ok() && c.parse::<u64>().is_ok())
        })
        .map(|(_, msg)| msg);
    without_position.unwrap_or(rest).to_string()
}
