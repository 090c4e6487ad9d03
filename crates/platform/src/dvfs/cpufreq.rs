//! cpufreq: read, set and restore each policy's governor and frequency limits.
//!
//! A frequency is set with the userspace governor and `scaling_setspeed` when the
//! driver offers it (acpi-cpufreq), otherwise by lowering `scaling_max_freq`
//! (intel_pstate and other drivers without userspace).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sysfs::{self, SysfsError};

/// Tolerance when matching a requested frequency to one the driver offers:
/// decisions are made in GHz and may not round-trip to the exact kHz value.
const MATCH_TOLERANCE_KHZ: u64 = 1_000;

/// Why a frequency could not be read, set or restored.
#[derive(Debug, thiserror::Error)]
pub enum CpufreqError {
    /// A sysfs file could not be read or written.
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    /// The tree has no cpufreq policies (no driver loaded, or a wrong sysfs root).
    #[error("{0}: no cpufreq policies found")]
    NoPolicies(PathBuf),
    /// None of the job's CPUs is governed by a policy that covers only the job's CPUs.
    #[error("no cpufreq policy covers only the CPUs {0:?}")]
    NoJobPolicies(Vec<u32>),
    /// The driver does not offer the requested frequency.
    #[error("policy{policy}: {khz} kHz is not offered: expected one of {offered}")]
    Unavailable {
        /// The policy number.
        policy: u32,
        /// The requested frequency in kHz.
        khz: u64,
        /// What the driver offers.
        offered: String,
    },
    /// The frequency lies outside the bounds the node already has; greenup never widens
    /// them (they may be an admin's cap), and the kernel would clamp a set speed to them.
    #[error(
        "policy{policy}: {khz} kHz is outside this node's scaling_min_freq..scaling_max_freq {min_khz}..{max_khz}, which greenup does not widen"
    )]
    OutsideBounds {
        /// The policy number.
        policy: u32,
        /// The requested frequency in kHz.
        khz: u64,
        /// The policy's current scaling_min_freq.
        min_khz: u64,
        /// The policy's current scaling_max_freq.
        max_khz: u64,
    },
}

/// One cpufreq policy: a group of CPUs that always run at the same frequency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The N of `policyN`.
    pub id: u32,
    /// The policy's directory.
    pub dir: PathBuf,
    /// The CPUs this policy governs (`affected_cpus`).
    pub cpus: Vec<u32>,
}

/// How a frequency was put in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// userspace governor plus `scaling_setspeed`.
    Setspeed,
    /// `scaling_max_freq` lowered to the frequency.
    MaxFreq,
}

/// A policy's settings as found before a job, to be put back after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySettings {
    /// The N of `policyN`.
    pub id: u32,
    /// `scaling_governor`.
    pub governor: String,
    /// `scaling_min_freq` in kHz.
    pub min_khz: u64,
    /// `scaling_max_freq` in kHz.
    pub max_khz: u64,
    /// `scaling_setspeed` in kHz, when the userspace governor was active.
    pub setspeed_khz: Option<u64>,
}

/// What was applied, for the record and the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The frequency written, in kHz.
    pub khz: u64,
    /// How it was written.
    pub method: Method,
    /// The policies changed.
    pub policies: Vec<u32>,
}

/// The cpufreq tree under one sysfs root.
#[derive(Debug, Clone)]
pub struct Cpufreq {
    base: PathBuf,
}

impl Cpufreq {
    /// The cpufreq tree under `sysfs_root` (normally `/sys`).
    pub fn new(sysfs_root: &Path) -> Self {
        Cpufreq {
            base: sysfs_root.join("devices/system/cpu/cpufreq"),
        }
    }

