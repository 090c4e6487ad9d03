//! Energy budgets at admission: the job's predicted joules are charged to every budget
//! it falls under, in the same step that reads what is left, so concurrent admissions
//! never overspend; the warning levels in force act on the decision; closing settles.

use std::sync::Arc;

use super::{Ctx, Shared, lock};
use crate::decide::{Proposal, expand_open, unmanaged_fate, unmanaged_w, validate_open};
use crate::store::sqlite::now;
use greenup::budget::book::{Book, Charge};
use greenup::budget::{AtAdmission, Quote, Scope, Standing, budgets_for, quote_line};
use greenup::site::{Enforce, Site};
use greenup_core::quantity::{Joules, Seconds};
use greenup_proto::protocol::{ErrorCode, ErrorReply, OpenJob, Verdict};

/// A decision with its budget charges.
pub(super) struct Admitted {
    /// The decision, after any level's action.
    pub(super) proposal: Proposal,
    /// What the job is charged (held in the book; stored with the job).
    pub(super) charges: Vec<Charge>,
    /// Each budget's state at admission, for the decision record.
    pub(super) states: Vec<AtAdmission>,
}

/// Joules a decision is charged at admission: the plan's prediction when the job runs
/// a plan (its baseline when it runs unchanged), else the watts it holds for its time
/// limit; nothing for a refused job that does not run (`enforce: strict`).
pub(super) fn predicted_j(site: &Site, req: &OpenJob, p: &Proposal) -> Joules {
    let limit = req.time_limit.hold_s();
    match (p.verdict, &p.plan) {
        (Verdict::Planned | Verdict::BudgetLimited, Some(plan)) => plan.predicted.energy_j,
        (Verdict::Unchanged, Some(plan)) => plan.baseline.energy_j,
        (Verdict::Refused, _) if site.enforce == Enforce::Strict => Joules(0.0),
        _ => p.reserve_w * Seconds(limit),
    }
}

/// Charge `p` for job `req` against its budgets, letting the warning levels in force act.
/// `free_w` is the power left to the job before its own reservation (what a power share
/// shrinks). Holds the book's lock from the check to the charge.
pub(super) fn admit(
    shared: &Arc<Shared>,
    ctx: &Ctx,
    req: &OpenJob,
    p: Proposal,
    free_w: Option<f64>,
    at: i64,
) -> Admitted {
    // The spread reads the profile version's fit from disk; only a refusal's quote shows
    // it, and a site without budgets never refuses one, so its admissions skip the read.
    let spread = if ctx.site.budgets.is_empty() {
        None
    } else {
        spread(&ctx.site, &p)
    };
    let mut book = lock(&shared.budget);
    let (admitted, _) = evaluate(&book, ctx, req, p, free_w, at, spread);
    book.hold(req.job_id, admitted.charges.clone());
    // A job that holds nothing (refused under `enforce: strict`) is stored closed at
    // once, and the store settles it in that same step: so does the book.
    let p = &admitted.proposal;
    if !p.verdict.holds_reservation(p.reserve_w) {
        book.settle(req.job_id, &[]);
    }
    admitted
}

