//! A SimGrid platform (XML, version 4.1) built from a greenup site config: one host per
//! node with one core, one pstate per frequency of its node type, and the host energy
//! plugin's wattages from the type's power model.
//!
//! A host obeys one of two laws:
//! - **Published measurements** (`--physics`, [`crate::physics`]): each node type is a
//!   real CPU whose measured package power at each P-state the host draws, and the
//!   program's measured sensitivity to the clock sets its speed at each P-state. greenup
//!   is told none of it: its site config gives the frequencies and its own prior.
//! - **greenup's own law** (no `--physics`), kept as a second column: at frequency f a
//!   host computes at `GFLOPS × f / f_max`, the CPU-bound scaling paper 004 assumes
//!   (T_cp × S), and draws the type's static watts when idle (waiting in MPI, or done)
//!   and static plus dynamic watts when computing, as the site config says: the energy
//!   plugin integrates `idle + load × (busy − idle)`, paper 004's eq. 11 for one rank per
//!   node. A figure measured this way is arithmetic on the site config, not evidence.
//!
//! A site config has no flop rate, so each node type's speed at f_max is given apart
//! (`--speed TYPE=GFLOPS`).
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

use crate::physics::{Cpu, Physics, time_ratio};

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
    /// Under `--physics`, a node type has no CPU.
    #[error(
        "--cpu: node type {node_type} has no CPU (give --cpu {node_type}=NAME, a cpu of {file})"
    )]
    NoCpu {
        /// The node type.
        node_type: String,
        /// The physics file.
        file: PathBuf,
    },
    /// Under `--physics`, one of a node type's frequencies was never measured on its CPU.
    #[error(
        "node type {node_type}: {freq_ghz} GHz is not a measured P-state of cpu {cpu} ({pstates} GHz in {file}): the site config's frequencies must be P-states the testbed's physics knows"
    )]
    NotMeasured {
        /// The node type.
        node_type: String,
        /// Its CPU.
        cpu: String,
        /// The frequency.
        freq_ghz: f64,
        /// The CPU's measured P-states.
        pstates: String,
        /// The physics file.
        file: PathBuf,
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
    /// The published physics it obeys; `None`: greenup's own law from the site config.
    pub physics: Option<&'a Physics>,
}

