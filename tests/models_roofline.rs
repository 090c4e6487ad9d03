//! Paper 001: balance points from Tables 3 and 4, and eqs. 1-8 and 10.

mod models_common;

use std::path::Path;

use greenup::model::roofline::Machine;
use greenup::model::{Config, NodeSetting};
use greenup::profile::Profile;
use models_common::*;

/// Table 3 peaks (GFLOP/s single, double; GB/s) and Table 4 fits (pJ/flop single,
/// double; pJ/byte; W).
struct Platform {
    name: &'static str,
    gflops_s: f64,
    gflops_d: f64,
    gbs: f64,
    eps_s: f64,
    eps_d: f64,
    eps_mem: f64,
    pi0: f64,
}

const PLATFORMS: [Platform; 3] = [
    Platform {
        name: "GTX 680",
        gflops_s: 3532.8,
        gflops_d: 147.2,
        gbs: 192.2,
        eps_s: 43.2,
        eps_d: 262.9,
        eps_mem: 437.5,
        pi0: 66.37,
    },
    Platform {
        name: "GTX 580",
        gflops_s: 1581.06,
        gflops_d: 197.63,
        gbs: 192.4,
        eps_s: 99.7,
        eps_d: 212.0,
        eps_mem: 513.0,
        pi0: 122.0,
    },
    Platform {
        name: "i7-950",
        gflops_s: 106.56,
        gflops_d: 53.28,
        gbs: 25.6,
        eps_s: 371.0,
        eps_d: 670.0,
        eps_mem: 795.0,
        pi0: 122.0,
    },
];

fn machine(p: &Platform, double: bool) -> Machine {
    let (gf, eps) = if double {
        (p.gflops_d, p.eps_d)
    } else {
        (p.gflops_s, p.eps_s)
    };
    Machine {
        tau_flop: 1.0 / (gf * 1e9),
        tau_mem: 1.0 / (p.gbs * 1e9),
        eps_flop: eps * 1e-12,
        eps_mem: p.eps_mem * 1e-12,
        pi0: p.pi0,
    }
}

#[test]
fn table4_balance_points() {
    // B_tau = peak flops / peak bytes; B_eps = eps_mem / eps_flop.
    let want = [
        // (B_tau single, B_eps single, B_tau double, B_eps double)
        (3532.8 / 192.2, 437.5 / 43.2, 147.2 / 192.2, 437.5 / 262.9),
        (1581.06 / 192.4, 513.0 / 99.7, 197.63 / 192.4, 513.0 / 212.0),
        (106.56 / 25.6, 795.0 / 371.0, 53.28 / 25.6, 795.0 / 670.0),
    ];
    for (p, w) in PLATFORMS.iter().zip(want) {
        let s = machine(p, false);
        let d = machine(p, true);
        assert!(close(s.time_balance(), w.0, 1e-12), "{}", p.name);
        assert!(close(s.energy_balance(), w.1, 1e-12));
        assert!(close(d.time_balance(), w.2, 1e-12));
        assert!(close(d.energy_balance(), w.3, 1e-12));
        // Fig. 5: in single precision every platform has B^_eps <= B_eps < B_tau.
        assert!(s.energy_balance() < s.time_balance(), "{}", p.name);
        // Where the time penalty vanishes (I >= B_tau), B^_eps(I) = eta B_eps <= B_eps.
        for i in [1.0, 2.0, 4.0] {
            let i = i * s.time_balance();
            let b_hat = s.effective_energy_balance(i);
            assert!(close(b_hat, s.eta_flop() * s.energy_balance(), 1e-12));
            assert!(b_hat <= s.energy_balance());
        }
    }
    // Fig. 4: the GPUs in double precision have B^_eps < B_tau < B_eps (at I = B_tau).
    for p in &PLATFORMS[..2] {
        let d = machine(p, true);
        let bt = d.time_balance();
        assert!(
            d.effective_energy_balance(bt) < bt && bt < d.energy_balance(),
            "{}",
            p.name
        );
    }
    // Table 2's Fermi sample: B_tau ~ 3.6, B_eps ~ 14.4.
    let fermi = Machine {
        tau_flop: 1.0 / 515e9,
        tau_mem: 1.0 / 144e9,
        eps_flop: 25e-12,
        eps_mem: 360e-12,
        pi0: 0.0,
    };
    assert!((fermi.time_balance() - 3.6).abs() < 0.05);
    assert!((fermi.energy_balance() - 14.4).abs() < 1e-9);
}

