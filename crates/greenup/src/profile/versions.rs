//! Refined profile versions, kept beside greenupd's store and never in the
//! admin's profile directory: `<state>/profiles/NAME/vN.yaml`, plus a `pinned`
//! file holding the version an admin pinned.
//!
//! The admin's file is version 1 (or whatever it says); each refinement adds the
//! next number. The version in use is the pinned one if any, else the newest. This
//! module reads them and says what a new version or a pin writes; greenupd and the CLI
//! write it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use greenup_core::fs::FileWrite;

use crate::input::{InputError, Origin};

use super::ProfileFile;

/// The refined versions of every application at one site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    root: PathBuf,
}

/// A refined version not yet stored: its number and the files that store it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a new version is stored only once its writes are written"]
pub struct NewVersion {
    /// The version number the files give it.
    pub version: u64,
    /// Its files, in the order they must be written.
    pub writes: Vec<FileWrite>,
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
        format!("cannot read: {e}"),
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

    /// A refined profile as the next version: its number (one more than both the file's
    /// own version and every stored one), and the files that store it with the outcomes
    /// it was fitted from and its residual, for greenupd to write in the order given
    /// ([`greenup_core::fs::write_files`]): the fit first, since the profile's file is what
    /// makes the version exist.
    pub fn next(&self, mut file: ProfileFile, fit: &Fit) -> Result<NewVersion, InputError> {
        let name = file.name.value.to_string();
        // A file that reached here passed Profile::from_file, so its version is a number.
        let own = match file.version.value {
            super::Param::Number(x) => x as u64,
            _ => 0,
        };
        let dir = self.dir(&name)?;
        let version = self
            .list(&name)?
            .last()
            .copied()
            .unwrap_or(0)
            .max(own.saturating_sub(1))
            + 1;
        file.version = super::unspanned(super::Param::Number(version as f64));
        let text = serde_saphyr::to_string(&file).map_err(|e| {
            InputError::bare(
                Origin::Path(dir.clone()),
                format!("cannot write profile: {e}"),
            )
        })?;
        let fit_text = serde_json::to_string(fit).unwrap_or_default();
        Ok(NewVersion {
            version,
            writes: vec![
                FileWrite {
                    path: dir.join(format!("v{version}.fit.json")),
                    bytes: fit_text.into_bytes(),
                },
                FileWrite {
                    path: dir.join(format!("v{version}.yaml")),
                    bytes: text.into_bytes(),
                },
            ],
        })
    }

    /// How a stored version was fitted; `None` for the admin's file or an unreadable record.
    pub fn fit(&self, name: &str, version: u64) -> Option<Fit> {
        let path = self.dir(name).ok()?.join(format!("v{version}.fit.json"));
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    }

    /// The file that pins `version` of `name`, for the caller to write; `admin_version`
    /// (the admin file's own) is always allowed, any other must be stored.
    pub fn pin(
        &self,
        name: &str,
        version: u64,
        admin_version: u64,
    ) -> Result<FileWrite, InputError> {
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
        Ok(FileWrite {
            path: self.pin_path(name)?,
            bytes: format!("{version}\n").into_bytes(),
        })
    }

    /// The file holding `name`'s pin: removing it unpins, so the newest version is used.
    pub fn pin_path(&self, name: &str) -> Result<PathBuf, InputError> {
        Ok(self.dir(name)?.join("pinned"))
    }

    /// The pinned version of `name`, if an admin pinned one.
    pub fn pinned(&self, name: &str) -> Result<Option<u64>, InputError> {
        let path = self.pin_path(name)?;
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
