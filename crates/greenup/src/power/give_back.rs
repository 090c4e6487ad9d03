//! Stranded power given back (`power.give_back_after_s`): a running job whose nodes have
//! drawn well below its grant for a while keeps its highest measured power plus a
//! headroom, and Slurm's queue gets the rest. Slurm lets an operator change a running
//! job's license counts (slurmctld's job update, both 22.05 and 24.11), so greenupd, as
//! root or the SlurmUser, lowers the job's greenup licenses once every node's RAPL
//! limit holds the smaller share. The rules live here; greenupd follows the reports.

use greenup_core::quantity::Watts;

use crate::site::PowerSettings;

/// A give-back must return at least this share of the job's grant: smaller changes
/// would churn the queue and the nodes' limits for nothing.
pub const MIN_GAIN: f64 = 0.05;

/// The whole watts a job keeps of its `granted_w` when its used nodes' highest measured
/// powers over the judged stretch are `peaks_w`: their sum plus `headroom` (a share),
/// never below `floor_w` (what its nodes draw at their lowest clock, the least the
/// queue grants), rounded up. None when that returns less than [`MIN_GAIN`] of the
/// grant, or a peak is not a finite number of watts.
pub fn kept_w(
    granted_w: Watts,
    peaks_w: impl IntoIterator<Item = Watts>,
    floor_w: Watts,
    headroom: f64,
) -> Option<Watts> {
    let mut sum = 0.0;
    for Watts(p) in peaks_w {
        if !(p.is_finite() && p >= 0.0) {
            return None;
        }
        sum += p;
    }
    let kept = (sum * (1.0 + headroom.max(0.0))).max(floor_w.0).ceil();
    let granted = granted_w.0;
    (granted.is_finite() && kept.is_finite() && granted - kept >= MIN_GAIN * granted)
        .then_some(Watts(kept))
}

/// The job's Slurm license list (`squeue -o %W`: `name:count` items, comma-separated)
/// with greenup's site license and its partition's license set to `watts`; every other
/// license the job holds is kept as it is. None when the list holds none of greenup's.
pub fn licenses_with(
    list: &str,
    power: &PowerSettings,
    partition: Option<&str>,
    watts: u64,
) -> Option<String> {
    let site = power.license_for(None);
    let part = partition.map(|p| power.license_for(Some(p)));
    let mut found = false;
    let items: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "(null)")
        .map(|item| {
            let name = item.split([':', '*']).next().unwrap_or(item);
            if name == site || Some(name) == part.as_deref() {
                found = true;
                format!("{name}:{watts}")
            } else {
                item.to_string()
            }
        })
        .collect();
    found.then(|| items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_keeps_its_peak_and_headroom_in_whole_watts_above_its_floor() {
        let kept = |granted, peaks: &[f64], floor, headroom| {
            kept_w(
                Watts(granted),
                peaks.iter().copied().map(Watts),
                Watts(floor),
                headroom,
            )
            .map(|w| w.0)
        };
        // Two nodes peaking at 41 and 43.5 W: 84.5 x 1.2 = 101.4, kept 102 of 320.
        assert_eq!(kept(320.0, &[41.0, 43.5], 90.0, 0.2), Some(102.0));
        // The floor wins over a lower peak.
        assert_eq!(kept(320.0, &[10.0, 10.0], 90.0, 0.2), Some(90.0));
        // 300 of 320 returns 20 W, 6.25 %: given; 310 returns 3 %: not.
        assert_eq!(kept(320.0, &[250.0], 0.0, 0.2), Some(300.0));
        assert_eq!(kept(320.0, &[258.0], 0.0, 0.2), None);
        // A job drawing its grant keeps it; a broken peak gives nothing back.
        assert_eq!(kept(160.0, &[160.0], 45.0, 0.0), None);
        assert_eq!(kept(160.0, &[f64::NAN], 45.0, 0.0), None);
        assert_eq!(kept(160.0, &[-1.0], 45.0, 0.0), None);
    }

    #[test]
    fn only_greenups_licenses_change_and_others_are_kept() {
        let p = PowerSettings::default();
        assert_eq!(
            licenses_with(
                "matlab:2,greenup_w:160,greenup_w_debug:160",
                &p,
                Some("debug"),
                60
            )
            .as_deref(),
            Some("matlab:2,greenup_w:60,greenup_w_debug:60")
        );
        // Another partition's license with greenup's prefix is not this job's cap.
        assert_eq!(
            licenses_with("greenup_w:160,greenup_w_gpu:160", &p, None, 60).as_deref(),
            Some("greenup_w:60,greenup_w_gpu:160")
        );
        assert_eq!(licenses_with("matlab:2", &p, None, 60), None);
        assert_eq!(licenses_with("(null)", &p, None, 60), None);
    }
}