    /// Every policy, in policy-number order.
    pub fn policies(&self) -> Result<Vec<Policy>, CpufreqError> {
        let entries = std::fs::read_dir(&self.base)
            .map_err(|_| CpufreqError::NoPolicies(self.base.clone()))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name
                .strip_prefix("policy")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let dir = entry.path();
            let file = dir.join("affected_cpus");
            let cpus = sysfs::parse_cpu_list(&file, &sysfs::read(&file)?)?;
            out.push(Policy { id, dir, cpus });
        }
        if out.is_empty() {
            return Err(CpufreqError::NoPolicies(self.base.clone()));
        }
        out.sort_by_key(|p| p.id);
        Ok(out)
    }

    /// How many CPUs the node's policies govern (each CPU belongs to one policy).
    pub fn cpu_count(&self) -> Result<usize, CpufreqError> {
        Ok(self.policies()?.iter().map(|p| p.cpus.len()).sum())
    }

    /// The policies whose CPUs all belong to `cpus` (every policy when `cpus` is None),
    /// so that a job never changes a CPU it does not hold.
    pub fn policies_for(&self, cpus: Option<&[u32]>) -> Result<Vec<Policy>, CpufreqError> {
        let all = self.policies()?;
        let Some(cpus) = cpus else { return Ok(all) };
        let chosen: Vec<Policy> = all
            .into_iter()
            .filter(|p| !p.cpus.is_empty() && p.cpus.iter().all(|c| cpus.contains(c)))
            .collect();
        if chosen.is_empty() {
            return Err(CpufreqError::NoJobPolicies(cpus.to_vec()));
        }
        Ok(chosen)
    }

    /// The current settings of `policies`.
    pub fn snapshot(&self, policies: &[Policy]) -> Result<Vec<PolicySettings>, CpufreqError> {
        policies.iter().map(Policy::settings).collect()
    }

    /// Set every policy in `policies` to `khz`, matched to a frequency the driver offers.
    pub fn apply(&self, policies: &[Policy], khz: u64) -> Result<Applied, CpufreqError> {
        let mut applied = Applied {
            khz,
            method: Method::MaxFreq,
            policies: Vec::new(),
        };
        for p in policies {
            let target = p.match_frequency(khz)?;
            let now = p.settings()?;
            if !(now.min_khz..=now.max_khz).contains(&target) {
                return Err(CpufreqError::OutsideBounds {
                    policy: p.id,
                    khz: target,
                    min_khz: now.min_khz,
                    max_khz: now.max_khz,
                });
            }
            let method = if p.governors()?.iter().any(|g| g == "userspace") {
                sysfs::write(&p.dir.join("scaling_governor"), "userspace")?;
                sysfs::write(&p.dir.join("scaling_setspeed"), &target.to_string())?;
                Method::Setspeed
            } else {
                sysfs::write(&p.dir.join("scaling_max_freq"), &target.to_string())?;
                Method::MaxFreq
            };
            applied = Applied {
                khz: target,
                method,
                policies: applied.policies,
            };
            applied.policies.push(p.id);
        }
        Ok(applied)
    }

    /// Put back exactly the saved settings. Every policy is attempted; the first error is returned.
    pub fn restore(&self, saved: &[PolicySettings]) -> Result<(), CpufreqError> {
        let mut first_err = None;
        for s in saved {
            if let Err(e) = self.restore_one(s) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn restore_one(&self, s: &PolicySettings) -> Result<(), CpufreqError> {
        let dir = self.base.join(format!("policy{}", s.id));
        let cur = Policy {
            id: s.id,
            dir: dir.clone(),
            cpus: Vec::new(),
        }
        .settings()?;
        // The kernel refuses a min above the current max (and a max below the current
        // min), so write the bounds in the order that never crosses them.
        let bounds = [
            ("scaling_min_freq", cur.min_khz, s.min_khz),
            ("scaling_max_freq", cur.max_khz, s.max_khz),
        ];
        let order: [usize; 2] = if s.min_khz > cur.max_khz {
            [1, 0]
        } else {
            [0, 1]
        };
        for i in order {
            let (file, now, want) = bounds[i];
            if now != want {
                sysfs::write(&dir.join(file), &want.to_string())?;
            }
        }
        if cur.governor != s.governor {
            sysfs::write(&dir.join("scaling_governor"), &s.governor)?;
        }
        if let Some(speed) = s.setspeed_khz {
            sysfs::write(&dir.join("scaling_setspeed"), &speed.to_string())?;
        }
        Ok(())
    }
}

impl Policy {
    /// This policy's governor, bounds and (under userspace) set speed.
    pub fn settings(&self) -> Result<PolicySettings, CpufreqError> {
        let governor = sysfs::read(&self.dir.join("scaling_governor"))?;
        let setspeed_khz = if governor == "userspace" {
            Some(sysfs::read_u64(&self.dir.join("scaling_setspeed"))?)
        } else {
            None
        };
        Ok(PolicySettings {
            id: self.id,
            governor,
            min_khz: sysfs::read_u64(&self.dir.join("scaling_min_freq"))?,
            max_khz: sysfs::read_u64(&self.dir.join("scaling_max_freq"))?,
            setspeed_khz,
        })
    }

    /// The governors the driver offers.
    pub fn governors(&self) -> Result<Vec<String>, CpufreqError> {
        Ok(sysfs::read_words(
            &self.dir.join("scaling_available_governors"),
        )?)
    }

    /// The frequencies the driver lists, in kHz, ascending; empty when it lists none (intel_pstate).
    pub fn available_khz(&self) -> Result<Vec<u64>, CpufreqError> {
        let file = self.dir.join("scaling_available_frequencies");
        if !file.exists() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for w in sysfs::read_words(&file)? {
            let khz = w.parse::<u64>().map_err(|_| SysfsError::Parse {
                path: file.clone(),
                value: w.clone(),
                expected: "frequencies in kHz",
            })?;
            out.push(khz);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The driver's frequency that `khz` names: a listed one within 1 MHz, or, when the
    /// driver lists none, any value between cpuinfo_min_freq and cpuinfo_max_freq.
    pub fn match_frequency(&self, khz: u64) -> Result<u64, CpufreqError> {
        let listed = self.available_khz()?;
        if !listed.is_empty() {
            return listed
                .iter()
                .copied()
                .find(|f| f.abs_diff(khz) <= MATCH_TOLERANCE_KHZ)
                .ok_or_else(|| CpufreqError::Unavailable {
                    policy: self.id,
                    khz,
                    offered: listed
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(" "),
                });
        }
        let lo = sysfs::read_u64(&self.dir.join("cpuinfo_min_freq"))?;
        let hi = sysfs::read_u64(&self.dir.join("cpuinfo_max_freq"))?;
        if (lo..=hi).contains(&khz) {
            Ok(khz)
        } else {
            Err(CpufreqError::Unavailable {
                policy: self.id,
                khz,
                offered: format!("{lo}..={hi}"),
            })
        }
    }
}

/// Convert a frequency in GHz (as decisions carry it) to kHz (as sysfs carries it).
pub fn ghz_to_khz(ghz: f64) -> Option<u64> {
    if ghz.is_finite() && ghz > 0.0 && ghz < 1.0e3 {
        Some((ghz * 1.0e6).round() as u64)
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// Write a kernel-like cpufreq tree with `n` single-CPU policies under `root`.
    pub(crate) fn tree(root: &Path, n: u32, governors: &str, freqs: &[u64]) {
        for i in 0..n {
            let d = root.join(format!("devices/system/cpu/cpufreq/policy{i}"));
            fs::create_dir_all(&d).unwrap();
            let desc: Vec<String> = freqs.iter().rev().map(u64::to_string).collect();
            let (lo, hi) = (freqs[0], freqs[freqs.len() - 1]);
            for (f, v) in [
                ("affected_cpus", i.to_string()),
                ("scaling_available_governors", governors.to_string()),
                ("scaling_available_frequencies", desc.join(" ")),
                (
                    "scaling_governor",
                    governors
                        .split(' ')
                        .nth(1)
                        .unwrap_or("performance")
                        .to_string(),
                ),
                ("cpuinfo_min_freq", lo.to_string()),
                ("cpuinfo_max_freq", hi.to_string()),
                ("scaling_min_freq", lo.to_string()),
                ("scaling_max_freq", hi.to_string()),
                ("scaling_setspeed", "<unsupported>".to_string()),
            ] {
                fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
        }
    }

    #[test]
    fn the_cpu_count_adds_up_every_policys_cpus() {
        let dir = tempfile::tempdir().unwrap();
        tree(
            dir.path(),
            3,
            "userspace performance",
            &[1_000_000, 2_000_000],
        );
        // A policy that governs two CPUs (a shared clock domain) counts both.
        fs::write(
            dir.path()
                .join("devices/system/cpu/cpufreq/policy2/affected_cpus"),
            "2-3\n",
        )
        .unwrap();
        assert_eq!(Cpufreq::new(dir.path()).cpu_count().unwrap(), 4);
        let empty = tempfile::tempdir().unwrap();
        assert!(Cpufreq::new(empty.path()).cpu_count().is_err());
    }

    fn file(root: &Path, policy: u32, f: &str) -> String {
        fs::read_to_string(root.join(format!("devices/system/cpu/cpufreq/policy{policy}/{f}")))
            .unwrap()
            .trim()
            .to_string()
    }

    fn all_files(root: &Path) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let base = root.join("devices/system/cpu/cpufreq");
        for p in fs::read_dir(&base).unwrap().flatten() {
            for f in fs::read_dir(p.path()).unwrap().flatten() {
                out.push((f.path(), fs::read_to_string(f.path()).unwrap()));
            }
        }
        out.sort();
        out
    }

    const FREQS: [u64; 4] = [1_200_000, 1_800_000, 2_400_000, 3_000_000];

    #[test]
    fn userspace_driver_gets_setspeed_and_restore_is_byte_exact() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 4, "userspace ondemand performance", &FREQS);
        let before = all_files(t.path());
        let cf = Cpufreq::new(t.path());
        let pols = cf.policies_for(None).unwrap();
        let saved = cf.snapshot(&pols).unwrap();
        let applied = cf.apply(&pols, ghz_to_khz(1.8).unwrap()).unwrap();
        assert_eq!(applied.method, Method::Setspeed);
        assert_eq!(applied.policies, vec![0, 1, 2, 3]);
        for i in 0..4 {
            assert_eq!(file(t.path(), i, "scaling_governor"), "userspace");
            assert_eq!(file(t.path(), i, "scaling_setspeed"), "1800000");
        }
        cf.restore(&saved).unwrap();
        for ((p0, v0), (p1, v1)) in before.iter().zip(all_files(t.path()).iter()) {
            assert_eq!(p0, p1);
            if !p0.ends_with("scaling_setspeed") {
                assert_eq!(v0, v1, "{}", p0.display());
            }
        }
        assert_eq!(file(t.path(), 2, "scaling_governor"), "ondemand");
    }

    #[test]
    fn a_frequency_above_the_nodes_current_max_is_refused_not_clamped() {
        for governors in ["userspace ondemand", "performance powersave"] {
            let t = tempfile::tempdir().unwrap();
            tree(t.path(), 2, governors, &FREQS);
            // An admin capped policy1 at 1.8 GHz; 2.4 GHz would raise that cap (max_freq)
            // or be clamped to it by the kernel (setspeed).
            std::fs::write(
                t.path()
                    .join("devices/system/cpu/cpufreq/policy1/scaling_max_freq"),
                "1800000\n",
            )
            .unwrap();
            let cf = Cpufreq::new(t.path());
            let pols = cf.policies_for(None).unwrap();
            let e = cf.apply(&pols, 2_400_000).unwrap_err();
            assert_eq!(
                e.to_string(),
                "policy1: 2400000 kHz is outside this node's scaling_min_freq..scaling_max_freq 1200000..1800000, which greenup does not widen"
            );
            assert_eq!(file(t.path(), 1, "scaling_max_freq"), "1800000");
            // Within the cap is fine.
            assert!(cf.apply(&pols, 1_800_000).is_ok());
        }
    }

    #[test]
    fn driver_without_userspace_gets_max_freq_and_restore() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 2, "performance powersave", &FREQS);
        let before = all_files(t.path());
        let cf = Cpufreq::new(t.path());
        let pols = cf.policies_for(None).unwrap();
        let saved = cf.snapshot(&pols).unwrap();
        let applied = cf.apply(&pols, 2_400_000).unwrap();
        assert_eq!(applied.method, Method::MaxFreq);
        assert_eq!(file(t.path(), 1, "scaling_max_freq"), "2400000");
        assert_eq!(file(t.path(), 1, "scaling_governor"), "powersave");
        cf.restore(&saved).unwrap();
        assert_eq!(before, all_files(t.path()));
    }

    #[test]
    fn ghz_rounding_matches_listed_frequency_and_unlisted_is_refused() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 1, "userspace performance", &FREQS);
        let cf = Cpufreq::new(t.path());
        let pols = cf.policies().unwrap();
        // 2.4 GHz written as 2.3999999 still names the listed 2400000 kHz.
        assert_eq!(pols[0].match_frequency(2_399_999).unwrap(), 2_400_000);
        let err = cf.apply(&pols, 2_000_000).unwrap_err().to_string();
        assert!(
            err.contains("2000000 kHz is not offered") && err.contains("1200000 1800000"),
            "{err}"
        );
        // Nothing was written on refusal.
        assert_eq!(file(t.path(), 0, "scaling_governor"), "performance");
    }

    #[test]
    fn job_cpus_select_only_policies_inside_the_job() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 4, "userspace performance", &FREQS);
        // policy3 spans CPUs 3 and 4; a job holding only CPU 3 must not touch it.
        fs::write(
            t.path()
                .join("devices/system/cpu/cpufreq/policy3/affected_cpus"),
            "3-4\n",
        )
        .unwrap();
        let cf = Cpufreq::new(t.path());
        let ids: Vec<u32> = cf
            .policies_for(Some(&[1, 3]))
            .unwrap()
            .iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, vec![1]);
        let pols = cf.policies_for(Some(&[1, 3])).unwrap();
        cf.apply(&pols, 3_000_000).unwrap();
        assert_eq!(file(t.path(), 0, "scaling_governor"), "performance");
        assert_eq!(file(t.path(), 1, "scaling_setspeed"), "3000000");
        assert_eq!(file(t.path(), 3, "scaling_governor"), "performance");
        assert!(matches!(
            cf.policies_for(Some(&[3])),
            Err(CpufreqError::NoJobPolicies(_))
        ));
    }

    #[test]
    fn restore_crosses_bounds_in_a_safe_order() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 1, "performance powersave", &FREQS);
        let cf = Cpufreq::new(t.path());
        let saved = vec![PolicySettings {
            id: 0,
            governor: "performance".into(),
            min_khz: 2_400_000,
            max_khz: 3_000_000,
            setspeed_khz: None,
        }];
        fs::write(
            t.path()
                .join("devices/system/cpu/cpufreq/policy0/scaling_max_freq"),
            "1200000\n",
        )
        .unwrap();
        cf.restore(&saved).unwrap();
        assert_eq!(file(t.path(), 0, "scaling_min_freq"), "2400000");
        assert_eq!(file(t.path(), 0, "scaling_max_freq"), "3000000");
        assert_eq!(file(t.path(), 0, "scaling_governor"), "performance");
    }

    #[test]
    fn missing_tree_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let err = Cpufreq::new(t.path()).policies().unwrap_err().to_string();
        assert!(
            err.ends_with("devices/system/cpu/cpufreq: no cpufreq policies found"),
            "{err}"
        );
    }

    #[test]
    fn ghz_conversion_rejects_nonsense() {
        assert_eq!(ghz_to_khz(2.4), Some(2_400_000));
        assert_eq!(ghz_to_khz(f64::NAN), None);
        assert_eq!(ghz_to_khz(-1.0), None);
    }
}