/// What admitting `p` for `req` at `at` would do with the accounts in `book`, and the
/// job's quote; `book` is only read.
fn evaluate(
    book: &Book,
    ctx: &Ctx,
    req: &OpenJob,
    p: Proposal,
    free_w: Option<f64>,
    at: i64,
    spread: Option<(f64, u32)>,
) -> (Admitted, Quote) {
    let site = &ctx.site;
    let budgets = budgets_for(
        &site.budgets,
        req.partition.as_deref(),
        req.account.as_deref(),
    );
    let first = book.assess(&budgets, at, predicted_j(site, req, &p));
    let acts = &first.actions;
    let mut proposal = p;
    let mut why = first.why();
    if !acts.refuse && acts.changes_plan() {
        let mut forced = req.clone();
        if let Some(name) = acts.policy.clone().or_else(|| {
            acts.policy_file
                .as_deref()
                .and_then(|f| ctx.decider.policy_from_file(f))
        }) {
            forced.policy = Some(name);
        }
        let free = match acts.power_share {
            Some(share) => {
                let full = greenup::power::max_power_w(site, &req.nodes).0;
                let base = [free_w, req.power_cap_w.map(|w| w.0)]
                    .into_iter()
                    .flatten()
                    .fold(full, f64::min);
                Some(share * base)
            }
            None => free_w,
        };
        // Planned under the lock: the charge must be the one the check saw.
        let ceiling = crate::baseline::AppState {
            max_freq_ghz: acts.max_freq_ghz.map(|g| g.0),
            ..Default::default()
        };
        proposal = ctx
            .decider
            .decide_or_refuse_with(site, &forced, free, &ceiling);
    }
    let charge_j = predicted_j(site, req, &proposal);
    let mut state = book.assess(&budgets, at, charge_j);
    // The levels that acted stay on record even when the new plan falls below them.
    for (s, f) in state.budgets.iter_mut().zip(&first.budgets) {
        if s.level_pct.is_none() {
            s.level_pct = f.level_pct;
            s.action = f.action.clone();
        }
    }
    let refused = acts.refuse || state.actions.refuse;
    let mut quote = quote(req, &proposal, &state.budgets, &budgets, refused, spread);
    quote.fails = refused && site.enforce == greenup::site::Enforce::Strict;
    if refused {
        if why.is_empty() {
            why = state.why();
        }
        proposal = Proposal {
            verdict: Verdict::Refused,
            reason: format!("{why}; {}; {}", quote.line, unmanaged_fate(site)),
            reserve_w: unmanaged_w(site, req),
            refusal: Some(ErrorCode::OverBudget),
            ..proposal
        };
        let charge_j = predicted_j(site, req, &proposal);
        for s in &mut state.budgets {
            s.charged_j = charge_j;
        }
    } else if !why.is_empty() {
        proposal.reason = if proposal.reason.is_empty() {
            why
        } else {
            format!("{}; {why}", proposal.reason)
        };
    }
    let charges = state.charges();
    let admitted = Admitted {
        proposal,
        charges,
        states: state.budgets,
    };
    (admitted, quote)
}

/// The spread of `p`'s prediction from its profile's refinement: the refined version's
/// relative RMS residual (as a percentage) and the runs it was fitted from; `None` for
/// the admin's own file, which no run has confirmed yet.
fn spread(site: &Site, p: &Proposal) -> Option<(f64, u32)> {
    let name = p.profile.as_deref()?;
    let version: u64 = p.profile_version.as_deref()?.parse().ok()?;
    let fit =
        greenup::profile::versions::Versions::for_store(&site.daemon.store).fit(name, version)?;
    Some((fit.residual * 100.0, fit.samples))
}

/// The quote for `p`, with what each budget has left before the job.
fn quote(
    req: &OpenJob,
    p: &Proposal,
    states: &[AtAdmission],
    budgets: &[&greenup::budget::Budget],
    refused: bool,
    spread: Option<(f64, u32)>,
) -> Quote {
    let (energy_j, time_s, nodes) = match &p.plan {
        Some(plan) => (
            plan.predicted.energy_j,
            Some(plan.predicted.time_s),
            plan.node_count,
        ),
        None => (
            p.reserve_w * Seconds(req.time_limit.hold_s()),
            req.time_limit.seconds().map(Seconds),
            req.nodes.len(),
        ),
    };
    let left: Vec<(Scope, Joules, Joules, greenup::budget::Period)> = states
        .iter()
        .zip(budgets)
        .map(|(s, b)| {
            (
                b.scope.clone(),
                s.amount_j - s.used_j - s.held_j,
                s.amount_j,
                b.period,
            )
        })
        .collect();
    Quote {
        line: quote_line(energy_j, spread, time_s, nodes, &left),
        energy_j,
        time_s,
        nodes,
        refused,
        fails: false,
        budgets: states.to_vec(),
        hold: None,
    }
}

