//! Measured power, live: what each node's `greenup meter` reports to greenupd, and what
//! greenupd shows of every power cap (the site's, each capped partition's): its watts,
//! the watts granted under it, the watts measured, and the stranded watts between them.
//!
//! The meter, the CLI and greenupd use it.

use serde::{Deserialize, Serialize};

use greenup_core::quantity::{Seconds, Watts};

/// The most samples one report may carry.
pub const MAX_SAMPLES: usize = 64;

/// The most job ids one sample may name (the jobs sharing the node).
pub const MAX_SAMPLE_JOBS: usize = 64;

/// Hours of timeline greenupd keeps per cap.
pub const HOURS_KEPT: f64 = 6.0;

pub use greenup_wire::power::REPORT_PERIOD_S;

/// Samples a meter sampling every `interval_s` gathers into one report sent every
/// `period_s` (`power.report_period_s`, [`REPORT_PERIOD_S`] by default).
pub fn samples_per_report(interval_s: f64, period_s: f64) -> usize {
    if interval_s.is_finite() && interval_s > 0.0 && period_s.is_finite() {
        ((period_s / interval_s).ceil() as usize).clamp(1, MAX_SAMPLES)
    } else {
        1
    }
}

/// How long after its time a node's latest sample still counts as its present power:
/// two report periods and one interval, so one late or lost report does not drop it.
pub fn counts_for_s(interval_s: f64) -> f64 {
    let i = if interval_s.is_finite() && interval_s > 0.0 {
        interval_s
    } else {
        1.0
    };
    2.0 * samples_per_report(i, REPORT_PERIOD_S) as f64 * i + i
}

/// A node's measured power since its last report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerReport {
    /// The node reporting, as Slurm names it.
    pub node: String,
    /// Its samples, oldest first (usually one).
    pub samples: Vec<PowerSample>,
    /// The node's RAPL long-term limit in watts as read back after the meter lowered it
    /// for its job on greenupd's word (a give-back); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_w: Option<Watts>,
}

/// The node's mean power over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerSample {
    /// The jobs running on the node (the meter's own first).
    pub jobs: Vec<u64>,
    /// Unix seconds at the interval's end.
    pub at: i64,
    /// The node's mean power over the interval, in watts (RAPL's zones summed, and the
    /// job's GPUs' energy counters where it holds GPUs).
    pub watts: Watts,
    /// The interval's length in seconds.
    pub interval_s: Seconds,
    /// Of `watts`, what the job's GPUs drew (NVML); absent where it holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_watts: Option<Watts>,
}

/// Watts granted but not drawn: the one rule, floored at zero.
pub fn stranded_w(granted_w: Watts, measured_w: Watts) -> Watts {
    (granted_w - measured_w).max(Watts(0.0))
}

/// One cap now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapPower {
    /// `site` or the partition's name.
    pub scope: String,
    /// The cap in watts (`None`: the site sets none; its power is still measured).
    pub cap_w: Option<Watts>,
    /// Watts the ledger holds for the open jobs under this cap (their grants).
    pub granted_w: Watts,
    /// Watts the reporting nodes draw, each node's latest report summed.
    pub measured_w: Watts,
    /// Of `measured_w`, what their jobs' GPUs draw.
    #[serde(default)]
    pub measured_gpu_w: Watts,
    /// Granted watts not drawn.
    pub stranded_w: Watts,
    /// Nodes whose latest report still counts.
    pub nodes: u64,
    /// Unix seconds since which measured power has stayed above granted, if it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_grant_since: Option<i64>,
    /// Times measured power stayed above granted for longer than
    /// `power.over_grant_window_s` since greenupd started (each logged once).
    #[serde(default)]
    pub over_grant_episodes: u64,
    /// Watts given back to Slurm's queue from running jobs since greenupd started
    /// (`power.give_back_after_s`).
    #[serde(default)]
    pub given_back_w: Watts,
    /// Of `nodes`, those reporting for a job greenupd never opened (it was down when the
    /// job started): their watts count, but no plan or grant stands behind them.
    #[serde(default)]
    pub unopened_nodes: u64,
}

