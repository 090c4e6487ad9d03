//! Slurm hostlists: `n[1-4,7],gpu[01-02]` <-> the node names they stand for.
//!
//! A hostlist is a comma-separated list of host expressions. Each expression
//! is literal text with any number of bracket groups; a group holds
//! comma-separated numbers or `lo-hi` ranges, and several groups multiply
//! (`r[1-2]n[1-2]` is r1n1, r1n2, r2n1, r2n2). Brackets do not nest. A range
//! keeps the width of its low bound, so `gpu[01-10]` gives gpu01 .. gpu10.

/// The most names one hostlist may expand to; guards against `n[0-999999999]`.
pub const MAX_HOSTS: usize = 1_000_000;

/// A hostlist that cannot be expanded; the message quotes it and says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hostlist '{list}': {problem}")]
pub struct HostlistError {
    /// The hostlist as written.
    pub list: String,
    /// What is wrong with it.
    pub problem: HostlistProblem,
}

/// What is wrong with a hostlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistProblem {
    /// A bracket opens inside another; Slurm's hostlists do not nest.
    #[error("brackets cannot nest")]
    NestedBrackets,
    /// A bracket closes that never opened.
    #[error("']' without '['")]
    UnopenedBracket,
    /// A bracket opens and never closes.
    #[error("'[' without ']'")]
    UnclosedBracket,
    /// Two commas in a row, or a comma at an end.
    #[error("empty host name; write names like n1,n[2-4]")]
    EmptyName,
    /// The list names no host at all.
    #[error("no hosts; write names like n1,n[2-4]")]
    NoHosts,
    /// The list names more hosts than allowed.
    #[error("more than {max} hosts")]
    TooMany {
        /// The most hosts allowed.
        max: usize,
    },
    /// A host expression holds white space.
    #[error("'{expr}' contains a space")]
    Space {
        /// The host expression.
        expr: String,
    },
    /// A bracket holds something other than numbers and ranges.
    #[error("'[{group}]' holds '{item}'; a bracket holds numbers or ranges like 1-4,7")]
    NotARange {
        /// The bracket's contents.
        group: String,
        /// The part that is not a number or range.
        item: String,
    },
    /// A number in a bracket does not fit in 64 bits.
    #[error("number too large")]
    NumberTooLarge,
    /// A range's high end is below its low end.
    #[error("range '{item}' runs backwards")]
    Backwards {
        /// The range.
        item: String,
    },
    /// One range alone names more hosts than allowed.
    #[error("range '{item}' makes more than {max} hosts")]
    RangeTooMany {
        /// The range.
        item: String,
        /// The most hosts allowed.
        max: usize,
    },
}

/// Expand a Slurm hostlist into node names, in the order written (duplicates kept).
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    expand_at_most(list, MAX_HOSTS)
}

/// [`expand`], refusing a list of more than `max` names before it is built in full, so
/// a short hostile string (`n[1-999999]`) costs no more than `max` names.
pub fn expand_at_most(list: &str, max: usize) -> Result<Vec<String>, HostlistError> {
    let max = max.min(MAX_HOSTS);
    let bad = |problem: HostlistProblem| HostlistError {
        list: list.to_string(),
        problem,
    };
    let mut out = Vec::new();
    for expr in split_top(list).map_err(bad)? {
        let expr = expr.trim();
        if expr.is_empty() {
            return Err(bad(HostlistProblem::EmptyName));
        }
        expand_one(expr, max, &mut out).map_err(bad)?;
        if out.len() > max {
            return Err(bad(HostlistProblem::TooMany { max }));
        }
    }
    if out.is_empty() {
        return Err(bad(HostlistProblem::NoHosts));
    }
    Ok(out)
}

