//! The exact sweep over sorted makespan bounds.
//!
//! Why it is exact. Write a pick k's wall time as T(k) = m(k) + T0, where
//! m(k) = max_i c_i(k_i) is the slowest node's compute time, and its energy as
//! E(k) = D(k) + T(k) * S + E0 with D(k) = sum_i d_i(k_i). Every m(k) is one of
//! the N*F compute times in the table. Fix a value tau of that set and let q(tau)
//! be the pick with the least D among picks whose slowest node takes exactly tau:
//! every node takes its least-d choice with c <= tau, except that one node whose
//! choice takes exactly tau is forced to it, the one for which forcing costs least.
//! For any pick k with m(k) = tau: T(q) = T(k) and D(q) <= D(k), hence
//! E(q) <= E(k) and E(q)/T(q) <= E(k)/T(k). So q(m(k)) is at least as good as k in
//! time, energy and average power at once. Every objective here is monotone in
//! (T, E) (min_energy, min_time, min_edp, min_ed2p, max_ee = E1/E at a fixed node
//! set, max_dist = T_base/T - E/E_base) and every limit is an upper bound on T, E or
//! E/T, so the best of the q(tau) is the best of all F^N picks, feasible or
//! closest. Nodes with identical rows (one node type) are one kind weighted by
//! its count; forcing touches one node of the kind. Sweeping tau upward, each node's least-d choice only improves as
//! choices enter, so the sums update in O(1) per entry: O(NF log NF) for the sort
//! plus O(NF) for the sweep.
//!
//! Nodes that draw while they wait. A choice with waiting watts w uses
//! d + w (T - c) above static, so at a fixed tau each node still picks alone (the
//! argument above holds), but its cheapest choice is now the lowest of lines
//! b + w tau and can change between entries, as a flatter line (a lower clock's
//! smaller waiting draw) overtakes. Each kind's lower envelope of its entered lines
//! is walked once, O(F^2) per kind, giving the points where its best line changes;
//! the sweep applies those with the entries, and the sums become A + W tau.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{Goal, OptimizeError, Optimum, check_table};
use crate::model::SweepTable;

/// What the sweep needs of one (kind, choice) of the table. It travels through
/// the sort whole, so the sweep reads the sorted entries in order.
#[derive(Clone, Copy)]
struct Entry {
    /// The compute time's bits.
    key: u64,
    dynamic_j: f64,
    kind: u32,
    choice: u32,
}

/// Nodes with identical rows (the same choices and static power), as a model
/// gives for nodes of one type: the sweep handles each kind once, weighted by
/// its count, so a site of thousands of nodes of a few types costs little.
pub(super) struct Kinds {
    /// Kind of each node.
    pub(super) of: Vec<u32>,
    /// A node of each kind, whose row stands for the kind.
    pub(super) first: Vec<usize>,
    /// How many nodes each kind has.
    pub(super) count: Vec<f64>,
}

pub(super) fn kinds(table: &SweepTable) -> Kinds {
    // Row hashes are already mixed, so the map need not hash them again. A hash
    // collision between different rows only leaves them as separate kinds.
    let mut by_hash: HashMap<u64, u32, BuildHasherDefault<Premixed>> =
        HashMap::with_capacity_and_hasher(16, BuildHasherDefault::default());
    let mut k = Kinds {
        of: Vec::with_capacity(table.nodes.len()),
        first: Vec::new(),
        count: Vec::new(),
    };
    for (i, row) in table.nodes.iter().enumerate() {
        let mut h = mix(row.static_w.to_bits() ^ row.choices.len() as u64);
        for c in &row.choices {
            h = mix(h ^ c.compute_s.to_bits());
            // One mix for both: a collision only leaves two rows separate kinds.
            h = mix(h ^ c.dynamic_j.to_bits() ^ c.wait_w.to_bits().rotate_left(29));
        }
        let same = |j: u32| {
            let other = &table.nodes[k.first[j as usize]];
            other.static_w == row.static_w
                && other.choices.len() == row.choices.len()
                && other.choices.iter().zip(&row.choices).all(|(a, b)| {
                    a.compute_s == b.compute_s && a.dynamic_j == b.dynamic_j && a.wait_w == b.wait_w
                })
        };
        let kind = match by_hash.get(&h) {
            Some(&j) if same(j) => j,
            found => {
                let j = k.first.len() as u32;
                k.first.push(i);
                k.count.push(0.0);
                if found.is_none() {
                    by_hash.insert(h, j);
                }
                j
            }
        };
        k.count[kind as usize] += 1.0;
        k.of.push(kind);
    }
    k
}

/// A hasher for keys that are already well-mixed 64-bit hashes.
#[derive(Default)]
struct Premixed(u64);

