//! A node's GPUs in a decision. The models predict what RAPL measures (a node's CPUs and
//! memory), and profiles learn from that alone; a GPU node's GPUs draw beside it.
//!
//! Without a profile's `gpu:` section a decision counts them as running flat out at their
//! top clock for the whole job: what Slurm's queue holds for them unplanned, so a plan
//! never fits a power cap, an energy cap or a budget that its GPUs would break.
//!
//! With it, the GPUs of node i are busy `b_i` seconds (the section's seconds on its node
//! count, the work divided evenly over the job's nodes) at the clock `c` they ran at
//! when left alone (the section's `clock_mhz`: a power-bound kernel runs below the top
//! clock; the top clock when not given), each drawing `P_c` above its static power
//! (the section's `power_w` less the static power; else the site's dynamic power at
//! c). Their SM clocks below c are gears like a CPU's (paper 004's scaling factor, on
//! the GPU): locked at g, with `r = g / c`,
//!
//! `compute_s(f, g) = compute_s(f) + b_i * (1 / r - 1)`: the models' compute time holds
//! the GPUs' time (the CPU waits for its kernels), which stretches by 1 / r;
//!
//! `dynamic_j(f, g) = dynamic_j(f) + n * P_c * r^gamma * b_i / r`: each of the n GPUs
//! draws its dynamic power at g, the site's `gamma` law (3, the cube of eq. 8, unless
//! the site says), while busy;
//!
//! `static_w += n * P_s`: the GPUs' static power, for the whole wall time.
//!
//! A clock at or above c changes nothing, so it is no gear; a choice that keeps c leaves
//! the clock unset, so a decision changes a GPU only where it lowers it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Choice, Config, ModelError, NodeSlot, Prediction, Predictor, SweepTable};

/// Which devices a policy lets a decision slow down (`devices:` in a policy file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Devices {
    /// CPU frequencies only; the GPUs stay at their top clock.
    Cpu,
    /// GPU clocks only; the CPUs stay at their top frequency (or the budget's ceiling).
    Gpu,
    /// Both (the default).
    #[default]
    Both,
}

impl Devices {
    /// The name as a policy writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Devices::Cpu => "cpu",
            Devices::Gpu => "gpu",
            Devices::Both => "both",
        }
    }
}

/// How long the GPUs of each GPU node type are busy (a profile's `gpu:` section).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuBusy {
    /// The node count the seconds hold for.
    pub nodes: usize,
    /// By site node type.
    pub types: BTreeMap<String, TypeBusy>,
}

/// One node type's GPUs in a profile's `gpu:` section.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypeBusy {
    /// Seconds each node's GPUs compute over the job, left at their own clock.
    pub busy_s: f64,
    /// The SM clock they ran at while busy, MHz (None: the top clock).
    pub clock_mhz: Option<u32>,
    /// Watts one GPU drew while busy (None: the site's power model at that clock).
    pub power_w: Option<f64>,
}

impl TypeBusy {
    /// Busy seconds only, at the top clock and the site's power.
    pub fn seconds(busy_s: f64) -> TypeBusy {
        TypeBusy {
            busy_s,
            clock_mhz: None,
            power_w: None,
        }
    }
}

/// One node type's GPUs as a decision sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuNode {
    /// GPUs per node.
    pub count: u32,
    /// The SM clocks a decision may choose, ascending, the top one last (empty: none).
    pub gears_mhz: Vec<u32>,
    /// Dynamic watts of one GPU at the top clock, fully busy.
    pub dynamic_w: f64,
    /// Static watts of one GPU.
    pub static_w: f64,
    /// The exponent of the clock's share in the dynamic power.
    pub gamma: f64,
}

impl GpuNode {
    /// Watts one node's GPUs draw flat out at their top clock: what a decision counts
    /// for them for the whole job while the profile says nothing of their busy time.
    fn flat_out_w(&self) -> f64 {
        f64::from(self.count) * (self.static_w + self.dynamic_w)
    }
}

/// One node type's GPUs while busy, as the module's text says: on `n` nodes.
struct Busy1 {
    /// Seconds busy at clock `c`.
    b: f64,
    /// The clock they run at left alone (None: unknown, no gear).
    c: Option<u32>,
    /// Dynamic watts of one GPU while busy at `c`.
    p_c: f64,
}

impl Busy1 {
    /// (busy seconds, dynamic joules of one GPU) locked at `mhz` (None: left alone).
    fn at(&self, g: &GpuNode, mhz: Option<u32>) -> (f64, f64) {
        let r = match (mhz, self.c) {
            (Some(m), Some(c)) if m > 0 && m < c => f64::from(m) / f64::from(c),
            _ => 1.0,
        };
        (self.b / r, self.p_c * r.powf(g.gamma) * self.b / r)
    }
}

