//! The points a report plots, drawn from a model's [`SweepTable`] rather than from
//! any optimizer's internals: the configurations a makespan sweep visits, every
//! uniform frequency, and a fixed pseudo-random sample of mixed frequency vectors.

use serde::{Deserialize, Serialize};

use crate::model::{Config, ModelError, NodeSetting, NodeSlot, Predictor, SweepTable};

/// Where a candidate point comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A makespan bound of the exact sweep: each node at the lowest frequency that fits it.
    Sweep,
    /// Every node at the same frequency (or its nearest lower one).
    Uniform,
    /// A mixed frequency vector from a fixed pseudo-random sample.
    Mixed,
}

/// One configuration's predicted cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Node count of the configuration.
    pub nodes: usize,
    /// Predicted wall time in seconds.
    pub time_s: f64,
    /// Predicted energy in joules.
    pub energy_j: f64,
    /// Where it comes from.
    pub kind: Kind,
}

/// What the landscape plot draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Landscape {
    /// Plot title, e.g. `job 4242: lammps v3, min-energy`.
    pub title: String,
    /// Every candidate point.
    pub candidates: Vec<Candidate>,
    /// The energy cap in joules (a horizontal line).
    pub energy_cap_j: Option<f64>,
    /// The power cap in watts (the line E = P * T).
    pub power_cap_w: Option<f64>,
    /// The decision's predicted (time, energy).
    pub chosen: Option<(f64, f64)>,
    /// The baseline's predicted (time, energy).
    pub baseline: Option<(f64, f64)>,
}

/// One point of the EE-against-node-count plot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EePoint {
    /// Node count.
    pub nodes: usize,
    /// Frequency every node runs at, in GHz.
    pub freq_ghz: f64,
    /// Iso-energy-efficiency EE = E1 / Ep.
    pub ee: f64,
}

/// What the EE plot draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EeCurves {
    /// Plot title.
    pub title: String,
    /// Points, one curve per frequency.
    pub points: Vec<EePoint>,
    /// The decision's node count and EE, marked on the plot.
    pub chosen: Option<(usize, f64)>,
}

/// Largest number of sweep bounds and mixed vectors taken from one table, so
/// a 10,000-node table still gives a plot of a few thousand points.
const MAX_SWEEP: usize = 400;
const MIXED: usize = 200;

/// Candidate points of one table: the sweep's bounds, uniform frequencies and a mixed sample.
pub fn sample(table: &SweepTable) -> Vec<Candidate> {
    let n = table.nodes.len();
    let mut out = Vec::new();
    if n == 0 || table.nodes.iter().any(|r| r.choices.is_empty()) {
        return out;
    }
    let point = |pick: &[usize], kind| {
        let (time_s, energy_j) = table.totals(pick);
        Candidate {
            nodes: n,
            time_s,
            energy_j,
            kind,
        }
    };

    let mut taus: Vec<f64> = table
        .nodes
        .iter()
        .flat_map(|r| r.choices.iter().map(|c| c.compute_s))
        .collect();
    taus.sort_by(f64::total_cmp);
    taus.dedup();
    let step = taus.len().div_ceil(MAX_SWEEP).max(1);
    for &tau in taus.iter().step_by(step) {
        // Lowest frequency (first choice) whose compute time fits the bound.
        let pick: Option<Vec<usize>> = table
            .nodes
            .iter()
            .map(|r| r.choices.iter().position(|c| c.compute_s <= tau))
            .collect();
        if let Some(pick) = pick {
            out.push(point(&pick, Kind::Sweep));
        }
    }

    let mut freqs: Vec<f64> = table
        .nodes
        .iter()
        .flat_map(|r| r.choices.iter().map(|c| c.freq_ghz))
        .collect();
    freqs.sort_by(f64::total_cmp);
    freqs.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    for f in freqs {
        let pick: Vec<usize> = table
            .nodes
            .iter()
            .map(|r| {
                r.choices
                    .iter()
                    .rposition(|c| c.freq_ghz <= f + 1e-9)
                    .unwrap_or(0)
            })
            .collect();
        out.push(point(&pick, Kind::Uniform));
    }

    // A fixed xorshift sequence: the same table always gives the same plot.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15 ^ (n as u64);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    if table.nodes.iter().any(|r| r.choices.len() > 1) {
        for _ in 0..MIXED {
            let pick: Vec<usize> = table
                .nodes
                .iter()
                .map(|r| (next() % r.choices.len() as u64) as usize)
                .collect();
            out.push(point(&pick, Kind::Mixed));
        }
    }
    out
}

/// The Pareto front of (time, energy) points: no other point is both faster and cheaper.
/// Returned sorted by time.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut p: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(t, e)| t.is_finite() && e.is_finite())
        .collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut front: Vec<(f64, f64)> = Vec::new();
    for q in p {
        if front.last().is_none_or(|last| q.1 < last.1) {
            front.push(q);
        }
    }
    front
}

impl Landscape {
    /// The Pareto front of the candidates.
    pub fn front(&self) -> Vec<(f64, f64)> {
        let pts: Vec<(f64, f64)> = self
            .candidates
            .iter()
            .map(|c| (c.time_s, c.energy_j))
            .collect();
        pareto_front(&pts)
    }
}

/// Candidates over node counts `counts`, each count using the first `n` of `slots`.
pub fn candidates(
    predictor: &dyn Predictor,
    slots: &[NodeSlot],
    counts: impl IntoIterator<Item = usize>,
) -> Result<Vec<Candidate>, ModelError> {
    let mut out = Vec::new();
    for n in counts {
        if n == 0 || n > slots.len() {
            continue;
        }
        out.extend(sample(&predictor.table(&slots[..n])?));
    }
    Ok(out)
}

/// EE for every node count in `counts` and every frequency of the first slot,
/// all nodes at that frequency (or their nearest lower one). Empty when the model has no EE.
pub fn ee_points(
    predictor: &dyn Predictor,
    slots: &[NodeSlot],
    counts: impl IntoIterator<Item = usize>,
) -> Result<Vec<EePoint>, ModelError> {
    let freqs = slots
        .first()
        .map(|s| s.freqs_ghz.clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for n in counts {
        if n == 0 || n > slots.len() {
            continue;
        }
        for &f in &freqs {
            let config = Config {
                nodes: slots[..n]
                    .iter()
                    .map(|s| NodeSetting {
                        gpu_mhz: None,
                        name: s.name.clone(),
                        node_type: s.node_type.clone(),
                        freq_ghz: s
                            .freqs_ghz
                            .iter()
                            .copied()
                            .rfind(|g| *g <= f + 1e-9)
                            .unwrap_or(f),
                    })
                    .collect(),
            };
            let p = predictor.predict(&config)?;
            if let Some(ee) = predictor.efficiency(&config, &p) {
                out.push(EePoint {
                    nodes: n,
                    freq_ghz: f,
                    ee,
                });
            }
        }
    }
    Ok(out)
}
