//! The SQLite store: WAL journal, synchronous commits, a failing change undone alone.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Applied, BaselineNode, Change, Counts, NewJob, Reservation, Store, StoreError, StoreMetrics,
};
use crate::run::{self, Run};
use greenup::query::{JobSummary, ListJobs, ListRecords};
use greenup::record::{Decision, JobRecord, JobState, NodeOutcome, OpenJob, Verdict};
use greenup::record::{JobEnd, Source};
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    job_id     INTEGER PRIMARY KEY,
    uid        INTEGER NOT NULL,
    user       TEXT,
    partition  TEXT,
    state      TEXT NOT NULL,
    end_reason TEXT,
    opened_at  INTEGER NOT NULL,
    closed_at  INTEGER,
    request    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_by_uid ON jobs (uid, job_id);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, job_id);
CREATE TABLE IF NOT EXISTS decisions (
    job_id             INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    verdict            TEXT NOT NULL,
    policy             TEXT NOT NULL,
    profile            TEXT,
    profile_version    TEXT,
    power_cap_w        REAL,
    reserved_w         REAL NOT NULL,
    node_count         INTEGER NOT NULL,
    predicted_energy_j REAL,
    inputs             TEXT NOT NULL,
    decision           TEXT NOT NULL,
    decided_at         INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS outcomes (
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    node        TEXT NOT NULL,
    freq_ghz    REAL,
    energy_j    REAL,
    elapsed_s   REAL,
    source      TEXT,
    restored    INTEGER NOT NULL,
    note        TEXT,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, node)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS reservations (
    job_id     INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    partition  TEXT,
    watts      REAL NOT NULL,
    expires_at INTEGER NOT NULL
);
";

/// Version 2: a decision says whether its policy only records (`monitor`). Before it,
/// greenupd treated only the policy named `monitor` as monitoring, so that is what
/// those rows meant.
const MIGRATE_TO_2: &str = "
BEGIN IMMEDIATE;
UPDATE decisions SET decision = json_set(decision, '$.monitor', json('true'))
 WHERE policy = 'monitor' AND json_extract(decision, '$.monitor') IS NULL;
PRAGMA user_version = 2;
COMMIT;
";

/// Version 4: the application/policy pairs greenupd has stopped applying because their
/// measured slowdown missed the policy's target (until an admin clears them), and an
/// index that counts an application's decisions (its baseline samples) cheaply.
const MIGRATE_TO_4: &str = "
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS policy_holds (
    profile TEXT NOT NULL,
    policy  TEXT NOT NULL,
    reason  TEXT NOT NULL,
    held_at INTEGER NOT NULL,
    PRIMARY KEY (profile, policy)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS decisions_by_profile ON decisions (profile);
PRAGMA user_version = 4;
COMMIT;
";

/// Version 5: a node's outcome keeps what the job's MPI ranks measured there
/// (`comm`, [`greenup::comm::NodeComm`] as JSON); older rows have none.
const MIGRATE_TO_5: &str = "
BEGIN IMMEDIATE;
ALTER TABLE outcomes ADD COLUMN comm TEXT;
PRAGMA user_version = 5;
COMMIT;
";

/// Version 6: a node's outcome keeps what the job's GPUs used there (`gpu`,
/// [`greenup::record::NodeGpu`] as JSON); older rows have none.
const MIGRATE_TO_6: &str = "
BEGIN IMMEDIATE;
ALTER TABLE outcomes ADD COLUMN gpu TEXT;
PRAGMA user_version = 6;
COMMIT;
";

/// Version 7: a node's outcome keeps whether it held the RAPL power limit its decision
/// asked for (`power`, [`greenup::record::NodePower`] as JSON); older rows have none.
const MIGRATE_TO_7: &str = "
BEGIN IMMEDIATE;
ALTER TABLE outcomes ADD COLUMN power TEXT;
PRAGMA user_version = 7;
COMMIT;
";

/// Version 8: a job's runs. Slurm keeps a requeued job's id, so the run after a requeue
/// takes the job's rows and the run before it is kept whole in `earlier_runs` (its
/// record as JSON, measured energy and all), its budget charges in `earlier_charges`;
/// `jobs.restart_count` is the current run's `SLURM_JOB_RESTART_COUNT`, when known.
const MIGRATE_TO_8: &str = "
BEGIN IMMEDIATE;
ALTER TABLE jobs ADD COLUMN restart_count INTEGER;
CREATE TABLE IF NOT EXISTS earlier_runs (
    job_id        INTEGER NOT NULL,
    run           INTEGER NOT NULL,
    restart_count INTEGER,
    record        TEXT NOT NULL,
    PRIMARY KEY (job_id, run)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS earlier_charges (
    job_id       INTEGER NOT NULL,
    run          INTEGER NOT NULL,
    budget       TEXT NOT NULL,
    period_start INTEGER NOT NULL,
    charged_j    REAL NOT NULL,
    nodes        INTEGER NOT NULL,
    settled_j    REAL,
    measured     INTEGER,
    PRIMARY KEY (job_id, run, budget)
) WITHOUT ROWID;
PRAGMA user_version = 8;
COMMIT;
";

/// Version 9: the whole joules greenupd wrote into Slurm's accounting as a job's energy
/// (`daemon.slurm_energy`), so its report never passes them off as Slurm's own measure.
const MIGRATE_TO_9: &str = "
BEGIN IMMEDIATE;
ALTER TABLE jobs ADD COLUMN slurm_energy_j INTEGER;
PRAGMA user_version = 9;
COMMIT;
";

/// Each step that brings an older store up to date, in order: (version, script).
const MIGRATIONS: &[(i64, &str)] = &[
    (2, MIGRATE_TO_2),
    (3, super::charges::MIGRATE_TO_3),
    (4, MIGRATE_TO_4),
    (5, MIGRATE_TO_5),
    (6, MIGRATE_TO_6),
    (7, MIGRATE_TO_7),
    (8, MIGRATE_TO_8),
    (9, MIGRATE_TO_9),
];

/// The schema version this build writes.
const SCHEMA_VERSION: i64 = 9;

/// WAL pages after which the writer checkpoints by itself (about 40 MB).
const BACKSTOP_PAGES: i64 = 10_000;

/// Copies the write-ahead log into the database from a connection and a thread of its
/// own, so a commit never waits for a checkpoint (one took tens of milliseconds under
/// load when the writer ran them). Stops when dropped.
pub struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// Checkpoint the database at `path` every `every`, without blocking its writer.
    pub fn start(path: &Path, every: std::time::Duration) -> Result<Checkpointer, StoreError> {
        let conn = Connection::open(path)
            .map_err(|e| StoreError::Read(format!("{}: {e}", path.display())))?;
        let (stop, idle) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("greenup-checkpoint".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = idle.recv_timeout(every)
                {
                    // PASSIVE copies what it can without waiting for readers or the writer.
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::debug!(error = %e, "checkpoint skipped");
                    }
                }
            })
            .map_err(|e| StoreError::Read(format!("cannot start the checkpoint thread: {e}")))?;
        Ok(Checkpointer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// greenup's SQLite database.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
}

fn write_err(e: rusqlite::Error) -> StoreError {
    StoreError::Write(e.to_string())
}

fn read_err(e: rusqlite::Error) -> StoreError {
    StoreError::Read(e.to_string())
}

fn json_err(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn job_id_sql(id: u64) -> Result<i64, StoreError> {
    i64::try_from(id).map_err(|_| StoreError::Corrupt(format!("job id {id} is out of range")))
}

impl SqliteStore {
    /// A grouped count (`SELECT label, count(*) ... GROUP BY 1`) as label → count.
    fn counts_by(&self, sql: &str) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
        let mut s = self.conn.prepare_cached(sql).map_err(read_err)?;
        let rows = s
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(read_err)?;
        rows.map(|row| {
            row.map(|(label, n)| (label, u64::try_from(n).unwrap_or(0)))
                .map_err(read_err)
        })
        .collect()
    }

    /// Open (creating if needed) the database at `path` in WAL mode.
    ///
    /// A database that exists but cannot be written (read-only file system) still opens,
    /// so greenupd can serve reads and answer writes with a clear error.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path)
            .map_err(|e| StoreError::Read(format!("{}: {e}", path.display())))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(read_err)?;
        // WAL lets readers (greenup report) run beside the daemon; FULL makes every
        // commit durable before it is acknowledged.
        let _ = conn.pragma_update(None, "journal_mode", "WAL");
        // These fail only when the file cannot be read at all (a read-only file
        // system); that case is handled below.
        let _ = conn.pragma_update(None, "synchronous", "FULL");
        let _ = conn.pragma_update(None, "foreign_keys", "ON");
        // Checkpoints run on their own connection (see `Checkpointer`), so no commit
        // waits for one; this is only the backstop should that thread fall behind.
        let _ = conn.pragma_update(None, "wal_autocheckpoint", BACKSTOP_PAGES);
        if let Err(e) = conn.execute_batch(SCHEMA) {
            let has_schema = |c: &Connection| {
                c.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n > 0)
            };
            match has_schema(&conn) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(StoreError::Write(format!(
                        "{}: cannot create the schema: {e}",
                        path.display()
                    )));
                }
                // A WAL database on a read-only file system cannot even be read
                // normally: open it immutable, so reads work and writes get a clear error.
                Err(_) => {
                    let conn = Self::open_immutable(path)?;
                    if !has_schema(&conn).map_err(read_err)? {
                        return Err(StoreError::Read(format!(
                            "{}: read-only and holds no greenup schema",
                            path.display()
                        )));
                    }
                    tracing::warn!(path = %path.display(), error = %e, "store is read-only: writes will be refused");
                    return Ok(SqliteStore { conn });
                }
            }
            tracing::warn!(path = %path.display(), error = %e, "store opened but cannot be written");
        } else {
            let version: i64 = conn
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(read_err)?;
            for &(to, script) in MIGRATIONS {
                if version < to
                    && let Err(e) = conn.execute_batch(script)
                {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(StoreError::Write(format!(
                        "{}: cannot bring the store to version {to} of {SCHEMA_VERSION}: {e}",
                        path.display()
                    )));
                }
            }
        }
        Ok(SqliteStore { conn })
    }

    /// A read-only connection to the database greenupd writes at `path`; WAL lets it
    /// read while the writer commits.
    pub fn open_reader(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| StoreError::Read(format!("{}: {e}", path.display())))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(read_err)?;
        Ok(SqliteStore { conn })
    }

    fn open_immutable(path: &Path) -> Result<Connection, StoreError> {
        let mut uri = String::from("file:");
        for c in path.to_string_lossy().chars() {
            match c {
                '?' => uri.push_str("%3f"),
                '#' => uri.push_str("%23"),
                '%' => uri.push_str("%25"),
                c => uri.push(c),
            }
        }
        uri.push_str("?immutable=1");
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        Connection::open_with_flags(&uri, flags)
            .map_err(|e| StoreError::Read(format!("{}: {e}", path.display())))
    }

    /// Run one cached statement that takes no parameters.
    fn run(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([]).map(|_| ())
    }

    /// Apply one change inside its own savepoint: if it fails, it leaves nothing behind.
    fn apply_isolated(&self, change: &Change) -> Result<Applied, StoreError> {
        self.run("SAVEPOINT change").map_err(write_err)?;
        match self.apply_one(change) {
            Ok(a) => self.run("RELEASE change").map(|_| a).map_err(write_err),
            Err(e) => {
                let _ = self.run("ROLLBACK TO change");
                let _ = self.run("RELEASE change");
                Err(e)
            }
        }
    }

    fn apply_one(&self, change: &Change) -> Result<Applied, StoreError> {
        match change {
            Change::Open(job) => self.open_job(job),
            Change::Outcome { outcome, at } => self.record(outcome, *at),
            Change::Close {
                job_id,
                state,
                end,
                at,
                restart_count,
            } => self.close(*job_id, *state, *end, *at, *restart_count),
            Change::SettleEnd { job_id, end } => self.settle_end(*job_id, *end),
            Change::SlurmEnergy {
                job_id,
                restart_count,
                joules,
            } => self.slurm_energy(*job_id, *restart_count, *joules),
            Change::Hold {
                profile,
                policy,
                reason,
                at,
            } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "INSERT OR IGNORE INTO policy_holds (profile, policy, reason, held_at) VALUES (?1, ?2, ?3, ?4)",
                    )
                    .and_then(|mut st| st.execute(params![profile, policy, reason, at]))
                    .map_err(write_err)?;
                Ok(Applied::Stored { new: n > 0 })
            }
            Change::ClearHold { profile, policy } => {
                let n = self
                    .conn
                    .prepare_cached("DELETE FROM policy_holds WHERE profile = ?1 AND policy = ?2")
                    .and_then(|mut st| st.execute(params![profile, policy]))
                    .map_err(write_err)?;
                Ok(Applied::Stored { new: n > 0 })
            }
        }
    }

    fn open_job(&self, job: &NewJob) -> Result<Applied, StoreError> {
        let job_id = job.request.job_id;
        let id = job_id_sql(job_id)?;
        if let Some((decision, state)) = self.decision_of(id)? {
            let asked = job.request.restart_count;
            match self.run_of(
                id,
                asked,
                Some(|held: &OpenJob| held.nodes == job.request.nodes),
            )? {
                Run::Same => {
                    return Ok(Applied::Opened {
                        new: false,
                        decision: Box::new(decision),
                        state,
                    });
                }
                Run::Earlier => {
                    return Err(StoreError::OtherRun(format!(
                        "job {job_id} ran again since this run ({}): its open comes too late",
                        run::describe(asked)
                    )));
                }
                // greenupd ends the run before (see `jobs::decided`): one still open
                // here was opened meanwhile, and is not overwritten.
                Run::Later if state == JobState::Open => {
                    return Err(StoreError::OtherRun(format!(
                        "job {job_id}'s earlier run is still open: it is ended before the job is decided again"
                    )));
                }
                Run::Later => self.set_aside(id, job_id)?,
            }
        }
        let d = &job.decision;
        let state = if d.holds_reservation() {
            JobState::Open
        } else {
            JobState::Closed
        };
        let request = serde_json::to_string(&job.request).map_err(json_err)?;
        let decision = serde_json::to_string(d).map_err(json_err)?;
        let inputs = job.inputs.to_string();
        let c = &self.conn;
        c.prepare_cached(
            "INSERT INTO jobs (job_id, uid, user, partition, state, opened_at, closed_at, request, restart_count)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                job.request.uid,
                job.request.user,
                job.request.partition,
                state.as_str(),
                d.decided_at,
                (state == JobState::Closed).then_some(d.decided_at),
                request,
                job.request.restart_count
            ])
        })
        .map_err(write_err)?;
        let plan = d.plan.as_ref();
        c.prepare_cached(
            "INSERT INTO decisions (job_id, verdict, policy, profile, profile_version, power_cap_w, reserved_w,
                                    node_count, predicted_energy_j, inputs, decision, decided_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                Verdict::as_str(d.verdict),
                d.policy,
                d.profile,
                d.profile_version,
                d.power_cap_w.map(|w| w.0),
                d.reserved_w.0,
                plan.map_or(0, |p| p.node_count as i64),
                // What RAPL will measure, to compare with the outcomes' energy_j.
                plan.map(|p| p.without_gpus().0.energy_j.0),
                inputs,
                decision,
                d.decided_at
            ])
        })
        .map_err(write_err)?;
        let nodes = plan.map_or(job.request.nodes.len(), |p| p.node_count);
        super::charges::insert(c, id, &job.charges, nodes)?;
        if state == JobState::Closed {
            // Decided and closed at once (a refusal): nothing runs that a node could measure.
            super::charges::settle(c, id)?;
        }
        if state == JobState::Open {
            c.prepare_cached("INSERT INTO reservations (job_id, partition, watts, expires_at) VALUES (?1, ?2, ?3, ?4)")
                .and_then(|mut s| s.execute(params![id, job.request.partition, d.reserved_w.0, job.expires_at]))
                .map_err(write_err)?;
        }
        Ok(Applied::Opened {
            new: true,
            decision: Box::new(d.clone()),
            state,
        })
    }

    /// How run `asked` stands to the run held for job `id` ([`run::compare_with`]).
    /// `same_nodes` sees the held run's request, read only when the counts cannot tell
    /// (a large job's is long); without it the nodes count as the held run's.
    fn run_of(
        &self,
        id: i64,
        asked: Option<u32>,
        same_nodes: Option<impl FnOnce(&OpenJob) -> bool>,
    ) -> Result<Run, StoreError> {
        let held: Option<Option<u32>> = self
            .conn
            .prepare_cached("SELECT restart_count FROM jobs WHERE job_id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
            .map_err(read_err)?;
        let Some(held) = held else {
            return Err(StoreError::NoSuchJob(id as u64));
        };
        run::compare_with(held, asked, || {
            let Some(same_nodes) = same_nodes else {
                return Ok(true);
            };
            let request: String = self
                .conn
                .prepare_cached("SELECT request FROM jobs WHERE job_id = ?1")
                .and_then(|mut s| s.query_row([id], |r| r.get(0)))
                .map_err(read_err)?;
            let held: OpenJob = serde_json::from_str(&request).map_err(json_err)?;
            Ok(same_nodes(&held))
        })
    }

    /// Move job `id`'s current run, closed, out of the way of the run after a requeue:
    /// its record (decision, outcomes, end) into `earlier_runs`, its charges (their
    /// energy still counts in the budgets' periods) into `earlier_charges`.
    fn set_aside(&self, id: i64, job_id: u64) -> Result<(), StoreError> {
        let Some(mut rec) = self.record_of(job_id)? else {
            return Ok(());
        };
        // The count is the job's, not the run's: it is read afresh with the job.
        rec.earlier_run_count = 0;
        let c = &self.conn;
        let run: i64 = c
            .prepare_cached("SELECT coalesce(max(run), 0) + 1 FROM earlier_runs WHERE job_id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)))
            .map_err(read_err)?;
        let record = serde_json::to_string(&rec).map_err(json_err)?;
        c.prepare_cached(
            "INSERT INTO earlier_runs (job_id, run, restart_count, record) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![id, run, rec.request.restart_count, record]))
        .map_err(write_err)?;
        super::charges::set_aside(c, id, run)?;
        for sql in [
            "DELETE FROM outcomes WHERE job_id = ?1",
            "DELETE FROM reservations WHERE job_id = ?1",
            "DELETE FROM decisions WHERE job_id = ?1",
            "DELETE FROM jobs WHERE job_id = ?1",
        ] {
            c.prepare_cached(sql)
                .and_then(|mut s| s.execute([id]))
                .map_err(write_err)?;
        }
        Ok(())
    }

    /// Store `o`, which is not of job `id`'s current run, with the earlier run it
    /// measured (newest first), unless that run has this node's outcome already; the
    /// run's charges are settled again with it, as a late outcome of the current run
    /// settles its own.
    fn record_earlier(&self, id: i64, o: &NodeOutcome) -> Result<Applied, StoreError> {
        let runs: Vec<(i64, Option<u32>, String)> = self
            .conn
            .prepare_cached(
                "SELECT run, restart_count, record FROM earlier_runs WHERE job_id = ?1 ORDER BY run DESC",
            )
            .and_then(|mut s| {
                s.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .map_err(read_err)?;
        for (run, held, record) in runs {
            let mut rec: JobRecord = serde_json::from_str(&record).map_err(json_err)?;
            let has_node = rec.request.nodes.contains(&o.node);
            if run::compare(held, o.restart_count, || has_node) != Run::Same {
                continue;
            }
            if rec.outcomes.iter().any(|x| x.node == o.node) {
                return Ok(Applied::Stored { new: false });
            }
            rec.outcomes.push(o.clone());
            rec.outcomes.sort_by(|a, b| a.node.cmp(&b.node));
            let record = serde_json::to_string(&rec).map_err(json_err)?;
            self.conn
                .prepare_cached(
                    "UPDATE earlier_runs SET record = ?3 WHERE job_id = ?1 AND run = ?2",
                )
                .and_then(|mut s| s.execute(params![id, run, record]))
                .map_err(write_err)?;
            super::charges::settle_earlier(&self.conn, id, run, &rec.outcomes)?;
            return Ok(Applied::Stored { new: true });
        }
        Err(StoreError::OtherRun(format!(
            "node '{}' reports for job {} ({}), but is of none of its runs greenupd decided",
            o.node,
            o.job_id,
            run::describe(o.restart_count)
        )))
    }

    fn decision_of(&self, id: i64) -> Result<Option<(Decision, JobState)>, StoreError> {
        let row: Option<(String, String)> = self
            .conn
            .prepare_cached("SELECT d.decision, j.state FROM jobs j JOIN decisions d USING (job_id) WHERE j.job_id = ?1")
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(read_err)?;
        match row {
            None => Ok(None),
            Some((d, s)) => Ok(Some((
                serde_json::from_str(&d).map_err(json_err)?,
                parse_state(&s)?,
            ))),
        }
    }

    fn record(&self, o: &NodeOutcome, at: i64) -> Result<Applied, StoreError> {
        let id = job_id_sql(o.job_id)?;
        let known: bool = self
            .conn
            .prepare_cached("SELECT 1 FROM jobs WHERE job_id = ?1")
            .and_then(|mut s| s.exists([id]))
            .map_err(read_err)?;
        if !known {
            return Err(StoreError::NoSuchJob(o.job_id));
        }
        let earlier: bool = self
            .conn
            .prepare_cached("SELECT 1 FROM earlier_runs WHERE job_id = ?1 LIMIT 1")
            .and_then(|mut s| s.exists([id]))
            .map_err(read_err)?;
        // Without an earlier run every report is the current run's, as before runs were
        // told apart: a node outside the job is only compared once the job was requeued.
        let in_job = |held: &OpenJob| held.nodes.contains(&o.node);
        let run = self.run_of(id, o.restart_count, earlier.then_some(in_job))?;
        if run != Run::Same {
            return self.record_earlier(id, o);
        }
        let n = self
            .conn
            .prepare_cached(
                "INSERT OR IGNORE INTO outcomes (job_id, node, freq_ghz, energy_j, elapsed_s, source, restored, note, recorded_at, comm, gpu, power)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .and_then(|mut s| {
                let comm = o.comm.as_ref().and_then(|c| serde_json::to_string(c).ok());
                let gpu = o.gpu.as_ref().and_then(|g| serde_json::to_string(g).ok());
                let power = o.power.as_ref().and_then(|p| serde_json::to_string(p).ok());
                s.execute(params![id, o.node, o.freq_ghz.map(|f| f.0), o.energy_j.map(|j| j.0), o.elapsed_s.map(|t| t.0), o.source.map(Source::as_str), o.restored, o.note, at, comm, gpu, power])
            })
            .map_err(write_err)?;
        // An outcome that comes after the close (from a node's spool) settles again.
        if n == 1 && super::charges::settled(&self.conn, id)? {
            super::charges::settle(&self.conn, id)?;
        }
        Ok(Applied::Stored { new: n == 1 })
    }

    fn close(
        &self,
        job_id: u64,
        state: JobState,
        end: Option<JobEnd>,
        at: i64,
        restart_count: Option<u32>,
    ) -> Result<Applied, StoreError> {
        let id = job_id_sql(job_id)?;
        // A close names no node: without a count it is the current run's, as before.
        let no_nodes: Option<fn(&OpenJob) -> bool> = None;
        if restart_count.is_some() && self.run_of(id, restart_count, no_nodes)? != Run::Same {
            return Err(StoreError::OtherRun(format!(
                "job {job_id}'s close ({}) is not of its current run: the run it ended was set aside when the job was requeued",
                run::describe(restart_count)
            )));
        }
        let n = self
            .conn
            .prepare_cached(
                // A job reclaimed because its close never came is closed when the close
                // does come (from a node's spool): how it really ended is worth more.
                "UPDATE jobs SET state = ?2, end_reason = ?3, closed_at = ?4
                 WHERE job_id = ?1 AND (state = 'open' OR (state = 'reclaimed' AND ?2 = 'closed'))",
            )
            .and_then(|mut s| s.execute(params![id, state.as_str(), end.map(JobEnd::as_str), at]))
            .map_err(write_err)?;
        if n == 0 {
            let known = self
                .conn
                .prepare_cached("SELECT 1 FROM jobs WHERE job_id = ?1")
                .and_then(|mut s| s.exists([id]))
                .map_err(read_err)?;
            return if known {
                Ok(Applied::Stored { new: false })
            } else {
                Err(StoreError::NoSuchJob(job_id))
            };
        }
        self.conn
            .prepare_cached("DELETE FROM reservations WHERE job_id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(write_err)?;
        super::charges::settle(&self.conn, id)?;
        Ok(Applied::Stored { new: true })
    }

    /// Keep that greenupd wrote `joules` into Slurm's accounting for the closed run
    /// `restart_count`; a run requeued meanwhile is left as it is.
    fn slurm_energy(
        &self,
        job_id: u64,
        restart_count: Option<u32>,
        joules: u64,
    ) -> Result<Applied, StoreError> {
        let id = job_id_sql(job_id)?;
        let joules = i64::try_from(joules)
            .map_err(|_| StoreError::Write(format!("job {job_id}: {joules} J is out of range")))?;
        let n = self
            .conn
            .prepare_cached(
                "UPDATE jobs SET slurm_energy_j = ?2
                 WHERE job_id = ?1 AND state = 'closed' AND restart_count IS ?3",
            )
            .and_then(|mut s| s.execute(params![id, joules, restart_count]))
            .map_err(write_err)?;
        Ok(Applied::Stored { new: n > 0 })
    }

    fn settle_end(&self, job_id: u64, end: JobEnd) -> Result<Applied, StoreError> {
        let id = job_id_sql(job_id)?;
        let n = self
            .conn
            .prepare_cached(
                "UPDATE jobs SET end_reason = ?2 WHERE job_id = ?1 AND state = 'closed'",
            )
            .and_then(|mut s| s.execute(params![id, end.as_str()]))
            .map_err(write_err)?;
        if n == 0 {
            return Err(StoreError::NoSuchJob(job_id));
        }
        Ok(Applied::Stored { new: true })
    }

    /// Job `job_id`'s current run with its decision and outcomes.
    fn record_of(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        let id = job_id_sql(job_id)?;
        type Row = (
            u32,
            Option<String>,
            Option<String>,
            String,
            Option<String>,
            i64,
            Option<i64>,
            String,
            Option<i64>,
        );
        let row: Option<Row> = self
            .conn
            .prepare_cached(
                "SELECT uid, user, partition, state, end_reason, opened_at, closed_at, request, slurm_energy_j FROM jobs WHERE job_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
                })
                .optional()
            })
            .map_err(read_err)?;
        let Some((uid, user, partition, state, end, opened_at, closed_at, request, slurm_energy_j)) =
            row
        else {
            return Ok(None);
        };
        let Some((decision, _)) = self.decision_of(id)? else {
            return Err(StoreError::Corrupt(format!("job {job_id} has no decision")));
        };
        let request: OpenJob = serde_json::from_str(&request).map_err(json_err)?;
        Ok(Some(JobRecord {
            job_id,
            uid,
            user,
            partition,
            state: parse_state(&state)?,
            end: end.as_deref().map(JobEnd::from_stored),
            opened_at,
            closed_at,
            request,
            decision,
            outcomes: self.outcomes_of(id)?,
            earlier_runs: Vec::new(),
            earlier_run_count: self
                .conn
                .prepare_cached("SELECT count(*) FROM earlier_runs WHERE job_id = ?1")
                .and_then(|mut s| s.query_row([id], |r| r.get::<_, i64>(0)))
                .map_err(read_err)?
                .clamp(0, i64::from(u32::MAX)) as u32,
            slurm_energy_j: slurm_energy_j.and_then(|j| u64::try_from(j).ok()),
        }))
    }

    fn earlier_of(&self, job_id: u64) -> Result<Vec<JobRecord>, StoreError> {
        let id = job_id_sql(job_id)?;
        let records: Vec<String> = self
            .conn
            .prepare_cached("SELECT record FROM earlier_runs WHERE job_id = ?1 ORDER BY run")
            .and_then(|mut s| s.query_map([id], |r| r.get(0))?.collect())
            .map_err(read_err)?;
        records
            .iter()
            .map(|r| serde_json::from_str(r).map_err(json_err))
            .collect()
    }

    fn outcomes_of(&self, id: i64) -> Result<Vec<NodeOutcome>, StoreError> {
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT node, freq_ghz, energy_j, elapsed_s, source, restored, note, comm, gpu, power FROM outcomes
                 WHERE job_id = ?1 ORDER BY node",
            )
            .map_err(read_err)?;
        let rows = s
            .query_map([id], |r| {
                Ok(NodeOutcome {
                    restart_count: None,
                    job_id: id as u64,
                    node: r.get(0)?,
                    freq_ghz: r.get::<_, Option<f64>>(1)?.map(Ghz),
                    energy_j: r.get::<_, Option<f64>>(2)?.map(Joules),
                    elapsed_s: r.get::<_, Option<f64>>(3)?.map(Seconds),
                    source: r.get::<_, Option<String>>(4)?.map(Source::from),
                    restored: r.get(5)?,
                    note: r.get(6)?,
                    comm: r
                        .get::<_, Option<String>>(7)?
                        .and_then(|c| serde_json::from_str(&c).ok()),
                    gpu: r
                        .get::<_, Option<String>>(8)?
                        .and_then(|g| serde_json::from_str(&g).ok()),
                    power: r
                        .get::<_, Option<String>>(9)?
                        .and_then(|p| serde_json::from_str(&p).ok()),
                })
            })
            .map_err(read_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(read_err)
    }
}

fn parse_verdict(s: &str) -> Result<Verdict, StoreError> {
    match s {
        "planned" => Ok(Verdict::Planned),
        "budget_limited" => Ok(Verdict::BudgetLimited),
        "unchanged" => Ok(Verdict::Unchanged),
        "refused" => Ok(Verdict::Refused),
        other => Err(StoreError::Corrupt(format!("unknown verdict '{other}'"))),
    }
}

fn parse_state(s: &str) -> Result<JobState, StoreError> {
    JobState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown job state '{s}'")))
}

impl Store for SqliteStore {
    fn app_history(
        &mut self,
        profile: &str,
        policy: &str,
    ) -> Result<(u32, Option<String>), StoreError> {
        let baselines: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM decisions WHERE profile = ?1 AND json_extract(decision, '$.monitor') = 1
                   AND json_extract(decision, '$.clock_sample') IS NOT 1",
            )
            .and_then(|mut st| st.query_row(params![profile], |r| r.get(0)))
            .map_err(read_err)?;
        let hold: Option<String> = self
            .conn
            .prepare_cached("SELECT reason FROM policy_holds WHERE profile = ?1 AND policy = ?2")
            .and_then(|mut st| {
                st.query_row(params![profile, policy], |r| r.get(0))
                    .optional()
            })
            .map_err(read_err)?;
        Ok((u32::try_from(baselines).unwrap_or(u32::MAX), hold))
    }

    fn baseline_nodes(&mut self, profile: &str) -> Result<Vec<BaselineNode>, StoreError> {
        // The 64 newest baseline nodes: enough for a median that one odd node cannot
        // move, few enough to read at every decision of a guarded job.
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT d.job_id, o.node, json_extract(o.comm, '$.sync_calls'),
                        json_extract(o.comm, '$.ranks'),
                        json_extract(o.comm, '$.compute_s') + json_extract(o.comm, '$.comm_s'),
                        d.profile_version
                 FROM decisions d JOIN outcomes o ON o.job_id = d.job_id
                 WHERE d.profile = ?1 AND json_extract(d.decision, '$.monitor') = 1
                   AND json_extract(d.decision, '$.clock_sample') IS NOT 1
                   AND json_extract(o.comm, '$.sync_calls') > 0
                 ORDER BY d.decided_at DESC, d.job_id DESC, o.node LIMIT 64",
            )
            .map_err(read_err)?;
        type Row = (i64, String, f64, f64, f64, Option<String>);
        let rows: Vec<Row> = st
            .query_map(params![profile], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(read_err)?;
        Ok(rows
            .into_iter()
            .filter(|(_, _, _, ranks, wall, _)| *ranks > 0.0 && *wall > 0.0)
            .map(|(job_id, node, calls, ranks, wall, version)| BaselineNode {
                job_id: u64::try_from(job_id).unwrap_or_default(),
                node,
                rate: calls / ranks / wall,
                version,
            })
            .filter(|b| b.rate.is_finite() && b.rate > 0.0)
            .collect())
    }

    fn holds(&mut self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT profile, policy, reason, held_at FROM policy_holds ORDER BY profile, policy",
            )
            .map_err(read_err)?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|rows| rows.collect())
            .map_err(read_err)
    }

    fn apply(&mut self, changes: &[Change]) -> Vec<Result<Applied, StoreError>> {
        if changes.is_empty() {
            return Vec::new();
        }
        let all_failed = |e: rusqlite::Error| {
            let msg = e.to_string();
            changes
                .iter()
                .map(|_| Err(StoreError::Write(msg.clone())))
                .collect()
        };
        if let Err(e) = self.run("BEGIN IMMEDIATE") {
            return all_failed(e);
        }
        // Nearly every group applies cleanly, so apply it plainly first; only when a
        // change fails is the group undone and applied again with a savepoint per
        // change, so that the failing one is undone alone and the others stay.
        let plain: Result<Vec<Applied>, StoreError> =
            changes.iter().map(|c| self.apply_one(c)).collect();
        let results: Vec<Result<Applied, StoreError>> = match plain {
            Ok(applied) => applied.into_iter().map(Ok).collect(),
            Err(_) => {
                if let Err(e) = self
                    .run("ROLLBACK")
                    .and_then(|()| self.run("BEGIN IMMEDIATE"))
                {
                    return all_failed(e);
                }
                changes.iter().map(|c| self.apply_isolated(c)).collect()
            }
        };
        if let Err(e) = self.run("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            let msg = e.to_string();
            return results
                .into_iter()
                .map(|r| match r {
                    Ok(_) => Err(StoreError::Write(msg.clone())),
                    Err(e) => Err(e),
                })
                .collect();
        }
        results
    }

    fn profile_of(&mut self, job_id: u64) -> Result<Option<Option<String>>, StoreError> {
        let id = job_id_sql(job_id)?;
        self.conn
            .prepare_cached("SELECT profile FROM decisions WHERE job_id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
            .map_err(read_err)
    }

    fn outcome_count(&mut self, job_id: u64) -> Result<Option<(u32, u64, u64)>, StoreError> {
        let id = job_id_sql(job_id)?;
        let count = |r: &rusqlite::Row, i| {
            r.get::<_, Option<i64>>(i)
                .map(|n| n.unwrap_or(0).max(0) as u64)
        };
        self.conn
            .prepare_cached(
                "SELECT uid, (SELECT count(*) FROM outcomes WHERE job_id = ?1),
                        json_array_length(request, '$.nodes')
                 FROM jobs WHERE job_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([id], |r| Ok((r.get(0)?, count(r, 1)?, count(r, 2)?)))
                    .optional()
            })
            .map_err(read_err)
    }

    fn job(&mut self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.record_of(job_id)
    }

    fn earlier_runs(&mut self, job_id: u64) -> Result<Vec<JobRecord>, StoreError> {
        self.earlier_of(job_id)
    }

    fn job_with_runs(&mut self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        // One read transaction: a requeue committed between the two reads would show
        // the new run beside a list of earlier runs without the one it set aside.
        let tx = self.conn.unchecked_transaction().map_err(read_err)?;
        let Some(mut rec) = self.record_of(job_id)? else {
            return Ok(None);
        };
        rec.earlier_runs = self.earlier_of(job_id)?;
        tx.finish().map_err(read_err)?;
        Ok(Some(rec))
    }

    fn job_summaries(&mut self, f: &ListJobs) -> Result<Vec<JobSummary>, StoreError> {
        let before = f.before_job_id.map(job_id_sql).transpose()?;
        let (uid, state, limit) = (f.uid, f.state, f.limit.unwrap_or(100));
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT j.job_id, j.uid, j.user, j.partition, j.state, d.policy, d.verdict, d.node_count,
                        d.reserved_w, d.predicted_energy_j, j.opened_at,
                        (SELECT sum(energy_j) FROM outcomes o WHERE o.job_id = j.job_id),
                        (SELECT count(*) FROM outcomes o WHERE o.job_id = j.job_id)
                 FROM jobs j JOIN decisions d USING (job_id)
                 WHERE (?1 IS NULL OR j.uid = ?1) AND (?2 IS NULL OR j.state = ?2)
                   AND (?4 IS NULL OR j.job_id < ?4)
                 ORDER BY j.job_id DESC LIMIT ?3",
            )
            .map_err(read_err)?;
        let rows = s
            .query_map(
                params![uid, state.map(JobState::as_str), limit, before],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, u32>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, i64>(7)?,
                        r.get::<_, f64>(8)?,
                        r.get::<_, Option<f64>>(9)?,
                        r.get::<_, i64>(10)?,
                        r.get::<_, Option<f64>>(11)?,
                        r.get::<_, i64>(12)?,
                    ))
                },
            )
            .map_err(read_err)?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                uid,
                user,
                partition,
                state,
                policy,
                verdict,
                nodes,
                reserved,
                pred,
                opened,
                measured,
                n,
            ) = row.map_err(read_err)?;
            out.push(JobSummary {
                job_id: id as u64,
                uid,
                user,
                partition,
                state: parse_state(&state)?,
                policy,
                verdict: parse_verdict(&verdict)?,
                node_count: usize::try_from(nodes).unwrap_or(0),
                reserved_w: Watts(reserved),
                predicted_energy_j: pred.map(Joules),
                measured_energy_j: measured.map(Joules),
                outcomes: usize::try_from(n).unwrap_or(0),
                opened_at: opened,
            });
        }
        Ok(out)
    }

    fn job_records(&mut self, f: &ListRecords) -> Result<Vec<JobRecord>, StoreError> {
        use rusqlite::types::Value;
        let before = f.before_job_id.map(job_id_sql).transpose()?;
        // Only the filters given go into the query, so SQLite can use the indexes on
        // (uid, job_id) and (state, job_id) instead of scanning every job.
        let mut sql =
            String::from("SELECT j.job_id FROM jobs j JOIN decisions d USING (job_id) WHERE 1");
        let mut args: Vec<Value> = Vec::new();
        let mut filter = |clause: &str, value: Option<Value>| {
            if let Some(v) = value {
                args.push(v);
                sql.push_str(&format!(" AND {clause} ?{}", args.len()));
            }
        };
        filter("j.uid =", f.uid.map(|u| Value::Integer(i64::from(u))));
        filter("j.user =", f.user.clone().map(Value::Text));
        filter("j.state =", f.state.map(|s| Value::Text(s.as_str().into())));
        filter("d.profile =", f.profile.clone().map(Value::Text));
        filter("j.closed_at >=", f.closed_since.map(Value::Integer));
        filter("j.closed_at <", f.closed_before.map(Value::Integer));
        filter("j.job_id <", before.map(Value::Integer));
        args.push(Value::Integer(i64::from(f.limit.unwrap_or(100))));
        sql.push_str(&format!(" ORDER BY j.job_id DESC LIMIT ?{}", args.len()));
        let ids: Vec<i64> = {
            let mut s = self.conn.prepare_cached(&sql).map_err(read_err)?;
            let rows = s
                .query_map(rusqlite::params_from_iter(args), |r| r.get(0))
                .map_err(read_err)?;
            rows.collect::<Result<_, _>>().map_err(read_err)?
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(rec) = self.job(id as u64)? {
                out.push(rec);
            }
        }
        Ok(out)
    }

    fn closed_jobs_of(
        &mut self,
        application: &str,
        limit: u32,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.job_records(&ListRecords {
            profile: Some(application.to_string()),
            state: Some(JobState::Closed),
            limit: Some(limit),
            ..ListRecords::default()
        })
    }

    fn metrics(&mut self) -> Result<StoreMetrics, StoreError> {
        let mut m = StoreMetrics {
            decisions_by_policy: self
                .counts_by("SELECT policy, count(*) FROM decisions GROUP BY policy")?,
            // Monitor runs unchanged on purpose; anything else unchanged is a fallback.
            fallbacks_by_reason: self.counts_by(
                "SELECT CASE WHEN verdict = 'refused' THEN 'refused'
                             WHEN profile IS NULL THEN 'no_profile'
                             ELSE 'over_budget' END, count(*)
                 FROM decisions
                 WHERE verdict IN ('unchanged', 'refused') AND json_extract(decision, '$.monitor') IS NOT 1
                 GROUP BY 1",
            )?,
            power_limit_nodes: self.counts_by(
                "SELECT CASE WHEN json_extract(power, '$.held_w') IS NULL THEN 'not_held' ELSE 'held' END,
                        count(*)
                 FROM outcomes WHERE power IS NOT NULL GROUP BY 1",
            )?,
            measurement_runs: self.counts_by(
                "SELECT CASE WHEN json_extract(decision, '$.clock_sample') IS 1 THEN 'clock_sample'
                             ELSE 'baseline_sample' END, count(*)
                 FROM decisions
                 WHERE json_extract(decision, '$.clock_sample') IS 1
                    OR json_extract(decision, '$.baseline_sample') IS 1
                 GROUP BY 1",
            )?,
            ..StoreMetrics::default()
        };
        // A job counts only when every node reported a measured energy (as in reports).
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT d.predicted_energy_j, sum(o.energy_j)
                 FROM jobs j JOIN decisions d USING (job_id) JOIN outcomes o USING (job_id)
                 WHERE j.state = 'closed' AND d.verdict IN ('planned', 'budget_limited')
                   AND d.predicted_energy_j IS NOT NULL
                 GROUP BY j.job_id
                 HAVING count(*) = sum(o.energy_j IS NOT NULL AND o.source IN ('rapl', 'slurm', 'simgrid'))",
            )
            .map_err(read_err)?;
        let rows = s
            .query_map([], |r| Ok((r.get::<_, f64>(0)?, r.get::<_, f64>(1)?)))
            .map_err(read_err)?;
        for row in rows {
            let (predicted, measured) = row.map_err(read_err)?;
            if measured > 0.0 {
                m.prediction_error
                    .observe((predicted - measured) / measured * 100.0);
            }
        }
        Ok(m)
    }

    fn reservations(&mut self) -> Result<Vec<Reservation>, StoreError> {
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT r.job_id, r.partition, r.watts, r.expires_at, j.opened_at
                 FROM reservations r JOIN jobs j USING (job_id) WHERE j.state = 'open' ORDER BY r.job_id",
            )
            .map_err(read_err)?;
        let rows = s
            .query_map([], |r| {
                Ok(Reservation {
                    job_id: r.get::<_, i64>(0)? as u64,
                    partition: r.get(1)?,
                    watts: r.get(2)?,
                    expires_at: r.get(3)?,
                    opened_at: r.get(4)?,
                })
            })
            .map_err(read_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(read_err)
    }

    fn counts(&mut self) -> Result<Counts, StoreError> {
        let q = |sql: &str| -> Result<u64, StoreError> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
                .map_err(read_err)
        };
        Ok(Counts {
            open_jobs: q("SELECT count(*) FROM jobs WHERE state = 'open'")?,
            total_jobs: q("SELECT count(*) FROM jobs")?,
            outcomes: q("SELECT count(*) FROM outcomes")?,
        })
    }

    fn budget_state(&mut self) -> Result<super::BudgetState, StoreError> {
        super::charges::state(&self.conn)
    }

    fn charges_of(
        &mut self,
        job_id: u64,
    ) -> Result<Vec<greenup::budget::book::Charge>, StoreError> {
        super::charges::of_job(&self.conn, job_id_sql(job_id)?)
    }
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::record::{NodeOutcome, OpenJob};
    use greenup_core::quantity::{Joules, Seconds, Watts};

    fn decision(job_id: u64, watts: f64) -> Decision {
        Decision {
            comm_dvfs: None,
            job_id,
            verdict: Verdict::Unchanged,
            reason: "no profile".into(),
            policy: "min-energy".into(),
            monitor: false,
            profile: None,
            profile_version: None,
            power_cap_w: None,
            reserved_w: Watts(watts),
            plan: None,
            decided_at: 1000,
            baseline_sample: false,
            clock_sample: false,
            refusal: None,
            budgets: Vec::new(),
            grant: None,
            guard: None,
            watts: Vec::new(),
        }
    }

    fn open(job_id: u64, uid: u32, watts: f64) -> Change {
        Change::Open(Box::new(NewJob {
            request: OpenJob {
                restart_count: None,
                job_id,
                uid,
                user: None,
                partition: Some("debug".into()),
                nodes: vec!["n1".into(), "n2".into()],
                nodelist: None,
                min_nodes: None,
                time_limit: greenup::record::TimeLimit::Seconds(60.0),
                policy: None,
                profile: None,
                energy_cap_j: None,
                power_cap_w: None,
                algorithm: None,
                account: None,
                granted_w: None,
            },
            decision: decision(job_id, watts),
            inputs: serde_json::json!({}),
            expires_at: 2000,
            charges: Vec::new(),
        }))
    }

    fn outcome(job_id: u64, node: &str, e: f64) -> Change {
        Change::Outcome {
            outcome: Box::new(NodeOutcome {
                restart_count: None,
                comm: None,
                job_id,
                node: node.into(),
                freq_ghz: Some(Ghz(2.0)),
                energy_j: Some(Joules(e)),
                elapsed_s: Some(Seconds(10.0)),
                source: Some(Source::Rapl),
                restored: true,
                note: None,
                gpu: None,
                power: None,
            }),
            at: 1001,
        }
    }

    #[test]
    fn open_is_idempotent_and_close_releases_the_reservation() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        let r = s.apply(&[
            open(7, 1000, 250.0),
            open(7, 1000, 999.0),
            outcome(7, "n1", 5.0),
            outcome(7, "n1", 6.0),
        ]);
        assert!(matches!(&r[0], Ok(Applied::Opened { new: true, .. })));
        match &r[1] {
            Ok(Applied::Opened {
                new: false,
                decision,
                ..
            }) => assert_eq!(decision.reserved_w, Watts(250.0)),
            other => panic!("{other:?}"),
        }
        assert_eq!(r[2], Ok(Applied::Stored { new: true }));
        assert_eq!(r[3], Ok(Applied::Stored { new: false }));
        assert_eq!(s.reservations().unwrap().len(), 1);
        let close = Change::Close {
            job_id: 7,
            state: JobState::Closed,
            end: Some(JobEnd::Completed),
            at: 1002,
            restart_count: None,
        };
        assert_eq!(
            s.apply(std::slice::from_ref(&close)),
            vec![Ok(Applied::Stored { new: true })]
        );
        assert_eq!(s.apply(&[close]), vec![Ok(Applied::Stored { new: false })]);
        assert!(s.reservations().unwrap().is_empty());
        let job = s.job(7).unwrap().unwrap();
        assert_eq!(job.state, JobState::Closed);
        assert_eq!(job.outcomes.len(), 1);
        assert_eq!(job.outcomes[0].energy_j, Some(Joules(5.0)));
        let c = s.counts().unwrap();
        assert_eq!((c.open_jobs, c.total_jobs, c.outcomes), (0, 1, 1));
    }

    #[test]
    fn a_failing_change_is_undone_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        let r = s.apply(&[
            open(1, 5, 10.0),
            outcome(99, "n1", 1.0),
            outcome(1, "n2", 2.0),
        ]);
        assert!(r[0].is_ok());
        assert_eq!(r[1], Err(StoreError::NoSuchJob(99)));
        assert_eq!(r[2], Ok(Applied::Stored { new: true }));
        let listed = s.list_jobs(Some(5), None, 10).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].measured_energy_j, Some(Joules(2.0)));
        assert!(s.list_jobs(Some(6), None, 10).unwrap().is_empty());
    }

    /// Jobs in the database file alone (a copy without its WAL), as sqlite3 would see it.
    fn jobs_in_main_file(db: &Path, scratch: &Path) -> i64 {
        let copy = scratch.join("copy.db");
        std::fs::copy(db, &copy).unwrap();
        let n = Connection::open(&copy)
            .and_then(|c| c.query_row("SELECT count(*) FROM jobs", [], |r| r.get(0)))
            .unwrap_or(-1);
        let _ = std::fs::remove_file(&copy);
        n
    }

    #[test]
    fn the_checkpointer_copies_committed_jobs_into_the_database_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        let mut s = SqliteStore::open(&db).unwrap();
        let changes: Vec<Change> = (1..=50).map(|i| open(i, 1000, 10.0)).collect();
        assert!(s.apply(&changes).iter().all(Result::is_ok));
        // Well under the backstop: without the checkpointer the jobs (and even the
        // schema) are only in the WAL.
        assert_ne!(jobs_in_main_file(&db, dir.path()), 50);

        let c = Checkpointer::start(&db, std::time::Duration::from_millis(10)).unwrap();
        let start = std::time::Instant::now();
        while jobs_in_main_file(&db, dir.path()) != 50 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "no checkpoint"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        drop(c);
        // The writer goes on after checkpoints, and what it commits is read back.
        assert!(s.apply(&[open(51, 1000, 10.0)]).iter().all(Result::is_ok));
        assert_eq!(s.counts().unwrap().total_jobs, 51);
    }

    #[test]
    fn a_late_close_closes_a_reclaimed_job_but_a_reclaim_never_reopens_a_closed_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        let end = |job_id, state| Change::Close {
            job_id,
            state,
            end: Some(match state {
                JobState::Closed => JobEnd::Completed,
                _ => JobEnd::Unknown,
            }),
            at: 1002,
            restart_count: None,
        };
        s.apply(&[open(1, 1000, 10.0), open(2, 1000, 10.0)]);
        let r = s.apply(&[
            end(1, JobState::Reclaimed),
            end(1, JobState::Closed),
            end(2, JobState::Closed),
            end(2, JobState::Reclaimed),
            end(1, JobState::Reclaimed),
        ]);
        let stored = |new| Ok(Applied::Stored { new });
        assert_eq!(
            r,
            vec![
                stored(true),
                stored(true),
                stored(true),
                stored(false),
                stored(false)
            ]
        );
        for id in [1, 2] {
            let job = s.job(id).unwrap().unwrap();
            assert_eq!(
                (job.state, job.end),
                (JobState::Closed, Some(JobEnd::Completed))
            );
        }
        assert!(s.reservations().unwrap().is_empty());
    }

    #[test]
    fn profile_of_tells_unknown_jobs_from_jobs_without_a_profile() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        let mut with = open(2, 1000, 10.0);
        if let Change::Open(job) = &mut with {
            job.decision.profile = Some("lammps".into());
        }
        s.apply(&[open(1, 1000, 10.0), with]);
        assert_eq!(s.profile_of(1).unwrap(), Some(None));
        assert_eq!(s.profile_of(2).unwrap(), Some(Some("lammps".to_string())));
        assert_eq!(s.profile_of(3).unwrap(), None);
    }

    #[test]
    fn outcome_count_counts_one_per_node_and_names_the_owner() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        s.apply(&[open(1, 1000, 10.0)]);
        assert_eq!(s.outcome_count(1).unwrap(), Some((1000, 0, 2)));
        let outcome = |node: &str| Change::Outcome {
            outcome: Box::new(NodeOutcome {
                restart_count: None,
                comm: None,
                job_id: 1,
                node: node.into(),
                freq_ghz: None,
                energy_j: None,
                elapsed_s: None,
                source: None,
                restored: true,
                note: None,
                gpu: None,
                power: None,
            }),
            at: 0,
        };
        // The same node twice is one outcome: the first wins.
        s.apply(&[outcome("n1"), outcome("n2"), outcome("n1")]);
        assert_eq!(s.outcome_count(1).unwrap(), Some((1000, 2, 2)));
        assert_eq!(s.outcome_count(2).unwrap(), None);
    }

    fn open_as(job_id: u64, profile: &str, monitor: bool) -> Change {
        let Change::Open(mut job) = open(job_id, 1000, 10.0) else {
            unreachable!()
        };
        job.decision.profile = Some(profile.into());
        job.decision.monitor = monitor;
        job.decision.baseline_sample = monitor && job_id.is_multiple_of(2);
        Change::Open(job)
    }

    #[test]
    fn the_guards_baseline_nodes_are_the_baselines_per_rank_rates_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        // sync calls, ranks, per-rank wall (compute + comm) of each node.
        let with = |job: u64, node: &str, sync: u64, ranks: u32, wall: f64| {
            let Change::Outcome { mut outcome, at } = outcome(job, node, 5.0) else {
                unreachable!()
            };
            outcome.comm = Some(greenup::comm::NodeComm {
                ranks,
                compute_s: Seconds(wall * 0.75),
                comm_s: Seconds(wall * 0.25),
                sync_calls: sync,
                ..Default::default()
            });
            Change::Outcome { outcome, at }
        };
        assert!(
            s.apply(&[
                open_as(1, "lammps", true),
                open_as(2, "lammps", true),
                open_as(3, "lammps", false),
                // By hand: 8000 / 4 / 20 = 100; 6000 / 4 / 20 = 75; 4000 / 2 / 10 = 200.
                with(1, "n1", 8000, 4, 20.0),
                with(1, "n2", 6000, 4, 20.0),
                with(2, "n1", 4000, 2, 10.0),
                // Not a baseline, and a baseline node that counted nothing: neither counts.
                with(3, "n1", 1, 1, 10.0),
                with(2, "n2", 0, 2, 10.0),
            ])
            .iter()
            .all(Result::is_ok)
        );
        // Newest run first (both decided at one time: the higher job id), nodes in order.
        let got: Vec<(u64, String, f64)> = s
            .baseline_nodes("lammps")
            .unwrap()
            .into_iter()
            .map(|b| (b.job_id, b.node, b.rate))
            .collect();
        assert_eq!(
            got,
            [
                (2, "n1".into(), 200.0),
                (1, "n1".into(), 100.0),
                (1, "n2".into(), 75.0)
            ]
        );
        assert_eq!(s.baseline_nodes("hpcc").unwrap(), []);
    }

    #[test]
    fn a_clock_sample_is_never_counted_or_paced_as_a_baseline() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        // A clock sample decided as greenupd decides one (not monitor), and one stored
        // as monitor by some other writer: neither may count, though both ran under
        // the monitor policy and both measured synchronising calls.
        let sample = |job_id: u64, monitor: bool| {
            let Change::Open(mut job) = open_as(job_id, "lammps", monitor) else {
                unreachable!()
            };
            job.decision.baseline_sample = false;
            job.decision.clock_sample = true;
            assert!(!job.decision.measured_baseline());
            Change::Open(job)
        };
        let with = |job: u64| {
            let Change::Outcome { mut outcome, at } = outcome(job, "n1", 5.0) else {
                unreachable!()
            };
            outcome.comm = Some(greenup::comm::NodeComm {
                ranks: 1,
                compute_s: Seconds(9.0),
                comm_s: Seconds(1.0),
                sync_calls: 100,
                ..Default::default()
            });
            Change::Outcome { outcome, at }
        };
        let changes = [
            open_as(1, "lammps", true),
            sample(2, false),
            sample(3, true),
            with(1),
            with(2),
            with(3),
        ];
        assert!(s.apply(&changes).iter().all(Result::is_ok));
        assert_eq!(s.app_history("lammps", "monitor").unwrap(), (1, None));
        let jobs: Vec<u64> = s
            .baseline_nodes("lammps")
            .unwrap()
            .iter()
            .map(|b| b.job_id)
            .collect();
        // 100 calls over 10 s of one rank: job 1 alone.
        assert_eq!(jobs, [1]);
    }

    #[test]
    fn a_version_2_store_gains_holds_and_counts_an_applications_baselines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(SCHEMA).unwrap();
            c.execute_batch("PRAGMA user_version = 2;").unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let v: i64 = s
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        let changes = [
            open_as(1, "lammps", true),
            open_as(2, "lammps", true),
            open_as(3, "lammps", false),
            open_as(4, "nwchem", true),
        ];
        assert!(s.apply(&changes).iter().all(Result::is_ok));
        assert_eq!(s.app_history("lammps", "min-energy").unwrap(), (2, None));
        assert_eq!(s.app_history("hpcc", "min-energy").unwrap(), (0, None));

        let hold = |reason: &str| Change::Hold {
            profile: "lammps".into(),
            policy: "min-energy".into(),
            reason: reason.into(),
            at: 5,
        };
        let r = s.apply(&[hold("first"), hold("second")]);
        assert_eq!(r[0], Ok(Applied::Stored { new: true }));
        assert_eq!(r[1], Ok(Applied::Stored { new: false }));
        // The first reason stands; another policy is not held.
        assert_eq!(
            s.app_history("lammps", "min-energy").unwrap(),
            (2, Some("first".into()))
        );
        assert_eq!(s.app_history("lammps", "max-dist").unwrap().1, None);
        assert_eq!(s.holds().unwrap().len(), 1);
        let clear = Change::ClearHold {
            profile: "lammps".into(),
            policy: "min-energy".into(),
        };
        let r = s.apply(&[clear.clone(), clear]);
        assert_eq!(r[0], Ok(Applied::Stored { new: true }));
        assert_eq!(r[1], Ok(Applied::Stored { new: false }));
        assert_eq!(s.app_history("lammps", "min-energy").unwrap().1, None);

        // Reopening a current store changes nothing.
        drop(s);
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.app_history("lammps", "min-energy").unwrap(), (2, None));
    }

    #[test]
    fn a_version_2_store_gains_the_mpi_measurements_and_keeps_its_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        {
            // A store as version 2 left it: no comm column.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(SCHEMA).unwrap();
            c.execute_batch(
                "PRAGMA user_version = 2;
                 INSERT INTO jobs (job_id, uid, state, opened_at, request) VALUES (1, 1000, 'open', 0, '{}');
                 INSERT INTO outcomes (job_id, node, restored, recorded_at) VALUES (1, 'old', 1, 0);",
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let version: i64 = s
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let comm = greenup::comm::NodeComm {
            ranks: 2,
            compute_s: Seconds(7.5),
            comm_s: Seconds(2.5),
            ..Default::default()
        };
        let mut o = match outcome(1, "new", 10.0) {
            Change::Outcome { outcome, .. } => outcome,
            _ => unreachable!(),
        };
        o.comm = Some(comm.clone());
        s.apply(&[Change::Outcome { outcome: o, at: 1 }]);
        let read = s.outcomes_of(1).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read.iter().find(|o| o.node == "old").unwrap().comm, None);
        assert_eq!(
            read.iter().find(|o| o.node == "new").unwrap().comm,
            Some(comm)
        );
        // Opening again migrates nothing twice.
        drop(s);
        assert!(SqliteStore::open(&path).is_ok());
    }

    /// A connection to a new store at `path` as schema `version` left it.
    fn connection_at(path: &std::path::Path, version: i64) -> Connection {
        let c = Connection::open(path).unwrap();
        c.execute_batch(SCHEMA).unwrap();
        for &(_, script) in MIGRATIONS.iter().filter(|(to, _)| *to <= version) {
            c.execute_batch(script).unwrap();
        }
        c
    }

    #[test]
    fn a_version_7_store_keeps_a_requeued_jobs_first_run_and_its_budget_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        // A store as version 7 left it, with a job whose run was closed there.
        drop(connection_at(&path, 7));
        let mut s = SqliteStore::open(&path).unwrap();
        let charged = |c: &mut Change| {
            if let Change::Open(j) = c {
                j.charges = vec![greenup::budget::book::Charge {
                    budget: "site".into(),
                    period_start: 0,
                    charged_j: greenup_core::quantity::Joules(100.0),
                    settled_j: None,
                    measured: None,
                }];
            }
        };
        let mut first = open(5, 1000, 10.0);
        charged(&mut first);
        let close = Change::Close {
            job_id: 5,
            state: JobState::Closed,
            end: Some(JobEnd::Failed),
            at: 1001,
            restart_count: None,
        };
        let r = s.apply(&[first, outcome(5, "n1", 40.0), outcome(5, "n2", 30.0), close]);
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        // The run after the requeue, on other nodes.
        let mut second = open(5, 1000, 10.0);
        charged(&mut second);
        if let Change::Open(j) = &mut second {
            j.request.nodes = vec!["n3".into(), "n4".into()];
        }
        let r = s.apply(&[second]);
        assert!(
            matches!(r[0], Ok(Applied::Opened { new: true, .. })),
            "{r:?}"
        );
        let job = s.job(5).unwrap().unwrap();
        assert_eq!((job.state, job.outcomes.len()), (JobState::Open, 0));
        let earlier = s.earlier_runs(5).unwrap();
        assert_eq!(earlier.len(), 1);
        assert_eq!(earlier[0].outcomes.len(), 2);
        assert_eq!(earlier[0].end, Some(JobEnd::Failed));
        // The first run's measured 70 J stay used; the second run's 100 J are held.
        let b = s.budget_state().unwrap();
        assert_eq!(b.totals.len(), 1);
        let t = b.totals[0].2;
        assert_eq!((t.used_j.0, t.held_j.0, t.jobs), (70.0, 100.0, 2));
        assert_eq!(b.held.len(), 1);
    }

    #[test]
    fn a_late_outcome_of_an_earlier_run_settles_that_runs_charges_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("g.db")).unwrap();
        let charged = |mut c: Change, nodes: [&str; 2]| {
            if let Change::Open(j) = &mut c {
                j.request.nodes = nodes.iter().map(|n| n.to_string()).collect();
                j.charges = vec![greenup::budget::book::Charge {
                    budget: "site".into(),
                    period_start: 0,
                    charged_j: greenup_core::quantity::Joules(100.0),
                    settled_j: None,
                    measured: None,
                }];
            }
            c
        };
        let close = Change::Close {
            job_id: 5,
            state: JobState::Closed,
            end: Some(JobEnd::Failed),
            at: 1001,
            restart_count: None,
        };
        // n2 failed with the first run: its outcome is in its spool, so the first run
        // is settled with its prediction.
        let r = s.apply(&[
            charged(open(5, 1000, 10.0), ["n1", "n2"]),
            outcome(5, "n1", 40.0),
            close,
        ]);
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        let r = s.apply(&[charged(open(5, 1000, 10.0), ["n3", "n4"])]);
        assert!(
            matches!(r[0], Ok(Applied::Opened { new: true, .. })),
            "{r:?}"
        );
        let used = |s: &mut SqliteStore| {
            let b = s.budget_state().unwrap();
            (b.totals[0].2.used_j.0, b.totals[0].2.held_j.0)
        };
        assert_eq!(used(&mut s), (100.0, 100.0));

        // n2, back, delivers its spool: the first run measured 70 J, not 100.
        let r = s.apply(&[outcome(5, "n2", 30.0)]);
        assert_eq!(r[0], Ok(Applied::Stored { new: true }));
        assert_eq!(
            used(&mut s),
            (70.0, 100.0),
            "the earlier run is not settled again"
        );
        let measured: bool = s
            .conn
            .query_row(
                "SELECT measured FROM earlier_charges WHERE job_id = 5 AND run = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(measured);
        // Sent twice, nothing changes; the current run's charge is still held.
        let r = s.apply(&[outcome(5, "n2", 30.0)]);
        assert_eq!(r[0], Ok(Applied::Stored { new: false }));
        assert_eq!(used(&mut s), (70.0, 100.0));
        assert_eq!(s.budget_state().unwrap().held.len(), 1);
    }

    #[test]
    fn a_version_6_store_gains_whether_nodes_held_their_power_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        {
            // A store as version 6 left it: no power column.
            let c = connection_at(&path, 6);
            c.execute_batch(
                "INSERT INTO jobs (job_id, uid, state, opened_at, request) VALUES (1, 1000, 'open', 0, '{}');
                 INSERT INTO outcomes (job_id, node, restored, recorded_at) VALUES (1, 'old', 1, 0);",
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let version: i64 = s
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let with = |node: &str, held_w: Option<f64>| {
            let mut o = match outcome(1, node, 10.0) {
                Change::Outcome { outcome, .. } => outcome,
                _ => unreachable!(),
            };
            o.power = Some(greenup::record::NodePower {
                asked_w: Watts(200.0),
                held_w: held_w.map(Watts),
                note: held_w.is_none().then(|| "write failed".to_string()),
            });
            Change::Outcome { outcome: o, at: 1 }
        };
        let r = s.apply(&[
            with("held1", Some(200.0)),
            with("held2", Some(150.0)),
            with("lost", None),
        ]);
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        let read = s.outcomes_of(1).unwrap();
        let of = |n: &str| read.iter().find(|o| o.node == n).unwrap().power.clone();
        assert_eq!(of("old"), None);
        assert_eq!(of("held2").unwrap().held_w, Some(Watts(150.0)));
        assert_eq!(of("lost").unwrap().note.as_deref(), Some("write failed"));
        let m = s.metrics().unwrap();
        assert_eq!(
            m.power_limit_nodes,
            [("held".to_string(), 2), ("not_held".to_string(), 1)]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn a_version_8_store_keeps_the_energy_greenupd_wrote_into_slurm() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        drop(connection_at(&path, 8));
        let mut s = SqliteStore::open(&path).unwrap();
        let version: i64 = s
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let written = |job_id| Change::SlurmEnergy {
            job_id,
            restart_count: None,
            joules: 4321,
        };
        s.apply(&[open(7, 1000, 250.0)]);
        // An open job has not ended in accounting: nothing is kept.
        assert_eq!(
            s.apply(&[written(7)]),
            vec![Ok(Applied::Stored { new: false })]
        );
        assert_eq!(s.job(7).unwrap().unwrap().slurm_energy_j, None);
        s.apply(&[Change::Close {
            job_id: 7,
            state: JobState::Closed,
            end: Some(JobEnd::Completed),
            at: 1002,
            restart_count: None,
        }]);
        assert_eq!(
            s.apply(&[written(7)]),
            vec![Ok(Applied::Stored { new: true })]
        );
        assert_eq!(s.job(7).unwrap().unwrap().slurm_energy_j, Some(4321));
        assert_eq!(
            s.apply(&[written(8)]),
            vec![Ok(Applied::Stored { new: false })]
        );
    }
}