/// Split at commas outside brackets, checking that brackets pair up and do not nest.
fn split_top(list: &str) -> Result<Vec<&str>, HostlistProblem> {
    let mut parts = Vec::new();
    let mut depth = false;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth => return Err(HostlistProblem::NestedBrackets),
            '[' => depth = true,
            ']' if !depth => return Err(HostlistProblem::UnopenedBracket),
            ']' => depth = false,
            ',' if !depth => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth {
        return Err(HostlistProblem::UnclosedBracket);
    }
    parts.push(&list[start..]);
    Ok(parts)
}

/// Expand one host expression (no top-level commas) and append its names to `out`;
/// more than `max` names in `out` is an error.
fn expand_one(expr: &str, max: usize, out: &mut Vec<String>) -> Result<(), HostlistProblem> {
    let room = max.saturating_sub(out.len());
    if expr.chars().any(|c| c.is_whitespace()) {
        return Err(HostlistProblem::Space {
            expr: expr.to_string(),
        });
    }
    let mut names = vec![String::new()];
    let mut rest = expr;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or(HostlistProblem::UnclosedBracket)?;
        for n in &mut names {
            n.push_str(&rest[..open]);
        }
        let numbers = expand_group(&rest[open + 1..close], room, max)?;
        if names.len().saturating_mul(numbers.len()) > room {
            return Err(HostlistProblem::TooMany { max });
        }
        names = names
            .iter()
            .flat_map(|n| numbers.iter().map(move |x| format!("{n}{x}")))
            .collect();
        rest = &rest[close + 1..];
    }
    for n in &mut names {
        n.push_str(rest);
    }
    out.extend(names);
    Ok(())
}

/// Expand the inside of one bracket group, e.g. `1-4,07` -> 1 2 3 4 07; more than
/// `room` numbers is an error naming `max`, the hostlist's limit.
fn expand_group(group: &str, room: usize, max: usize) -> Result<Vec<String>, HostlistProblem> {
    let mut out = Vec::new();
    for item in group.split(',') {
        let (lo, hi) = item.split_once('-').unwrap_or((item, item));
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(HostlistProblem::NotARange {
                group: group.to_string(),
                item: item.to_string(),
            });
        }
        let (a, b): (u64, u64) = (
            lo.parse().map_err(|_| HostlistProblem::NumberTooLarge)?,
            hi.parse().map_err(|_| HostlistProblem::NumberTooLarge)?,
        );
        if b < a {
            return Err(HostlistProblem::Backwards {
                item: item.to_string(),
            });
        }
        if (b - a) as usize >= room.saturating_sub(out.len()) {
            return Err(HostlistProblem::RangeTooMany {
                item: item.to_string(),
                max,
            });
        }
        let width = lo.len();
        out.extend((a..=b).map(|x| format!("{x:0width$}")));
    }
    Ok(out)
}

