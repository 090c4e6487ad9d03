//! The power cap held by Slurm's queue and the nodes' hardware (`power.enforce: queue`,
//! or `hres` where Slurm's hierarchical resources count it per node):
//! how many watts a job holds as Slurm licenses, what Slurm granted a job, and each
//! node's share of the grant, which the node's RAPL long-term limit then holds.
//!
//! The one home for these rules: slurm.conf's `Licenses=` line and the data the
//! job_submit script reads are generated from them ([`slurm`]), PrologSlurmctld reads a
//! grant with [`granted_w`], and greenupd shares it among the nodes with [`grant_over`].

pub mod give_back;
pub mod slurm;
pub mod split;

use greenup_core::quantity::{Ghz, Watts};

use crate::site::{PowerSettings, Site};

pub use greenup_wire::power::Grant;

/// What a node would draw running flat out at `freq_ghz` with its GPUs at `gpu_mhz` (each
/// its top one when None), by its type's power model ([`split::node_model`]): the weight
/// its share of a grant is in proportion to, so that a plan's slower nodes are not held
/// to a fast node's share. None for a node the site does not type.
pub fn node_weight_w(
    site: &Site,
    node: &str,
    freq_ghz: Option<Ghz>,
    gpu_mhz: Option<u32>,
) -> Option<Watts> {
    split::node_model(site, node, freq_ghz, gpu_mhz).map(|m| m.total_w())
}

/// The most `nodes` may draw: each node's CPUs at their top frequency and its GPUs at
/// their top clock, fully busy (nothing for a node the site does not type). What a job
/// that runs unplanned is held at, and what a run at f_max must fit under.
pub fn max_power_w(site: &Site, nodes: &[String]) -> Watts {
    nodes
        .iter()
        .filter_map(|n| node_weight_w(site, n, None, None))
        .sum()
}

/// A grant of `granted_w` over `nodes` (each with the frequency and GPU clock it will
/// run at, None for its top ones). None when a node is untyped: its share could not
/// be weighed.
pub fn grant_over<'a>(
    site: &Site,
    granted_w: Watts,
    nodes: impl IntoIterator<Item = (&'a str, Option<Ghz>, Option<u32>)>,
) -> Option<Grant> {
    let mut weight_w = Watts(0.0);
    for (n, f, g) in nodes {
        weight_w += node_weight_w(site, n, f, g)?;
    }
    let ok = granted_w.0.is_finite() && granted_w.0 >= 0.0 && weight_w.0 > 0.0;
    ok.then_some(Grant {
        granted_w,
        weight_w,
        node_w: None,
    })
}

/// `grant` as the site's mode holds it on the job's `allocated` nodes: under
/// `enforce: hres` Slurm counted the same watts on each node, in whichever rack it sits,
/// so every node's share is an equal part of the grant, whatever its weight (a heavier
/// node given more would draw past what its rack counted for it).
pub fn held(power: &PowerSettings, grant: Grant, allocated: usize) -> Grant {
    match power.enforce {
        crate::site::PowerEnforce::Hres if allocated > 0 => Grant {
            node_w: Some(grant.granted_w / allocated as f64),
            ..grant
        },
        _ => grant,
    }
}

/// A license of greenup's whose count is not watts, so the job's grant is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("license '{item}': the count '{count}' is not a whole number of watts")]
pub struct LicenseCountError {
    /// The license as Slurm lists it (`name:count`).
    pub item: String,
    /// The count as written.
    pub count: String,
}