/// What a decision may do with GPUs: which devices it may slow, and the CPU frequency
/// ceiling (an energy budget's) that holds whatever the devices.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Gears {
    /// Which devices may be slowed.
    pub devices: Devices,
    /// No CPU above this frequency in GHz.
    pub cpu_ceiling_ghz: Option<f64>,
}

/// A model with each GPU node's GPUs added (see the module's text).
pub struct WithGpus<'a> {
    inner: &'a dyn Predictor,
    /// The GPUs of each site node type that has them.
    gpus: &'a BTreeMap<String, GpuNode>,
    busy: Option<&'a GpuBusy>,
    gears: Gears,
}

impl<'a> WithGpus<'a> {
    /// `inner` with the GPUs of `gpus`' node types, busy as `busy` says (flat out at
    /// their top clock when it does not), their clocks chosen as `gears` allows.
    pub fn new(
        inner: &'a dyn Predictor,
        gpus: &'a BTreeMap<String, GpuNode>,
        busy: Option<&'a GpuBusy>,
        gears: Gears,
    ) -> Self {
        WithGpus {
            inner,
            gpus,
            busy,
            gears,
        }
    }

    /// Joules the GPUs of one node of type `t` use at SM clock `mhz` (None: left alone)
    /// over a job of `time_s` seconds on `n` nodes: the part of a prediction that NVML
    /// measures, not RAPL.
    pub fn gpus_j(&self, t: &str, mhz: Option<u32>, n: usize, time_s: f64) -> f64 {
        let Some(g) = self.gpus.get(t) else {
            return 0.0;
        };
        let count = f64::from(g.count);
        match self.busy(t, g, n) {
            None => g.flat_out_w() * time_s,
            Some(b) => count * g.static_w * time_s + count * b.at(g, mhz).1,
        }
    }

    /// The GPUs of a node of type `t` (`g`) while busy on `n` nodes, when the profile
    /// says how long.
    fn busy(&self, t: &str, g: &GpuNode, n: usize) -> Option<Busy1> {
        let section = self.busy?;
        let tb = section.types.get(t)?;
        let top = g.gears_mhz.last().copied();
        let c = match (tb.clock_mhz, top) {
            (Some(c), Some(top)) => Some(c.min(top)),
            (c, top) => c.or(top),
        };
        let p_c = match (tb.power_w, c, top) {
            (Some(p), _, _) => (p - g.static_w).max(0.0),
            (None, Some(c), Some(top)) => dynamic_at_w(g.dynamic_w, c, top, g.gamma),
            _ => g.dynamic_w,
        };
        Some(Busy1 {
            b: tb.busy_s * section.nodes as f64 / n.max(1) as f64,
            c,
            p_c,
        })
    }
}

/// Dynamic watts of one fully busy GPU at SM clock `mhz`, given its dynamic watts at its
/// top clock `top_mhz`: the clock's share of the top to the power `gamma` (a clock above
/// the top counts as the top). The one home of the GPUs' power law, which a node's power
/// share and a decision both read.
pub fn dynamic_at_w(dynamic_top_w: f64, mhz: u32, top_mhz: u32, gamma: f64) -> f64 {
    if top_mhz == 0 {
        return dynamic_top_w;
    }
    dynamic_top_w * (f64::from(mhz.min(top_mhz)) / f64::from(top_mhz)).powf(gamma)
}

/// The CPU choices a GPU-only decision keeps: the fastest under the ceiling (the
/// slowest when none is).
fn cpu_top(choices: &mut Vec<Choice>, ceiling: Option<f64>) {
    let under = choices
        .iter()
        .rposition(|c| ceiling.is_none_or(|g| c.freq_ghz <= g + 1e-9))
        .unwrap_or(0);
    let keep = choices[under].freq_ghz;
    choices.retain(|c| c.freq_ghz == keep);
}

