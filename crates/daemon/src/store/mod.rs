//! greenup's durable state: jobs, decisions (with the inputs and profile
//! version that produced them), per-node outcomes, power reservations, and
//! refined profile versions.
//!
//! [`Store`] is the seam; [`sqlite::SqliteStore`] is the implementation
//! (SQLite in WAL mode, synchronous commits). Writes arrive as [`Change`]s and
//! are applied in groups: each change is all-or-nothing (its own savepoint)
//! and nothing is acknowledged before the group's commit is on disk.

mod charges;
pub mod sqlite;

use greenup::query::{JobSummary, ListJobs, ListRecords};
use greenup::record::JobEnd;
use greenup::record::{Decision, JobRecord, JobState, NodeOutcome, OpenJob};

pub use sqlite::SqliteStore;

/// A job to store with its decision.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The request that opened it.
    pub request: OpenJob,
    /// The decision made for it.
    pub decision: Decision,
    /// The plan request the decision was made from (JSON), for reports and audits.
    pub inputs: serde_json::Value,
    /// Unix seconds after which an unclosed job's reservation is reclaimed.
    pub expires_at: i64,
    /// Its charges against the energy budgets it falls under.
    pub charges: Vec<greenup::budget::book::Charge>,
}

/// The energy budgets' accounts as stored: totals per budget and period, and the
/// charges of jobs still open (greenupd's budget book is rebuilt from these).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BudgetState {
    /// `(budget, period_start, totals)` for every period charged.
    pub totals: Vec<(String, i64, greenup::budget::book::Totals)>,
    /// `(job_id, charge)` for every charge not settled yet.
    pub held: Vec<(u64, greenup::budget::book::Charge)>,
}

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Store a job, its decision and its reservation, unless the job exists already.
    Open(Box<NewJob>),
    /// Store one node's outcome (the first outcome per node wins).
    Outcome {
        /// The outcome (boxed: with its MPI summary it is the largest change by far).
        outcome: Box<NodeOutcome>,
        /// Unix seconds it arrived.
        at: i64,
    },
    /// Close or reclaim an open job and drop its reservation.
    Close {
        /// Slurm job id.
        job_id: u64,
        /// `closed` or `reclaimed`.
        state: JobState,
        /// How it ended.
        end: Option<JobEnd>,
        /// Unix seconds.
        at: i64,
        /// The run closed (its restart count); `None`: the current run, whichever.
        restart_count: Option<u32>,
    },
    /// Stop applying `policy` to `profile`'s jobs (their measured slowdown missed the
    /// policy's target), unless it is stopped already.
    Hold {
        /// Application profile.
        profile: String,
        /// Policy name.
        policy: String,
        /// Why, in one line.
        reason: String,
        /// Unix seconds.
        at: i64,
    },
    /// Apply `policy` to `profile`'s jobs again (an admin cleared the hold).
    ClearHold {
        /// Application profile.
        profile: String,
        /// Policy name.
        policy: String,
    },
    /// Replace a closed job's end with the one Slurm's final record settled.
    SettleEnd {
        /// Slurm job id.
        job_id: u64,
        /// How it ended.
        end: JobEnd,
    },
    /// Keep that greenupd wrote a closed run's measured energy into Slurm's accounting.
    SlurmEnergy {
        /// Slurm job id.
        job_id: u64,
        /// The run written for (its restart count as the job's request has it).
        restart_count: Option<u32>,
        /// The whole joules written.
        joules: u64,
    },
}

/// What a change did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// An open: `new` is false when the job existed, and `decision` is then the stored one.
    Opened {
        /// Whether this change created the job.
        new: bool,
        /// The job's decision as stored.
        decision: Box<Decision>,
        /// The job's state as stored.
        state: JobState,
    },
    /// An outcome or close: `new` is false when it was stored before.
    Stored {
        /// Whether this change wrote anything.
        new: bool,
    },
}

/// A job's hold on the power budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// Slurm job id.
    pub job_id: u64,
    /// Partition, if any.
    pub partition: Option<String>,
    /// Watts reserved.
    pub watts: f64,
    /// Unix seconds after which it is reclaimed if the job was never closed.
    pub expires_at: i64,
    /// Unix seconds the job was opened.
    pub opened_at: i64,
}

/// Row counts, for `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Jobs open now.
    pub open_jobs: u64,
    /// Jobs ever stored.
    pub total_jobs: u64,
    /// Node outcomes ever stored.
    pub outcomes: u64,
}

/// What the store adds to greenupd's metrics.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoreMetrics {
    /// Decisions ever stored, by policy.
    pub decisions_by_policy: std::collections::BTreeMap<String, u64>,
    /// Jobs greenup let run unchanged although it was asked to decide, by reason
    /// (`no_profile`, `over_budget`, `refused`).
    pub fallbacks_by_reason: std::collections::BTreeMap<String, u64>,
    /// Energy prediction errors (%) of closed planned jobs whose every node was measured.
    pub prediction_error: greenup::report::metrics::ErrorHistogram,
    /// Node outcomes whose decision asked for a power limit, by whether the node held
    /// it (`held`, `not_held`).
    pub power_limit_nodes: std::collections::BTreeMap<String, u64>,
    /// Jobs run to measure rather than to save, by kind (`baseline_sample`: at f_max
    /// although the policy would have planned; `clock_sample`: at a clock whose watts are
    /// not yet measured).
    pub measurement_runs: std::collections::BTreeMap<String, u64>,
}

