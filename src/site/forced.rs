//! The policies budget levels force, checked against the policies the site loads.

use super::Site;
use crate::budget::Action;
use crate::policy::{Policy, PolicySet};

/// Add every level's `policy_file` to `policies`, and check every forced policy name is
/// one of them, so a level never names a policy greenupd cannot plan with.
pub fn add_forced(site: &Site, policies: &mut PolicySet) -> Result<(), String> {
    for b in &site.budgets {
        for l in &b.levels {
            match &l.action {
                Action::PolicyFile(path) => {
                    let p = Policy::load(path).map_err(|e| e.to_string())?;
                    policies.add(p)?;
                }
                Action::Policy(name) if policies.get(name).is_none() => {
                    return Err(format!(
                        "{}: budgets ({}): level {:.0}% forces policy {name}, which no policy directory defines (loaded: {})",
                        site.path.display(),
                        b.scope.label(),
                        l.at * 100.0,
                        policies.names().join(", ")
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}
