//! What Slurm needs to hold the caps in its queue, generated from the site config so the
//! caps live in one file: slurm.conf's `Licenses=` line (one license per watt of each
//! cap, less the reserve), under `power.enforce: hres` the layers of `resources.yaml`
//! (the site cap over every node, each rack's over its nodes, counted per node), and
//! the table etc/job_submit.lua reads to size each job's request
//! (`greenup site licenses`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use greenup_core::quantity::{Ghz, Watts};

use crate::site::{PowerEnforce, Site};

/// The watts one node of a pool draws (its GPUs included): at its type's lowest frequency
/// and at its top one, the largest over the pool's node types (a job's nodes are not known at submission).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeBounds {
    /// The most a node of the pool draws at its lowest frequency, flat out.
    pub min_w: Watts,
    /// The most a node of the pool draws at its top frequency, flat out.
    pub max_w: Watts,
}

/// The bounds of the nodes `names` (None when none of them is typed).
pub fn bounds(site: &Site, names: &[String]) -> Option<NodeBounds> {
    let mut out: Option<NodeBounds> = None;
    for (n, t) in names
        .iter()
        .filter_map(|n| site.node_type_of(n).map(|t| (n, t)))
    {
        // A GPU node's GPUs count too: at their lowest clock with its lowest frequency.
        let at = |f: f64, mhz: Option<u32>| {
            super::split::node_model(site, n, Some(Ghz(f)), mhz).map_or(Watts(0.0), |m| m.total_w())
        };
        let gpu_min_mhz = site
            .nodes
            .get(n)
            .and_then(|t| site.gpu_types.get(t))
            .and_then(|g| g.clocks_mhz)
            .map(|(lo, _)| lo);
        let (lo, hi) = (at(t.fmin(), gpu_min_mhz), at(t.fmax(), None));
        out = Some(match out {
            Some(b) => NodeBounds {
                min_w: Watts(b.min_w.0.max(lo.0)),
                max_w: Watts(b.max_w.0.max(hi.0)),
            },
            None => NodeBounds {
                min_w: lo,
                max_w: hi,
            },
        });
    }
    out
}

/// The flat licenses the site's caps need in Slurm, by name: the site cap's (unless
/// `enforce: hres` counts it as a hierarchical resource) and each capped partition's,
/// each counting the cap's grantable watts (one license a watt).
pub fn licenses(site: &Site) -> BTreeMap<String, u64> {
    let p = &site.power;
    let mut out = BTreeMap::new();
    if let Some(cap) = site.power_cap_w.filter(|_| p.enforce != PowerEnforce::Hres) {
        out.insert(p.license_for(None), p.grantable_w(cap));
    }
    for (name, part) in &site.partitions {
        if let Some(cap) = part.power_cap_w {
            out.insert(p.license_for(Some(name)), p.grantable_w(cap));
        }
    }
    out
}

/// The most watts Slurm can ever grant one job in `partition` (None: a job that names
/// none): the smallest total of the licenses it must hold. None where no cap applies.
pub fn grantable_w(site: &Site, partition: Option<&str>) -> Option<u64> {
    let p = &site.power;
    let part_cap = partition
        .and_then(|n| site.partitions.get(n))
        .and_then(|x| x.power_cap_w);
    let site_w = site.power_cap_w.map(|c| p.grantable_w(c));
    let part_w = part_cap.map(|c| p.grantable_w(c));
    match (site_w, part_w) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// slurm.conf's `Licenses=` line for [`licenses`]. None when the site has no power cap at all.
pub fn licenses_line(site: &Site) -> Option<String> {
    let all = licenses(site);
    let items: Vec<String> = all.iter().map(|(l, w)| format!("{l}:{w}")).collect();
    (!items.is_empty()).then(|| format!("Licenses={}", items.join(",")))
}

/// The licenses a slurm.conf text declares on its `Licenses=` lines (Slurm's keys ignore
/// case; a name without `:COUNT` counts one). A later line's count for a name wins, as a
/// later value does in slurm.conf.
pub fn declared_licenses(slurm_conf: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in slurm_conf.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("licenses") {
            continue;
        }
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, count) = match item.split_once(':') {
                Some((n, c)) => (n, c.trim().parse::<u64>().ok()),
                None => (item, Some(1)),
            };
            if let Some(c) = count {
                out.insert(name.trim().to_string(), c);
            }
        }
    }
    out
}

