//! Each rank's compute seconds per window of wall time, from a run's time-independent
//! trace: what greenup's MPI runtime counts on a Slurm node (`greenup::comm::StepTimes`),
//! so that the step model learns from SimGrid as it learns from a real job.
//!
//! SimGrid's log says how long a run took and what each host used, not when each rank
//! computed. The trace says what each rank did in order, so this module plays it again
//! on a plain model of the run: each rank computes its flops at its host's speed, a
//! message arrives after two link latencies and its bytes at the link's bandwidth, a
//! blocking receive (or a wait on one) lasts until its message has arrived, and a
//! collective ends for everyone once the last rank has reached it. That model has no
//! contention, so it runs somewhat ahead of SimGrid's own clock; the windows serve only
//! to tell which ranks compute together and which wait, and each rank's compute is
//! exactly its trace's flops at its host's speed.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use greenup::comm::StepTimes;

use crate::trace::{Moved, TraceError, io, moved, rank_files, rank_lines};

/// The network the replay assumes: each host's link, crossed twice by every message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// Seconds per link crossed.
    pub latency_s: f64,
}

/// What one line of a rank's trace does to the replay.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Action {
    Compute(f64),
    /// A blocking send (the sender's link is busy with its bytes) or a nonblocking one.
    Send {
        dst: u64,
        tag: i64,
        bytes: u64,
        blocking: bool,
    },
    /// A receive that blocks until the message from `src` with `tag` arrived.
    Recv {
        src: u64,
        tag: i64,
    },
    /// A nonblocking receive posted: its wait blocks.
    Post {
        src: u64,
        tag: i64,
    },
    /// Wait for every posted receive.
    WaitAll,
    /// Every rank meets here; the rank's own bytes follow.
    Collective {
        bytes: u64,
    },
    Nothing,
}

/// A `sendRecv` pairs with the other side's by this tag (the trace writes none).
const SENDRECV_TAG: i64 = i64::MIN;

/// One rank's file as replay actions, or the 1-based line at fault and why.
fn actions(text: &str, ranks: u64) -> Result<(u64, Vec<Action>), (usize, String)> {
    let (rank, lines) = rank_lines(text)?;
    let mut out = Vec::new();
    for l in &lines {
        let (i, line, me, action, args) = (l.no - 1, l.text, l.who, l.action, &l.args[..]);
        let int = |j: usize| -> Result<i64, (usize, String)> {
            args.get(j)
                .and_then(|w| w.parse::<i64>().ok())
                .ok_or_else(|| {
                    (
                        i + 1,
                        format!("'{line}': argument {} is not a number", j + 1),
                    )
                })
        };
        let peer = |j: usize| -> Result<u64, (usize, String)> {
            let p = int(j)?;
            u64::try_from(p).ok().filter(|p| *p < ranks).ok_or_else(|| {
                (
                    i + 1,
                    format!("'{line}': rank {p} is not one of the {ranks}"),
                )
            })
        };
        let bytes = match moved(action, args, me, ranks, 1).map_err(|m| (i + 1, m))? {
            Moved::Call(b) => b,
            Moved::Init(_) | Moved::Nothing => 0,
        };
        let a = match action {
            "compute" => Action::Compute(args.first().and_then(|w| w.parse().ok()).unwrap_or(0.0)),
            "send" | "isend" => Action::Send {
                dst: peer(0)?,
                tag: int(1)?,
                bytes,
                blocking: action == "send",
            },
            "recv" => Action::Recv {
                src: peer(0)?,
                tag: int(1)?,
            },
            "irecv" => Action::Post {
                src: peer(0)?,
                tag: int(1)?,
            },
            // `wait SRC DST TAG`: a receive's completion where DST is this rank.
            "wait" if args.len() >= 3 && int(1)? == me as i64 && int(0)? != me as i64 => {
                Action::Recv {
                    src: peer(0)?,
                    tag: int(2)?,
                }
            }
            "waitall" => Action::WaitAll,
            "sendRecv" => {
                out.push(Action::Send {
                    dst: peer(1)?,
                    tag: SENDRECV_TAG,
                    bytes,
                    blocking: false,
                });
                Action::Recv {
                    src: peer(3)?,
                    tag: SENDRECV_TAG,
                }
            }
            "barrier" | "bcast" | "reduce" | "allreduce" | "scan" | "exscan" | "alltoall"
            | "alltoallv" | "allgather" | "allgatherv" | "reducescatter" | "gather" | "scatter"
            | "gatherv" | "scatterv" => {
                if ranks > 1 {
                    Action::Collective { bytes }
                } else {
                    Action::Nothing
                }
            }
            _ => Action::Nothing,
        };
        if a != Action::Nothing {
            out.push(a);
        }
    }
    Ok((rank, out))
}