/// The watts a job on `nodes` nodes was granted, from its licenses as Slurm lists them
/// (`SLURM_JOB_LICENSES`: `name:count` or `name*count`, comma-separated; a remote
/// license is `name@server`): the smaller of the site license's and the partition's
/// counts, those being the caps the job must fit under. Under `enforce: hres` the site's
/// count is a hierarchical resource's, per node, so it is multiplied by `nodes`. Ok(None)
/// when it holds none of greenup's licenses (a job submitted before the site turned the
/// queue on).
pub fn granted_w(
    power: &PowerSettings,
    partition: Option<&str>,
    licenses: &str,
    nodes: usize,
) -> Result<Option<Watts>, LicenseCountError> {
    let per_node = power.enforce == crate::site::PowerEnforce::Hres;
    let site_license = power.license_for(None);
    let part_license = partition.map(|p| power.license_for(Some(p)));
    let mut granted: Option<Watts> = None;
    for item in licenses.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, count) = match item.split_once([':', '*']) {
            Some((n, c)) => (n, c),
            None => (item, "1"),
        };
        let name = name.split('@').next().unwrap_or(name);
        if name != site_license && Some(name) != part_license.as_deref() {
            continue;
        }
        let count: u64 = count.trim().parse().map_err(|_| LicenseCountError {
            item: item.to_string(),
            count: count.to_string(),
        })?;
        let w = Watts(if per_node && name == site_license {
            count as f64 * nodes as f64
        } else {
            count as f64
        });
        granted = Some(granted.map_or(w, |g| g.min(w)));
    }
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
        crate::site::example()
    }

    #[test]
    fn a_grant_is_the_smaller_of_the_site_and_partition_licenses() {
        let p = PowerSettings::default();
        let g = |l: &str| granted_w(&p, Some("debug"), l, 3);
        assert_eq!(
            g("greenup_w:640,greenup_w_debug:600"),
            Ok(Some(Watts(600.0)))
        );
        assert_eq!(g("matlab:1,greenup_w*700"), Ok(Some(Watts(700.0))));
        assert_eq!(g("greenup_w@db:300"), Ok(Some(Watts(300.0))));
        assert_eq!(g("greenup_w_other:5,matlab:2"), Ok(None));
        assert_eq!(g(""), Ok(None));
        assert!(
            g("greenup_w:lots")
                .unwrap_err()
                .to_string()
                .contains("'lots'")
        );
        assert_eq!(granted_w(&p, None, "greenup_w_debug:5", 3), Ok(None));
    }

    #[test]
    fn under_hres_the_site_count_is_per_node_and_every_node_shares_alike() {
        let p = PowerSettings {
            enforce: crate::site::PowerEnforce::Hres,
            ..PowerSettings::default()
        };
        // 3 nodes holding 60 W each of the resource, the flat partition license 150 W.
        let g = |l: &str, n| granted_w(&p, Some("debug"), l, n);
        assert_eq!(g("greenup_w:60", 3), Ok(Some(Watts(180.0))));
        assert_eq!(
            g("greenup_w:60,greenup_w_debug:150", 3),
            Ok(Some(Watts(150.0)))
        );
        assert_eq!(g("greenup_w_debug:150", 3), Ok(Some(Watts(150.0))));
        // Fast n1 weighs 160 W at its top, n2 at 1.4 GHz far less: under hres each still
        // holds a third of 150 W, as its rack counted.
        let site = site();
        let nodes = [("n1", None, None), ("n2", Some(Ghz(1.4)), None)];
        let grant = grant_over(&site, Watts(150.0), nodes).unwrap();
        let h = held(&p, grant, 3);
        assert_eq!(h.share_w(Watts(160.0)), Watts(50.0));
        assert_eq!(h.share_w(Watts(1.0)), Watts(50.0));
        let q = PowerSettings::default();
        assert_eq!(held(&q, grant, 3), grant);
        assert_eq!(
            granted_w(&q, Some("debug"), "greenup_w:60", 3),
            Ok(Some(Watts(60.0)))
        );
    }

    #[test]
    fn shares_follow_each_nodes_power_at_its_frequency_and_sum_to_the_grant() {
        let site = site();
        // etc/greenup.yaml: n[1-2] fast (120 W dynamic at 3.0 GHz, cube law, 40 W static).
        let fast = |f: f64| 120.0 * (f / 3.0_f64).powi(3) + 40.0;
        let nodes = [("n1", None, None), ("n2", Some(Ghz(1.4)), None)];
        let g = grant_over(&site, Watts(100.0), nodes).unwrap();
        let (w1, w2) = (fast(3.0), fast(1.4));
        assert!((g.weight_w.0 - (w1 + w2)).abs() < 1e-9, "{g:?}");
        let s1 = g.share_w(node_weight_w(&site, "n1", None, None).unwrap());
        let s2 = g.share_w(node_weight_w(&site, "n2", Some(Ghz(1.4)), None).unwrap());
        assert!(((s1 + s2).0 - 100.0).abs() < 1e-9);
        assert!((s1 / s2 - w1 / w2).abs() < 1e-9);
        assert!(grant_over(&site, Watts(100.0), [("nowhere", None, None)]).is_none());
    }
}