/// One way slurm.conf's licenses (or `resources.yaml`'s layers) and the site config's
/// caps disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LicenseDrift {
    /// The license's name; for a layer of a hierarchical resource, its name and nodes
    /// (`greenup_w over n[1-2]`).
    pub license: String,
    /// The Slurm file that declares it: `slurm.conf` or `resources.yaml`.
    pub file: &'static str,
    /// The watts the site config's cap grants through it; None when no cap names it.
    pub site_w: Option<u64>,
    /// The count slurm.conf declares; None when it declares none.
    pub slurm_count: Option<u64>,
}

impl std::fmt::Display for LicenseDrift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (l, file) = (&self.license, self.file);
        match (self.site_w, self.slurm_count) {
            (Some(w), Some(c)) => write!(
                f,
                "license {l}: the site config grants {w} W under its cap, {file} counts {c}; \
                 Slurm queues jobs by {c}"
            ),
            (Some(w), None) => write!(
                f,
                "license {l}: the site config grants {w} W under its cap, {file} declares none; \
                 Slurm refuses every job job_submit gives it"
            ),
            (None, Some(c)) => write!(
                f,
                "license {l}: {file} counts {c}, but no cap in the site config uses it"
            ),
            (None, None) => write!(f, "license {l}: declared nowhere"),
        }
    }
}

/// Where slurm.conf's `Licenses=` and the site config's caps differ, where Slurm holds
/// the caps (`power.enforce: queue` or `hres`). A slurm.conf license counts as greenup's
/// when it is the site license or starts with it and an underscore.
pub fn license_drift(site: &Site, slurm_conf: &str) -> Vec<LicenseDrift> {
    if !site.power.enforce.in_slurm() {
        return Vec::new();
    }
    drift(
        licenses(site),
        declared_licenses(slurm_conf),
        "slurm.conf",
        |name| {
            name == site.power.license
                || name
                    .strip_prefix(site.power.license.as_str())
                    .is_some_and(|rest| rest.starts_with('_'))
        },
    )
}

/// Each name whose count differs between what the site config wants and what a Slurm
/// `file` declares, among the declared names that are greenup's (`ours`).
fn drift(
    want: BTreeMap<String, u64>,
    have: BTreeMap<String, u64>,
    file: &'static str,
    ours: impl Fn(&str) -> bool,
) -> Vec<LicenseDrift> {
    let mut names: Vec<&String> = want.keys().collect();
    names.extend(have.keys().filter(|n| ours(n) && !want.contains_key(*n)));
    names.sort();
    names
        .into_iter()
        .filter_map(|n| {
            let (site_w, slurm_count) = (want.get(n).copied(), have.get(n).copied());
            (site_w != slurm_count).then(|| LicenseDrift {
                license: n.clone(),
                file,
                site_w,
                slurm_count,
            })
        })
        .collect()
}

