//! A GPU node's power under a grant: the node weighs its CPUs and its GPUs, and its share
//! of the job's watts splits between the CPU package (its RAPL limit) and each GPU (its
//! NVML power limit) in proportion to what each is modelled to draw.
//!
//! The one home for that split: greenupd tells each node its parts ([`with_node_type`]
//! fills them into a node's `NodeSettings`), and the node's prolog clamps each GPU's part
//! again into the range NVML accepts with [`GpuPart::clamped`].

use greenup_core::quantity::{Ghz, Watts};

use crate::site::Site;

pub use greenup_wire::power::GpuPart;
use greenup_wire::settings::NodeSettings;

/// What one node is modelled to draw flat out: its CPUs at the frequency it is told, and
/// each of its GPUs at the GPU clock it is told.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeModel {
    /// The CPU part (the node type's power model), watts.
    pub cpu_w: Watts,
    /// One GPU, watts (0 on a node without GPUs).
    pub gpu_w: Watts,
    /// GPUs on the node.
    pub gpus: u32,
    /// The power limits the site lets greenup set on a GPU, watts (None: NVML's range).
    pub gpu_range_w: Option<(Watts, Watts)>,
}

impl NodeModel {
    /// The whole node: CPUs plus every GPU.
    pub fn total_w(&self) -> Watts {
        self.cpu_w + self.gpu_w * f64::from(self.gpus)
    }
}

/// `node`'s model at CPU frequency `freq_ghz` and GPU clock `gpu_mhz` (each its top one
/// when None), by the site config's watts. None for a node the site does not type, or
/// whose model draws nothing.
pub fn node_model(
    site: &Site,
    node: &str,
    freq_ghz: Option<Ghz>,
    gpu_mhz: Option<u32>,
) -> Option<NodeModel> {
    let t = site.node_type_of(node)?;
    let f = freq_ghz.map_or_else(|| t.fmax(), |f| f.0);
    // The site config's watts, not a learned curve: the licenses, job_submit's bounds
    // and every reservation are sized from the config, and a learned busy mean is no
    // bound on what a node may draw.
    let cpu_w = t.site_dynamic_w(f).ok()? + t.site_static_w(f).ok()?;
    let g = site.nodes.get(node).and_then(|n| site.gpu_types.get(n));
    let m = NodeModel {
        cpu_w: Watts(cpu_w),
        gpu_w: Watts(g.map_or(0.0, |g| g.busy_w(gpu_mhz))),
        gpus: g.map_or(0, |g| g.count),
        gpu_range_w: g
            .and_then(|g| g.power_limit_w)
            .map(|(lo, hi)| (Watts(lo), Watts(hi))),
    };
    let w = m.total_w().0;
    (cpu_w.is_finite() && cpu_w >= 0.0 && w.is_finite() && w > 0.0).then_some(m)
}

/// How a node's share of a grant splits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// The CPU package's part, watts: its RAPL long-term limit.
    pub cpu_w: Watts,
    /// Each GPU's part and limit; None on a node without GPUs.
    pub gpu: Option<GpuPart>,
}

/// Split `share_w` between the CPU package and each GPU of a node modelled by `m`, in
/// proportion to their modelled power. A GPU limit clamped at its lowest is not paid for
/// by the CPU: a CPU package held below what it idles at would starve the GPUs it feeds,
/// so the node may then draw [`GpuPart::over_w`] per GPU over its share, which is said.
pub fn split(share_w: Watts, m: &NodeModel) -> Split {
    let total = m.total_w().0;
    if m.gpus == 0 || total <= 0.0 {
        return Split {
            cpu_w: share_w,
            gpu: None,
        };
    }
    Split {
        cpu_w: Watts(share_w.0 * m.cpu_w.0 / total),
        gpu: Some(GpuPart::of(
            Watts(share_w.0 * m.gpu_w.0 / total),
            m.gpu_range_w,
        )),
    }
}

