//! What the in-job MPI runtime's measurements are worth in the site's terms. The runtime's
//! contract with the node (its settings, control files and rank files) is the crate
//! `greenup-comm`, re-exported here so that the library speaks of one `comm`.

pub use greenup_comm::*;

use crate::model::NodeType;

/// Joules communication-phase DVFS saved on this node: the runtime's own figure when
/// it gave one, else an estimate from the node type's dynamic power. Each rank lowers
/// one core, and the node's dynamic power spreads over its CPUs, so the core-seconds
/// lowered (`ranks × low_s`) save `(P_dyn(f_run) − P_dyn(f_low)) / cpus` watts each.
/// Dynamic power only: a blocking wait that idles the core saves more, uncounted.
/// `None` without the CPU count or a usable power model.
pub fn saved_j(c: &NodeComm, node_type: &NodeType, f_run: f64, f_low: f64) -> Option<f64> {
    if let Some(Joules(j)) = c.saved_j {
        return Some(j);
    }
    let cpus = c.cpus.filter(|c| *c > 0)?;
    if !(f_run.is_finite() && f_low.is_finite() && f_run > 0.0 && f_low > 0.0) {
        return None;
    }
    let watts = node_type.dynamic_w(f_run).ok()? - node_type.dynamic_w(f_low).ok()?;
    let joules = f64::from(c.ranks) * c.low_s.0 * watts.max(0.0) / f64::from(cpus);
    joules.is_finite().then_some(joules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_type() -> crate::model::NodeType {
        crate::model::NodeType {
            name: "t".into(),
            freqs_ghz: vec![1.0, 2.4, 3.0],
            power: crate::model::PowerModel::AtMax {
                dynamic_w: 120.0,
                static_w: 50.0,
                gamma: 3.0,
            },
        }
    }

    #[test]
    fn the_saving_is_the_lowered_core_seconds_times_one_cpus_dynamic_power_drop() {
        let c = NodeComm {
            ranks: 1,
            low_s: Seconds(10.0),
            cpus: Some(4),
            ..NodeComm::default()
        };
        // By hand: 120 W × 0.8³ = 61.44 W at 2.4 GHz, 120 W / 27 = 4.444 W at 1.0 GHz;
        // 10 s × (61.44 − 4.444) W / 4 CPUs = 142.49 J.
        let want = 10.0 * (61.44 - 120.0 / 27.0) / 4.0;
        let got = saved_j(&c, &node_type(), 2.4, 1.0).unwrap();
        assert!((got - want).abs() < 1e-9, "{got} != {want}");
        assert!((got - 142.49).abs() < 0.01);
        // Two ranks lower twice the core-seconds.
        let two = NodeComm {
            ranks: 2,
            ..c.clone()
        };
        assert!((saved_j(&two, &node_type(), 2.4, 1.0).unwrap() - 2.0 * want).abs() < 1e-9);
        // Running at the low gear already saves nothing.
        assert_eq!(saved_j(&c, &node_type(), 1.0, 1.0), Some(0.0));
    }

    #[test]
    fn without_a_cpu_count_there_is_no_estimate_but_the_runtimes_own_is_kept() {
        let c = NodeComm {
            ranks: 1,
            low_s: Seconds(10.0),
            ..NodeComm::default()
        };
        assert_eq!(saved_j(&c, &node_type(), 2.4, 1.0), None);
        let own = NodeComm {
            saved_j: Some(Joules(7.0)),
            cpus: Some(4),
            ..c
        };
        assert_eq!(saved_j(&own, &node_type(), 2.4, 1.0), Some(7.0));
        // A record from before the field loads, without it.
        let old: NodeComm = serde_json::from_str(
            r#"{"ranks":1,"incomplete":0,"compute_s":1,"comm_s":1,"bytes":0,"calls":0,"low_s":1,"transitions":0}"#,
        )
        .unwrap();
        assert_eq!(old.cpus, None);
    }
}
