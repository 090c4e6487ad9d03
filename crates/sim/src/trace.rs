//! Each rank's MPI calls and bytes, counted from SimGrid's time-independent trace.
//!
//! On a Slurm node the MPI runtime counts them as the program runs; under SMPI the same
//! program leaves a trace (`smpirun -trace-ti`) of every call it made, which is the
//! count. Bytes follow the runtime's rule, so a profile learned here and one learned on
//! Slurm mean the same thing:
//! - a point-to-point call moves its count of its datatype (a send-receive the larger
//!   of its two halves);
//! - a collective moves what the rank exchanges with the others: `count` for a
//!   broadcast or a reduction, every other rank's block for an all-to-all or an
//!   all-gather, and every other rank's block at the root of a gather or a scatter (its
//!   own block elsewhere). A rank's block to itself is a copy no network carries, and a
//!   collective of a rank alone is no call at all;
//! - a wait, a test or a barrier is a call that moves nothing.
//!
//! The trace names datatypes by SMPI's ids of the predefined types (0 for `MPI_DOUBLE`,
//! 1 for `MPI_INT`, ...); a line without one uses the trace's default, bytes unless its
//! `init` line says otherwise, as SMPI's replay reads it. The argument positions are
//! those of SMPI 3.32's replay parser.
//!
//! A live trace can also hold waiting as work: SMPI makes a failed `MPI_Iprobe` compute
//! `smpi/iprobe` seconds at the host's speed (times a count that grows with each failed
//! probe), and its trace writes that down as a `compute` action of the rank, which every
//! replay computes again at the replayed clock. [`count_with_probes`] finds those
//! actions, given each rank's host speed at the recording.

use std::path::{Path, PathBuf};

/// Why a trace could not be counted; the message names the file and line at fault.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A file of the trace could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The index or a rank's file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A line is not one SMPI's replay would read.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The rank's file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong and what would be valid.
        message: String,
    },
    /// The index lists no rank file.
    #[error("{path}: lists no rank file (expected one path per line, as smpirun -trace-ti writes)")]
    Empty {
        /// The index.
        path: PathBuf,
    },
}

/// What one rank's calls moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Traffic {
    /// MPI calls that communicate or wait (not init, finalize or computation).
    pub calls: u64,
    /// Bytes those calls moved, by the module's rule.
    pub bytes: u64,
}

/// SMPI 3.32's `smpi/iprobe`: the seconds a failed `MPI_Iprobe` computes, times its count
/// of failures (greenup-sim leaves it at SMPI's default).
pub const SMPI_IPROBE_S: f64 = 1e-4;

/// One rank's computation in a live trace, and how much of it was SMPI's waiting in
/// failed `MPI_Iprobe` calls.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProbeWaits {
    /// Flops of all the rank's `compute` actions.
    pub compute_flops: f64,
    /// Flops of those that are SMPI's probe waits.
    pub probe_flops: f64,
    /// Seconds of waiting those stand for at the recording's speed.
    pub probe_s: f64,
}

impl ProbeWaits {
    /// The probe waits' share of the rank's traced flops, 0 to 1 (0 without any).
    pub fn share(&self) -> f64 {
        if self.compute_flops > 0.0 {
            self.probe_flops / self.compute_flops
        } else {
            0.0
        }
    }
}

/// Largest count of `smpi/iprobe` steps one action is matched against: beyond it the
/// trace's six significant digits cannot tell a multiple from any other number.
const MAX_PROBE_STEPS: f64 = 10_000.0;

/// How many `smpi/iprobe` steps of `step` flops a `compute` action of `flops` is, if it is
/// a whole number of them (to the trace's six significant digits), else `None`. A
/// program's own computation is host seconds times `smpi/host-speed`, which lands on
/// such a multiple only by chance (about 1e-5 × k of the time for k steps).
pub fn probe_steps(flops: f64, step: f64) -> Option<u64> {
    if !(step > 0.0 && flops.is_finite()) {
        return None;
    }
    let q = flops / step;
    let k = q.round();
    ((1.0..=MAX_PROBE_STEPS).contains(&k) && (q - k).abs() <= 5e-6 * q).then_some(k as u64)
}

