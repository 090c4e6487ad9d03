//! Facts about a job that slurmd passes to job_prolog and job_epilog in the environment.

/// Expand Slurm's compact per-node count list, e.g. `4(x2),2` -> [4, 4, 2].
pub fn expand_counts(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('(') {
            Some((n, rest)) => {
                let times = rest
                    .strip_prefix('x')?
                    .strip_suffix(')')?
                    .parse::<usize>()
                    .ok()?;
                if times > 1_000_000 {
                    return None;
                }
                let n = n.parse::<u32>().ok()?;
                out.extend(std::iter::repeat_n(n, times));
            }
            None => out.push(part.parse::<u32>().ok()?),
        }
    }
    Some(out)
}

/// The CPUs a job holds on `node`, from the job's node list and `SLURM_JOB_CPUS_PER_NODE`.
pub fn cpus_on_node(nodes: &[String], cpus_per_node: &str, node: &str) -> Option<u32> {
    let counts = expand_counts(cpus_per_node)?;
    let i = nodes.iter().position(|n| n == node)?;
    counts.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_expand_like_slurm_writes_them() {
        assert_eq!(expand_counts("4(x3)"), Some(vec![4, 4, 4]));
        assert_eq!(expand_counts("4(x2),2,1(x1)"), Some(vec![4, 4, 2, 1]));
        assert_eq!(expand_counts("1"), Some(vec![1]));
        assert_eq!(expand_counts("4(2)"), None);
        assert_eq!(expand_counts("x"), None);
    }

    #[test]
    fn cpus_on_node_follows_node_order() {
        let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
        assert_eq!(cpus_on_node(&nodes, "4(x2),1", "n3"), Some(1));
        assert_eq!(cpus_on_node(&nodes, "4(x2),1", "n2"), Some(4));
        assert_eq!(cpus_on_node(&nodes, "4", "n3"), None);
        assert_eq!(cpus_on_node(&nodes, "4(x3)", "n9"), None);
    }
}
