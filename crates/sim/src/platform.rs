//! A SimGrid platform (XML, version 4.1) built from a greenup site config: one host per
//! node with one core, one pstate per frequency of its node type, and the host energy
//! plugin's wattages from the type's power model.
//!
//! - **Speed.** A site config has no flop rate, so each node type's speed at f_max is
//!   given apart (`--speed TYPE=GFLOPS`); at frequency f a host computes at
//!   `GFLOPS × f / f_max`, the CPU-bound scaling paper 004 assumes (T_cp × S).
//! - **Power.** At frequency f a host draws the type's static watts when idle (waiting in
//!   MPI, or done) and static plus dynamic watts when computing: the energy plugin
//!   integrates `idle + load × (busy − idle)`, paper 004's eq. 11 for one rank per node.
//! - **Links.** A star: each host has a private shared (half-duplex) link of `bandwidth` and
//!   `latency` to one switch, and a message crosses the sender's and the receiver's
//!   links (paper 004: 1 Gbit/s Ethernet; latency 50 µs here, the paper names none).
//!
//! Pstate 0 is the type's highest frequency, the rest in descending order.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use std::path::PathBuf;

use greenup::expr::ExprError;
use greenup::site::{NodeType, Site};

/// Why the platform of a job cannot be written from the site config and the options.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// A node of the job is not one the site config lists.
    #[error("node {node} is not in the site config {site} (nodes:)")]
    UnknownNode {
        /// The node as named.
        node: String,
        /// The site config.
        site: PathBuf,
    },
    /// A node type has no flop rate, which the site config does not give.
    #[error("--speed: no speed for node type {node_type} (give --speed {node_type}=GFLOPS)")]
    NoSpeed {
        /// The node type.
        node_type: String,
    },
    /// A frequency asked of a node is not one of its type's: SimGrid would run another.
    #[error(
        "node {node}: {freq_ghz} GHz is not one of node type {node_type}'s frequencies ({gears}): the simulated host would run another frequency than the one asked"
    )]
    NotAGear {
        /// The node.
        node: String,
        /// Its type.
        node_type: String,
        /// The frequency asked, GHz.
        freq_ghz: f64,
        /// The type's frequencies, highest first.
        gears: String,
    },
    /// A node type's power model fails at one of its frequencies.
    #[error("node type {node_type}: {source}")]
    Wattage {
        /// The node type.
        node_type: String,
        /// Why its power expression failed.
        source: ExprError,
    },
}

/// The network every host is attached to.
#[derive(Debug, Clone, PartialEq)]
pub struct Links {
    /// Each host link's bandwidth, in SimGrid's notation (`1Gbps`, `125MBps`).
    pub bandwidth: String,
    /// Each host link's latency, in SimGrid's notation (`50us`).
    pub latency: String,
}

/// One simulated host: a node of the job, its type and its pstate.
#[derive(Debug, Clone, PartialEq)]
pub struct Host<'a> {
    /// The node's name, as the site config and greenupd know it.
    pub name: String,
    /// Its node type.
    pub node_type: &'a NodeType,
    /// Index into [`pstates`] of the frequency it runs at.
    pub pstate: usize,
}

impl Host<'_> {
    /// The frequency its pstate stands for, GHz.
    pub fn freq_ghz(&self) -> f64 {
        pstates(self.node_type)[self.pstate]
    }
}

/// A node type's frequencies as SimGrid pstates: highest first.
pub fn pstates(t: &NodeType) -> Vec<f64> {
    t.freqs_ghz.iter().rev().copied().collect()
}

/// The pstate of `freq_ghz` on type `t`, when it is one of the type's frequencies (to a
/// millionth): never the nearest, which would simulate another run than the one decided.
pub fn pstate_of(t: &NodeType, freq_ghz: f64) -> Option<usize> {
    pstates(t)
        .iter()
        .position(|f| (f - freq_ghz).abs() <= 1e-6 * f.abs())
}

/// Idle and busy watts of type `t` at `f` GHz.
pub fn wattage(t: &NodeType, f: f64) -> Result<(f64, f64), ExprError> {
    let idle = t.static_w(f)?;
    let busy = idle + t.dynamic_w(f)?;
    Ok((idle, busy))
}

