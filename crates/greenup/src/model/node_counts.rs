//! The node counts a program runs on. Many MPI codes start only on some: NAS IS, FT,
//! CG, MG and LU on a power of two ranks, BT and SP on a square number of them. A plan
//! that may shrink a job (`--nodes=MIN-MAX`) must not pick a count its program cannot
//! start on, so a profile's `node_counts` restricts the counts the search tries
//! ([`crate::optimize::nodes`]). The job's own largest count is always allowed: it is
//! what the job runs on unmanaged.

use std::collections::BTreeSet;
use std::fmt;

/// The node counts a profile says its program runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeCounts {
    /// 1, 2, 4, 8, ...
    PowersOfTwo,
    /// 1, 4, 9, 16, ...
    Squares,
    /// These counts alone.
    List(BTreeSet<usize>),
}

impl NodeCounts {
    /// Whether the program runs on `n` nodes.
    pub fn allows(&self, n: usize) -> bool {
        match self {
            NodeCounts::PowersOfTwo => n.is_power_of_two(),
            NodeCounts::Squares => {
                let r = n.isqrt();
                r * r == n && n > 0
            }
            NodeCounts::List(l) => l.contains(&n),
        }
    }

    /// The counts as a profile writes them: `powers_of_two`, `squares`, or a comma list.
    pub fn parse(text: &str) -> Option<NodeCounts> {
        match text.trim() {
            "powers_of_two" => Some(NodeCounts::PowersOfTwo),
            "squares" => Some(NodeCounts::Squares),
            list => list
                .split(',')
                .map(|x| x.trim().parse::<usize>().ok().filter(|n| *n >= 1))
                .collect::<Option<BTreeSet<usize>>>()
                .filter(|l| !l.is_empty())
                .map(NodeCounts::List),
        }
    }
}

impl fmt::Display for NodeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeCounts::PowersOfTwo => write!(f, "powers of two"),
            NodeCounts::Squares => write!(f, "squares"),
            NodeCounts::List(l) => {
                let v: Vec<String> = l.iter().map(|n| n.to_string()).collect();
                write!(f, "{}", v.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_allows_its_counts_and_no_other() {
        let two = NodeCounts::parse("powers_of_two").unwrap();
        let allowed: Vec<usize> = (1..=70).filter(|n| two.allows(*n)).collect();
        assert_eq!(allowed, [1, 2, 4, 8, 16, 32, 64]);
        let sq = NodeCounts::parse("squares").unwrap();
        let allowed: Vec<usize> = (0..=50).filter(|n| sq.allows(*n)).collect();
        assert_eq!(allowed, [1, 4, 9, 16, 25, 36, 49]);
        let list = NodeCounts::parse(" 8, 16 ,64").unwrap();
        let allowed: Vec<usize> = (1..=70).filter(|n| list.allows(*n)).collect();
        assert_eq!(allowed, [8, 16, 64]);
        assert_eq!(list.to_string(), "8, 16, 64");
        for bad in ["", "powers of two", "8, x", "0, 8", "-4", "8,,16"] {
            assert_eq!(NodeCounts::parse(bad), None, "{bad}");
        }
    }
}