/// Bytes of SMPI's predefined datatype `id` (its `Datatype::decode` table).
fn datatype_bytes(id: u32) -> Option<u64> {
    Some(match id {
        // char, byte, signed/unsigned char, bool, int8, uint8
        2 | 6 | 8 | 9 | 16 | 17 | 21 => 1,
        // short, unsigned short, int16, uint16
        3 | 10 | 18 | 22 => 2,
        // int, float, unsigned, wchar_t, int32, uint32
        1 | 5 | 11 | 15 | 19 | 23 => 4,
        // double, long, long long, unsigned long (long), int64, uint64, float complex,
        // MPI_Aint, MPI_Offset, float+int, short+int (padded), 2 int, 2 float
        0 | 4 | 7 | 12 | 13 | 20 | 24 | 25 | 28 | 29 | 30 | 33 | 34 | 35 => 8,
        // long double, double complex, long+int, double+int, 2 double, 2 long
        14 | 26 | 31 | 32 | 36 | 37 => 16,
        // long double complex
        27 => 32,
        _ => return None,
    })
}

/// Count every rank of the trace whose index (the file `--cfg=tracing/filename` named)
/// is `index`, in rank order: what it moved, and its probe waits, where `steps[rank]` is
/// the flops of one `smpi/iprobe` step on that rank's host at the recording (a rank past
/// `steps` is not searched: a replayed trace's recording speeds are not known).
pub fn count_with_probes(
    index: &Path,
    steps: &[f64],
) -> Result<Vec<(Traffic, ProbeWaits)>, TraceError> {
    let files = rank_files(index)?;
    let ranks = files.len() as u64;
    let mut out = vec![(Traffic::default(), ProbeWaits::default()); files.len()];
    // Which file counted each rank: a rank in two files would overwrite the first count.
    let mut seen: Vec<Option<&Path>> = vec![None; files.len()];
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(io(file))?;
        let (rank, traffic, computes) =
            count_rank(&text, ranks).map_err(|(line, message)| TraceError::Line {
                path: file.clone(),
                line,
                message,
            })?;
        let slot = out.get_mut(rank as usize).ok_or_else(|| TraceError::Line {
            path: file.clone(),
            line: 1,
            message: format!("rank {rank}, but the index lists {ranks} ranks"),
        })?;
        if let Some(first) = seen[rank as usize].replace(file) {
            return Err(TraceError::Line {
                path: file.clone(),
                line: 1,
                message: format!(
                    "rank {rank} again: {} already holds its calls (one file per rank)",
                    first.display()
                ),
            });
        }
        let mut waits = ProbeWaits {
            compute_flops: computes.iter().sum(),
            ..ProbeWaits::default()
        };
        if let Some(&step) = steps.get(rank as usize) {
            for &c in &computes {
                if let Some(k) = probe_steps(c, step) {
                    waits.probe_flops += c;
                    waits.probe_s += k as f64 * SMPI_IPROBE_S;
                }
            }
        }
        *slot = (traffic, waits);
    }
    Ok(out)
}

/// How a file of the trace failed to read, as a [`TraceError`].
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TraceError {
    let path = path.to_path_buf();
    move |source| TraceError::Io { path, source }
}

/// The rank files the trace's index lists, each relative to the index's folder.
pub(crate) fn rank_files(index: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let text = std::fs::read_to_string(index).map_err(io(index))?;
    let base = index.parent().unwrap_or(Path::new("."));
    let files: Vec<PathBuf> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| base.join(l))
        .collect();
    if files.is_empty() {
        return Err(TraceError::Empty {
            path: index.to_path_buf(),
        });
    }
    Ok(files)
}

/// One line of a rank's file, split into its words.
pub(crate) struct Line<'a> {
    /// 1-based.
    pub no: usize,
    /// The whole line, for messages.
    pub text: &'a str,
    /// The rank that wrote it.
    pub who: u64,
    /// What it did (`compute`, `send`, ...).
    pub action: &'a str,
    /// The words after the action.
    pub args: Vec<&'a str>,
}

