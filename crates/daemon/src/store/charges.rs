//! Budget charges in SQLite: written in the transaction that stores the job, settled in
//! the one that closes it, so a restart finds every charge exactly as acknowledged.

use rusqlite::{Connection, params};

use super::StoreError;
use greenup::budget::book::{Charge, Totals};
use greenup::record::NodeOutcome;
use greenup_core::quantity::Joules;

/// Version 3: one row per job and budget it was charged to.
pub(super) const MIGRATE_TO_3: &str = "
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS budget_charges (
    job_id       INTEGER NOT NULL REFERENCES jobs (job_id),
    budget       TEXT NOT NULL,
    period_start INTEGER NOT NULL,
    charged_j    REAL NOT NULL,
    nodes        INTEGER NOT NULL,
    settled_j    REAL,
    measured     INTEGER,
    PRIMARY KEY (job_id, budget)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS budget_charges_by_period ON budget_charges (budget, period_start);
PRAGMA user_version = 3;
COMMIT;
";

fn write_err(e: rusqlite::Error) -> StoreError {
    StoreError::Write(e.to_string())
}

fn read_err(e: rusqlite::Error) -> StoreError {
    StoreError::Read(e.to_string())
}

/// Store `charges` for job `id`, whose settlement waits for `nodes` measured nodes.
pub(super) fn insert(
    c: &Connection,
    id: i64,
    charges: &[Charge],
    nodes: usize,
) -> Result<(), StoreError> {
    let mut s = c
        .prepare_cached(
            "INSERT INTO budget_charges (job_id, budget, period_start, charged_j, nodes)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(write_err)?;
    for ch in charges {
        s.execute(params![
            id,
            ch.budget,
            ch.period_start,
            ch.charged_j.0,
            nodes as i64
        ])
        .map_err(write_err)?;
    }
    Ok(())
}

/// What a run's nodes reported, as its charges are settled from it.
struct Reported {
    /// Nodes with an outcome.
    nodes: i64,
    /// Of them, nodes with an energy (0 when a node's GPUs went unmeasured).
    measured: i64,
    /// Their energy and their GPUs', joules.
    total_j: f64,
}

impl Reported {
    fn new(nodes: i64, measured: i64, sum: Option<f64>, gpus: (i64, i64, Option<f64>)) -> Self {
        let (gpu_nodes, gpu_measured, gpu_sum) = gpus;
        Reported {
            nodes,
            // A node whose GPUs went unmeasured leaves the job's energy unknown, as a
            // node without a reading does.
            measured: if gpu_measured == gpu_nodes {
                measured
            } else {
                0
            },
            total_j: sum.unwrap_or(0.0) + gpu_sum.unwrap_or(0.0),
        }
    }

    /// The outcomes of a run set aside, as its record holds them.
    fn of(outcomes: &[NodeOutcome]) -> Self {
        let energies = outcomes.iter().filter_map(|o| o.energy_j).map(|j| j.0);
        let gpus: Vec<Option<f64>> = outcomes
            .iter()
            .filter_map(|o| o.gpu.as_ref().map(|g| g.energy_j.map(|j| j.0)))
            .collect();
        let gpu_energies = gpus.iter().flatten();
        Reported::new(
            outcomes.len() as i64,
            energies.clone().count() as i64,
            energies.reduce(|a, b| a + b),
            (
                gpus.len() as i64,
                gpu_energies.clone().count() as i64,
                gpu_energies.copied().reduce(|a, b| a + b),
            ),
        )
    }
}

/// The one settlement rule, for the charges in `table` that `which` picks (SQL on
/// `?1`, the job, and `?5`, the run when given): measured when every node charged for
/// reported an energy, else the prediction (flagged).
fn settle_rows(
    c: &Connection,
    table: &str,
    which: &str,
    id: i64,
    run: Option<i64>,
    r: &Reported,
) -> Result<(), StoreError> {
    use rusqlite::types::Value;
    let mut values = vec![
        Value::Integer(id),
        Value::Integer(r.measured),
        Value::Integer(r.nodes),
        Value::Real(r.total_j),
    ];
    values.extend(run.map(Value::Integer));
    c.prepare_cached(&format!(
        "UPDATE {table} SET
             measured  = (?2 > 0 AND ?2 = ?3 AND ?3 >= nodes),
             settled_j = CASE WHEN ?2 > 0 AND ?2 = ?3 AND ?3 >= nodes THEN ?4 ELSE charged_j END
         WHERE {which}"
    ))
    .and_then(|mut s| s.execute(rusqlite::params_from_iter(values)))
    .map_err(write_err)?;
    Ok(())
}

/// Settle job `id`'s charges: with the energy its nodes measured, their GPUs' included
/// (NVML), when every node the job was charged for reported a measured energy and every
/// node that held GPUs measured them; else with the prediction (flagged). Run again when
/// a late outcome arrives, so the settlement follows what was measured.
pub(super) fn settle(c: &Connection, id: i64) -> Result<(), StoreError> {
    let (count, measured, sum, gpu_nodes, gpu_measured, gpu_sum): (
        i64,
        i64,
        Option<f64>,
        i64,
        i64,
        Option<f64>,
    ) = c
        .prepare_cached(
            "SELECT count(*), count(energy_j), sum(energy_j),
                    count(gpu), count(json_extract(gpu, '$.energy_j')), sum(json_extract(gpu, '$.energy_j'))
             FROM outcomes WHERE job_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
            })
        })
        .map_err(read_err)?;
    let r = Reported::new(count, measured, sum, (gpu_nodes, gpu_measured, gpu_sum));
    settle_rows(c, "budget_charges", "job_id = ?1", id, None, &r)
}