impl Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A 64-bit mixing step (from SplitMix64), enough to spread row hashes.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The exact optimum of `goal` over `table`, or the closest configuration when none is feasible.
pub fn sweep(table: &SweepTable, goal: &Goal) -> Result<Optimum, OptimizeError> {
    check_table(table)?;
    let n = table.nodes.len();
    if n == 0 {
        return Ok(Optimum::of(table, goal, Vec::new(), 1));
    }
    let kinds = kinds(table);
    let nk = kinds.first.len();
    let total: usize = kinds
        .first
        .iter()
        .map(|&i| table.nodes[i].choices.len())
        .sum();
    let mut entries = Vec::with_capacity(total);
    for (kind, &i) in kinds.first.iter().enumerate() {
        for (k, c) in table.nodes[i].choices.iter().enumerate() {
            // Non-negative finite floats order like their bits; + 0.0 turns -0.0 into 0.0.
            entries.push(Entry {
                key: (c.compute_s + 0.0).to_bits(),
                dynamic_j: c.dynamic_j,
                kind: kind as u32,
                choice: k as u32,
            });
        }
    }
    radix_sort(&mut entries, |e| e.key);
    // Rows of a kind are alike, waits included: its first row speaks for it.
    let waits = kinds
        .first
        .iter()
        .any(|&i| table.nodes[i].choices.iter().any(|c| c.wait_w != 0.0));
    if waits {
        return sweep_waiting(table, goal, &kinds, &entries);
    }

    let static_w = table.static_w();
    let mut best_d = vec![f64::INFINITY; nk];
    let mut covered = 0usize;
    let mut sum_d = 0.0;
    // The winning bound and the forced entry, enough to rebuild the pick afterwards.
    let mut winner: Option<(f64, usize, crate::optimize::Assessment)> = None;
    let mut candidates = 0u64;

    let mut start = 0;
    while start < entries.len() {
        let key = entries[start].key;
        let mut end = start;
        while end < entries.len() && entries[end].key == key {
            let e = entries[end];
            let m = kinds.count[e.kind as usize];
            let slot = &mut best_d[e.kind as usize];
            if slot.is_infinite() {
                covered += 1;
                sum_d += m * e.dynamic_j;
                *slot = e.dynamic_j;
            } else if e.dynamic_j < *slot {
                sum_d += m * (e.dynamic_j - *slot);
                *slot = e.dynamic_j;
            }
            end += 1;
        }
        if covered == nk {
            // Force the cheapest entry of this group on one node, so the slowest node takes exactly tau.
            let mut forced = start;
            let mut extra = f64::INFINITY;
            for (j, e) in entries[start..end].iter().enumerate() {
                let cost = e.dynamic_j - best_d[e.kind as usize];
                if cost < extra {
                    extra = cost;
                    forced = start + j;
                }
            }
            let tau = f64::from_bits(key);
            let t = tau + table.fixed_time_s;
            let en = sum_d + extra + t * static_w + table.fixed_energy_j;
            let a = goal.assess(t, en, None);
            candidates += 1;
            if winner.as_ref().is_none_or(|w| a.better_than(&w.2)) {
                winner = Some((tau, forced, a));
            }
        }
        start = end;
    }

    let (tau, forced, _) = winner.ok_or_else(|| OptimizeError::NoChoices("(every node)".into()))?;
    Ok(rebuild(
        table,
        goal,
        &kinds,
        entries[forced],
        tau,
        candidates,
    ))
}

/// The pick the sweep chose at bound `tau`: each kind at its cheapest choice within
/// `tau`, one node of the forced entry's kind at that entry.
fn rebuild(
    table: &SweepTable,
    goal: &Goal,
    kinds: &Kinds,
    forced: Entry,
    tau: f64,
    candidates: u64,
) -> Optimum {
    let wall = tau + table.fixed_time_s;
    let kind_pick: Vec<usize> = kinds
        .first
        .iter()
        .map(|&i| least_energy(table, i, tau, wall))
        .collect();
    let mut pick: Vec<usize> = kinds
        .of
        .iter()
        .map(|&kind| kind_pick[kind as usize])
        .collect();
    pick[kinds.first[forced.kind as usize]] = forced.choice as usize;
    Optimum::of(table, goal, pick, candidates)
}

/// Where one kind's cheapest choice changes as the bound grows: from `tau` on, the
/// kind's best is `choice`. `seq` keeps each kind's points in their order through the sort.
#[derive(Clone, Copy)]
struct Switch {
    tau: f64,
    seq: u32,
    kind: u32,
    choice: u32,
}