/// Each rank's compute windows for the trace whose index is `index`, rank `r` running at
/// `speeds[r]` flops per second.
pub fn of_trace(index: &Path, speeds: &[f64], link: Link) -> Result<Vec<StepTimes>, TraceError> {
    let files = rank_files(index)?;
    let ranks = files.len() as u64;
    let mut plays: Vec<Vec<Action>> = vec![Vec::new(); files.len()];
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(io(file))?;
        let (rank, acts) = actions(&text, ranks).map_err(|(line, message)| TraceError::Line {
            path: file.clone(),
            line,
            message,
        })?;
        plays[rank as usize] = acts;
    }
    replay(&plays, speeds, link).map_err(|message| TraceError::Line {
        path: index.to_path_buf(),
        line: 1,
        message,
    })
}

/// Where one rank is in its replay.
#[derive(Clone, Default)]
struct Rank {
    pc: usize,
    t: f64,
    posted: Vec<(u64, i64)>,
    /// Arrived at its next collective, with its time of arrival.
    at_collective: Option<f64>,
    steps: StepTimes,
}

fn replay(plays: &[Vec<Action>], speeds: &[f64], link: Link) -> Result<Vec<StepTimes>, String> {
    let n = plays.len();
    let mut ranks = vec![Rank::default(); n];
    let mut queues: HashMap<(u64, u64, i64), VecDeque<f64>> = HashMap::new();
    let wire = |bytes: u64| {
        if link.bytes_per_s > 0.0 {
            bytes as f64 / link.bytes_per_s
        } else {
            0.0
        }
    };
    // A receive takes its message if it has arrived in the replay's order, FIFO per
    // sender, receiver and tag as MPI's non-overtaking rule says.
    let take = |queues: &mut HashMap<(u64, u64, i64), VecDeque<f64>>, key| {
        queues.get_mut(&key).and_then(VecDeque::pop_front)
    };
    loop {
        let mut progress = false;
        for r in 0..n {
            let speed = speeds.get(r).copied().filter(|s| *s > 0.0).ok_or_else(|| {
                format!(
                    "no host speed for rank {r} (the platform has {} hosts)",
                    speeds.len()
                )
            })?;
            loop {
                let me = &mut ranks[r];
                let Some(&a) = plays[r].get(me.pc) else { break };
                match a {
                    Action::Compute(flops) => {
                        let end = me.t + flops / speed;
                        me.steps.add(me.t, end);
                        me.t = end;
                    }
                    Action::Send {
                        dst,
                        tag,
                        bytes,
                        blocking,
                    } => {
                        if blocking {
                            me.t += wire(bytes);
                        }
                        let arrive =
                            me.t + 2.0 * link.latency_s + if blocking { 0.0 } else { wire(bytes) };
                        queues
                            .entry((r as u64, dst, tag))
                            .or_default()
                            .push_back(arrive);
                    }
                    Action::Recv { src, tag } => {
                        let Some(at) = take(&mut queues, (src, r as u64, tag)) else {
                            break;
                        };
                        let me = &mut ranks[r];
                        me.t = me.t.max(at);
                        if let Some(i) = me.posted.iter().position(|p| *p == (src, tag)) {
                            me.posted.remove(i);
                        }
                    }
                    Action::Post { src, tag } => me.posted.push((src, tag)),
                    Action::WaitAll => {
                        let Some(&(src, tag)) = me.posted.first() else {
                            me.pc += 1;
                            progress = true;
                            continue;
                        };
                        let Some(at) = take(&mut queues, (src, r as u64, tag)) else {
                            break;
                        };
                        let me = &mut ranks[r];
                        me.t = me.t.max(at);
                        me.posted.remove(0);
                        progress = true;
                        // Stay on the wait until every posted receive has arrived.
                        continue;
                    }
                    Action::Collective { .. } => {
                        if me.at_collective.is_none() {
                            me.at_collective = Some(me.t);
                            progress = true;
                        }
                        break;
                    }
                    Action::Nothing => {}
                }
                ranks[r].pc += 1;
                progress = true;
            }
        }
        // A collective ends once every rank not finished has reached one.
        let waiting: Vec<usize> = (0..n)
            .filter(|&r| ranks[r].at_collective.is_some())
            .collect();
        let live = (0..n).filter(|&r| ranks[r].pc < plays[r].len()).count();
        if !waiting.is_empty() && waiting.len() == live {
            let start = waiting
                .iter()
                .filter_map(|&r| ranks[r].at_collective)
                .fold(0.0, f64::max);
            for r in waiting {
                let Action::Collective { bytes } = plays[r][ranks[r].pc] else {
                    unreachable!("a rank waits at a collective only on one")
                };
                let me = &mut ranks[r];
                me.t = start + 2.0 * link.latency_s + wire(bytes);
                me.at_collective = None;
                me.pc += 1;
            }
            continue;
        }
        if live == 0 {
            break;
        }
        if !progress {
            let stuck = (0..n).find(|&r| ranks[r].pc < plays[r].len()).unwrap_or(0);
            return Err(format!(
                "the replay cannot go on: rank {stuck} waits at its action {} for a message no rank sends (or not every rank reaches a collective)",
                ranks[stuck].pc + 1
            ));
        }
    }
    Ok(ranks.into_iter().map(|r| r.steps).collect())
}