/// Settle again job `id`'s earlier run `run` from `outcomes`, its record's, by the rule
/// of [`settle`]: a node of it that reports after the requeue set it aside (from its
/// spool) corrects what that run used, as a late node of the current run does. Only
/// charges settled already (every run set aside was ended first) are touched.
pub(super) fn settle_earlier(
    c: &Connection,
    id: i64,
    run: i64,
    outcomes: &[NodeOutcome],
) -> Result<(), StoreError> {
    settle_rows(
        c,
        "earlier_charges",
        "job_id = ?1 AND run = ?5 AND settled_j IS NOT NULL",
        id,
        Some(run),
        &Reported::of(outcomes),
    )
}

/// Move job `id`'s charges (settled: its run is closed) to its earlier run `run`,
/// where they still count in their budgets' periods.
pub(super) fn set_aside(c: &Connection, id: i64, run: i64) -> Result<(), StoreError> {
    c.prepare_cached(
        "INSERT INTO earlier_charges (job_id, run, budget, period_start, charged_j, nodes, settled_j, measured)
         SELECT job_id, ?2, budget, period_start, charged_j, nodes, settled_j, measured
         FROM budget_charges WHERE job_id = ?1",
    )
    .and_then(|mut s| s.execute(params![id, run]))
    .map_err(write_err)?;
    c.prepare_cached("DELETE FROM budget_charges WHERE job_id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(write_err)?;
    Ok(())
}

/// Whether job `id` has charges that are settled already (a closed job).
pub(super) fn settled(c: &Connection, id: i64) -> Result<bool, StoreError> {
    c.prepare_cached(
        "SELECT 1 FROM budget_charges WHERE job_id = ?1 AND settled_j IS NOT NULL LIMIT 1",
    )
    .and_then(|mut s| s.exists([id]))
    .map_err(read_err)
}

fn charge(r: &rusqlite::Row<'_>) -> rusqlite::Result<Charge> {
    Ok(Charge {
        budget: r.get(0)?,
        period_start: r.get(1)?,
        charged_j: Joules(r.get(2)?),
        settled_j: r.get::<_, Option<f64>>(3)?.map(Joules),
        measured: r.get(4)?,
    })
}

/// Job `id`'s charges.
pub(super) fn of_job(c: &Connection, id: i64) -> Result<Vec<Charge>, StoreError> {
    let mut s = c
        .prepare_cached(
            "SELECT budget, period_start, charged_j, settled_j, measured FROM budget_charges
             WHERE job_id = ?1 ORDER BY budget",
        )
        .map_err(read_err)?;
    let rows = s.query_map([id], charge).map_err(read_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(read_err)
}

/// Every budget period's totals, and each open job's charges.
pub(super) fn state(c: &Connection) -> Result<super::BudgetState, StoreError> {
    let mut s = c
        .prepare_cached(
            "SELECT budget, period_start, total(settled_j),
                    total(CASE WHEN settled_j IS NULL THEN charged_j END), count(*)
             FROM (SELECT budget, period_start, charged_j, settled_j FROM budget_charges
                   UNION ALL
                   SELECT budget, period_start, charged_j, settled_j FROM earlier_charges)
             GROUP BY budget, period_start",
        )
        .map_err(read_err)?;
    let totals = s
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                Totals {
                    used_j: Joules(r.get(2)?),
                    held_j: Joules(r.get(3)?),
                    jobs: r.get::<_, i64>(4)?.max(0) as u64,
                },
            ))
        })
        .map_err(read_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_err)?;
    let mut s = c
        .prepare_cached(
            "SELECT budget, period_start, charged_j, settled_j, measured, job_id FROM budget_charges
             WHERE settled_j IS NULL ORDER BY job_id, budget",
        )
        .map_err(read_err)?;
    let held = s
        .query_map([], |r| Ok((r.get::<_, i64>(5)? as u64, charge(r)?)))
        .map_err(read_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_err)?;
    Ok(super::BudgetState { totals, held })
}