/// The sweep where some choices draw while they wait (see the module's note).
fn sweep_waiting(
    table: &SweepTable,
    goal: &Goal,
    kinds: &Kinds,
    entries: &[Entry],
) -> Result<Optimum, OptimizeError> {
    let f0 = table.fixed_time_s;
    let mut switches: Vec<Switch> = Vec::new();
    for (kind, &i) in kinds.first.iter().enumerate() {
        envelope(&table.nodes[i].choices, f0, kind as u32, &mut switches);
    }
    switches.sort_by(|a, b| a.tau.total_cmp(&b.tau).then(a.seq.cmp(&b.seq)));

    let choices = |kind: u32| &table.nodes[kinds.first[kind as usize]].choices;
    let nk = kinds.first.len();
    let static_w = table.static_w();
    let mut best: Vec<Option<u32>> = vec![None; nk];
    let mut covered = 0usize;
    // The kinds' best lines summed: sum = a + w * tau.
    let (mut a, mut w) = (0.0, 0.0);
    let mut next = 0;
    let mut winner: Option<(f64, usize, crate::optimize::Assessment)> = None;
    let mut candidates = 0u64;
    let mut start = 0;
    while start < entries.len() {
        let key = entries[start].key;
        let tau = f64::from_bits(key);
        let mut end = start;
        while end < entries.len() && entries[end].key == key {
            end += 1;
        }
        while next < switches.len() && switches[next].tau <= tau {
            let sw = switches[next];
            let m = kinds.count[sw.kind as usize];
            let c = &choices(sw.kind)[sw.choice as usize];
            let slot = &mut best[sw.kind as usize];
            match *slot {
                None => covered += 1,
                Some(old) => {
                    let o = &choices(sw.kind)[old as usize];
                    a -= m * intercept(o, f0);
                    w -= m * o.wait_w;
                }
            }
            a += m * intercept(c, f0);
            w += m * c.wait_w;
            *slot = Some(sw.choice);
            next += 1;
        }
        if covered == nk {
            let t = tau + f0;
            let mut forced = start;
            let mut extra = f64::INFINITY;
            for (j, e) in entries[start..end].iter().enumerate() {
                let cs = choices(e.kind);
                let Some(b) = best[e.kind as usize] else {
                    continue;
                };
                let cost = cs[e.choice as usize].energy_j(t) - cs[b as usize].energy_j(t);
                if cost < extra {
                    extra = cost;
                    forced = start + j;
                }
            }
            let en = a + w * tau + extra.max(0.0) + t * static_w + table.fixed_energy_j;
            let asmt = goal.assess(t, en, None);
            candidates += 1;
            if winner.as_ref().is_none_or(|x| asmt.better_than(&x.2)) {
                winner = Some((tau, forced, asmt));
            }
        }
        start = end;
    }
    let (tau, forced, _) = winner.ok_or_else(|| OptimizeError::NoChoices("(every node)".into()))?;
    Ok(rebuild(
        table,
        goal,
        kinds,
        entries[forced],
        tau,
        candidates,
    ))
}

/// A choice's joules above static as a line in the bound tau, `b + wait_w * tau`: its
/// [`crate::model::Choice::energy_j`] in a run of `tau + f0` seconds, for any tau it
/// computes within.
fn intercept(c: &crate::model::Choice, f0: f64) -> f64 {
    c.dynamic_j + c.wait_w * (f0 - c.compute_s)
}

/// One kind's lower envelope of its entered lines, as the points where its cheapest
/// choice changes, appended to `out`. Lines enter at their compute time; between
/// entries only a flatter line (smaller waiting watts) can overtake the best, at the
/// bound where the two meet. Each overtaking lowers the best's slope, so a stretch
/// between entries has fewer switches than the kind has choices.
fn envelope(choices: &[crate::model::Choice], f0: f64, kind: u32, out: &mut Vec<Switch>) {
    let b = |c: &crate::model::Choice| intercept(c, f0);
    let mut order: Vec<usize> = (0..choices.len()).collect();
    order.sort_by(|&x, &y| choices[x].compute_s.total_cmp(&choices[y].compute_s));
    let mut entered: Vec<usize> = Vec::with_capacity(choices.len());
    let mut cur: Option<usize> = None;
    let mut idx = 0;
    let push = |tau: f64, j: usize, out: &mut Vec<Switch>| {
        out.push(Switch {
            tau,
            seq: out.len() as u32,
            kind,
            choice: j as u32,
        })
    };
    while idx < order.len() {
        let tau0 = choices[order[idx]].compute_s;
        while idx < order.len() && choices[order[idx]].compute_s == tau0 {
            entered.push(order[idx]);
            idx += 1;
        }
        // The cheapest entered line at tau0; on a tie the flatter, which no later
        // point can make dearer than the other.
        let value = |j: usize, tau: f64| b(&choices[j]) + choices[j].wait_w * tau;
        let mut top = entered[0];
        for &j in &entered[1..] {
            let (v, vt) = (value(j, tau0), value(top, tau0));
            if v < vt || (v == vt && choices[j].wait_w < choices[top].wait_w) {
                top = j;
            }
        }
        if cur != Some(top) {
            push(tau0, top, out);
            cur = Some(top);
        }
        let until = order
            .get(idx)
            .map_or(f64::INFINITY, |&j| choices[j].compute_s);
        let mut at = tau0;
        while let Some(c) = cur {
            let (bc, wc) = (b(&choices[c]), choices[c].wait_w);
            // The first flatter line to meet the best after `at`.
            let mut meet: Option<(f64, usize)> = None;
            for &j in &entered {
                let wj = choices[j].wait_w;
                if wj >= wc {
                    continue;
                }
                let t = ((b(&choices[j]) - bc) / (wc - wj)).max(at);
                if meet.is_none_or(|(m, mj)| t < m || (t == m && wj < choices[mj].wait_w)) {
                    meet = Some((t, j));
                }
            }
            match meet {
                Some((t, j)) if t < until => {
                    push(t, j, out);
                    cur = Some(j);
                    at = t;
                }
                _ => break,
            }
        }
    }
}