/// A rank's file as lines, with the rank they all name, or the 1-based line at fault
/// and why (a line that is not `RANK ACTION [ARGS]`, another rank's line, no line).
pub(crate) fn rank_lines(text: &str) -> Result<(u64, Vec<Line<'_>>), (usize, String)> {
    let mut rank = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let (who, action) = match (words.next(), words.next()) {
            (None, _) => continue,
            (Some(who), Some(action)) => (who, action),
            (Some(_), None) => {
                return Err((i + 1, format!("'{line}': expected RANK ACTION [ARGS]")));
            }
        };
        let who: u64 = who
            .parse()
            .map_err(|_| (i + 1, format!("'{who}': expected a rank number")))?;
        match rank {
            None => rank = Some(who),
            Some(r) if r != who => {
                return Err((i + 1, format!("rank {who} in rank {r}'s file")));
            }
            Some(_) => {}
        }
        out.push(Line {
            no: i + 1,
            text: line,
            who,
            action,
            args: words.collect(),
        });
    }
    let rank = rank.ok_or((1, "an empty rank file".to_string()))?;
    Ok((rank, out))
}

/// One rank's file: its rank, what it moved and the flops of each `compute` action, or
/// the 1-based line at fault and why.
fn count_rank(text: &str, ranks: u64) -> Result<(u64, Traffic, Vec<f64>), (usize, String)> {
    let (rank, lines) = rank_lines(text)?;
    let mut default_bytes = 1;
    let mut t = Traffic::default();
    let mut computes = Vec::new();
    for l in &lines {
        let (i, line, who, action, args) = (l.no - 1, l.text, l.who, l.action, &l.args[..]);
        if action == "compute" {
            let flops = args
                .first()
                .and_then(|w| w.parse::<f64>().ok())
                .filter(|f| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| (i + 1, format!("'{line}': expected RANK compute FLOPS")))?;
            computes.push(flops);
        }
        let moved = moved(action, args, who, ranks, default_bytes).map_err(|m| (i + 1, m))?;
        match moved {
            Moved::Nothing => {}
            Moved::Init(double) => default_bytes = if double { 8 } else { 1 },
            Moved::Call(bytes) => {
                t.calls += 1;
                t.bytes = t.bytes.saturating_add(bytes);
            }
        }
    }
    Ok((rank, t, computes))
}

/// What a line stands for.
pub(crate) enum Moved {
    /// Not a communication (computation, communicators, the end).
    Nothing,
    /// The run's start; true when it sets the default datatype to doubles.
    Init(bool),
    /// A call that moved this many bytes.
    Call(u64),
}

