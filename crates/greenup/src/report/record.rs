//! Building a [`JobReport`] from what greenupd stores about a job (its request,
//! decision and per-node outcomes), optionally with the profile's predictor
//! and the site, which add per-node predictions, EE and the baseline's EE.

use crate::model::{Config, NodeSetting, Predictor};
use crate::plan::Estimate;
use crate::record::{JobRecord, JobState, Verdict};
use crate::site::Site;
use greenup_core::quantity::{Joules, Seconds, Watts};

use super::accounting::SlurmEnergy;
use super::{Applied, Caps, Confidence, JobReport, NodeReport, RunState, Source, Warning};

/// What the store alone does not know about a job's report.
#[derive(Default)]
pub struct Context<'a> {
    /// The predictor of the profile version the decision used.
    pub predictor: Option<&'a dyn Predictor>,
    /// The site config, for node types and maximum frequencies.
    pub site: Option<&'a Site>,
    /// The model name of that profile version.
    pub model: Option<String>,
    /// That version's sample count and residual.
    pub confidence: Confidence,
    /// Slurm accounting's ConsumedEnergy, as [`super::accounting`] read it.
    pub slurm_energy: SlurmEnergy,
    /// Why the outcome was not used to refine the profile, if it was not.
    pub not_refined: Option<String>,
}

/// A frequency counts as applied when it is within this fraction of the decision.
const FREQ_TOLERANCE: f64 = 0.01;

const NAN_ESTIMATE: Estimate = Estimate {
    time_s: Seconds(f64::NAN),
    energy_j: Joules(f64::NAN),
    avg_power_w: Watts(f64::NAN),
};