/// Sort items by a 64-bit key, moving them whole. The high halves of the keys go through a
/// least-significant-digit radix sort (one byte per pass, skipping bytes every
/// key shares); runs that share a high half are then ordered by the whole key.
/// For compute times the high half already separates values 1 part in 10^6
/// apart, so those runs are short; the whole sort is close to linear time.
fn radix_sort<T: Copy>(items: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    if items.len() < 64 {
        items.sort_unstable_by_key(&key);
        return;
    }
    let high = |t: &T| (key(t) >> 32) as u32;
    let mut counts = [[0usize; 256]; 4];
    for t in items.iter() {
        let k = high(t);
        for (b, c) in counts.iter_mut().enumerate() {
            c[((k >> (8 * b)) & 0xff) as usize] += 1;
        }
    }
    let mut buf = items.clone();
    for (b, c) in counts.iter().enumerate() {
        if c.contains(&items.len()) {
            continue;
        }
        let mut offsets = [0usize; 256];
        let mut sum = 0;
        for (o, &x) in offsets.iter_mut().zip(c.iter()) {
            *o = sum;
            sum += x;
        }
        for t in items.iter() {
            let d = ((high(t) >> (8 * b)) & 0xff) as usize;
            buf[offsets[d]] = *t;
            offsets[d] += 1;
        }
        std::mem::swap(items, &mut buf);
    }
    let mut start = 0;
    while start < items.len() {
        let h = high(&items[start]);
        let mut end = start + 1;
        while end < items.len() && high(&items[end]) == h {
            end += 1;
        }
        if end - start > 1 {
            items[start..end].sort_unstable_by_key(&key);
        }
        start = end;
    }
}

/// The choice of node `i` of least energy in a run of `wall_s` seconds among those
/// computing at most `tau` seconds (the first such on a tie): the pick every node
/// makes once the slowest time is fixed, here and in the step search (`super::steps`).
pub(super) fn least_energy(table: &SweepTable, i: usize, tau: f64, wall_s: f64) -> usize {
    let mut k = 0;
    let mut d = f64::INFINITY;
    for (j, c) in table.nodes[i].choices.iter().enumerate() {
        if c.compute_s > tau {
            continue;
        }
        let e = c.energy_j(wall_s);
        if e < d {
            d = e;
            k = j;
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::radix_sort;
    use crate::optimize::testbed::Rng;

    #[test]
    fn radix_sort_orders_like_a_comparison_sort() {
        let mut rng = Rng::new(7);
        for (len, close) in [0usize, 1, 63, 64, 65, 1000, 20_000]
            .into_iter()
            .flat_map(|l| [(l, false), (l, true)])
        {
            // Few distinct values (ties, shared bytes), or values so close that
            // their high halves are equal and only the low halves order them.
            let mut v: Vec<(u64, u32)> = (0..len as u32)
                .map(|i| {
                    let x = if close {
                        1.0 + rng.uniform(0.0, 1e-9)
                    } else {
                        rng.uniform(0.0, 50.0).round() * 0.37
                    };
                    (x.to_bits(), i)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|e| e.0);
            radix_sort(&mut v, |e| e.0);
            assert_eq!(
                v.iter().map(|e| e.0).collect::<Vec<_>>(),
                want.iter().map(|e| e.0).collect::<Vec<_>>()
            );
            let mut ids: Vec<u32> = v.iter().map(|e| e.1).collect();
            ids.sort_unstable();
            assert!(
                ids.iter().enumerate().all(|(i, &x)| i as u32 == x),
                "a permutation"
            );
        }
    }
}
