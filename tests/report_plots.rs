//! The plots' inputs and outputs: the landscape's candidates reach the true
//! Pareto front (checked against every configuration), and both SVGs carry
//! their marks and legend. Set GREENUP_PLOT_DIR to keep the SVGs.

mod report_fixture;

use greenup::report::landscape::{self, Candidate, EeCurves, EePoint, Kind, Landscape};
use greenup::report::svg;
use report_fixture::table_i;

/// Every pick of a table, by counting in mixed radix.
fn all_picks(sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![];
    let mut pick = vec![0; sizes.len()];
    loop {
        out.push(pick.clone());
        let mut i = 0;
        loop {
            if i == sizes.len() {
                return out;
            }
            pick[i] += 1;
            if pick[i] < sizes[i] {
                break;
            }
            pick[i] = 0;
            i += 1;
        }
    }
}

/// Quadratic dominance check, independent of `pareto_front`'s sort-and-scan.
fn oracle_front(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut f: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| {
            !points
                .iter()
                .any(|q| (q.0 <= p.0 && q.1 < p.1) || (q.0 < p.0 && q.1 <= p.1))
        })
        .collect();
    f.sort_by(|a, b| a.0.total_cmp(&b.0));
    f.dedup();
    f
}

#[test]
fn sweep_candidates_reach_the_true_pareto_front() {
    let table = table_i(3, 6_000.0, 5.0);
    let sizes: Vec<usize> = table.nodes.iter().map(|n| n.choices.len()).collect();
    let every: Vec<(f64, f64)> = all_picks(&sizes).iter().map(|p| table.totals(p)).collect();
    assert_eq!(every.len(), 14 * 9 * 18);
    let truth = oracle_front(&every);
    let sampled: Vec<(f64, f64)> = landscape::sample(&table)
        .iter()
        .map(|c| (c.time_s, c.energy_j))
        .collect();
    let got = landscape::pareto_front(&sampled);
    assert_eq!(got.len(), truth.len());
    for (a, b) in got.iter().zip(&truth) {
        assert!(
            (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-6,
            "{a:?} != {b:?}"
        );
    }
    // And the front of everything computed by the scan equals the oracle.
    assert_eq!(landscape::pareto_front(&every).len(), truth.len());
}

#[test]
fn sample_kinds() {
    let table = table_i(4, 8_000.0, 5.0);
    let c = landscape::sample(&table);
    let count = |k| c.iter().filter(|x| x.kind == k).count();
    // Uniform: every distinct frequency of the four Table I types.
    let mut freqs: Vec<f64> = table
        .nodes
        .iter()
        .flat_map(|n| n.choices.iter().map(|c| c.freq_ghz))
        .collect();
    freqs.sort_by(f64::total_cmp);
    freqs.dedup();
    assert_eq!(count(Kind::Uniform), freqs.len());
    assert_eq!(count(Kind::Mixed), 200);
    assert!(count(Kind::Sweep) > 0);
    assert!(c.iter().all(|x| x.nodes == 4));
    // Deterministic: the same table gives the same plot.
    assert_eq!(c, landscape::sample(&table));
}

/// The landscape the docs show: 4 to 16 Table I nodes sharing 144,000 GFLOP, with
/// communication growing with the node count; min-time under both caps.
pub fn demo_landscape() -> Landscape {
    let mut candidates: Vec<Candidate> = Vec::new();
    for n in [4, 8, 12, 16] {
        candidates.extend(landscape::sample(&table_i(n, 144_000.0, 8.0 * n as f64)));
    }
    let energy_cap = 75_000.0;
    let power_cap = 110.0;
    let chosen = candidates
        .iter()
        .filter(|c| c.energy_j <= energy_cap && c.energy_j / c.time_s <= power_cap)
        .min_by(|a, b| a.time_s.total_cmp(&b.time_s))
        .map(|c| (c.time_s, c.energy_j));
    let base = table_i(16, 144_000.0, 8.0 * 16.0);
    let baseline = Some(base.totals(&base.max_pick()));
    Landscape {
        title: "job 4242: lammps v3, min-time under caps (4-16 nodes, paper 004 Table I)".into(),
        candidates,
        energy_cap_j: Some(energy_cap),
        power_cap_w: Some(power_cap),
        chosen,
        baseline,
    }
}

/// EE of a job whose overhead energy grows with p and shrinks with f (shape of paper 000's EP/FT).
pub fn demo_ee() -> EeCurves {
    let mut points = vec![];
    for f in [2.8, 2.4, 2.0, 1.6] {
        for p in 1..=16usize {
            let eef = 0.012 * (p as f64 - 1.0) * (1.0 + 1.6 / f);
            points.push(EePoint {
                nodes: p,
                freq_ghz: f,
                ee: 1.0 / (1.0 + eef),
            });
        }
    }
    let chosen = points
        .iter()
        .find(|p| p.nodes == 8 && p.freq_ghz == 2.0)
        .map(|p| (p.nodes, p.ee));
    EeCurves {
        title: "npb-ep: EE against node count".into(),
        points,
        chosen,
    }
}

fn keep(name: &str, svg: &str) {
    if let Ok(dir) = std::env::var("GREENUP_PLOT_DIR") {
        std::fs::write(std::path::Path::new(&dir).join(name), svg).unwrap();
    }
}

#[test]
fn landscape_svg_has_every_mark() {
    let l = demo_landscape();
    assert!(l.chosen.is_some(), "some candidate meets both caps");
    let s = svg::landscape(&l).unwrap();
    assert!(s.starts_with("<svg"));
    for label in [
        "Pareto front",
        "chosen",
        "energy cap 75.00 kJ",
        "power cap 110.0 W",
        "baseline",
        "predicted time",
        "predicted energy",
    ] {
        assert!(s.contains(label), "missing {label}");
    }
    keep("landscape.svg", &s);
}

#[test]
fn ee_svg() {
    let s = svg::ee_vs_nodes(&demo_ee()).unwrap();
    for label in [
        "2.80 GHz",
        "1.60 GHz",
        "chosen",
        "EE = E1 / Ep",
        "nodes (p)",
    ] {
        assert!(s.contains(label), "missing {label}");
    }
}

/// EE of NAS FT with paper 000's SystemG vectors (etc/profiles/ft.yaml), all nodes at one frequency.
#[test]
fn ee_svg_from_paper_000_ft() {
    use greenup::model::NodeSlot;
    let profile =
        greenup::profile::Profile::load(std::path::Path::new("etc/profiles/ft.yaml")).unwrap();
    let model = profile.iso_energy().unwrap();
    let slots: Vec<NodeSlot> = (1..=64)
        .map(|i| NodeSlot {
            name: format!("n{i}"),
            node_type: "systemg".into(),
            freqs_ghz: vec![1.6, 2.0, 2.4, 2.8],
        })
        .collect();
    let points = landscape::ee_points(model, &slots, [1, 2, 4, 8, 16, 32, 64]).unwrap();
    assert_eq!(points.len(), 7 * 4);
    // On one node there is no parallel overhead: Ep = E1, EE = 1.
    for p in points.iter().filter(|p| p.nodes == 1) {
        assert!((p.ee - 1.0).abs() < 1e-9, "{p:?}");
    }
    // Overhead grows with p: EE falls at every frequency.
    for f in [1.6, 2.0, 2.4, 2.8] {
        let curve: Vec<f64> = points
            .iter()
            .filter(|p| p.freq_ghz == f)
            .map(|p| p.ee)
            .collect();
        assert!(curve.windows(2).all(|w| w[1] < w[0]), "{f} GHz: {curve:?}");
    }
    let chosen = points
        .iter()
        .find(|p| p.nodes == 16 && p.freq_ghz == 2.0)
        .map(|p| (p.nodes, p.ee));
    let curves = EeCurves {
        title: "ft (paper 000 SystemG vectors): EE against node count".into(),
        points,
        chosen,
    };
    let s = svg::ee_vs_nodes(&curves).unwrap();
    keep("ee-vs-nodes.svg", &s);
}

#[test]
fn empty_inputs_are_errors_not_panics() {
    assert!(svg::landscape(&Landscape::default()).is_err());
    assert!(svg::ee_vs_nodes(&EeCurves::default()).is_err());
}