/// The hosts of a job on `nodes` (in order), each at the frequency `freq(node, type)`
/// asks (None: its type's highest), which must be one of its type's.
pub fn hosts<'a>(
    site: &'a Site,
    nodes: &[String],
    mut freq: impl FnMut(&str, &NodeType) -> Option<f64>,
) -> Result<Vec<Host<'a>>, PlatformError> {
    nodes
        .iter()
        .map(|n| {
            let t = site
                .node_type_of(n)
                .ok_or_else(|| PlatformError::UnknownNode {
                    node: n.clone(),
                    site: site.path.clone(),
                })?;
            Ok(Host {
                name: n.clone(),
                node_type: t,
                pstate: match freq(n, t) {
                    None => 0,
                    Some(f) => pstate_of(t, f).ok_or_else(|| PlatformError::NotAGear {
                        node: n.clone(),
                        node_type: t.name.clone(),
                        freq_ghz: f,
                        gears: pstates(t)
                            .iter()
                            .map(|g| g.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })?,
                },
            })
        })
        .collect()
}

/// A host's speed in flops per second at `f` GHz, given its type's speed at f_max in
/// GFLOPS: what the platform tells SimGrid.
pub fn flops_per_s(gflops: f64, t: &NodeType, f: f64) -> f64 {
    gflops * 1e9 * f / t.fmax()
}

/// The platform XML for `hosts`, given each type's speed at f_max in GFLOPS.
pub fn xml(
    hosts: &[Host<'_>],
    gflops: &BTreeMap<String, f64>,
    links: &Links,
) -> Result<String, PlatformError> {
    let mut x = String::from(
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n\
         <!-- Generated by greenup-sim from a greenup site config. -->\n\
         <platform version=\"4.1\">\n<zone id=\"site\" routing=\"Dijkstra\">\n",
    );
    for h in hosts {
        let t = h.node_type;
        let g = gflops.get(&t.name).ok_or_else(|| PlatformError::NoSpeed {
            node_type: t.name.clone(),
        })?;
        let fs = pstates(t);
        let speeds: Vec<String> = fs
            .iter()
            .map(|f| format!("{}f", flops_per_s(*g, t, *f)))
            .collect();
        let mut watts = Vec::new();
        for f in &fs {
            let (idle, busy) = wattage(t, *f).map_err(|source| PlatformError::Wattage {
                node_type: t.name.clone(),
                source,
            })?;
            watts.push(format!("{idle}:{idle}:{busy}"));
        }
        let idle_min = fs
            .iter()
            .filter_map(|f| t.static_w(*f).ok())
            .fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            x,
            "  <host id=\"{}\" speed=\"{}\" pstate=\"{}\" core=\"1\">\n    \
             <prop id=\"wattage_per_state\" value=\"{}\"/>\n    \
             <prop id=\"wattage_off\" value=\"{}\"/>\n  </host>",
            h.name,
            speeds.join(","),
            h.pstate.min(fs.len().saturating_sub(1)),
            watts.join(", "),
            if idle_min.is_finite() { idle_min } else { 0.0 },
        );
    }
    for h in hosts {
        let _ = writeln!(
            x,
            "  <link id=\"link-{}\" bandwidth=\"{}\" latency=\"{}\"/>",
            h.name, links.bandwidth, links.latency
        );
    }
    x.push_str("  <router id=\"switch\"/>\n");
    for h in hosts {
        let _ = writeln!(
            x,
            "  <route src=\"{0}\" dst=\"switch\"><link_ctn id=\"link-{0}\"/></route>",
            h.name
        );
    }
    x.push_str("</zone>\n</platform>\n");
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::site::PowerModel;

    fn ty() -> NodeType {
        NodeType {
            name: "fast".into(),
            freqs_ghz: vec![1.0, 2.0],
            power: PowerModel::AtMax {
                dynamic_w: 80.0,
                static_w: 20.0,
                gamma: 3.0,
            },
        }
    }

    #[test]
    fn pstates_run_highest_first_with_cubic_dynamic_power() {
        let t = ty();
        assert_eq!(pstates(&t), vec![2.0, 1.0]);
        assert_eq!(pstate_of(&t, 1.0), Some(1));
        assert_eq!(pstate_of(&t, 2.0), Some(0));
        // Between the gears: none, not the nearest.
        assert_eq!(pstate_of(&t, 1.01), None);
        // At half the clock the dynamic power is 80 / 2^3 = 10 W.
        assert_eq!(wattage(&t, 1.0).unwrap(), (20.0, 30.0));
        let h = [Host {
            name: "n1".into(),
            node_type: &t,
            pstate: 1,
        }];
        let g = BTreeMap::from([("fast".to_string(), 4.0)]);
        let links = Links {
            bandwidth: "1Gbps".into(),
            latency: "50us".into(),
        };
        let x = xml(&h, &g, &links).unwrap();
        assert!(
            x.contains("speed=\"4000000000f,2000000000f\" pstate=\"1\""),
            "{x}"
        );
        assert!(x.contains("value=\"20:20:100, 20:20:30\""), "{x}");
        let none = xml(&h, &BTreeMap::new(), &links).unwrap_err().to_string();
        assert!(none.contains("--speed fast=GFLOPS"), "{none}");
    }
}
