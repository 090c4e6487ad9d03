//! What one node is told of a job's decision ([`NodeSettings`]): its frequency, its GPUs'
//! clock, its share of the job's watts, and communication-phase DVFS. [`NodeSettings::of`]
//! is the one rule for what a node is told; what the node's type adds (its lowest gear,
//! its share of a grant split between CPUs and GPUs) the decision library fills in
//! (`power::split::with_node_type`).

use serde::{Deserialize, Serialize};

use greenup_comm::CommDvfs;
use greenup_core::plan::{Estimate, PlannedNode};
use greenup_core::quantity::{Ghz, Watts};

use crate::power::{GpuPart, Grant};
use crate::record::{Decision, Verdict};

/// What a plan sets on one node: its CPU frequency and, on a GPU node, its GPUs' clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeGears {
    /// CPU frequency in GHz.
    pub freq_ghz: Ghz,
    /// SM clock of the job's GPUs in MHz; None leaves them at their top clock.
    pub gpu_mhz: Option<u32>,
}

impl NodeGears {
    /// A planned node's gears.
    pub fn of(n: &PlannedNode) -> NodeGears {
        NodeGears {
            freq_ghz: n.freq_ghz,
            gpu_mhz: n.gpu_mhz,
        }
    }
}

/// One node's part of a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSettings {
    /// Slurm job id.
    pub job_id: u64,
    /// The node.
    pub node: String,
    /// Whether the plan uses this node (false: the job is shrunk off it).
    pub used: bool,
    /// Frequency to set in GHz; `None` leaves the node as it is.
    pub freq_ghz: Option<Ghz>,
    /// SM clock to lock the job's GPUs on this node at, in MHz; `None` leaves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
    /// The job's verdict.
    pub verdict: Verdict,
    /// Why, in one line (empty when there is nothing to say).
    #[serde(default)]
    pub reason: String,
    /// Nodes the plan uses (the allocation's count when there is no plan).
    #[serde(default)]
    pub node_count: usize,
    /// The nodes the plan uses as a compressed hostlist, when they are fewer than the
    /// job holds: sent to the job's first node only, which shrinks the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_nodes: Option<String>,
    /// The plan's predicted time, energy and power, when there is a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Estimate>,
    /// Communication-phase DVFS for the job's MPI ranks on this node, its low gear
    /// resolved; absent when the job's policy does not ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_dvfs: Option<CommDvfs>,
    /// This node's share of the watts Slurm granted the job (on a GPU node, the CPU
    /// package's part of it): the RAPL long-term limit its prolog sets (`power.enforce:
    /// queue`); absent: the node's limit is left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<Watts>,
    /// On a GPU node, each GPU's part of the node's share and the power limit each of the
    /// job's GPUs is set to (the library's `power::split`); absent: GPU limits are left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_power: Option<GpuPart>,
    /// The in-job guard's terms (the promise, the baseline's rate or why there is none);
    /// absent when the job's policy promises no `max_slowdown`, or from an older greenupd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<greenup_comm::GuardTerms>,
    /// Whether greenup keeps the run as its application's measured baseline
    /// ([`Decision::measured_baseline`]): the node then measures its MPI steps, so the
    /// in-job guard of later runs has a baseline rate. Absent (false) from older greenupd.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline: bool,
    /// Whether greenupd asks Slurm itself how a job claimed completed really ended, so
    /// that the job's first node, once every node has reported, closes it without asking
    /// slurmctld (`scontrol`) in its epilog. Absent (false) from an older greenupd, or one
    /// started with `--no-slurm-check`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asks_slurm_end: bool,
    /// Whether greenupd takes a node's outcomes in one `end_node` request, and with them
    /// the first node's close once every node has reported: one round trip at the end of
    /// a one-node job. Absent (false) from an older greenupd.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ends_in_one: bool,
    /// The job's grant, carried from the decision to the library's
    /// `power::split::with_node_type`, which weighs this node's share by its type.
    #[serde(skip)]
    grant: Option<Grant>,
}

