//! Ready-made wire values for other crates' tests (feature `fixtures`, a dev-dependency
//! only): one home for a decision that both the library's and the protocol's tests read.

use crate::record::Decision;

/// A planned decision of job 4242 for nodes n1..=n of type `std`, the even ones at
/// 1.8 GHz and the odd ones at 2.2.
pub fn planned_decision(n: usize) -> Decision {
    let nodes: Vec<serde_json::Value> = (1..=n)
        .map(|i| {
            let f = if i % 2 == 0 { 1.8 } else { 2.2 };
            serde_json::json!({"name": format!("n{i}"), "type": "std", "freq_ghz": f})
        })
        .collect();
    let est = serde_json::json!({"time_s": 100.0, "energy_j": 3.0e7, "avg_power_w": 3.0e5});
    serde_json::from_value(serde_json::json!({
        "job_id": 4242, "verdict": "planned", "reason": "", "policy": "min-energy",
        "profile": "lammps", "profile_version": "3", "power_cap_w": null, "reserved_w": 1.0e5,
        "plan": {"policy": "min-energy", "feasible": true, "reason": "", "node_count": n,
            "nodes": nodes, "predicted": est, "baseline": est, "objective": 1.0,
            "search": {"algorithm": "exact", "candidates": 1, "elapsed_us": 1}},
        "decided_at": 1_795_000_000
    }))
    .expect("the fixture is a valid decision")
}
