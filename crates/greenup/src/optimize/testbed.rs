//! Paper 004's Table I node types and random instances built on them, shared by
//! the optimizer experiment (`examples/alg1_gap.rs`), the benchmarks and the tests.

use crate::model::{Choice, NodeChoices, SweepTable};

/// One node type of paper 004, Table I.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaperNodeType {
    /// Simulated GFLOPS at maximum frequency.
    pub gflops: f64,
    /// Maximum frequency in GHz.
    pub fmax: f64,
    /// Minimum frequency in GHz.
    pub fmin: f64,
    /// Step between gears in GHz.
    pub fdiff: f64,
    /// Dynamic watts at maximum frequency.
    pub dynamic_w: f64,
    /// Static watts.
    pub static_w: f64,
}

/// The four node types of Table I.
pub const TABLE_I: [PaperNodeType; 4] = [
    PaperNodeType {
        gflops: 40.0,
        fmax: 2.50,
        fmin: 1.20,
        fdiff: 0.100,
        dynamic_w: 20.0,
        static_w: 4.0,
    },
    PaperNodeType {
        gflops: 50.0,
        fmax: 2.66,
        fmin: 1.60,
        fdiff: 0.133,
        dynamic_w: 25.0,
        static_w: 5.0,
    },
    PaperNodeType {
        gflops: 60.0,
        fmax: 2.90,
        fmin: 1.20,
        fdiff: 0.100,
        dynamic_w: 30.0,
        static_w: 6.0,
    },
    PaperNodeType {
        gflops: 70.0,
        fmax: 3.40,
        fmin: 1.60,
        fdiff: 0.133,
        dynamic_w: 35.0,
        static_w: 7.0,
    },
];

impl PaperNodeType {
    /// The gears, ascending: F_max minus whole steps, down to F_min. A step that
    /// lands within 0.01 GHz of F_min counts as F_min (2.66 - 8 x 0.133 = 1.596).
    pub fn freqs(&self) -> Vec<f64> {
        let mut f = Vec::new();
        let mut k = 0.0;
        loop {
            let v = self.fmax - k * self.fdiff;
            if v < self.fmin - 0.01 {
                break;
            }
            f.push(v);
            k += 1.0;
        }
        f.reverse();
        f
    }
}

/// A small deterministic random source (SplitMix64), so experiments repeat exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// A random paper-004 instance and the paper's own baseline for it.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The table (one iteration): compute time T_cp * S and dynamic energy S^-2 P_d T_cp per gear.
    pub table: SweepTable,
    /// T_Old = max_i (T_cp_i + T_cm_i), eq. 12.
    pub t_old: f64,
    /// E_Original = sum_i P_d_i T_cp_i + sum_i P_s_i T_Old, Algorithm 1 line 8.
    pub e_original: f64,
}

/// A random instance of `n` nodes of the Table I types in equal proportion (node i
/// has type i mod 4). Work per iteration is shared evenly, so T_cp is inversely
/// proportional to the type's GFLOPS, with +-10 % noise per node; communication
/// takes 5 % to 200 % of the mean compute time, +-20 % per node.
pub fn instance(n: usize, rng: &mut Rng) -> Instance {
    instance_with(n, rng, true)
}

/// Like [`instance`]; without `per_node_noise` every node of a type has the same
/// times, as a model built from per-type parameters predicts.
pub fn instance_with(n: usize, rng: &mut Rng, per_node_noise: bool) -> Instance {
    let work_gflop = rng.uniform(10.0, 100.0);
    let mean_tcp = TABLE_I.iter().map(|t| work_gflop / t.gflops).sum::<f64>() / 4.0;
    let comm = rng.uniform(0.05, 2.0) * mean_tcp;
    let mut nodes = Vec::with_capacity(n);
    let mut t_old: f64 = 0.0;
    let mut min_tcm = f64::INFINITY;
    let mut dyn_at_max = 0.0;
    for i in 0..n {
        let ty = &TABLE_I[i % 4];
        let (a, b) = if per_node_noise {
            (rng.uniform(0.9, 1.1), rng.uniform(0.8, 1.2))
        } else {
            (1.0, 1.0)
        };
        let tcp = work_gflop / ty.gflops * a;
        let tcm = comm * b;
        t_old = t_old.max(tcp + tcm);
        min_tcm = min_tcm.min(tcm);
        dyn_at_max += ty.dynamic_w * tcp;
        let choices = ty
            .freqs()
            .into_iter()
            .map(|f| {
                let s = ty.fmax / f;
                Choice {
                    wait_w: 0.0,
                    gpu_mhz: None,
                    freq_ghz: f,
                    compute_s: tcp * s,
                    dynamic_j: ty.dynamic_w * tcp / (s * s),
                }
            })
            .collect();
        nodes.push(NodeChoices {
            name: format!("n{i}"),
            node_type: format!("type{}", i % 4 + 1),
            choices,
            static_w: ty.static_w,
        });
    }
    let table = SweepTable {
        nodes,
        fixed_time_s: if n == 0 { 0.0 } else { min_tcm },
        fixed_energy_j: 0.0,
        steps: None,
    };
    let e_original = dyn_at_max + table.static_w() * t_old;
    Instance {
        table,
        t_old,
        e_original,
    }
}