/// The Lua table etc/job_submit.lua loads (`dofile`): for each partition, the licenses a
/// job in it must hold and its nodes' bounds; `any` for a job that names no partition.
/// `slurm_uid` is the site's SlurmUser's uid as the user database says when the table
/// is written (the caller asks it).
pub fn lua_table(site: &Site, slurm_uid: Option<u32>) -> String {
    let p = &site.power;
    let hres = p.enforce == PowerEnforce::Hres;
    let site_license = site
        .power_cap_w
        .filter(|_| !hres)
        .map(|_| p.license_for(None));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- Generated by `greenup site licenses --lua` from {}: edit the site config, not this file.",
        site.path.display()
    );
    let _ = writeln!(out, "return {{");
    let _ = writeln!(out, "  enforce = {:?},", p.enforce.as_str());
    // Who may change a job's greenup licenses after submission: root and SlurmUser (as
    // the user database says when the table is written).
    let operators: Vec<u32> = std::iter::once(0)
        .chain(slurm_uid.filter(|u| *u != 0))
        .collect();
    let ops: Vec<String> = operators.iter().map(u32::to_string).collect();
    let _ = writeln!(out, "  operators = {{ {} }},", ops.join(", "));
    let totals = licenses(site);
    let entry = |out: &mut String, key: &str, part_license: Option<String>, nodes: &[String]| {
        let names: Vec<String> = site_license.iter().cloned().chain(part_license).collect();
        let licenses: Vec<String> = names.iter().map(|l| format!("{l:?}")).collect();
        let Some(b) = bounds(site, nodes) else {
            return;
        };
        // The most any job here can ever hold: the smallest of its licenses' totals.
        let cap_w = names.iter().filter_map(|l| totals.get(l)).min();
        let cap = cap_w.map_or(String::new(), |w| format!(", cap_w = {w}"));
        let _ = writeln!(
            out,
            "    [{key:?}] = {{ licenses = {{ {} }}, min_node_w = {}, max_node_w = {}, nodes = {}{cap}{} }},",
            licenses.join(", "),
            b.min_w.0.ceil(),
            b.max_w.0.ceil(),
            nodes.len(),
            hres_entry(site, nodes),
        );
    };
    let _ = writeln!(out, "  partitions = {{");
    for (name, part) in &site.partitions {
        let part_license = part.power_cap_w.map(|_| p.license_for(Some(name)));
        entry(&mut out, name, part_license, &part.nodes);
    }
    let _ = writeln!(out, "  }},");
    let all: Vec<String> = site.nodes.keys().cloned().collect();
    let mut any = String::new();
    entry(&mut any, "any", None, &all);
    out.push_str(any.strip_prefix("  ").unwrap_or(&any));
    let _ = writeln!(out, "}}");
    out
}

/// Under `enforce: hres`, what job_submit needs to size a per-node count in a pool of
/// `nodes`: the resource's name, the site layer's count, and for each rack the pool's
/// nodes in it and the rack's count (the pool's nodes in no rack are one group under
/// the site layer alone). Empty otherwise.
fn hres_entry(site: &Site, nodes: &[String]) -> String {
    let p = &site.power;
    let Some(site_w) = site_layer_w(site) else {
        return String::new();
    };
    // Each rack's nodes looked up in the pool: a rack's list is searched once, not once
    // per pool node.
    let pool: std::collections::HashSet<&str> = nodes.iter().map(String::as_str).collect();
    let mut groups: Vec<(usize, u64)> = Vec::new();
    let mut racked = 0;
    for rack in p.racks.values() {
        let k = rack
            .nodes
            .iter()
            .filter(|n| pool.contains(n.as_str()))
            .count();
        if k > 0 {
            groups.push((k, p.grantable_w(rack.power_cap_w)));
            racked += k;
        }
    }
    if racked < nodes.len() {
        groups.push((nodes.len() - racked, site_w));
    }
    let racks: Vec<String> = groups
        .iter()
        .map(|(k, w)| format!("{{ nodes = {k}, w = {w} }}"))
        .collect();
    format!(
        ", node_license = {:?}, site_w = {site_w}, racks = {{ {} }}",
        p.license_for(None),
        racks.join(", ")
    )
}