/// The report of a stored job.
pub fn from_record(rec: &JobRecord, ctx: &Context) -> JobReport {
    let d = &rec.decision;
    let state = rec.run_state();
    let plan = d.applied_plan();
    let monitor = d.monitor;
    let mut warnings = Vec::new();
    match d.verdict {
        Verdict::BudgetLimited => warnings.push(Warning::BudgetLimited(d.reason.clone())),
        Verdict::Unchanged if !monitor => {
            warnings.push(Warning::Fallback(format!("ran unchanged: {}", d.reason)))
        }
        Verdict::Refused => warnings.push(Warning::Fallback(format!("refused: {}", d.reason))),
        _ => {}
    }
    if let Some(p) = plan
        && !p.feasible
    {
        warnings.push(Warning::Infeasible(p.reason.clone()));
    }
    if rec.state == JobState::Reclaimed {
        warnings.push(Warning::Fallback(
            "the job vanished without a close; its reservation was reclaimed".into(),
        ));
    }

    let type_of = |name: &str| -> String {
        plan.and_then(|p| {
            p.nodes
                .iter()
                .find(|n| n.name == name)
                .map(|n| n.node_type.clone())
        })
        .or_else(|| ctx.site.and_then(|s| s.nodes.get(name).cloned()))
        .unwrap_or_else(|| "-".to_string())
    };
    // Decided nodes, or (without a plan) every allocated node as it ran.
    let decided: Vec<(String, String, f64)> = match plan {
        Some(p) => p
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.node_type.clone(), n.freq_ghz.0))
            .collect(),
        None => rec
            .request
            .nodes
            .iter()
            .map(|n| {
                let f = rec
                    .outcomes
                    .iter()
                    .find(|o| &o.node == n)
                    .and_then(|o| o.freq_ghz)
                    .map_or(f64::NAN, |f| f.0);
                (n.clone(), type_of(n), f)
            })
            .collect(),
    };
    let config = Config {
        nodes: decided
            .iter()
            .map(|(n, t, f)| NodeSetting {
                gpu_mhz: None,
                name: n.clone(),
                node_type: t.clone(),
                freq_ghz: *f,
            })
            .collect(),
    };
    let prediction = match (plan, ctx.predictor) {
        (Some(_), Some(pr)) => pr.predict(&config).ok(),
        _ => None,
    };

    let mut nodes = Vec::new();
    for (i, (name, ty, f)) in decided.iter().enumerate() {
        let out = rec.outcomes.iter().find(|o| &o.node == name);
        let source = out.and_then(|o| o.source).unwrap_or(Source::Unmeasured);
        let measured = out.and_then(|o| o.measured_energy_j()).map(|e| e.0);
        let applied = if plan.is_none() {
            if monitor {
                Applied::Monitor
            } else {
                Applied::Fallback
            }
        } else {
            match out {
                None if state == RunState::Running => Applied::Applied,
                None => Applied::Failed("no outcome from the node".into()),
                Some(o) if o.note.as_deref().is_some_and(|n| n.contains("shared")) => {
                    Applied::SharedNode
                }
                Some(o) => match o.freq_ghz.map(|g| g.0) {
                    Some(g) if (g - f).abs() > FREQ_TOLERANCE * f => {
                        Applied::Failed(format!("ran at {g:.2} GHz"))
                    }
                    _ => Applied::Applied,
                },
            }
        };
        nodes.push(NodeReport {
            name: name.clone(),
            node_type: ty.clone(),
            freq_ghz: *f,
            applied,
            source,
            predicted_energy_j: prediction
                .as_ref()
                .and_then(|p| p.per_node.get(i))
                .map(|n| n.energy_j),
            measured_energy_j: measured,
            mpi: out.and_then(|o| {
                let c = o.comm.as_ref()?;
                let mut mpi = super::NodeMpi::of(c);
                // The estimate needs the node type's power model, so it is made where
                // the stored record meets the site.
                let t = ctx.site.and_then(|s| s.node_types.get(ty));
                if let (Some(t), Some(f_run)) = (t, o.freq_ghz.map(|f| f.0)) {
                    let f_low = d
                        .comm_dvfs
                        .and_then(|p| p.low_ghz)
                        .map_or(t.fmin(), |g| g.0);
                    mpi.saved_j = crate::comm::saved_j(c, t, f_run, f_low);
                }
                Some(mpi)
            }),
            gpu: out.and_then(|o| o.gpu.as_deref().cloned()),
            power: out.and_then(|o| o.power.clone()),
        });
    }
    let not_applied: Vec<String> = nodes
        .iter()
        .filter(|n| plan.is_some() && n.applied != Applied::Applied)
        .map(|n| {
            format!(
                "{}: {}",
                n.name,
                n.applied.to_string().trim_start_matches("not applied: ")
            )
        })
        .collect();
    if !not_applied.is_empty() {
        warnings.push(Warning::NotApplied(not_applied.join("; ")));
    }
    let unmeasured: Vec<&str> = nodes
        .iter()
        .filter(|n| n.measured_energy_j.is_none())
        .map(|n| n.name.as_str())
        .collect();
    if !unmeasured.is_empty() && state != RunState::Running {
        warnings.push(Warning::Unmeasured(format!(
            "{} has no energy measurement; job energy is unknown",
            unmeasured.join(",")
        )));
    }
    if let Some(why) = &ctx.not_refined {
        warnings.push(Warning::NotRefined(why.clone()));
    }

    let measured = JobReport::totals_from_nodes(&nodes, rec.elapsed_s().map(|t| t.0));

    let (ee, ee_baseline) = match (ctx.predictor, &prediction) {
        (Some(pr), Some(p)) => {
            let ee = pr.efficiency(&config, p);
            let base = ctx.site.and_then(|site| {
                let cfg = Config {
                    nodes: rec
                        .request
                        .nodes
                        .iter()
                        .map(|n| {
                            let t = site.nodes.get(n)?;
                            let f = site.node_types.get(t)?.fmax();
                            Some(NodeSetting {
                                gpu_mhz: None,
                                name: n.clone(),
                                node_type: t.clone(),
                                freq_ghz: f,
                            })
                        })
                        .collect::<Option<Vec<_>>>()?,
                };
                let bp = pr.predict(&cfg).ok()?;
                pr.efficiency(&cfg, &bp)
            });
            (ee, base)
        }
        _ => (None, None),
    };

    let earlier = earlier_runs(rec, ctx);
    JobReport {
        job_id: rec.job_id,
        user: rec.user.clone().unwrap_or_else(|| rec.uid.to_string()),
        partition: rec.partition.clone(),
        state,
        end_unix: rec.closed_at,
        app: d.profile.clone().unwrap_or_else(|| "-".into()),
        profile_version: d.profile_version_number(),
        model: ctx
            .model
            .clone()
            .or_else(|| ctx.predictor.map(|p| p.name().to_string()))
            .unwrap_or_else(|| "-".into()),
        confidence: ctx.confidence,
        policy: d.policy.clone(),
        caps: Caps {
            energy_j: rec.request.energy_cap_j.map(|j| j.0),
            power_w: d.power_cap_w.or(rec.request.power_cap_w).map(|w| w.0),
            time_limit: rec.request.time_limit,
        },
        allocated_nodes: rec.request.nodes.len(),
        shape: super::measured::shape_of(
            rec.request
                .nodes
                .iter()
                .map(|n| type_of(n))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str),
        ),
        baseline_run: monitor,
        baseline_sample: d.baseline_sample,
        clock_sample: d.clock_sample,
        against_measured: None,
        nodes,
        // The models' part alone, to compare with RAPL's: NVML's GPU energy is beside it.
        predicted: plan.map_or(NAN_ESTIMATE, |p| p.without_gpus().0),
        baseline: plan.map_or(NAN_ESTIMATE, |p| p.without_gpus().1),
        measured,
        ee,
        ee_baseline,
        slurm_energy: ctx
            .slurm_energy
            .clone()
            .written_by_greenupd(rec.slurm_energy_j),
        warnings,
        budgets: d.budgets.clone(),
        guard: guard_line(rec),
        watts: d.watts.clone(),
        all_runs: (!earlier.is_empty()).then(|| super::AllRuns::of(&measured, &earlier)),
        // A listing's record counts its earlier runs without carrying them.
        run: (rec.earlier_run_count as usize)
            .max(earlier.len())
            .saturating_add(1)
            .try_into()
            .unwrap_or(u32::MAX),
        earlier_runs: earlier,
    }
}