impl NodeSettings {
    /// `node`'s part of `d`, given the node's planned gears (`planned`: `None` when the
    /// plan leaves it out), how many nodes the job holds, and the used nodes' hostlist to
    /// hand on (the first node's only). The one rule for what a node is told.
    pub fn of(
        d: &Decision,
        node: &str,
        planned: Option<NodeGears>,
        allocated: usize,
        used_nodes: Option<String>,
    ) -> NodeSettings {
        let plan = d.plan.as_ref();
        let applied = planned.filter(|_| d.verdict.applies_plan());
        NodeSettings {
            job_id: d.job_id,
            node: node.to_string(),
            used: plan.is_none() || planned.is_some(),
            freq_ghz: applied.map(|g| g.freq_ghz),
            gpu_mhz: applied.and_then(|g| g.gpu_mhz),
            verdict: d.verdict,
            reason: d.reason.clone(),
            node_count: plan.map_or(allocated, |p| p.nodes.len()),
            used_nodes,
            predicted: plan.map(|p| p.predicted),
            comm_dvfs: d.comm_dvfs,
            power_limit_w: None,
            gpu_power: None,
            guard: d.guard,
            baseline: d.measured_baseline(),
            asks_slurm_end: false,
            ends_in_one: false,
            grant: d.grant,
        }
    }

    /// The job's grant, as the decision holds it: what the node's share is weighed from.
    pub fn grant(&self) -> Option<Grant> {
        self.grant
    }

    /// `node`'s part of `d`, looked up in the plan (linear in the job's size: for one
    /// node, not for every node of a job).
    pub fn from_decision(d: &Decision, node: &str, allocated: usize) -> NodeSettings {
        let planned = d
            .plan
            .as_ref()
            .and_then(|p| p.nodes.iter().find(|n| n.name == node))
            .map(NodeGears::of);
        NodeSettings::of(d, node, planned, allocated, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_power_limit_crosses_the_wire_as_a_bare_number() {
        let line = r#"{"job_id":7,"node":"n1","used":true,"freq_ghz":2.2,"verdict":"planned","reason":"","node_count":2,"power_limit_w":149.5}"#;
        let s: NodeSettings = serde_json::from_str(line).unwrap();
        assert_eq!(s.power_limit_w, Some(Watts(149.5)));
        assert_eq!(serde_json::to_string(&s).unwrap(), line);
    }

    #[test]
    fn a_nodes_clock_crosses_the_wire_as_a_bare_number_or_null() {
        let d: Decision = serde_json::from_str(
            r#"{"job_id": 7, "verdict": "planned", "reason": "", "policy": "min-energy",
            "profile": "lammps", "profile_version": "3", "power_cap_w": null,
            "reserved_w": 500.0, "decided_at": 1795000000, "plan": {"policy": "min-energy",
            "feasible": true, "reason": "", "node_count": 1, "objective": 1.0,
            "nodes": [{"name": "n1", "type": "std", "freq_ghz": 2.45, "gpu_mhz": 1410}],
            "predicted": {"time_s": 100.0, "energy_j": 3.0e4, "avg_power_w": 300.0},
            "baseline": {"time_s": 90.0, "energy_j": 4.0e4, "avg_power_w": 444.5},
            "search": {"algorithm": "exact", "candidates": 1, "elapsed_us": 1}}}"#,
        )
        .unwrap();
        // The planned node is told its gears; the node the plan leaves out, none.
        let used = NodeSettings::from_decision(&d, "n1", 2);
        let line = r#"{"job_id":7,"node":"n1","used":true,"freq_ghz":2.45,"gpu_mhz":1410,"verdict":"planned","reason":"","node_count":1,"predicted":{"time_s":100.0,"energy_j":30000.0,"avg_power_w":300.0}}"#;
        assert_eq!(serde_json::to_string(&used).unwrap(), line);
        let mut back: NodeSettings = serde_json::from_str(line).unwrap();
        back.grant = used.grant;
        assert_eq!(back, used);
        let left_out = NodeSettings::from_decision(&d, "n2", 2);
        let line = r#"{"job_id":7,"node":"n2","used":false,"freq_ghz":null,"verdict":"planned","reason":"","node_count":1,"predicted":{"time_s":100.0,"energy_j":30000.0,"avg_power_w":300.0}}"#;
        assert_eq!(serde_json::to_string(&left_out).unwrap(), line);
        let mut back: NodeSettings = serde_json::from_str(line).unwrap();
        back.grant = left_out.grant;
        assert_eq!(back, left_out);
    }
}
