//! The policies budget levels force, checked against the policies the site loads.

use std::path::PathBuf;

use super::Site;
use crate::budget::Action;
use crate::input::InputError;
use crate::policy::{DuplicatePolicyError, Policy, PolicySet};

/// Why the policies the budget levels force cannot be loaded, so greenupd refuses the
/// site config rather than meeting the problem when a level is reached.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForcedPolicyError {
    /// A level's `policy_file` is unreadable or invalid.
    #[error(transparent)]
    Load(#[from] InputError),
    /// A level's `policy_file` gives a name another policy file already gives.
    #[error(transparent)]
    Duplicate(#[from] DuplicatePolicyError),
    /// A level forces a policy by a name no loaded policy has.
    #[error(
        "{}: budgets ({scope}): level {percent:.0}% forces policy {name}, which no policy directory defines (loaded: {loaded})",
        site.display()
    )]
    Undefined {
        /// The site config.
        site: PathBuf,
        /// The budget's scope, as the config writes it.
        scope: String,
        /// The level, in percent of the budget.
        percent: f64,
        /// The policy name the level forces.
        name: String,
        /// The names that are loaded, comma-separated.
        loaded: String,
    },
}

/// Add every level's `policy_file` to `policies`, and check every forced policy name is
/// one of them, so a level never names a policy greenupd cannot plan with.
pub fn add_forced(site: &Site, policies: &mut PolicySet) -> Result<(), ForcedPolicyError> {
    for b in &site.budgets {
        for l in &b.levels {
            match &l.action {
                Action::PolicyFile(path) => {
                    let p = Policy::load(path)?;
                    policies.add(p)?;
                }
                Action::Policy(name) if policies.get(name).is_none() => {
                    return Err(ForcedPolicyError::Undefined {
                        site: site.path.clone(),
                        scope: b.scope.label(),
                        percent: l.at * 100.0,
                        name: name.clone(),
                        loaded: policies.names().join(", "),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(())
}
