//! The one rule for the names people give greenup: profile (application), policy, node
//! type and partition names, Slurm node names, and the site's user names. Every name
//! that becomes part of a file name (`NAME.yaml`, a node's files under the run and spool
//! directories) is checked here, so none can reach outside its directory.

/// The longest profile, policy, node type or partition name.
pub const MAX_NAME: usize = 64;

/// The longest node name: a DNS name's 253 characters, with room to spare.
pub const MAX_NODE: usize = 255;

/// The longest user name (Linux's LOGIN_NAME_MAX is 32 with the final NUL).
pub const MAX_USER: usize = 32;

/// What a valid name is made of, for error messages ("a policy name of ...").
pub const NAME_RULE: &str = "1 to 64 letters, digits, '-', '_' or '.', not starting with '.'";

/// What a valid node name is made of, for error messages.
pub const NODE_RULE: &str = "1 to 255 letters, digits, '-', '_' or '.', not starting with '.'";

/// Letters, digits, '-', '_' and '.', 1 to `max` of them, not starting with '.' (so
/// never `.`, `..` or a hidden file).
fn plain(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `s` is a valid profile (application), policy, node type or partition name.
pub fn is_name(s: &str) -> bool {
    plain(s, MAX_NAME)
}

/// Whether `s` is a valid Slurm node name.
pub fn is_node(s: &str) -> bool {
    plain(s, MAX_NODE)
}

/// Whether `s` is a valid user name (the site's SlurmUser and admins).
pub fn is_user(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_USER
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_a_directory_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "../../etc/shadow",
            "a/b",
            "a b",
            "a\nb",
            "ä",
            "a\0",
        ] {
            assert!(!is_name(bad), "{bad:?}");
            assert!(!is_node(bad), "{bad:?}");
        }
        for good in ["md", "min-energy", "lammps_2.1", "a.b", "0"] {
            assert!(is_name(good), "{good}");
        }
        assert!(is_name(&"a".repeat(MAX_NAME)));
        assert!(!is_name(&"a".repeat(MAX_NAME + 1)));
        assert!(is_node(&"n".repeat(MAX_NODE)));
        assert!(!is_node(&"n".repeat(MAX_NODE + 1)));
        assert!(is_user("slurm") && is_user("svc$") && !is_user("a/b") && !is_user(""));
        assert!(!is_user(&"u".repeat(MAX_USER + 1)));
    }
}