#[test]
fn eq5_and_eq7_agree_with_eqs_3_and_4() {
    for p in &PLATFORMS {
        for double in [false, true] {
            let m = machine(p, double);
            let w = 1e12;
            for i in [0.1, 0.5, 1.0, 2.0, 8.0, 64.0] {
                let q = w / i;
                let t = m.time(w, q);
                let e = m.energy(w, q);
                // Eq. 3: T = W tau_flop max(1, B_tau / I).
                assert!(close(
                    t,
                    w * m.tau_flop * (1f64).max(m.time_balance() / i),
                    1e-12
                ));
                // Eq. 5: E = W eps^_flop (1 + B^_eps(I) / I), eps^ = eps_flop + pi0 tau_flop.
                let eps_hat = m.eps_flop + m.pi0 * m.tau_flop;
                assert!(
                    close(
                        e,
                        w * eps_hat * (1.0 + m.effective_energy_balance(i) / i),
                        1e-12
                    ),
                    "{} I={i}",
                    p.name
                );
                // Eq. 7: P = E / T.
                assert!(close(m.power_line(i), e / t, 1e-12));
            }
        }
    }
}

#[test]
fn eq8_bounds_without_constant_power() {
    let mut m = machine(&PLATFORMS[1], true);
    m.pi0 = 0.0;
    let pi_flop = m.eps_flop / m.tau_flop;
    let gap = m.energy_balance() / m.time_balance();
    for k in 0..200 {
        let i = 0.01 * 1.05f64.powi(k);
        let pw = m.power_line(i);
        assert!(
            pw >= pi_flop * gap.min(1.0) - 1e-9 && pw <= pi_flop * (1.0 + gap) + 1e-9,
            "I={i}: {pw}"
        );
    }
    // The maximum is at I = B_tau.
    assert!(close(
        m.power_line(m.time_balance()),
        pi_flop * (1.0 + gap),
        1e-12
    ));
}

#[test]
fn predictor_splits_the_job_over_nodes_with_cache_term() {
    // i7-950 double precision; 4 nodes; W = 8e11 flops, Q = 1.6e12 bytes, 4e11 cache accesses at 1e-11 J.
    let text = "
name: roof
version: 1
roofline:
  flops: 8.0e11
  bytes: 1.6e12
  cache_accesses: 4.0e11
  eps_cache_j: 1.0e-11
  tau_flop_s: \"1 / 53.28e9 * 3.0 / f\"
  tau_mem_s: \"1 / 25.6e9\"
  eps_flop_j: 670e-12
  eps_mem_j: 795e-12
  pi0_w: 122
";
    let p = Profile::from_str(Path::new("roof.yaml"), text).unwrap();
    let site = table1_site(1);
    let model = p.predictor(&site).unwrap();
    for f in [1.5, 3.0] {
        let cfg = Config {
            nodes: (0..4)
                .map(|i| NodeSetting {
                    gpu_mhz: None,
                    name: format!("n{}", i + 1),
                    node_type: "t".into(),
                    freq_ghz: f,
                })
                .collect(),
        };
        let out = model.predict(&cfg).unwrap();
        let (w, q, qc) = (2e11, 4e11, 1e11);
        let t = (w / 53.28e9 * 3.0 / f).max(q / 25.6e9);
        let e = 4.0 * (w * 670e-12 + q * 795e-12 + qc * 1e-11 + 122.0 * t);
        assert!(close(out.time_s, t, 1e-12), "f={f}");
        assert!(close(out.energy_j, e, 1e-12), "f={f}");
    }
}