/// Compress node names into a short Slurm hostlist; `expand` gives the same set back.
///
/// Names that end in digits and share the rest are merged into one bracket group;
/// zero-padded numbers keep their width. Duplicates are dropped.
pub fn compress(names: &[String]) -> String {
    use std::collections::BTreeMap;
    // (prefix, width class) -> numbers; width 0 means "written without leading zeros".
    let mut groups: BTreeMap<(&str, usize), Vec<u64>> = BTreeMap::new();
    let mut literal: Vec<&str> = Vec::new();
    let mut split: Vec<(&str, &str)> = Vec::new();
    for name in names {
        let digits_from = name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, digits) = name.split_at(digits_from);
        // A name with brackets or commas cannot be written back inside a hostlist group.
        if digits.is_empty() || digits.len() > 18 || prefix.contains(['[', ']', ',']) {
            literal.push(name);
        } else {
            split.push((prefix, digits));
        }
    }
    let padded_widths: std::collections::BTreeSet<(&str, usize)> = split
        .iter()
        .filter(|(_, d)| d.len() > 1 && d.starts_with('0'))
        .map(|(p, d)| (*p, d.len()))
        .collect();
    for (prefix, digits) in split {
        let width = if padded_widths.contains(&(prefix, digits.len())) {
            digits.len()
        } else {
            0
        };
        let n: u64 = digits.parse().unwrap_or(0);
        groups.entry((prefix, width)).or_default().push(n);
    }
    let mut parts: Vec<String> = Vec::new();
    for ((prefix, width), mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        let fmt = |x: u64| format!("{x:0width$}");
        let mut ranges: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
                j += 1;
            }
            ranges.push(if i == j {
                fmt(nums[i])
            } else {
                format!("{}-{}", fmt(nums[i]), fmt(nums[j]))
            });
            i = j + 1;
        }
        if nums.len() == 1 {
            parts.push(format!("{prefix}{}", ranges.concat()));
        } else {
            parts.push(format!("{prefix}[{}]", ranges.join(",")));
        }
    }
    literal.sort_unstable();
    literal.dedup();
    parts.extend(literal.into_iter().map(str::to_string));
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_list_past_the_limit_is_refused_before_it_is_built() {
        let e = expand_at_most("n[1-999999999]", 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("makes more than 100 hosts"), "{e}");
        let e = expand_at_most("r[1-20]n[1-6]", 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 100 hosts"), "{e}");
        let e = expand_at_most("n[1-60],m[1-41]", 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 100 hosts"), "{e}");
        assert_eq!(expand_at_most("n[1-60],m[1-40]", 100).unwrap().len(), 100);
    }

    #[test]
    fn expands_ranges_lists_and_padding() {
        assert_eq!(
            expand("n[1-4,7],gpu[01-02]").unwrap(),
            s(&["n1", "n2", "n3", "n4", "n7", "gpu01", "gpu02"])
        );
        assert_eq!(expand("node9").unwrap(), s(&["node9"]));
        assert_eq!(expand("a,b").unwrap(), s(&["a", "b"]));
        assert_eq!(expand("n[9-11]").unwrap(), s(&["n9", "n10", "n11"]));
        assert_eq!(
            expand("n[098-101]").unwrap(),
            s(&["n098", "n099", "n100", "n101"])
        );
        assert_eq!(
            expand("r[1-2]n[1-2]-ib").unwrap(),
            s(&["r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib"])
        );
        assert_eq!(expand("n[3]").unwrap(), s(&["n3"]));
        assert_eq!(expand("[1-2]").unwrap(), s(&["1", "2"]));
    }

    #[test]
    fn bad_hostlists_say_why() {
        for bad in [
            "",
            "n1,,n2",
            "n[1-",
            "n1]",
            "n[[1]]",
            "n[4-1]",
            "n[a-b]",
            "n[]",
            "n[1-2-3]",
            "n 1",
            "n[0-99999999]",
            ",",
        ] {
            let e = expand(bad).expect_err(bad).to_string();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn compresses() {
        assert_eq!(compress(&s(&["n1", "n2", "n3", "n4", "n7"])), "n[1-4,7]");
        assert_eq!(compress(&s(&["gpu01", "gpu02", "gpu10"])), "gpu[01-02,10]");
        assert_eq!(compress(&s(&["n3"])), "n3");
        assert_eq!(compress(&s(&["login", "n2", "n1"])), "n[1-2],login");
        assert_eq!(compress(&s(&["n1", "n01"])), "n1,n01");
        assert_eq!(compress(&[]), "");
    }

    proptest! {
        #[test]
        fn expand_compress_roundtrip(names in proptest::collection::btree_set(
            prop_oneof![
                "[a-c]{1,2}[0-9]{1,3}",
                "(gpu|n)0[0-9]{1,2}",
                "[a-z][a-z-]{0,4}",
                "r[0-3]n[0-9]{1,2}",
            ],
            1..40,
        )) {
            let names: Vec<String> = names.into_iter().collect();
            let mut back = expand(&compress(&names)).unwrap();
            back.sort();
            prop_assert_eq!(back, names);
        }
    }
}