impl Predictor for WithGpus<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        let mut t = self.inner.table(nodes)?;
        let n = nodes.len();
        for row in &mut t.nodes {
            if self.gears.devices == Devices::Gpu && !row.choices.is_empty() {
                cpu_top(&mut row.choices, self.gears.cpu_ceiling_ghz);
            }
            let Some(g) = self.gpus.get(&row.node_type) else {
                continue;
            };
            let count = f64::from(g.count);
            let Some(b) = self.busy(&row.node_type, g, n) else {
                row.static_w += g.flat_out_w();
                continue;
            };
            row.static_w += count * g.static_w;
            // The gears: the clocks below the one the GPUs run at left alone.
            let clocks: Vec<u32> = match (self.gears.devices, b.c) {
                (Devices::Cpu, _) | (_, None) => Vec::new(),
                (_, Some(c)) => g.gears_mhz.iter().copied().filter(|&m| m < c).collect(),
            };
            let (b_c, _) = b.at(g, None);
            let mut out = Vec::with_capacity(row.choices.len() * (clocks.len() + 1));
            for c in &row.choices {
                let at = |mhz: Option<u32>| {
                    let (busy, dyn_j) = b.at(g, mhz);
                    Choice {
                        wait_w: c.wait_w,
                        freq_ghz: c.freq_ghz,
                        gpu_mhz: mhz,
                        compute_s: c.compute_s + (busy - b_c),
                        dynamic_j: c.dynamic_j + count * dyn_j,
                    }
                };
                out.extend(clocks.iter().map(|&m| at(Some(m))));
                out.push(at(None));
            }
            row.choices = out;
        }
        Ok(t)
    }

    fn predict(&self, config: &Config) -> Result<Prediction, ModelError> {
        let table = self.table(&config.slots())?;
        let mut pick = Vec::with_capacity(config.nodes.len());
        for (row, n) in table.nodes.iter().zip(&config.nodes) {
            let k = row
                .choices
                .iter()
                .position(|c| c.gpu_mhz == n.gpu_mhz)
                .ok_or_else(|| ModelError::GpuClockNotOffered {
                    node: n.name.clone(),
                    mhz: n.gpu_mhz,
                })?;
            pick.push(k);
        }
        Ok(table.evaluate(&pick))
    }

    /// The model's own efficiency: iso-energy-efficiency speaks of the energy the model
    /// predicts, without the GPUs.
    fn efficiency(&self, config: &Config, _prediction: &Prediction) -> Option<f64> {
        let own = self.inner.predict(config).ok()?;
        self.inner.efficiency(config, &own)
    }

    fn clock_note(&self, node_types: &[&str]) -> Option<String> {
        self.inner.clock_note(node_types)
    }
    fn node_counts(&self) -> Option<&crate::model::node_counts::NodeCounts> {
        self.inner.node_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeChoices;

    /// A model whose every node computes 20 / f s at f GHz (f in 1, 2), 50 W dynamic at
    /// 2 GHz with the cube law, 30 W static, plus 5 s of communication.
    struct Flat;

    impl Predictor for Flat {
        fn name(&self) -> &'static str {
            "flat"
        }
        fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
            Ok(SweepTable {
                nodes: nodes
                    .iter()
                    .map(|s| NodeChoices {
                        name: s.name.clone(),
                        node_type: s.node_type.clone(),
                        choices: s
                            .freqs_ghz
                            .iter()
                            .map(|&f| Choice {
                                wait_w: 0.0,
                                gpu_mhz: None,
                                freq_ghz: f,
                                compute_s: 20.0 / f,
                                dynamic_j: 50.0 * (f / 2.0).powi(3) * 20.0 / f,
                            })
                            .collect(),
                        static_w: 30.0,
                    })
                    .collect(),
                fixed_time_s: 5.0,
                fixed_energy_j: 0.0,
                steps: None,
            })
        }
        fn efficiency(&self, _: &Config, p: &Prediction) -> Option<f64> {
            Some(p.energy_j)
        }
    }

    fn slot(name: &str, t: &str) -> NodeSlot {
        NodeSlot {
            name: name.into(),
            node_type: t.into(),
            freqs_ghz: vec![1.0, 2.0],
        }
    }

    /// Two GPUs of 100 W static and 600 W dynamic at 1600 MHz; gears 800 and 1600 MHz.
    fn gpus() -> BTreeMap<String, GpuNode> {
        BTreeMap::from([(
            "gpu".to_string(),
            GpuNode {
                count: 2,
                gears_mhz: vec![800, 1600],
                dynamic_w: 600.0,
                static_w: 100.0,
                gamma: 3.0,
            },
        )])
    }

    #[test]
    fn the_power_law_scales_by_the_clocks_share_and_never_above_the_top() {
        // 600 W at 1600 MHz: half the clock under the cube is an eighth; the square, a
        // quarter; a clock above the top, or a type with no top, is the top's.
        assert_eq!(dynamic_at_w(600.0, 800, 1600, 3.0), 75.0);
        assert_eq!(dynamic_at_w(600.0, 800, 1600, 2.0), 150.0);
        assert_eq!(dynamic_at_w(600.0, 1980, 1600, 3.0), 600.0);
        assert_eq!(dynamic_at_w(600.0, 800, 0, 3.0), 600.0);
    }

    #[test]
    fn without_busy_times_gpu_nodes_draw_their_gpus_flat_out_for_the_whole_wall_time() {
        let g = gpus();
        let m = WithGpus::new(&Flat, &g, None, Gears::default());
        let nodes = [slot("c1", "cpu"), slot("g1", "gpu")];
        let t = m.table(&nodes).unwrap();
        assert_eq!(t.nodes[0].static_w, 30.0);
        assert_eq!(t.nodes[1].static_w, 30.0 + 2.0 * 700.0);
        assert_eq!(t.nodes[1].choices.len(), 2, "no GPU clock is chosen");
        // Both at 1 GHz: 20 s of compute + 5 s = 25 s; dynamic 6.25 W x 20 s each;
        // static (30 + 30 + 1400) W x 25 s.
        let p = t.evaluate(&[0, 0]);
        assert_eq!(p.time_s, 25.0);
        let want = 2.0 * 6.25 * 20.0 + 1460.0 * 25.0;
        assert!((p.energy_j - want).abs() < 1e-9, "{} vs {want}", p.energy_j);
        // The model's own efficiency sees its own energy, without the GPUs'.
        let ee = m.efficiency(&t.config(&[0, 0]), &p).unwrap();
        assert!((ee - (want - 1400.0 * 25.0)).abs() < 1e-9);
        assert_eq!(m.name(), "flat");
    }

    #[test]
    fn gpu_clocks_are_gears_whose_time_stretches_and_whose_dynamic_energy_falls_as_the_square() {
        // 8 s of GPU time per node on 1 node; the job runs on 2: 4 s each.
        let busy = GpuBusy {
            nodes: 1,
            types: BTreeMap::from([("gpu".to_string(), TypeBusy::seconds(8.0))]),
        };
        let g = gpus();
        let m = WithGpus::new(&Flat, &g, Some(&busy), Gears::default());
        let t = m.table(&[slot("c1", "cpu"), slot("g1", "gpu")]).unwrap();
        let row = &t.nodes[1];
        assert_eq!(row.static_w, 30.0 + 200.0);
        let seen: Vec<(f64, Option<u32>)> = row
            .choices
            .iter()
            .map(|c| (c.freq_ghz, c.gpu_mhz))
            .collect();
        assert_eq!(
            seen,
            [(1.0, Some(800)), (1.0, None), (2.0, Some(800)), (2.0, None)]
        );
        // 2 GHz, 800 MHz: S = 2, 10 s + 4 s more; CPU 50 W x 10 s; GPUs 2 x 600 / 8 x 8 s.
        let c = row.choices[2];
        assert_eq!(c.compute_s, 14.0);
        assert!((c.dynamic_j - (500.0 + 2.0 * 75.0 * 8.0)).abs() < 1e-9);
        // At the top clock, busy 4 s at 2 x 600 W.
        let c = row.choices[3];
        assert_eq!(c.compute_s, 10.0);
        assert!((c.dynamic_j - (500.0 + 1200.0 * 4.0)).abs() < 1e-9);
        // A CPU node is unchanged.
        assert_eq!(t.nodes[0].choices.len(), 2);
        // predict() finds the chosen clock again.
        let p = m.predict(&t.config(&[1, 2])).unwrap();
        assert_eq!(p, t.evaluate(&[1, 2]));
    }

    #[test]
    fn a_policy_slows_the_devices_it_names_and_the_cpu_ceiling_still_holds() {
        let busy = GpuBusy {
            nodes: 2,
            types: BTreeMap::from([("gpu".to_string(), TypeBusy::seconds(4.0))]),
        };
        let g = gpus();
        let nodes = [slot("c1", "cpu"), slot("g1", "gpu")];
        let clocks = |devices, ceiling| {
            let gears = Gears {
                devices,
                cpu_ceiling_ghz: ceiling,
            };
            let t = WithGpus::new(&Flat, &g, Some(&busy), gears)
                .table(&nodes)
                .unwrap();
            t.nodes
                .iter()
                .map(|r| {
                    r.choices
                        .iter()
                        .map(|c| (c.freq_ghz, c.gpu_mhz))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            clocks(Devices::Cpu, None),
            [
                vec![(1.0, None), (2.0, None)],
                vec![(1.0, None), (2.0, None)]
            ]
        );
        assert_eq!(
            clocks(Devices::Gpu, None),
            [vec![(2.0, None)], vec![(2.0, Some(800)), (2.0, None)]]
        );
        assert_eq!(
            clocks(Devices::Gpu, Some(1.5)),
            [vec![(1.0, None)], vec![(1.0, Some(800)), (1.0, None)]]
        );
    }
}
