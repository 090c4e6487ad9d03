//! Which run of a job a request speaks for. Slurm keeps a requeued job's id, so the id
//! alone cannot tell the run after a requeue from the one before it: this is the one
//! rule the decisions kept in memory and the store both follow.

/// How the run a request speaks for stands to the run greenupd holds for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// The run greenupd holds.
    Same,
    /// A run after it: Slurm requeued the job, and it runs again.
    Later,
    /// A run before it: a node of an earlier run, late.
    Earlier,
}

/// Compare the run asking (restart count `asked`) with the run held (`held`). Where
/// Slurm gave both counts they decide; where it did not (an older plugin or Slurm),
/// the nodes do: the held run's nodes are the held run, other nodes a later run.
/// `same_nodes` is asked only then, as it may cost a read.
pub fn compare_with<E>(
    held: Option<u32>,
    asked: Option<u32>,
    same_nodes: impl FnOnce() -> Result<bool, E>,
) -> Result<Run, E> {
    Ok(match (held, asked) {
        (Some(h), Some(a)) => match a.cmp(&h) {
            std::cmp::Ordering::Equal => Run::Same,
            std::cmp::Ordering::Greater => Run::Later,
            std::cmp::Ordering::Less => Run::Earlier,
        },
        _ if same_nodes()? => Run::Same,
        _ => Run::Later,
    })
}

/// [`compare_with`] for nodes known without a read.
pub fn compare(held: Option<u32>, asked: Option<u32>, same_nodes: impl FnOnce() -> bool) -> Run {
    match compare_with(held, asked, || {
        Ok::<_, std::convert::Infallible>(same_nodes())
    }) {
        Ok(run) => run,
        Err(never) => match never {},
    }
}

/// A run in messages: its restart count, where Slurm gave it.
pub fn describe(restart_count: Option<u32>) -> String {
    match restart_count {
        Some(n) => format!("restart count {n}"),
        None => "restart count not given".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_decide_where_both_are_given_and_nodes_where_not() {
        let never = || -> bool { panic!("the nodes are not asked when the counts decide") };
        assert_eq!(compare(Some(0), Some(0), never), Run::Same);
        assert_eq!(compare(Some(0), Some(1), never), Run::Later);
        assert_eq!(compare(Some(2), Some(1), never), Run::Earlier);
        // A requeue onto the same nodes: only the count tells it.
        assert_eq!(compare(None, Some(1), || true), Run::Same);
        assert_eq!(compare(Some(0), None, || false), Run::Later);
        assert_eq!(compare(None, None, || true), Run::Same);
    }
}
