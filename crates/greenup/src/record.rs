//! One vocabulary for a job's record: what was asked (`OpenJob`), what was decided
//! (`Decision`, `Verdict`), what each node measured (`NodeOutcome`, `Source`), whether
//! each node's setting took (`Applied`) and how the job ended (`JobEnd`, `RunState`).
//! The types are the wire's ([`greenup_wire::record`], re-exported here), so the protocol
//! carries them without linking the library; the rules that decide with them live here:
//! which runs are too short to compare ([`ran_far_shorter`]).

pub use greenup_wire::record::*;

/// A run shorter than this fraction of its predicted time is an outlier
/// (an early crash, a wrong input deck), not a lesson about the model.
pub const SHORT_FRACTION: f64 = 0.5;

/// Whether a run of `time_s` seconds was far shorter than the `predicted_s` it was
/// planned for: the one rule refinement and reports both use.
pub fn ran_far_shorter(time_s: f64, predicted_s: f64) -> bool {
    predicted_s.is_finite() && time_s < SHORT_FRACTION * predicted_s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_run_rule_is_half_the_prediction() {
        assert!(ran_far_shorter(49.9, 100.0));
        assert!(!ran_far_shorter(50.0, 100.0));
        assert!(!ran_far_shorter(1.0, f64::NAN));
    }
}