/// Slurm's `resources.yaml` (beside slurm.conf) under `power.enforce: hres`: one
/// hierarchical resource named for the site license, `MODE_3` (counted per node, summed
/// up each layer), whose top layer is the site cap over every node the site config types
/// and whose lower layers are the racks. Each count is the cap less the reserve. None in
/// any other mode.
pub fn resources_yaml(site: &Site) -> Option<String> {
    let want = layers(site);
    if want.is_empty() {
        return None;
    }
    let mut out = format!(
        "# Generated by `greenup site licenses --resources` from {}: edit the site config, not this file.\n---\n- resource: {}\n  mode: MODE_3\n  layers:\n",
        site.path.display(),
        site.power.license_for(None)
    );
    for (nodes, count) in want {
        let _ = writeln!(out, "    - nodes: [{nodes:?}]\n      count: {count}");
    }
    Some(out)
}

/// The count of the site's layer of its hierarchical resource (the site cap less the
/// reserve); None unless `enforce: hres` with a site cap.
fn site_layer_w(site: &Site) -> Option<u64> {
    let p = &site.power;
    (p.enforce == PowerEnforce::Hres)
        .then_some(site.power_cap_w)
        .flatten()
        .map(|cap| p.grantable_w(cap))
}

/// The layers of the site's hierarchical resource, top first: each one's nodes (as a
/// hostlist) and count. Empty unless `enforce: hres` with a site cap.
fn layers(site: &Site) -> Vec<(String, u64)> {
    let p = &site.power;
    let Some(site_w) = site_layer_w(site) else {
        return Vec::new();
    };
    let all: Vec<String> = site.nodes.keys().cloned().collect();
    std::iter::once((crate::hostlist::compress(&all), site_w))
        .chain(p.racks.values().map(|r| {
            (
                crate::hostlist::compress(&r.nodes),
                p.grantable_w(r.power_cap_w),
            )
        }))
        .collect()
}

/// A resource of `resources.yaml` as Slurm reads it (only what the drift check needs).
#[derive(serde::Deserialize)]
struct DeclaredResource {
    resource: String,
    #[serde(default)]
    layers: Vec<DeclaredLayer>,
}

#[derive(serde::Deserialize)]
struct DeclaredLayer {
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    count: Option<u64>,
}