/// A SimGrid bandwidth (`1Gbps`, `125MBps`, `10Mbps`) in bytes per second.
pub fn bandwidth(text: &str) -> Option<f64> {
    let (num, unit) = split_unit(text)?;
    let scale = match unit {
        "Bps" | "" => 1.0,
        "kBps" | "KBps" => 1e3,
        "MBps" => 1e6,
        "GBps" => 1e9,
        "bps" => 1.0 / 8.0,
        "kbps" | "Kbps" => 1e3 / 8.0,
        "Mbps" => 1e6 / 8.0,
        "Gbps" => 1e9 / 8.0,
        _ => return None,
    };
    Some(num * scale)
}

/// A SimGrid latency (`50us`, `1ms`, `0.5s`) in seconds.
pub fn latency(text: &str) -> Option<f64> {
    let (num, unit) = split_unit(text)?;
    // Divided, not multiplied by 1e-6: 50 us is then the nearest double to 5e-5.
    let per = match unit {
        "s" | "" => 1.0,
        "ms" => 1e3,
        "us" => 1e6,
        "ns" => 1e9,
        _ => return None,
    };
    Some(num / per)
}

fn split_unit(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    let cut = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let num: f64 = t[..cut].parse().ok()?;
    (num.is_finite() && num >= 0.0).then_some((num, &t[cut..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: Link = Link {
        bytes_per_s: 1e9,
        latency_s: 0.0,
    };

    fn play(files: &[&str], speeds: &[f64], link: Link) -> Result<Vec<StepTimes>, TraceError> {
        let dir = tempfile::tempdir().unwrap();
        let mut index = String::new();
        for (i, f) in files.iter().enumerate() {
            let name = format!("rank-{i}.txt");
            std::fs::write(dir.path().join(&name), f).unwrap();
            index.push_str(&name);
            index.push('\n');
        }
        let path = dir.path().join("run.trace");
        std::fs::write(&path, index).unwrap();
        of_trace(&path, speeds, link)
    }

    fn total(s: &StepTimes) -> f64 {
        s.compute_s.iter().sum()
    }

    #[test]
    fn a_receiver_waits_for_its_sender_and_computes_after() {
        // Rank 0 computes 25 ms then sends; rank 1 computes 5 ms, waits, computes 10 ms.
        // At 1 flop/s... 1e9 flops/s: 25e6 flops = 25 ms.
        let r0 = "0 init\n0 compute 25e6\n0 send 1 7 8 0\n0 finalize\n";
        let r1 =
            "1 init\n1 compute 5e6\n1 irecv 0 7 8 0\n1 wait 0 1 7\n1 compute 10e6\n1 finalize\n";
        let s = play(&[r0, r1], &[1e9, 1e9], LINK).unwrap();
        // Rank 0: windows [10, 10, 5] ms.
        assert_eq!(s[0].compute_s.len(), 3);
        assert!((s[0].compute_s[2] - 0.005).abs() < 1e-9);
        // Rank 1: 5 ms in window 0, then from 25 ms (plus 64 ns of wire) to 35 ms:
        // about 5 ms in window 2 and 5 ms in window 3.
        assert!((s[1].compute_s[0] - 0.005).abs() < 1e-9);
        assert_eq!(s[1].compute_s[1], 0.0);
        assert!((s[1].compute_s[2] - 0.005).abs() < 1e-6, "{:?}", s[1]);
        assert!((s[1].compute_s[3] - 0.005).abs() < 1e-6, "{:?}", s[1]);
        assert!((total(&s[1]) - 0.015).abs() < 1e-9);
    }

    #[test]
    fn a_collective_starts_everyone_at_the_last_arrival() {
        let r0 = "0 init\n0 compute 30e6\n0 barrier\n0 compute 5e6\n0 finalize\n";
        let r1 = "1 init\n1 compute 5e6\n1 barrier\n1 compute 5e6\n1 finalize\n";
        // Rank 1 runs at half speed: its 5e6 flops take 10 ms.
        let s = play(&[r0, r1], &[1e9, 5e8], LINK).unwrap();
        // Both start again at 30 ms: rank 1 computes 30-40 ms, window 3.
        assert!((s[1].compute_s[0] - 0.01).abs() < 1e-9);
        assert!((s[1].compute_s[3] - 0.01).abs() < 1e-9, "{:?}", s[1]);
        assert!((s[0].compute_s[3] - 0.005).abs() < 1e-9, "{:?}", s[0]);
    }

    #[test]
    fn latency_and_bandwidth_delay_the_message() {
        let link = Link {
            bytes_per_s: 1e6,
            latency_s: 0.001,
        };
        // 10,000 doubles: 80 ms on the wire, 2 ms of latency, a blocking send.
        let r0 = "0 init\n0 send 1 1 10000 0\n0 finalize\n";
        let r1 = "1 init\n1 recv 0 1 10000 0\n1 compute 1e6\n1 finalize\n";
        let s = play(&[r0, r1], &[1e9, 1e8], link).unwrap();
        // Rank 1 computes 10 ms from 82 ms: windows 8 and 9.
        assert!((s[1].compute_s[8] - 0.008).abs() < 1e-6, "{:?}", s[1]);
        assert!((s[1].compute_s[9] - 0.002).abs() < 1e-6, "{:?}", s[1]);
    }

    #[test]
    fn a_trace_that_cannot_finish_says_where() {
        let r0 = "0 init\n0 recv 1 1 8 0\n0 finalize\n";
        let r1 = "1 init\n1 recv 0 1 8 0\n1 finalize\n";
        let e = play(&[r0, r1], &[1e9, 1e9], LINK).unwrap_err().to_string();
        assert!(e.contains("rank 0 waits at its action 1"), "{e}");
        let bad = play(&["0 init\n0 send 5 1 8 0\n"], &[1e9], LINK)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("rank 5 is not one of the 1"), "{bad}");
    }

    #[test]
    fn simgrid_units_read_as_bytes_and_seconds() {
        assert_eq!(bandwidth("1Gbps"), Some(1.25e8));
        assert_eq!(bandwidth("125MBps"), Some(1.25e8));
        assert_eq!(latency("50us"), Some(5e-5));
        assert_eq!(latency("1.5ms"), Some(0.0015));
        assert_eq!(bandwidth("fast"), None);
        assert_eq!(latency("3 parsecs"), None);
    }
}