/// One cap at one time of its timeline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PowerPoint {
    /// Unix seconds at the end of the point's span.
    pub t: i64,
    /// Measured watts.
    pub measured_w: Watts,
    /// Granted watts.
    pub granted_w: Watts,
    /// The cap's watts (`None`: no cap).
    pub cap_w: Option<Watts>,
    /// Granted watts not drawn.
    pub stranded_w: Watts,
}

/// One cap's timeline, oldest point first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapTimeline {
    /// `site` or the partition's name.
    pub scope: String,
    /// Seconds each point spans (a multiple of the meter interval when thinned).
    pub step_s: Seconds,
    /// The points; a span without reports has none.
    pub points: Vec<PowerPoint>,
}

/// The caps now and over the last hours: cluster totals only, no job's own data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerView {
    /// Unix seconds greenupd answered at.
    pub at: i64,
    /// The meter interval the nodes report at (`power.meter_interval_s`).
    pub interval_s: Seconds,
    /// How long measured may stay above granted before a warning (`power.over_grant_window_s`).
    pub over_grant_window_s: Seconds,
    /// The site first, then each capped partition.
    pub caps: Vec<CapPower>,
    /// The same caps' timelines.
    pub timelines: Vec<CapTimeline>,
}

/// The Prometheus gauges of the caps now.
pub fn prometheus(caps: &[CapPower]) -> String {
    type Metric = (
        &'static str,
        &'static str,
        &'static str,
        fn(&CapPower) -> Option<f64>,
    );
    let metrics: [Metric; 8] = [
        (
            "measured_watts",
            "gauge",
            "Watts the reporting nodes draw under the cap.",
            |c| Some(c.measured_w.0),
        ),
        (
            "measured_gpu_watts",
            "gauge",
            "Of the measured watts, what the jobs' GPUs draw (NVML).",
            |c| Some(c.measured_gpu_w.0),
        ),
        (
            "granted_watts",
            "gauge",
            "Watts granted to the open jobs under the cap.",
            |c| Some(c.granted_w.0),
        ),
        ("cap_watts", "gauge", "The cap in watts.", |c| {
            c.cap_w.map(|w| w.0)
        }),
        (
            "stranded_watts",
            "gauge",
            "Watts granted under the cap but not drawn.",
            |c| Some(c.stranded_w.0),
        ),
        (
            "nodes_reporting",
            "gauge",
            "Nodes whose latest power report counts under the cap.",
            |c| Some(c.nodes as f64),
        ),
        (
            "nodes_unopened",
            "gauge",
            "Of the nodes reporting, those running a job greenupd never opened (down at its start).",
            |c| Some(c.unopened_nodes as f64),
        ),
        (
            "given_back_watts_total",
            "counter",
            "Watts given back to Slurm's queue from running jobs under the cap.",
            |c| Some(c.given_back_w.0),
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, get) in metrics {
        out.push_str(&format!(
            "# HELP greenup_power_{name} {help}\n# TYPE greenup_power_{name} {kind}\n"
        ));
        for c in caps {
            if let Some(v) = get(c) {
                let label = c.scope.replace('\\', "\\\\").replace('"', "\\\"");
                out.push_str(&format!("greenup_power_{name}{{cap=\"{label}\"}} {v}\n"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_carries_a_minute_of_samples() {
        assert_eq!(samples_per_report(5.0, REPORT_PERIOD_S), 12);
        assert_eq!(samples_per_report(7.0, REPORT_PERIOD_S), 9);
        assert_eq!(samples_per_report(60.0, REPORT_PERIOD_S), 1);
        assert_eq!(samples_per_report(300.0, REPORT_PERIOD_S), 1);
        assert_eq!(samples_per_report(0.0, REPORT_PERIOD_S), 1);
        // 2 x 12 x 5 s + 5 s.
        assert_eq!(counts_for_s(5.0), 125.0);
        assert_eq!(counts_for_s(300.0), 900.0);
    }

    #[test]
    fn stranded_is_granted_less_measured_never_below_zero() {
        assert_eq!(stranded_w(Watts(1000.0), Watts(600.0)), Watts(400.0));
        assert_eq!(stranded_w(Watts(1000.0), Watts(1200.0)), Watts(0.0));
    }

    #[test]
    fn a_report_refuses_fields_it_does_not_know() {
        let ok = r#"{"node":"n1","samples":[{"jobs":[7],"at":1,"watts":2.5,"interval_s":5}]}"#;
        assert!(serde_json::from_str::<PowerReport>(ok).is_ok());
        let bad =
            r#"{"node":"n1","samples":[{"jobs":[7],"at":1,"watts":2.5,"interval_s":5,"x":1}]}"#;
        assert!(serde_json::from_str::<PowerReport>(bad).is_err());
    }

    #[test]
    fn a_report_a_view_and_a_lowered_limit_cross_the_wire_as_bare_numbers() {
        let r = PowerReport {
            node: "n1".into(),
            samples: vec![PowerSample {
                jobs: vec![7],
                at: 1_795_000_005,
                watts: Watts(701.4),
                interval_s: Seconds(5.0),
                gpu_watts: Some(Watts(700.0)),
            }],
            limit_w: Some(Watts(54.0)),
        };
        let line = r#"{"node":"n1","samples":[{"jobs":[7],"at":1795000005,"watts":701.4,"interval_s":5.0,"gpu_watts":700.0}],"limit_w":54.0}"#;
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
        assert_eq!(serde_json::from_str::<PowerReport>(line).unwrap(), r);

        let v = PowerView {
            at: 1_795_000_010,
            interval_s: Seconds(5.0),
            over_grant_window_s: Seconds(60.0),
            caps: vec![CapPower {
                scope: "site".into(),
                cap_w: Some(Watts(10_000.0)),
                granted_w: Watts(2400.0),
                measured_w: Watts(980.5),
                measured_gpu_w: Watts(0.0),
                stranded_w: stranded_w(Watts(2400.0), Watts(980.5)),
                nodes: 5,
                over_grant_since: None,
                over_grant_episodes: 0,
                given_back_w: Watts(60.0),
                unopened_nodes: 1,
            }],
            timelines: vec![CapTimeline {
                scope: "site".into(),
                step_s: Seconds(10.0),
                points: vec![PowerPoint {
                    t: 1_795_000_010,
                    measured_w: Watts(980.5),
                    granted_w: Watts(2400.0),
                    cap_w: None,
                    stranded_w: Watts(1419.5),
                }],
            }],
        };
        let line = r#"{"at":1795000010,"interval_s":5.0,"over_grant_window_s":60.0,"caps":[{"scope":"site","cap_w":10000.0,"granted_w":2400.0,"measured_w":980.5,"measured_gpu_w":0.0,"stranded_w":1419.5,"nodes":5,"over_grant_episodes":0,"given_back_w":60.0,"unopened_nodes":1}],"timelines":[{"scope":"site","step_s":10.0,"points":[{"t":1795000010,"measured_w":980.5,"granted_w":2400.0,"cap_w":null,"stranded_w":1419.5}]}]}"#;
        assert_eq!(serde_json::to_string(&v).unwrap(), line);
        assert_eq!(serde_json::from_str::<PowerView>(line).unwrap(), v);

        let taken = crate::protocol::Reply::PowerTaken {
            samples: 3,
            limit_w: Some(Watts(54.0)),
        };
        let line = r#"{"kind":"power_taken","samples":3,"limit_w":54.0}"#;
        assert_eq!(serde_json::to_string(&taken).unwrap(), line);
    }

    #[test]
    fn gauges_leave_out_a_cap_the_site_does_not_set() {
        let c = CapPower {
            scope: "site".into(),
            cap_w: None,
            granted_w: Watts(900.0),
            measured_w: Watts(700.0),
            measured_gpu_w: Watts(400.0),
            stranded_w: Watts(200.0),
            nodes: 3,
            over_grant_since: None,
            over_grant_episodes: 0,
            given_back_w: Watts(60.0),
            unopened_nodes: 0,
        };
        let text = prometheus(&[c]);
        assert!(text.contains("# TYPE greenup_power_given_back_watts_total counter\n"));
        assert!(text.contains("greenup_power_given_back_watts_total{cap=\"site\"} 60\n"));
        assert!(text.contains("greenup_power_stranded_watts{cap=\"site\"} 200\n"));
        assert!(text.contains("greenup_power_nodes_reporting{cap=\"site\"} 3\n"));
        assert!(text.contains("greenup_power_measured_gpu_watts{cap=\"site\"} 400\n"));
        assert!(!text.contains("greenup_power_cap_watts{"));
    }
}
