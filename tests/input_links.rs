//! The site's profile and policy directories: a link out of them is refused, never
//! followed, and an error about a file not every user may read quotes none of it.
//! greenupd and the prolog read these files as root; their errors reach users.

mod daemon_support;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use daemon_support::*;
use greenup::policy::PolicySet;
use greenup::profile::Profile;
use greenup_proto::protocol::Verdict;

/// A line shaped like /etc/shadow's, in a root-only file (0600) outside the directories.
const SECRET: &str = "root:$y$j9T$SECRETSALT$SECRETHASH:19700:0:99999:7:::\n";

fn secret_file(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("shadow");
    std::fs::write(&p, SECRET).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[test]
fn a_policy_directory_with_a_link_out_of_it_is_refused_without_its_content() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("policies");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("fast.yaml"), "name: fast\nobjective: min_time\n").unwrap();
    symlink(secret_file(t.path()), dir.join("evil.yaml")).unwrap();
    let e = PolicySet::load(std::slice::from_ref(&dir))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("evil.yaml") && e.contains("resolves outside"),
        "{e}"
    );
    assert!(!e.contains("SECRET"), "{e}");
    // A link to a policy inside the directory is that policy (a site may alias one).
    std::fs::remove_file(dir.join("evil.yaml")).unwrap();
    std::fs::create_dir(dir.join("shipped")).unwrap();
    std::fs::write(
        dir.join("shipped/slow.yaml"),
        "name: slow\nobjective: min_energy\n",
    )
    .unwrap();
    symlink("shipped/slow.yaml", dir.join("slow.yaml")).unwrap();
    let set = PolicySet::load(&[dir]).unwrap();
    assert_eq!(set.names(), vec!["fast", "slow"]);
}

#[test]
fn an_error_quotes_a_file_only_when_every_user_may_read_it() {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = t.path().join("app.yaml");
    std::fs::write(&p, SECRET).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Readable by all: the message may show what it read, as any user could see it anyway.
    let open = Profile::load(&p).unwrap_err().to_string();
    assert!(open.contains("SECRET"), "the control must quote: {open}");
    // Root-only: the same error keeps the file and position, but none of the content.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let closed = Profile::load(&p).unwrap_err().to_string();
    assert!(!closed.contains("SECRET"), "{closed}");
    assert!(closed.starts_with(&p.display().to_string()), "{closed}");
    assert!(closed.contains("details withheld"), "{closed}");
    assert_eq!(closed.lines().count(), 1);
    // So does a key's value that the file gave (here the profile's own name).
    std::fs::write(&p, "name: SECRET/NAME\nversion: 1\n").unwrap();
    let closed = Profile::load(&p).unwrap_err().to_string();
    assert!(!closed.contains("SECRET"), "{closed}");
    // A world-readable file in a directory others cannot enter is not public either.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let closed = Profile::load(&p).unwrap_err().to_string();
    assert!(!closed.contains("SECRET"), "{closed}");
}

#[test]
fn greenupd_never_sends_a_root_only_file_to_a_job() {
    let outside = tempfile::tempdir().unwrap();
    let secret = secret_file(outside.path());
    let profiles = tempfile::tempdir().unwrap();
    std::fs::set_permissions(profiles.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A link out of the site's profile directory, and a root-only file in it that
    // does not parse.
    symlink(&secret, profiles.path().join("shadow.yaml")).unwrap();
    std::fs::copy(&secret, profiles.path().join("broken.yaml")).unwrap();
    let dir = profiles.path().to_path_buf();
    let d = start(2, |_, site, _| site.profile_dir = dir);
    for (job, profile) in [(1, "shadow"), (2, "broken"), (3, "../../etc/shadow")] {
        let mut req = open_req(job, 0, 1);
        req.profile = Some(profile.into());
        req.policy = Some("min-energy".into());
        // A refused job is on record and its nodes get the refused decision; what they
        // read (the reason) and what the store keeps must quote nothing of the file.
        let e = match d.unix_client().open_job(req) {
            Ok(dec) => {
                assert_eq!(dec.verdict, Verdict::Refused, "{profile}: {dec:?}");
                dec.reason
            }
            Err(e) => e.to_string(),
        };
        assert!(!e.contains("SECRET"), "{profile}: {e}");
        if let Ok(rec) = d.unix_client().get_job(job) {
            let stored = serde_json::to_string(&rec).unwrap();
            assert!(!stored.contains("SECRET"), "{profile}: {stored}");
        }
        match profile {
            "shadow" => assert!(e.contains("resolves outside"), "{e}"),
            "broken" => assert!(e.contains("details withheld"), "{e}"),
            _ => assert!(e.contains("invalid value '../../etc/shadow'"), "{e}"),
        }
    }
}
