//! Who is calling, and what they may do.
//!
//! TCP callers prove their uid with a MUNGE credential whose payload must be
//! the exact request body; Unix-socket callers are known by SO_PEERCRED.
//! Root and the SlurmUser may open, record and close; admins may read every
//! job; everyone else reads only their own.

pub use greenup::site::roles::Roles;
pub use greenup_host::users::{name_of, uid_of};
use greenup_proto::munge::{Munge, MungeFailure};
use greenup_proto::protocol::{ErrorCode, ErrorReply};

/// An authenticated caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// The caller's uid.
    pub uid: u32,
    /// The caller's gid.
    pub gid: u32,
}

/// Check a TCP request's credential against its body.
pub fn authenticate(
    munge: Option<&Munge>,
    cred: Option<&str>,
    body: &[u8],
) -> Result<Caller, ErrorReply> {
    let Some(cred) = cred else {
        return Err(ErrorReply::new(
            ErrorCode::CredMissing,
            "request has no \"cred\": every TCP request needs a MUNGE credential whose payload is the \"req\" object",
        ));
    };
    let Some(munge) = munge else {
        return Err(ErrorReply::new(
            ErrorCode::AuthUnavailable,
            "greenupd cannot check credentials: libmunge is not loaded",
        ));
    };
    let d = munge.decode(cred).map_err(|e| {
        let code = match e.kind {
            MungeFailure::Expired => ErrorCode::CredExpired,
            MungeFailure::Replayed => ErrorCode::CredReplayed,
            MungeFailure::Invalid | MungeFailure::Rewound | MungeFailure::BadArgument => {
                ErrorCode::CredInvalid
            }
            MungeFailure::Daemon | MungeFailure::Unavailable => ErrorCode::AuthUnavailable,
        };
        ErrorReply::new(code, format!("credential rejected: {}", e.message))
    })?;
    if d.payload != body {
        return Err(ErrorReply::new(
            ErrorCode::CredMismatch,
            "credential was made for a different request: its payload must equal the \"req\" object byte for byte",
        ));
    }
    Ok(Caller {
        uid: d.uid,
        gid: d.gid,
    })
}

/// Refuse unless `caller` may write.
pub fn require_write(roles: &Roles, caller: Caller, what: &str) -> Result<(), ErrorReply> {
    if roles.may_write(caller.uid) {
        Ok(())
    } else {
        Err(ErrorReply::new(
            ErrorCode::Forbidden,
            format!(
                "uid {} may not {what}: only root and the SlurmUser may",
                caller.uid
            ),
        ))
    }
}

/// Refuse unless `caller` may read a job owned by `owner`.
pub fn require_read(
    roles: &Roles,
    caller: Caller,
    owner: u32,
    job_id: u64,
) -> Result<(), ErrorReply> {
    if caller.uid == owner || roles.may_read_all(caller.uid) {
        Ok(())
    } else {
        Err(ErrorReply::new(
            ErrorCode::Forbidden,
            format!(
                "uid {} may not read job {job_id}: it belongs to another user",
                caller.uid
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_and_roles_apply() {
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(uid_of("4242"), Some(4242));
        assert_eq!(name_of(0).as_deref(), Some("root"));
        let roles = Roles::from_uids(Some(64030), [1500]);
        let c = |uid| Caller { uid, gid: uid };
        assert!(require_write(&roles, c(0), "open").is_ok());
        assert!(require_write(&roles, c(64030), "open").is_ok());
        let e = require_write(&roles, c(1000), "open jobs").unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert!(e.message.contains("uid 1000 may not open jobs"));
        assert!(require_read(&roles, c(1000), 1000, 5).is_ok());
        assert!(require_read(&roles, c(1500), 1000, 5).is_ok());
        assert_eq!(
            require_read(&roles, c(1001), 1000, 5).unwrap_err().code,
            ErrorCode::Forbidden
        );
    }

    #[test]
    fn missing_credential_is_named() {
        let e = authenticate(None, None, b"{}").unwrap_err();
        assert_eq!(e.code, ErrorCode::CredMissing);
    }
}
