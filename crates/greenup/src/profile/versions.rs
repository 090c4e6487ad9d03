//! Refined profile versions, kept beside greenupd's store and never in the
//! admin's profile directory: `<state>/profiles/NAME/vN.yaml`, plus a `pinned`
//! file holding the version an admin pinned.
//!
//! The admin's file is version 1 (or whatever it says); each refinement adds the
//! next number. The version in use is the pinned one if any, else the newest.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::input::{InputError, Origin, write_atomic};

use super::ProfileFile;

/// The refined versions of every application at one site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    root: PathBuf,
}

/// How a refined version was fitted: what the report shows as its confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Outcomes it was fitted from.
    pub samples: u32,
    /// Relative RMS residual of the fit.
    pub residual: f64,
    /// What was refitted from what, or why a term was kept (iso_energy says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Which file a decision should use for an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InUse {
    /// The admin's profile file, as written.
    Admin,
    /// A refined version's file.
    Refined {
        /// The version number.
        version: u64,
        /// Its file.
        path: PathBuf,
    },
}

fn io_err(path: &Path, e: std::io::Error) -> InputError {
    InputError::bare(
        Origin::Path(path.to_path_buf()),
        format!("cannot read or write: {e}"),
    )
}

impl Versions {
    /// Versions under `root` (e.g. `/var/lib/greenup/profiles`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Versions { root: root.into() }
    }

    /// The site's versions directory: `profiles/` beside greenupd's store file.
    pub fn for_store(store: &Path) -> Self {
        let dir = store
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Versions::new(dir.join("profiles"))
    }

    fn dir(&self, name: &str) -> Result<PathBuf, InputError> {
        if crate::names::is_name(name) {
            Ok(self.root.join(name))
        } else {
            Err(InputError::new(
                Origin::Option("NAME".into()),
                "profile name",
                name,
                format!("a profile name of {}", crate::names::NAME_RULE),
            ))
        }
    }

    /// The directory every application's refined versions are kept under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Refined versions of `name`, ascending.
    pub fn list(&self, name: &str) -> Result<Vec<u64>, InputError> {
        let dir = self.dir(name)?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&dir, e)),
        };
        let mut v: Vec<u64> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.strip_prefix('v')?.strip_suffix(".yaml")?.parse().ok()
            })
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// Path of a refined version's file.
    pub fn path(&self, name: &str, version: u64) -> Result<PathBuf, InputError> {
        Ok(self.dir(name)?.join(format!("v{version}.yaml")))
    }

    /// Store a refined profile as the next version (its number is set here: one more than
    /// both the file's own version and every stored one), with the outcomes it was fitted
    /// from and its residual. Returns that version.
    pub fn save(&self, mut file: ProfileFile, fit: Fit) -> Result<u64, InputError> {
        let name = file.name.value.to_string();
        // A file that reached here passed Profile::from_file, so its version is a number.
        let own = match file.version.value {
            super::Param::Number(x) => x as u64,
            _ => 0,
        };
        let dir = self.dir(&name)?;
        let next = self
            .list(&name)?
            .last()
            .copied()
            .unwrap_or(0)
            .max(own.saturating_sub(1))
            + 1;
        file.version = super::unspanned(super::Param::Number(next as f64));
        let text = serde_saphyr::to_string(&file).map_err(|e| {
            InputError::bare(
                Origin::Path(dir.clone()),
                format!("cannot write profile: {e}"),
            )
        })?;
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let path = dir.join(format!("v{next}.yaml"));
        let fit_path = dir.join(format!("v{next}.fit.json"));
        let fit_text = serde_json::to_string(&fit).unwrap_or_default();
        write_atomic(&fit_path, fit_text.as_bytes()).map_err(|e| io_err(&fit_path, e))?;
        write_atomic(&path, text.as_bytes()).map_err(|e| io_err(&path, e))?;
        Ok(next)
    }

    /// How a stored version was fitted; `None` for the admin's file or an unreadable record.
    pub fn fit(&self, name: &str, version: u64) -> Option<Fit> {
        let path = self.dir(name).ok()?.join(format!("v{version}.fit.json"));
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    }

    /// Pin `version` of `name`; `admin_version` (the admin file's own) is always allowed.
    pub fn pin(&self, name: &str, version: u64, admin_version: u64) -> Result<(), InputError> {
        let known = self.list(name)?;
        if version != admin_version && !known.contains(&version) {
            let mut all = vec![admin_version];
            all.extend(known);
            let all: Vec<String> = all.iter().map(u64::to_string).collect();
            return Err(InputError::new(
                Origin::Option("VERSION".into()),
                "version",
                version,
                format!("one of {}", all.join(", ")),
            ));
        }
        let dir = self.dir(name)?;
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let path = dir.join("pinned");
        write_atomic(&path, format!("{version}\n").as_bytes()).map_err(|e| io_err(&path, e))
    }

    /// Remove the pin of `name`, so the newest version is used again.
    pub fn unpin(&self, name: &str) -> Result<(), InputError> {
        let path = self.dir(name)?.join("pinned");
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&path, e)),
        }
    }

    /// The pinned version of `name`, if an admin pinned one.
    pub fn pinned(&self, name: &str) -> Result<Option<u64>, InputError> {
        let path = self.dir(name)?.join("pinned");
        match std::fs::read_to_string(&path) {
            Ok(t) => t.trim().parse().map(Some).map_err(|_| {
                InputError::new(
                    Origin::Path(path.clone()),
                    "pinned",
                    t.trim(),
                    "a version number",
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path, e)),
        }
    }

    /// The file decisions for `name` should use: the pinned version, else the newest refined
    /// one, else the admin's. A pin of the admin's own version selects the admin's file.
    pub fn in_use(&self, name: &str) -> Result<InUse, InputError> {
        let known = self.list(name)?;
        let pick = match self.pinned(name)? {
            Some(v) => known.contains(&v).then_some(v),
            None => known.last().copied(),
        };
        Ok(match pick {
            Some(version) => InUse::Refined {
                version,
                path: self.path(name, version)?,
            },
            None => InUse::Admin,
        })
    }
}