/// A requeued job's earlier runs in brief, each measured as a report of its own would
/// measure it.
fn earlier_runs(rec: &JobRecord, ctx: &Context) -> Vec<super::EarlierRun> {
    let site_only = Context {
        site: ctx.site,
        ..Context::default()
    };
    rec.earlier_runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let r = from_record(run, &site_only);
            let mut clocks: Vec<f64> = match run.decision.applied_plan() {
                Some(p) => p.nodes.iter().map(|n| n.freq_ghz.0).collect(),
                None => Vec::new(),
            };
            clocks.retain(|f| f.is_finite());
            clocks.sort_by(f64::total_cmp);
            clocks.dedup();
            super::EarlierRun {
                run: i as u32 + 1,
                restart_count: run.request.restart_count,
                nodes: crate::hostlist::compress(&run.request.nodes),
                policy: run.decision.policy.clone(),
                clocks_ghz: clocks,
                state: r.state,
                reclaimed: run.state == JobState::Reclaimed,
                end_unix: run.closed_at,
                measured: r.measured,
            }
        })
        .collect()
}

/// The in-job guard's line: what the nodes' runtimes did, or, where none reported, what
/// the decision said of the guard; `None` when the job's policy promised no slowdown.
pub fn guard_line(rec: &JobRecord) -> Option<String> {
    let nodes = rec
        .outcomes
        .iter()
        .map(|o| o.comm.as_ref().and_then(|c| c.guard.as_deref()));
    crate::comm::guard_line(nodes).or_else(|| {
        let terms = rec.decision.guard?;
        // A node summary without a guard record still says whether the runtime ran.
        let measured = rec.outcomes.iter().any(|o| o.comm.is_some());
        Some(match terms.off {
            Some(off) => format!("guard off: {}", off.why()),
            None if measured => "no in-job guard ran: the MPI steps ran greenup's runtime without the guard's settings (GREENUP_GUARD unset in the step); the promise rests on the decision alone".into(),
            None => "no in-job guard ran: no MPI step preloaded greenup's runtime; the promise rests on the decision alone".into(),
        })
    })
}