/// The quote for a job described like an open_job: decided as greenupd would decide it
/// now, with nothing reserved, charged or stored.
pub(super) async fn quote_for(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    mut req: OpenJob,
) -> Result<Quote, ErrorReply> {
    let limits = ctx.site.daemon.limits;
    if req.nodes.is_empty() {
        expand_open(&mut req, &limits)?;
    } else {
        validate_open(&req, &limits)?;
    }
    // Under the queue a job that does not fit waits in Slurm for its watts: its quote is
    // the plan it would run, not the one the power left now allows; but it is planned
    // within what Slurm can ever grant it (the cap less the reserve), since the cli_filter
    // asks for the quote's watts and Slurm refuses a request above its licenses' total.
    let queue = ctx.site.power.enforce.in_slurm();
    let free = if queue {
        greenup::power::slurm::grantable_w(&ctx.site, req.partition.as_deref()).map(|w| w as f64)
    } else {
        lock(&shared.ledger)
            .free_w(req.partition.as_deref())
            .map(|w| w.0)
    };
    let (c2, r2) = (ctx.clone(), req.clone());
    let p = tokio::task::spawn_blocking(move || c2.decider.decide_or_refuse(&c2.site, &r2, free))
        .await
        .map_err(|e| ErrorReply::new(ErrorCode::Internal, format!("quote task failed: {e}")))?;
    let spread = spread(&ctx.site, &p);
    let book = lock(&shared.budget);
    let hold = (queue && p.verdict.applies_plan())
        .then_some(p.plan.as_ref())
        .flatten()
        .map(|plan| greenup::budget::PowerHold {
            // The site cap's license; a site with partition caps alone counts in those.
            license: match ctx.site.power_cap_w {
                Some(_) => ctx.site.power.license_for(None),
                None => ctx.site.power.license_for(req.partition.as_deref()),
            },
            watts: plan.predicted.avg_power_w.0.max(0.0).ceil() as u64,
        });
    let (_, q) = evaluate(&book, &ctx, &req, p, free, now(), spread);
    Ok(Quote { hold, ..q })
}

/// Every budget's standing now, the site's first; `account`/`partition` keep only
/// that one (with the site's).
pub(super) fn standings(
    shared: &Arc<Shared>,
    ctx: &Ctx,
    account: Option<String>,
    partition: Option<String>,
) -> Vec<Standing> {
    let at = now();
    let book = lock(&shared.budget);
    let filtered = account.is_some() || partition.is_some();
    ctx.site
        .budgets
        .iter()
        .filter(|b| match &b.scope {
            Scope::Site => true,
            Scope::Partition(p) => !filtered || partition.as_deref() == Some(p),
            Scope::Account(a) => !filtered || account.as_deref() == Some(a),
        })
        .map(|b| {
            let (start, _) = b.period.bounds(at);
            b.standing(book.totals(&b.scope.key(), start), at)
        })
        .collect()
}

/// Settle job `job_id` in the book from its charges as the store settled them.
pub(super) async fn settle(shared: &Arc<Shared>, job_id: u64) {
    if lock(&shared.budget).held_by(job_id).is_none() {
        return;
    }
    match shared.store.read(move |s| s.charges_of(job_id)).await {
        Ok(rows) => lock(&shared.budget).settle(job_id, &rows),
        Err(e) => {
            tracing::warn!(job_id, error = %e, "budget charges unread: settled with the prediction");
            lock(&shared.budget).settle(job_id, &[]);
        }
    }
}

/// Put back in the book what the store holds for a job stored before (a restart).
pub(super) async fn restore(shared: &Arc<Shared>, job_id: u64) {
    lock(&shared.budget).release(job_id);
    if let Ok(rows) = shared.store.read(move |s| s.charges_of(job_id)).await {
        let open: Vec<Charge> = rows.into_iter().filter(|c| c.settled_j.is_none()).collect();
        lock(&shared.budget).hold(job_id, open);
    }
}