/// Fill in what `s`'s node type in `site` decides: the communication-phase low gear the
/// policy left unset (its type's lowest frequency; unknown type: the runtime's own
/// choice), and the node's share of the job's grant, in proportion to what it draws at
/// the frequency it is told (its top one when none), split between its CPU package and
/// its GPUs. What greenupd tells a node, after [`NodeSettings::of`] took its part of the
/// decision.
pub fn with_node_type(mut s: NodeSettings, site: &Site) -> NodeSettings {
    if let Some(c) = s.comm_dvfs.as_mut()
        && c.low_ghz.is_none()
    {
        c.low_ghz = site
            .node_type_of(&s.node)
            .map(|t| t.fmin())
            .filter(|f| *f > 0.0)
            .map(Ghz);
    }
    let parts = match (s.grant(), s.used) {
        (Some(g), true) => node_model(site, &s.node, s.freq_ghz, s.gpu_mhz)
            .map(|m| split(g.share_w(m.total_w()), &m)),
        _ => None,
    };
    s.power_limit_w = parts.map(|p| p.cpu_w);
    s.gpu_power = parts.and_then(|p| p.gpu);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // CPU: 200 W dynamic at 3.0 GHz (cube law), 100 W static; 4 GPUs: 600 W dynamic at
    // 1980 MHz, 100 W static, limits 200-700 W.
    const SITE: &str = "\
node_types:
  cpu:
    frequencies: [1.5, 3.0]
    power: {dynamic_w: 200, static_w: 100}
  gpu4:
    frequencies: [1.5, 3.0]
    power: {dynamic_w: 200, static_w: 100}
    gpus:
      count: 4
      clocks_mhz: {min: 990, max: 1980}
      power_limit: {min: 200W, max: 700W}
      power: {dynamic_w: 600, static_w: 100}
  gpu2:
    frequencies: [1.5, 3.0]
    power: {dynamic_w: 200, static_w: 100}
    gpus:
      count: 2
      power: {dynamic_w: 600, static_w: 100}
nodes:
  cpu: c1
  gpu4: g1
  gpu2: h1
";

    fn site() -> Site {
        crate::site::parse("/etc/slurm/greenup.yaml", SITE).unwrap()
    }

    fn close(a: Watts, b: f64) -> bool {
        (a.0 - b).abs() < 1e-9
    }

    #[test]
    fn a_gpu_nodes_weight_counts_its_gpus_at_the_clock_told() {
        let s = site();
        // Top clocks: CPU 300 W, each GPU 700 W, node 300 + 4 x 700 = 3100 W.
        let m = node_model(&s, "g1", None, None).unwrap();
        assert_eq!((m.cpu_w, m.gpu_w, m.gpus), (Watts(300.0), Watts(700.0), 4));
        assert!(close(m.total_w(), 3100.0));
        // CPU at 1.5 GHz: 200/8 + 100 = 125 W; GPUs at 990 MHz: 600/8 + 100 = 175 W.
        let m = node_model(&s, "g1", Some(Ghz(1.5)), Some(990)).unwrap();
        assert!(close(m.total_w(), 125.0 + 4.0 * 175.0), "{m:?}");
        // A clock above the top one counts as the top one; without a clock range every
        // clock is the top one.
        assert!(close(
            node_model(&s, "g1", None, Some(5000)).unwrap().gpu_w,
            700.0
        ));
        assert!(close(
            node_model(&s, "h1", None, Some(990)).unwrap().gpu_w,
            700.0
        ));
        // A CPU node is its CPU model alone, and the grant's weight is the whole node.
        let c = node_model(&s, "c1", None, None).unwrap();
        assert_eq!((c.gpus, c.gpu_w), (0, Watts(0.0)));
        assert!(close(
            crate::power::node_weight_w(&s, "g1", None, None).unwrap(),
            3100.0
        ));
        assert!(node_model(&s, "nowhere", None, None).is_none());
        // A pool's bounds for the job_submit script count the GPUs too: lowest CPU
        // frequency with the lowest GPU clock (125 + 4 x 175 W), and the top ones.
        let b = crate::power::slurm::bounds(&s, &["g1".to_string()]).unwrap();
        assert!(close(b.min_w, 825.0) && close(b.max_w, 3100.0), "{b:?}");
        // What an unplanned job is held at, and what a run at f_max must fit under, counts
        // the GPUs too: 3100 + (300 + 2 x 700) + 300 W, and nothing for an untyped node.
        let nodes = ["g1", "h1", "c1", "nowhere"].map(String::from);
        assert!(close(crate::power::max_power_w(&s, &nodes), 5100.0));
    }

    #[test]
    fn a_share_splits_in_proportion_and_each_gpu_is_clamped_into_its_range() {
        let s = site();
        let m = node_model(&s, "g1", None, None).unwrap();
        // 1550 W of a 3100 W node: CPU 1550 x 300/3100 = 150 W, each GPU 1550 x 700/3100
        // = 350 W, inside 200-700 W; the parts sum to the share.
        let p = split(Watts(1550.0), &m);
        assert!(close(p.cpu_w, 150.0), "{p:?}");
        let g = p.gpu.unwrap();
        assert!(close(g.part_w, 350.0) && close(g.limit_w, 350.0), "{g:?}");
        assert!(close(p.cpu_w + g.limit_w * 4.0, 1550.0));
        assert_eq!((g.over_w(), g.note()), (Watts(0.0), None));
        // 620 W: each GPU's part is 140 W, below its 200 W lowest limit: held at 200 W,
        // 60 W over its part, said; the CPU keeps its 60 W part.
        let p = split(Watts(620.0), &m);
        let g = p.gpu.unwrap();
        assert!(close(p.cpu_w, 60.0) && close(g.part_w, 140.0), "{p:?}");
        assert_eq!(g.limit_w, Watts(200.0));
        assert!(close(g.over_w(), 60.0));
        assert!(g.note().unwrap().contains("60.0 W above its 140.0 W part"));
        // 3720 W: each part is 840 W, above the 700 W highest limit: held at 700 W.
        let g = split(Watts(3720.0), &m).gpu.unwrap();
        assert!(close(g.part_w, 840.0) && g.limit_w == Watts(700.0));
        assert_eq!(g.over_w(), Watts(0.0));
        assert!(
            g.note()
                .unwrap()
                .contains("140.0 W of its 840.0 W part unused")
        );
        // NVML's range at the node clamps again; no range leaves the limit alone.
        let g = GpuPart::of(Watts(140.0), None);
        assert_eq!(g.limit_w, Watts(140.0));
        assert_eq!(
            g.clamped(Some((Watts(150.0), Watts(400.0)))).limit_w,
            Watts(150.0)
        );
        assert_eq!(
            GpuPart::of(Watts(350.0), None)
                .clamped(Some((Watts(100.0), Watts(300.0))))
                .limit_w,
            Watts(300.0)
        );
        // A CPU node's share is all the CPU's.
        let c = split(Watts(250.0), &node_model(&s, "c1", None, None).unwrap());
        assert_eq!((c.cpu_w, c.gpu), (Watts(250.0), None));
    }

    // What greenupd tells a node, by its type.
    use greenup_wire::record::Decision;
    use greenup_wire::settings::NodeGears;

    /// A planned decision for nodes n1..=n (greenup-wire's fixture).
    fn planned(n: usize) -> Decision {
        greenup_wire::fixtures::planned_decision(n)
    }

    #[test]
    fn a_nodes_comm_settings_take_its_types_lowest_gear_unless_the_policy_sets_one() {
        let site = crate::site::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../etc/greenup.yaml"
        ))
        .unwrap();
        let mut d = planned(2);
        assert_eq!(
            with_node_type(NodeSettings::from_decision(&d, "n1", 2), &site).comm_dvfs,
            None
        );
        d.comm_dvfs = Some(crate::comm::CommDvfs::default());
        // n1 is fast (1.0 to 3.0 GHz), n3 eco (1.2 to 2.4), n9 unknown to the site.
        let low = |d: &Decision, node: &str| {
            with_node_type(NodeSettings::from_decision(d, node, 2), &site)
                .comm_dvfs
                .unwrap()
                .low_ghz
        };
        assert_eq!(low(&d, "n1"), Some(Ghz(1.0)));
        assert_eq!(low(&d, "n3"), Some(Ghz(1.2)));
        assert_eq!(low(&d, "n9"), None);
        d.comm_dvfs = Some(crate::comm::CommDvfs {
            low_ghz: Some(Ghz(1.4)),
            ..Default::default()
        });
        assert_eq!(low(&d, "n3"), Some(Ghz(1.4)));
    }

    #[test]
    fn a_gpu_nodes_share_is_told_as_its_cpu_part_and_each_gpus_limit() {
        // g1: CPU 100 W dynamic at 2.0 GHz (cube law) + 50 W static; 2 GPUs, 300 W
        // dynamic + 50 W static, limits 100-400 W. c1: the same CPU, no GPUs.
        let site = crate::site::parse(
            "/etc/slurm/greenup.yaml",
            "node_types:\n  c:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 50}\n  g:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 50}\n    gpus: {count: 2, power_limit: {min: 100, max: 400}, power: {dynamic_w: 300, static_w: 50}}\nnodes:\n  c: c1\n  g: g1\n",
        )
        .unwrap();
        let mut d = planned(1);
        // Nodes at their top: c1 150 W, g1 150 + 2 x 350 = 850 W; 500 W granted, so g1's
        // share is 425 W: CPU 425 x 150/850 = 75 W, each GPU 425 x 350/850 = 175 W.
        d.grant = Some(crate::power::Grant {
            granted_w: Watts(500.0),
            weight_w: Watts(1000.0),
            node_w: None,
        });
        let gears = Some(NodeGears {
            freq_ghz: Ghz(2.0),
            gpu_mhz: None,
        });
        let g1 = with_node_type(NodeSettings::of(&d, "g1", gears, 2, None), &site);
        assert!((g1.power_limit_w.unwrap().0 - 75.0).abs() < 1e-9, "{g1:?}");
        let gpu = g1.gpu_power.unwrap();
        assert!((gpu.part_w.0 - 175.0).abs() < 1e-9 && gpu.limit_w == gpu.part_w);
        let gears = Some(NodeGears {
            freq_ghz: Ghz(2.0),
            gpu_mhz: None,
        });
        let c1 = with_node_type(NodeSettings::of(&d, "c1", gears, 2, None), &site);
        assert!((c1.power_limit_w.unwrap().0 - 75.0).abs() < 1e-9);
        assert_eq!(c1.gpu_power, None);
        // The wire: absent when none, read back when there.
        let line = serde_json::to_string(&g1).unwrap();
        assert!(line.contains(r#""gpu_power":{"part_w":175"#), "{line}");
        assert_eq!(
            serde_json::from_str::<NodeSettings>(&line)
                .unwrap()
                .gpu_power,
            Some(gpu)
        );
        assert!(!serde_json::to_string(&c1).unwrap().contains("gpu_power"));
    }
}