/// Why the store failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The job is not in the store.
    #[error("job {0} is not known")]
    NoSuchJob(u64),
    /// The database refused the change (disk full, read-only, I/O error); nothing was stored.
    #[error("the store could not save the change, nothing was stored: {0}")]
    Write(String),
    /// The database could not be read.
    #[error("the store could not be read: {0}")]
    Read(String),
    /// A stored row could not be decoded.
    #[error("the store holds a damaged row: {0}")]
    Corrupt(String),
    /// The change is of another run of the job than the one stored (Slurm requeued it).
    #[error("{0}")]
    OtherRun(String),
}

/// greenup's durable state.
pub trait Store: Send {
    /// Apply changes in one commit. Each change is all-or-nothing on its own; the
    /// results come back in order, and any `Ok` is on disk when this returns.
    fn apply(&mut self, changes: &[Change]) -> Vec<Result<Applied, StoreError>>;
    /// One job with decision and outcomes (its current run, when Slurm requeued it).
    fn job(&mut self, job_id: u64) -> Result<Option<JobRecord>, StoreError>;
    /// A requeued job's runs before its current one, oldest first, each as it was when
    /// the requeue set it aside (with the late outcomes of its nodes since).
    fn earlier_runs(&mut self, _job_id: u64) -> Result<Vec<JobRecord>, StoreError> {
        Ok(Vec::new())
    }
    /// One job as a reader asks for it: its current run, with its runs before a
    /// requeue in [`JobRecord::earlier_runs`].
    fn job_with_runs(&mut self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        let Some(mut rec) = self.job(job_id)? else {
            return Ok(None);
        };
        rec.earlier_runs = self.earlier_runs(job_id)?;
        Ok(Some(rec))
    }
    /// A job's owner, how many of its nodes have an outcome stored, and how many nodes it
    /// was opened with; `None` for an unknown job.
    fn outcome_count(&mut self, job_id: u64) -> Result<Option<(u32, u64, u64)>, StoreError>;
    /// The profile a job was decided with: `None` for an unknown job, `Some(None)` for
    /// one decided without a profile.
    fn profile_of(&mut self, job_id: u64) -> Result<Option<Option<String>>, StoreError>;
    /// Jobs newest first, optionally only one uid's and one state's, at most `limit`.
    fn list_jobs(
        &mut self,
        uid: Option<u32>,
        state: Option<JobState>,
        limit: u32,
    ) -> Result<Vec<JobSummary>, StoreError> {
        self.job_summaries(&ListJobs {
            uid,
            state,
            before_job_id: None,
            limit: Some(limit),
        })
    }
    /// Jobs matching every filter in `filter`, newest first, at most its `limit` (default
    /// 100); the caller has already restricted `uid` to what the asker may read.
    fn job_summaries(&mut self, filter: &ListJobs) -> Result<Vec<JobSummary>, StoreError>;
    /// Whole jobs matching every filter in `filter`, newest first, at most its `limit`
    /// (the caller has already restricted `uid` to what the asker may read).
    fn job_records(&mut self, filter: &ListRecords) -> Result<Vec<JobRecord>, StoreError>;
    /// Closed jobs decided with profile `application`, newest first, at most `limit`,
    /// each with its decision and outcomes (what refinement learns from).
    fn closed_jobs_of(
        &mut self,
        application: &str,
        limit: u32,
    ) -> Result<Vec<JobRecord>, StoreError>;
    /// Decisions by policy, fallbacks by reason and the energy prediction errors of
    /// closed, fully measured jobs: what greenupd's metrics take from the store.
    fn metrics(&mut self) -> Result<StoreMetrics, StoreError>;
    /// Reservations of open jobs (the ledger is rebuilt from these at start).
    fn reservations(&mut self) -> Result<Vec<Reservation>, StoreError>;
    /// Row counts.
    fn counts(&mut self) -> Result<Counts, StoreError>;
    /// The energy budgets' accounts.
    fn budget_state(&mut self) -> Result<BudgetState, StoreError>;
    /// One job's budget charges.
    fn charges_of(&mut self, job_id: u64)
    -> Result<Vec<greenup::budget::book::Charge>, StoreError>;
    /// How many monitor (measured baseline) decisions `profile` has, and why `policy`
    /// is held for it, if it is.
    fn app_history(
        &mut self,
        profile: &str,
        policy: &str,
    ) -> Result<(u32, Option<String>), StoreError>;
    /// Every hold: (profile, policy, reason, unix seconds held).
    fn holds(&mut self) -> Result<Vec<(String, String, String, i64)>, StoreError>;
    /// The measured baselines of `profile` for the in-job guard: each node of its most
    /// recent monitor runs that counted synchronising calls, newest run first
    /// (`crate::baseline::baseline_rate` makes one rate of them). A store without the
    /// query has none.
    fn baseline_nodes(&mut self, _profile: &str) -> Result<Vec<BaselineNode>, StoreError> {
        Ok(Vec::new())
    }
}

/// One node of a measured baseline run, as the in-job guard's rate is made from it.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineNode {
    /// The baseline run.
    pub job_id: u64,
    /// The node.
    pub node: String,
    /// Its synchronising calls per second per rank.
    pub rate: f64,
    /// The profile version the run was decided under.
    pub version: Option<String>,
}