/// What `action` with `args` (the words after it) moved on rank `me` of `ranks`.
pub(crate) fn moved(
    action: &str,
    args: &[&str],
    me: u64,
    ranks: u64,
    default_bytes: u64,
) -> Result<Moved, String> {
    let n = ranks as usize;
    let need = |k: usize| {
        if args.len() < k {
            Err(format!(
                "'{action}' needs at least {k} arguments with {ranks} ranks, has {}",
                args.len()
            ))
        } else {
            Ok(())
        }
    };
    let num = |j: usize| -> Result<u64, String> {
        let w = args[j];
        // SMPI writes counts as integers and reads them as doubles, truncated.
        w.parse::<u64>()
            .ok()
            .or_else(|| {
                w.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(|v| v as u64)
            })
            .ok_or_else(|| format!("'{action}' argument {}: '{w}' is not a count", j + 1))
    };
    // The datatype's bytes at argument j, or the trace's default where the line stops.
    let dt = |j: usize| -> Result<u64, String> {
        let Some(w) = args.get(j) else {
            return Ok(default_bytes);
        };
        w.parse::<u32>()
            .ok()
            .and_then(datatype_bytes)
            .ok_or_else(|| {
                format!(
                    "'{action}': datatype '{w}' is not one of SMPI's predefined types (0 to 37)"
                )
            })
    };
    // The counts at arguments from..from+n, without this rank's own.
    let others_sum = |from: usize| -> Result<u64, String> {
        (0..n)
            .filter(|&i| i as u64 != me)
            .try_fold(0u64, |s, i| Ok(s.saturating_add(num(from + i)?)))
    };
    let others = ranks.saturating_sub(1);
    let collective = matches!(
        action,
        "barrier"
            | "bcast"
            | "reduce"
            | "allreduce"
            | "scan"
            | "exscan"
            | "alltoall"
            | "alltoallv"
            | "allgather"
            | "allgatherv"
            | "reducescatter"
            | "gather"
            | "scatter"
            | "gatherv"
            | "scatterv"
    );
    // A rank alone copies within its own memory: no communication, as the runtime lets
    // such a collective through uncounted.
    if collective && others == 0 {
        return Ok(Moved::Nothing);
    }
    let root = |j: usize| -> Result<u64, String> { args.get(j).map_or(Ok(0), |_| num(j)) };
    let times = |a: u64, b: u64| a.saturating_mul(b);
    let bytes = match action {
        "init" => return Ok(Moved::Init(!args.is_empty())),
        "finalize" | "compute" | "sleep" | "location" | "comm_size" | "comm_split" | "comm_dup" => {
            return Ok(Moved::Nothing);
        }
        "wait" | "waitall" | "test" | "barrier" => 0,
        "send" | "isend" | "recv" | "irecv" => {
            need(3)?;
            times(num(2)?, dt(3)?)
        }
        "sendRecv" => {
            need(4)?;
            times(num(0)?, dt(4)?).max(times(num(2)?, dt(5)?))
        }
        "bcast" => {
            need(1)?;
            times(num(0)?, dt(2)?)
        }
        "reduce" => {
            need(2)?;
            times(num(0)?, dt(3)?)
        }
        "allreduce" | "scan" | "exscan" => {
            need(2)?;
            times(num(0)?, dt(2)?)
        }
        "alltoall" | "allgather" => {
            need(2)?;
            times(others, times(num(1)?, dt(3)?))
        }
        "alltoallv" => {
            need(2 * n + 2)?;
            times(others_sum(n + 2)?, dt(2 * n + 3)?)
        }
        "allgatherv" => {
            need(n + 1)?;
            // SMPI's parser: datatypes right after the counts when displacements follow
            // them or nothing does; the default when only displacements follow.
            let recv = if args.len() > 2 * n + 1 || args.len() <= n + 3 {
                dt(n + 2)?
            } else {
                default_bytes
            };
            times(others_sum(1)?, recv)
        }
        "reducescatter" => {
            // The rank receives its own block, reduced from every rank's.
            need(n + 1)?;
            times(num(me as usize)?, dt(n + 1)?)
        }
        "gather" => {
            need(2)?;
            if me == root(2)? {
                times(others, times(num(1)?, dt(4)?))
            } else {
                times(num(0)?, dt(3)?)
            }
        }
        "scatter" => {
            need(2)?;
            if me == root(2)? {
                times(others, times(num(0)?, dt(3)?))
            } else {
                times(num(1)?, dt(4)?)
            }
        }
        "gatherv" => {
            need(n + 1)?;
            if me == root(n + 1)? {
                times(others_sum(1)?, dt(n + 3)?)
            } else {
                times(num(0)?, dt(n + 2)?)
            }
        }
        "scatterv" => {
            need(n + 1)?;
            if me == root(n + 1)? {
                times(others_sum(0)?, dt(n + 2)?)
            } else {
                times(num(n)?, dt(n + 3)?)
            }
        }
        other => {
            return Err(format!(
                "'{other}' is not an action SMPI's replay knows (send, recv, bcast, allreduce, alltoall, ...)"
            ));
        }
    };
    Ok(Moved::Call(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each rank moved, without looking for probe waits.
    fn count(index: &Path) -> Result<Vec<Traffic>, TraceError> {
        Ok(count_with_probes(index, &[])?
            .into_iter()
            .map(|(t, _)| t)
            .collect())
    }

    /// A two-rank trace whose counts are worked by hand in the comments.
    fn write_trace(dir: &Path, rank1: &str) -> PathBuf {
        let files = dir.join("run.trace_files");
        std::fs::create_dir_all(&files).unwrap();
        let rank0 = "0 init\n\
                     0 compute 1e+06\n\
                     0 send 1 0 100 0\n\
                     0 irecv 1 0 10 1\n\
                     0 wait 1 0 0\n\
                     0 allreduce 1029 0 1 \n\
                     0 alltoall 1 1 1 1\n\
                     0 alltoallv 131072 5 6 132074 7 8 1 1\n\
                     0 gather 3 3 0 6 6\n\
                     0 reduce 1 0 0 1\n\
                     0 barrier\n\
                     0 finalize\n";
        std::fs::write(files.join("t_rank-1.txt"), rank0).unwrap();
        std::fs::write(files.join("t_rank-2.txt"), rank1).unwrap();
        let index = dir.join("run.trace");
        // The index lists the rank files; rank 1's first, which the lines' ranks put right.
        std::fs::write(
            &index,
            format!(
                "{}\nrun.trace_files/t_rank-1.txt\n",
                files.join("t_rank-2.txt").display()
            ),
        )
        .unwrap();
        index
    }

    #[test]
    fn calls_and_bytes_follow_the_runtime_rule() {
        let dir = tempfile::tempdir().unwrap();
        let rank1 = "1 init\n\
                     1 recv 0 0 100 0\n\
                     1 isend 0 0 10 1\n\
                     1 gather 3 3 0 6 6\n\
                     1 bcast 5\n\
                     1 finalize\n";
        let t = count(&write_trace(dir.path(), rank1)).unwrap();
        // Rank 0: send 100 doubles (800), irecv 10 ints (40), a wait (0), allreduce of
        // 1029 ints (4116), alltoall of 1 int from the one other rank (4), alltoallv
        // receiving 8 ints from rank 1 (its own 7 stay: 32), gather's root receiving 3
        // bytes from rank 1 (3), reduce of 1 int (4), a barrier (0): 9 calls, 4999 bytes.
        assert_eq!(
            t[0],
            Traffic {
                calls: 9,
                bytes: 4999
            }
        );
        // Rank 1: recv 800, isend 40, its own block of the gather (3), and a broadcast of
        // 5 with no datatype, so the default of an `init` without arguments: bytes (5).
        assert_eq!(
            t[1],
            Traffic {
                calls: 4,
                bytes: 848
            }
        );
    }

    #[test]
    fn a_rank_alone_moves_nothing() {
        // One rank: its collectives are copies in its own memory, not communication.
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("one.trace_files");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(
            files.join("r.txt"),
            "0 init\n0 allreduce 1029 0 1\n0 alltoall 4 4 1 1\n0 alltoallv 9 9 9 9 1 1\n\
             0 bcast 5 0 0\n0 gather 3 3 0 6 6\n0 barrier\n0 finalize\n",
        )
        .unwrap();
        let index = dir.path().join("one.trace");
        std::fs::write(&index, "one.trace_files/r.txt\n").unwrap();
        assert_eq!(count(&index).unwrap(), vec![Traffic { calls: 0, bytes: 0 }]);
    }

    #[test]
    fn a_line_replay_would_refuse_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "1 init\n1 send 0 0 4 99\n",
                "t_rank-2.txt:2: 'send': datatype '99'",
            ),
            (
                "1 init\n1 frobnicate 3\n",
                "t_rank-2.txt:2: 'frobnicate' is not an action",
            ),
            (
                "1 init\n0 barrier\n",
                "t_rank-2.txt:2: rank 0 in rank 1's file",
            ),
            (
                "1 init\n1 send 0 0\n",
                "t_rank-2.txt:2: 'send' needs at least 3 arguments",
            ),
            (
                "1 init\n1 bcast x\n",
                "t_rank-2.txt:2: 'bcast' argument 1: 'x' is not a count",
            ),
            (
                "5 init\n",
                "t_rank-2.txt:1: rank 5, but the index lists 2 ranks",
            ),
            // Two files of rank 0: the second is named, with the file that came first.
            ("0 init\n0 send 1 0 4\n", "t_rank-1.txt:1: rank 0 again: "),
            (
                "1 init\n1 compute lots\n",
                "t_rank-2.txt:2: '1 compute lots': expected RANK compute FLOPS",
            ),
            (
                "1 init\n1 compute\n",
                "t_rank-2.txt:2: '1 compute': expected",
            ),
        ];
        for (rank1, want) in cases {
            let e = count(&write_trace(dir.path(), rank1))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
        let gone = count(&dir.path().join("none.trace"))
            .unwrap_err()
            .to_string();
        assert!(gone.contains("none.trace"), "{gone}");
        std::fs::write(dir.path().join("empty.trace"), "\n").unwrap();
        let empty = count(&dir.path().join("empty.trace"))
            .unwrap_err()
            .to_string();
        assert!(empty.contains("lists no rank file"), "{empty}");
    }

    #[test]
    fn smpis_probe_waits_are_whole_steps_to_six_digits() {
        // A t4 host of paper 004 at f_max: 70 GFLOPS, so one 0.1 ms step is 7e6 flops.
        let step = 70e9 * SMPI_IPROBE_S;
        assert_eq!(probe_steps(7e6, step), Some(1));
        assert_eq!(probe_steps(1.54e8, step), Some(22));
        // 1,234 steps of a t1 at 2.3 GHz (36.8 GFLOPS): 4,541,120,000 flops, which the
        // trace prints as 4.54112e+09.
        assert_eq!(probe_steps(4.54112e9, 36.8e9 * SMPI_IPROBE_S), Some(1234));
        // Rounded to six digits: 3,333 steps of 3,000,001 flops are 9,999,003,333, which
        // the trace prints as 9.999e+09, 3,332.9989 steps.
        assert_eq!(probe_steps(9.999e9, 3_000_001.0), Some(3333));
        // Not whole: 17.64 and 1.79 steps; less than one step; a trace's real compute
        // (HPL's, 86,160 flops); and past the count six digits can tell apart.
        assert_eq!(probe_steps(1.2348e8, step), None);
        assert_eq!(probe_steps(1.25223e7, step), None);
        assert_eq!(probe_steps(3.5e6, step), None);
        assert_eq!(probe_steps(86_160.0, step), None);
        assert_eq!(probe_steps(7e6 * 20_000.0, step), None);
        assert_eq!(probe_steps(7e6, 0.0), None);
    }

    #[test]
    fn a_live_traces_probe_waits_are_counted_per_rank() {
        let dir = tempfile::tempdir().unwrap();
        // Rank 1 (7e6 flops a step): 10 + 22 = 32 steps in two waits, 3.2 ms and 2.24e8
        // flops, among 2.24e8 + 1.25223e7 + 86,160 = 236,608,460 flops in all.
        let rank1 = "1 init\n1 compute 7e+07\n1 compute 1.54e+08\n1 compute 1.25223e+07\n\
                     1 compute 86160\n1 recv 0 0 1\n1 finalize\n";
        let index = write_trace(dir.path(), rank1);
        let got = count_with_probes(&index, &[4e6, 7e6]).unwrap();
        // Rank 0's only compute is 1e6 flops, a quarter step: no wait.
        assert_eq!(got[0].1.probe_flops, 0.0);
        assert_eq!(got[0].1.compute_flops, 1e6);
        let w = got[1].1;
        assert!((w.probe_s - 32.0 * 1e-4).abs() < 1e-12, "{w:?}");
        assert_eq!(w.probe_flops, 2.24e8);
        assert_eq!(w.compute_flops, 236_608_460.0);
        // Without the recording's speeds (a replay) nothing is looked for.
        let replay = count_with_probes(&index, &[]).unwrap();
        assert_eq!(replay[1].1.probe_flops, 0.0);
        assert_eq!(replay[1].1.compute_flops, 236_608_460.0);
    }

    #[test]
    fn every_predefined_datatype_has_its_c_size() {
        // The C sizes on x86_64, in SMPI's id order (smpi_datatype.cpp).
        let sizes = [
            8, 4, 1, 2, 8, 4, 1, 8, 1, 1, 2, 4, 8, 8, 16, 4, 1, 1, 2, 4, 8, 1, 2, 4, 8, 8, 16, 32,
            8, 8, 8, 16, 16, 8, 8, 8, 16, 16,
        ];
        for (id, size) in sizes.iter().enumerate() {
            assert_eq!(datatype_bytes(id as u32), Some(*size), "id {id}");
        }
        assert_eq!(datatype_bytes(38), None);
    }
}