/// Where `resources.yaml`'s layers of greenup's resource and the site config's caps
/// differ, under `power.enforce: hres`: each layer is named by the resource and its nodes
/// (`greenup_w over n[1-2]`). A file that does not parse declares no layer, so each of
/// the site config's is then named as missing.
pub fn resources_drift(site: &Site, resources_yaml: &str) -> Vec<LicenseDrift> {
    if site.power.enforce != PowerEnforce::Hres {
        return Vec::new();
    }
    let name = site.power.license_for(None);
    let key = |nodes: &str| format!("{name} over {nodes}");
    let want: BTreeMap<String, u64> = layers(site)
        .into_iter()
        .map(|(n, c)| (key(&n), c))
        .collect();
    let mut have = BTreeMap::new();
    let declared: Vec<DeclaredResource> =
        serde_saphyr::from_str(resources_yaml).unwrap_or_default();
    for layer in declared
        .iter()
        .filter(|r| r.resource == name)
        .flat_map(|r| &r.layers)
    {
        let mut nodes = Vec::new();
        for list in &layer.nodes {
            nodes.extend(crate::hostlist::expand(list).unwrap_or_default());
        }
        nodes.sort();
        nodes.dedup();
        if let Some(c) = layer.count {
            have.insert(key(&crate::hostlist::compress(&nodes)), c);
        }
    }
    let prefix = format!("{name} over ");
    drift(want, have, "resources.yaml", |n| n.starts_with(&prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
        crate::site::example()
    }

    #[test]
    fn the_licenses_line_counts_each_cap_less_the_reserve() {
        let mut site = site();
        // etc/greenup.yaml: site 4 kW, debug 1 kW, hetero 3.5 kW.
        assert_eq!(
            licenses_line(&site).unwrap(),
            "Licenses=greenup_w:4000,greenup_w_debug:1000,greenup_w_hetero:3500"
        );
        site.power.reserve = 0.05;
        assert_eq!(
            licenses_line(&site).unwrap(),
            "Licenses=greenup_w:3800,greenup_w_debug:950,greenup_w_hetero:3325"
        );
        site.power_cap_w = None;
        for p in site.partitions.values_mut() {
            p.power_cap_w = None;
        }
        assert_eq!(licenses_line(&site), None);
    }

    #[test]
    fn slurm_conf_licenses_are_read_as_slurm_reads_them() {
        let conf = "ClusterName=c\n# Licenses=greenup_w:1\nlicenses = greenup_w:4000, matlab ,greenup_w_debug:bad\nLICENSES=greenup_w_hetero:3500 # hetero\n";
        let got = declared_licenses(conf);
        let want: BTreeMap<String, u64> = [
            ("greenup_w", 4000),
            ("greenup_w_hetero", 3500),
            ("matlab", 1),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn drift_names_each_license_that_differs_and_only_under_queue() {
        let mut site = site();
        site.power.enforce = crate::site::PowerEnforce::Queue;
        // etc/greenup.yaml: site 4 kW, debug 1 kW, hetero 3.5 kW; the conf lowered the
        // site's to 3600, forgot debug's, and keeps an old one for a removed partition.
        let conf = "Licenses=greenup_w:3600,greenup_w_hetero:3500,greenup_w_old:500,greenup_wx:9,matlab:4\n";
        let d = license_drift(&site, conf);
        let got: Vec<(&str, Option<u64>, Option<u64>)> = d
            .iter()
            .map(|x| (x.license.as_str(), x.site_w, x.slurm_count))
            .collect();
        assert_eq!(
            got,
            vec![
                ("greenup_w", Some(4000), Some(3600)),
                ("greenup_w_debug", Some(1000), None),
                ("greenup_w_old", None, Some(500)),
            ]
        );
        assert_eq!(
            d[0].to_string(),
            "license greenup_w: the site config grants 4000 W under its cap, slurm.conf counts 3600; Slurm queues jobs by 3600"
        );
        // The generated line itself never drifts.
        assert!(license_drift(&site, &licenses_line(&site).unwrap()).is_empty());
        site.power.enforce = crate::site::PowerEnforce::Ledger;
        assert!(license_drift(&site, conf).is_empty());
    }

    #[test]
    fn a_job_can_be_granted_at_most_its_tightest_licenses_total() {
        let mut site = site();
        site.power.reserve = 0.1;
        // Site 4 kW, debug 1 kW: 3600 and 900 W grantable.
        assert_eq!(grantable_w(&site, None), Some(3600));
        assert_eq!(grantable_w(&site, Some("debug")), Some(900));
        assert_eq!(grantable_w(&site, Some("nowhere")), Some(3600));
        site.power_cap_w = None;
        assert_eq!(grantable_w(&site, None), None);
        assert_eq!(grantable_w(&site, Some("debug")), Some(900));
    }

    #[test]
    fn bounds_are_the_pools_largest_draw_at_its_lowest_and_top_clock() {
        let site = site();
        // debug is n[1-4]: fast 40 + 120 (f/3.0)^3 over 1.0-3.0 GHz, eco 20 + 60 (f/2.4)^3
        // over 1.2-2.4 GHz.
        let b = bounds(&site, &site.partitions["debug"].nodes).unwrap();
        let fast_lo = 40.0 + 120.0 * (1.0_f64 / 3.0).powi(3);
        let eco_lo = 20.0 + 60.0 * (1.2_f64 / 2.4).powi(3);
        assert!((b.min_w.0 - fast_lo.max(eco_lo)).abs() < 1e-9, "{b:?}");
        assert!((b.max_w.0 - 160.0).abs() < 1e-9, "{b:?}");
        let lua = lua_table(&site, None);
        assert!(
            lua.contains(r#"    ["debug"] = { licenses = { "greenup_w", "greenup_w_debug" }, min_node_w = 45, max_node_w = 160, nodes = 4, cap_w = 1000 },"#),
            "{lua}"
        );
        assert!(
            lua.contains("[\"any\"] = { licenses = { \"greenup_w\" }"),
            "{lua}"
        );
    }
}
