//! The plugin's plugstack.conf arguments: `config=FILE`, `site_cache=DIR` (where the
//! nodes keep their copy of the site config's node settings), `meter=PATH` (the greenup
//! command that counts a running job's energy, or `none`) and, for test clusters,
//! `sysfs_root=DIR` where `%n` stands for the node's name.

use std::path::PathBuf;

/// Where the site config lives unless plugstack.conf says otherwise.
pub const DEFAULT_CONFIG: &str = "/etc/slurm/greenup.yaml";

/// The greenup command each node runs to count a job's energy while it runs.
pub const DEFAULT_METER: &str = "/usr/bin/greenup";

const EXPECTED: &str =
    "expected config=FILE, site_cache=DIR, meter=/ABSOLUTE/PATH or meter=none, or sysfs_root=DIR";

/// A plugstack.conf argument the plugin does not take; the message lists the ones it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugstack.conf: invalid argument '{word}': {}", EXPECTED)]
pub struct ArgsError {
    /// The argument as written.
    pub word: String,
}

/// The arguments given on the plugin's plugstack.conf line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The site config file.
    pub config: PathBuf,
    /// A sysfs root overriding the site config's, with `%n` for the node name (test clusters).
    pub sysfs_root: Option<String>,
    /// Where a node keeps its root-only copy of the site config's node settings.
    pub site_cache: PathBuf,
    /// The `greenup` command that counts a job's energy during the job and does the
    /// prolog's GPU work; None: energy only at the job's start and end, and the prolog
    /// does its GPUs itself.
    pub meter: Option<PathBuf>,
}

impl Args {
    /// Parse `key=value` words; an unknown key or empty value is an error naming it.
    pub fn parse<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<Args, ArgsError> {
        let mut args = Args {
            config: PathBuf::from(DEFAULT_CONFIG),
            sysfs_root: None,
            site_cache: PathBuf::from(greenup::site::node::DEFAULT_CACHE_DIR),
            meter: Some(PathBuf::from(DEFAULT_METER)),
        };
        for w in words {
            match w.split_once('=') {
                Some(("config", v)) if !v.is_empty() => args.config = PathBuf::from(v),
                Some(("sysfs_root", v)) if !v.is_empty() => args.sysfs_root = Some(v.to_string()),
                Some(("site_cache", v)) if !v.is_empty() => args.site_cache = PathBuf::from(v),
                Some(("meter", "none")) => args.meter = None,
                // Absolute: the prolog runs it with an empty environment, so no PATH search.
                Some(("meter", v)) if v.starts_with('/') => args.meter = Some(PathBuf::from(v)),
                _ => {
                    return Err(ArgsError {
                        word: w.to_string(),
                    });
                }
            }
        }
        Ok(args)
    }

    /// The sysfs root for `node`, if plugstack.conf overrides the site's.
    pub fn sysfs_root_for(&self, node: &str) -> Option<PathBuf> {
        self.sysfs_root
            .as_ref()
            .map(|s| PathBuf::from(s.replace("%n", node)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_overrides_and_node_substitution() {
        let a = Args::parse([]).unwrap();
        assert_eq!(a.config, PathBuf::from(DEFAULT_CONFIG));
        assert_eq!(a.site_cache, PathBuf::from("/run/greenup/site"));
        assert_eq!(a.meter, Some(PathBuf::from("/usr/bin/greenup")));
        let a = Args::parse([
            "config=/tmp/g.yaml",
            "sysfs_root=/srv/sys/%n",
            "site_cache=/tmp/c",
            "meter=/opt/greenup/bin/greenup",
        ])
        .unwrap();
        assert_eq!(a.config, PathBuf::from("/tmp/g.yaml"));
        assert_eq!(a.site_cache, PathBuf::from("/tmp/c"));
        assert_eq!(a.meter, Some(PathBuf::from("/opt/greenup/bin/greenup")));
        assert_eq!(Args::parse(["meter=none"]).unwrap().meter, None);
        assert_eq!(a.sysfs_root_for("n3"), Some(PathBuf::from("/srv/sys/n3")));
    }

    #[test]
    fn unknown_or_empty_arguments_name_themselves() {
        let expected = "expected config=FILE, site_cache=DIR, meter=/ABSOLUTE/PATH or meter=none, or sysfs_root=DIR";
        assert_eq!(
            Args::parse(["sysfs=/x"]).unwrap_err().to_string(),
            format!("plugstack.conf: invalid argument 'sysfs=/x': {expected}")
        );
        assert!(Args::parse(["config="]).is_err());
        assert_eq!(
            Args::parse(["site_cache="]).unwrap_err().to_string(),
            format!("plugstack.conf: invalid argument 'site_cache=': {expected}")
        );
        assert_eq!(
            Args::parse(["meter=greenup"]).unwrap_err().to_string(),
            format!("plugstack.conf: invalid argument 'meter=greenup': {expected}")
        );
        assert!(Args::parse(["meter="]).is_err());
    }
}