impl Host<'_> {
    /// The frequency its pstate stands for, GHz.
    pub fn freq_ghz(&self) -> f64 {
        pstates(self.node_type)[self.pstate]
    }

    /// Its CPU and the program's sensitivity, under published physics.
    fn measured(&self) -> Option<(&Cpu, f64, f64)> {
        let p = self.physics?;
        Some((p.cpus.get(&self.node_type.name)?, p.beta, p.wait_share))
    }

    /// Its speed in flops per second at `f` GHz, given its type's speed at f_max in
    /// GFLOPS: what the platform tells SimGrid.
    pub fn flops_per_s(&self, gflops: f64, f: f64) -> f64 {
        let fmax = self.node_type.fmax();
        match self.measured() {
            Some((_, beta, _)) => gflops * 1e9 / time_ratio(beta, fmax, f),
            None => gflops * 1e9 * f / fmax,
        }
    }

    /// Its watts at `f` GHz while its rank waits and while it computes.
    pub fn wattage(&self, f: f64) -> Result<(f64, f64), PlatformError> {
        let t = self.node_type;
        match self.measured() {
            Some((cpu, _, share)) => {
                let p = cpu.pstate(f).ok_or_else(|| self.not_measured(cpu, f))?;
                let k = self.spread();
                Ok((k * (p.idle_w + share * (p.busy_w - p.idle_w)), k * p.busy_w))
            }
            None => wattage(t, f).map_err(|source| PlatformError::Wattage {
                node_type: t.name.clone(),
                source,
            }),
        }
    }

    /// How much more or less than its CPU's figures this chip draws (1 without a node
    /// spread).
    fn spread(&self) -> f64 {
        self.physics.map_or(1.0, |p| p.node_factor(&self.name))
    }

    /// Its watts when off: SimGrid's `wattage_off`, the least it draws idle.
    fn off_w(&self) -> f64 {
        let least = match self.measured() {
            Some((cpu, _, _)) => {
                self.spread()
                    * cpu
                        .pstates
                        .iter()
                        .map(|p| p.idle_w)
                        .fold(f64::INFINITY, f64::min)
            }
            None => pstates(self.node_type)
                .iter()
                .filter_map(|f| self.node_type.static_w(*f).ok())
                .fold(f64::INFINITY, f64::min),
        };
        if least.is_finite() { least } else { 0.0 }
    }

    fn not_measured(&self, cpu: &Cpu, f: f64) -> PlatformError {
        PlatformError::NotMeasured {
            node_type: self.node_type.name.clone(),
            cpu: cpu.name.clone(),
            freq_ghz: f,
            pstates: cpu
                .pstates
                .iter()
                .map(|p| p.ghz.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            file: self.physics.map(|p| p.file.clone()).unwrap_or_default(),
        }
    }

    /// Under published physics, every frequency of its type must have been measured.
    fn check_measured(&self) -> Result<(), PlatformError> {
        let Some(p) = self.physics else {
            return Ok(());
        };
        let cpu = p
            .cpus
            .get(&self.node_type.name)
            .ok_or_else(|| PlatformError::NoCpu {
                node_type: self.node_type.name.clone(),
                file: p.file.clone(),
            })?;
        for f in &self.node_type.freqs_ghz {
            if cpu.pstate(*f).is_none() {
                return Err(self.not_measured(cpu, *f));
            }
        }
        Ok(())
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
/// asks (None: its type's highest), which must be one of its type's, obeying `physics`
/// (None: greenup's own law).
pub fn hosts<'a>(
    site: &'a Site,
    nodes: &[String],
    physics: Option<&'a Physics>,
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
                physics,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|hs| {
            hs.iter().try_for_each(Host::check_measured)?;
            Ok(hs)
        })
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
            .map(|f| format!("{}f", h.flops_per_s(*g, *f)))
            .collect();
        let mut watts = Vec::new();
        for f in &fs {
            let (idle, busy) = h.wattage(*f)?;
            watts.push(format!("{idle}:{idle}:{busy}"));
        }
        let _ = writeln!(
            x,
            "  <host id=\"{}\" speed=\"{}\" pstate=\"{}\" core=\"1\">\n    \
             <prop id=\"wattage_per_state\" value=\"{}\"/>\n    \
             <prop id=\"wattage_off\" value=\"{}\"/>\n  </host>",
            h.name,
            speeds.join(","),
            h.pstate.min(fs.len().saturating_sub(1)),
            watts.join(", "),
            h.off_w(),
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
            physics: None,
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

    #[test]
    fn published_physics_sets_each_pstates_speed_and_watts() {
        use crate::physics::{Cpu, PState, Physics};
        let t = ty();
        let cpu = Cpu {
            name: "real".into(),
            pstates: vec![
                PState {
                    ghz: 1.0,
                    idle_w: 50.0,
                    busy_w: 90.0,
                },
                PState {
                    ghz: 1.5,
                    idle_w: 52.0,
                    busy_w: 120.0,
                },
                PState {
                    ghz: 2.0,
                    idle_w: 55.0,
                    busy_w: 175.0,
                },
            ],
        };
        let physics = Physics {
            file: "cpus.yaml".into(),
            cpus: BTreeMap::from([("fast".to_string(), cpu)]),
            beta: 0.5,
            wait_share: 0.25,
            node_factors: Vec::new(),
        };
        let h = [Host {
            name: "n1".into(),
            node_type: &t,
            pstate: 0,
            physics: Some(&physics),
        }];
        let g = BTreeMap::from([("fast".to_string(), 4.0)]);
        let links = Links {
            bandwidth: "1Gbps".into(),
            latency: "50us".into(),
        };
        let x = xml(&h, &g, &links).unwrap();
        // Half the time scales with the clock: at 1 GHz of 2 the run takes 1.5 times as
        // long, so the host computes at 4 / 1.5 GFLOPS.
        let slow = 4e9 / 1.5;
        assert!(x.contains(&format!("speed=\"4000000000f,{slow}f\"")), "{x}");
        // Waiting draws idle plus a quarter of (busy − idle): 55 + 30 and 50 + 10.
        assert!(x.contains("value=\"85:85:175, 60:60:90\""), "{x}");
        assert!(x.contains("wattage_off\" value=\"50\""), "{x}");
        assert_eq!(h[0].wattage(2.0).unwrap(), (85.0, 175.0));
        // Every frequency of the type must have been measured on its CPU.
        let mut sparse = physics.clone();
        sparse.cpus.get_mut("fast").unwrap().pstates.remove(0);
        let site_nodes = ["n1".to_string()];
        let site = site_of(&t);
        let e = hosts(&site, &site_nodes, Some(&sparse), |_, _| None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 GHz is not a measured P-state of cpu real (1.5, 2 GHz"),
            "{e}"
        );
        let mut none = physics.clone();
        none.cpus.clear();
        let e = hosts(&site, &site_nodes, Some(&none), |_, _| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("give --cpu fast=NAME"), "{e}");
    }

    /// A site of one node, n1, of type `t`.
    fn site_of(t: &NodeType) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("greenup.yaml");
        std::fs::write(
            &f,
            format!(
                "node_types:\n  {}:\n    frequencies: {:?}\n    power: {{dynamic_w: 80, static_w: 20}}\nnodes:\n  {}: n1\n",
                t.name, t.freqs_ghz, t.name
            ),
        )
        .unwrap();
        greenup::site::load(&f).unwrap()
    }
}
