//! The site config's `power:` section: how the site's and the partitions' power caps are
//! held (greenupd's ledger alone, or Slurm's queue and each node's RAPL limit), and how
//! often the nodes report measured power. Every error names the file, line, key and
//! value, and says what is valid.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::check::{Checker, shown};
use crate::input::{InputError, Spanned};

pub use greenup_wire::power::REPORT_PERIOD_S;

/// How the power caps are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PowerEnforce {
    /// greenupd's ledger of predicted watts alone: nothing waits, nothing is limited in
    /// hardware (for sites without Slurm licenses; the default).
    #[default]
    Ledger,
    /// Jobs hold their watts as Slurm licenses, so a job that does not fit the power left
    /// waits PENDING in Slurm's queue, and each node is held to its share of its job's
    /// watts by its RAPL long-term limit.
    Queue,
    /// As `queue`, but the site cap and each rack's (`power.racks`) are one Slurm
    /// hierarchical resource (Slurm 25.05+, `resources.yaml`), counted per node: a job
    /// waits until every layer its nodes sit under has its watts.
    Hres,
}

impl PowerEnforce {
    /// The word the config and the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            PowerEnforce::Ledger => "ledger",
            PowerEnforce::Queue => "queue",
            PowerEnforce::Hres => "hres",
        }
    }

    /// Whether Slurm holds the caps (jobs hold watts Slurm granted them), not greenupd's
    /// ledger alone.
    pub fn in_slurm(self) -> bool {
        matches!(self, PowerEnforce::Queue | PowerEnforce::Hres)
    }
}

/// A rack under its own power cap (`power.racks`, held under `power.enforce: hres`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rack {
    /// The rack's nodes, expanded from hostlist syntax.
    pub nodes: Vec<String>,
    /// The rack's power cap, watts.
    pub power_cap_w: f64,
}

/// The `power:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerSettings {
    /// How the caps are held.
    pub enforce: PowerEnforce,
    /// The Slurm license that counts the site cap's watts; a capped partition P counts
    /// its own under `LICENSE_P`. One license is one watt.
    pub license: String,
    /// Share of each cap (0-0.5) kept out of the licenses, for power drawn outside jobs.
    pub reserve: f64,
    /// The RAPL time window set with each node's long-term limit, in seconds.
    pub rapl_window_s: f64,
    /// The short-term limit as a multiple of the node's long-term share; None leaves the
    /// short-term limit as the node had it.
    pub short_term: Option<f64>,
    /// The short-term limit's time window, in milliseconds.
    pub short_window_ms: f64,
    /// How often each node reports its measured power to greenupd, in seconds.
    pub meter_interval_s: f64,
    /// How long a cap's measured power may stay above the watts granted under it before
    /// greenupd logs a warning, in seconds.
    pub over_grant_window_s: f64,
    /// How often each node sends its samples to greenupd, in seconds (a batch a period).
    pub report_period_s: f64,
    /// How long a running job's nodes must draw well below its grant before greenupd gives
    /// the unused watts back to Slurm's queue, in seconds; None: never.
    pub give_back_after_s: Option<f64>,
    /// The share above a job's highest measured power that a give-back leaves it.
    pub give_back_headroom: f64,
    /// Which monitor jobs run at a clock no run has measured yet, so greenup learns its
    /// nodes' watts there; None (the default): none do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_clocks: Option<SampleClocks>,
    /// Racks under their own power caps, by name (only under `enforce: hres`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub racks: std::collections::BTreeMap<String, Rack>,
}

/// `power.sample_clocks`: a share of monitor jobs runs every node of one of its types at
/// a clock with too few measured runs, so that clock's watts are measured rather than
/// taken from the site's model. Each such job costs at most `max_slowdown` of its
/// time, as its profile predicts; jobs without a profile are never sampled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampleClocks {
    /// Share of monitor jobs (0-1) sampled, chosen by a hash of the job id.
    pub fraction: f64,
    /// The most a sample may lengthen a job, as a fraction of its predicted time with
    /// every node at f_max (0.1: 10 % longer).
    pub max_slowdown: f64,
}

impl SampleClocks {
    /// `power.sample_clocks.fraction` when the section omits it.
    pub const DEFAULT_FRACTION: f64 = 0.02;
    /// `power.sample_clocks.max_slowdown` when the section omits it.
    pub const DEFAULT_MAX_SLOWDOWN: f64 = 0.1;
}

impl Default for PowerSettings {
    fn default() -> Self {
        PowerSettings {
            enforce: PowerEnforce::Ledger,
            license: DEFAULT_LICENSE.to_string(),
            reserve: 0.0,
            rapl_window_s: 1.0,
            short_term: None,
            short_window_ms: 10.0,
            meter_interval_s: 5.0,
            over_grant_window_s: 60.0,
            report_period_s: REPORT_PERIOD_S,
            give_back_after_s: None,
            give_back_headroom: 0.2,
            sample_clocks: None,
            racks: Default::default(),
        }
    }
}

/// The site cap's license when the config names none.
pub const DEFAULT_LICENSE: &str = "greenup_w";

impl PowerSettings {
    /// The license counting the watts of partition `partition`'s cap (None: the site's).
    pub fn license_for(&self, partition: Option<&str>) -> String {
        match partition {
            Some(p) => format!("{}_{p}", self.license),
            None => self.license.clone(),
        }
    }

    /// Watts of a cap of `cap_w` that Slurm may grant to jobs: the cap less the reserve,
    /// rounded down to whole licenses.
    pub fn grantable_w(&self, cap_w: f64) -> u64 {
        (cap_w * (1.0 - self.reserve)).floor().max(0.0) as u64
    }
}

/// `power:` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPowerSection {
    #[serde(default)]
    enforce: Option<Spanned<Value>>,
    #[serde(default)]
    license: Option<Spanned<Value>>,
    #[serde(default)]
    reserve: Option<Spanned<Value>>,
    #[serde(default)]
    rapl_window_s: Option<Spanned<Value>>,
    #[serde(default)]
    short_term: Option<Spanned<Value>>,
    #[serde(default)]
    short_window_ms: Option<Spanned<Value>>,
    #[serde(default)]
    meter_interval_s: Option<Spanned<Value>>,
    #[serde(default)]
    over_grant_window_s: Option<Spanned<Value>>,
    #[serde(default)]
    report_period_s: Option<Spanned<Value>>,
    #[serde(default)]
    give_back_after_s: Option<Spanned<Value>>,
    #[serde(default)]
    give_back_headroom: Option<Spanned<Value>>,
    #[serde(default)]
    sample_clocks: Option<Spanned<RawSampleClocks>>,
    /// Read by the site's loader, which knows the nodes.
    #[serde(default)]
    pub(super) racks: std::collections::BTreeMap<String, Spanned<RawRack>>,
}

/// One of `power.racks` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRack {
    pub(super) nodes: Spanned<Value>,
    pub(super) power_cap: Spanned<Value>,
}

/// `power.sample_clocks:` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSampleClocks {
    #[serde(default)]
    fraction: Option<Spanned<Value>>,
    #[serde(default)]
    max_slowdown: Option<Spanned<Value>>,
}

/// Whether `s` can name a Slurm license greenup adds partition names to: letters,
/// digits and `_`, starting with a letter (Slurm splits license lists on `,` and `:`).
fn is_license(s: &str) -> bool {
    s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl RawPowerSection {
    /// Where `power.enforce` is written, for errors about the mode as a whole.
    pub(super) fn enforce_span(&self) -> Option<Spanned<Value>> {
        self.enforce.clone()
    }
}

impl Checker<'_> {
    /// The `power:` section; its defaults when absent.
    pub(super) fn power_settings(&self, raw: RawPowerSection) -> Result<PowerSettings, InputError> {
        let d = PowerSettings::default();
        let enforce = self.choice(
            &raw.enforce,
            "power.enforce",
            &[
                ("ledger", PowerEnforce::Ledger),
                ("queue", PowerEnforce::Queue),
                ("hres", PowerEnforce::Hres),
            ],
            d.enforce,
        )?;
        let license = match &raw.license {
            Some(v) => {
                let valid = "a Slurm license name of letters, digits and _, starting with a letter, at most 64 long, e.g. greenup_w";
                let s = self.text(v, "power.license", valid)?;
                if !is_license(&s) {
                    return Err(self.err(v, "power.license", &s, valid));
                }
                s
            }
            None => d.license,
        };
        let number =
            |v: &Option<Spanned<Value>>, key: &str, lo: f64, hi: f64, dflt: f64, what: &str| {
                let Some(v) = v else { return Ok(dflt) };
                v.value
                    .as_f64()
                    .filter(|x| x.is_finite() && (lo..=hi).contains(x))
                    .ok_or_else(|| {
                        self.err(
                            v,
                            key,
                            shown(&v.value),
                            format!("{what} in {lo}-{hi}, e.g. {dflt}"),
                        )
                    })
            };
        let short_term = match &raw.short_term {
            Some(_) => Some(number(
                &raw.short_term,
                "power.short_term",
                1.0,
                3.0,
                1.2,
                "a multiple of the node's long-term limit",
            )?),
            None => None,
        };
        let meter_interval_s = number(
            &raw.meter_interval_s,
            "power.meter_interval_s",
            1.0,
            300.0,
            d.meter_interval_s,
            "seconds",
        )?;
        let report_period_s = number(
            &raw.report_period_s,
            "power.report_period_s",
            meter_interval_s,
            600.0,
            d.report_period_s.max(meter_interval_s),
            "seconds, at least power.meter_interval_s,",
        )?;
        // A give-back judges a job on at least two of its nodes' reports.
        let give_back_after_s = match &raw.give_back_after_s {
            Some(_) => Some(number(
                &raw.give_back_after_s,
                "power.give_back_after_s",
                2.0 * report_period_s,
                86_400.0,
                (2.0 * report_period_s).max(600.0),
                "seconds, at least twice power.report_period_s,",
            )?),
            None => None,
        };
        let sample_clocks = match raw.sample_clocks {
            Some(c) => Some(SampleClocks {
                fraction: number(
                    &c.value.fraction,
                    "power.sample_clocks.fraction",
                    0.0,
                    1.0,
                    SampleClocks::DEFAULT_FRACTION,
                    "a share of monitor jobs",
                )?,
                max_slowdown: number(
                    &c.value.max_slowdown,
                    "power.sample_clocks.max_slowdown",
                    0.0,
                    1.0,
                    SampleClocks::DEFAULT_MAX_SLOWDOWN,
                    "a fraction of the job's time at f_max",
                )?,
            }),
            None => None,
        };
        Ok(PowerSettings {
            sample_clocks,
            enforce,
            license,
            reserve: number(
                &raw.reserve,
                "power.reserve",
                0.0,
                0.5,
                d.reserve,
                "a share of each cap",
            )?,
            rapl_window_s: number(
                &raw.rapl_window_s,
                "power.rapl_window_s",
                0.001,
                60.0,
                d.rapl_window_s,
                "seconds",
            )?,
            short_term,
            short_window_ms: number(
                &raw.short_window_ms,
                "power.short_window_ms",
                0.1,
                1000.0,
                d.short_window_ms,
                "milliseconds",
            )?,
            meter_interval_s,
            over_grant_window_s: number(
                &raw.over_grant_window_s,
                "power.over_grant_window_s",
                1.0,
                86_400.0,
                d.over_grant_window_s,
                "seconds",
            )?,
            report_period_s,
            give_back_after_s,
            give_back_headroom: number(
                &raw.give_back_headroom,
                "power.give_back_headroom",
                0.0,
                1.0,
                d.give_back_headroom,
                "a share of the job's highest measured power",
            )?,
            racks: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn license_names_slurm_cannot_split() {
        assert!(is_license("greenup_w"));
        assert!(!is_license("greenup:w"));
        assert!(!is_license("a,b"));
        assert!(!is_license("_w"));
        assert!(!is_license(""));
    }

    #[test]
    fn each_bad_value_is_one_line_with_its_place_and_what_is_valid() {
        let bad = [
            (
                "power:\n  enforce: hardware\n",
                "2:12",
                "power.enforce",
                "ledger, queue or hres",
            ),
            ("power:\n  reserve: 0.9\n", "2:12", "power.reserve", "0-0.5"),
            (
                "power:\n  license: \"a,b\"\n",
                "2:12",
                "power.license",
                "letters, digits",
            ),
            (
                "power:\n  meter_interval_s: 0\n",
                "2:21",
                "power.meter_interval_s",
                "1-300",
            ),
            (
                "power:\n  short_term: 5\n",
                "2:15",
                "power.short_term",
                "1-3",
            ),
            (
                "power:\n  report_period_s: 10\n  give_back_after_s: 15\n",
                "3:22",
                "power.give_back_after_s",
                "20-86400",
            ),
            (
                "power:\n  give_back_headroom: 2\n",
                "2:23",
                "power.give_back_headroom",
                "0-1",
            ),
            (
                "power:\n  meter_interval_s: 30\n  report_period_s: 10\n",
                "3:20",
                "power.report_period_s",
                "30-600",
            ),
            (
                "power:\n  rapl_window: 1\n",
                "2:3",
                "rapl_window",
                "unknown field",
            ),
            (
                "power:\n  sample_clocks: {fraction: 1.5}\n",
                "2:29",
                "power.sample_clocks.fraction",
                "a share of monitor jobs in 0-1, e.g. 0.02",
            ),
            (
                "power:\n  sample_clocks:\n    max_slowdown: -0.1\n",
                "3:19",
                "power.sample_clocks.max_slowdown",
                "a fraction of the job's time at f_max in 0-1, e.g. 0.1",
            ),
            (
                "power:\n  sample_clocks: {fraction: lots}\n",
                "2:29",
                "power.sample_clocks.fraction",
                "value 'lots'",
            ),
            (
                "power:\n  sample_clocks: {share: 0.1}\n",
                "2:",
                "share",
                "unknown field",
            ),
        ];
        let base = "node_types: {x: {frequencies: [1.0, 2.0], power: {dynamic_w: 90, static_w: 10}}}\nnodes: {x: n1}\n";
        for (text, at, key, valid) in bad {
            let (line, col) = at.split_once(':').unwrap();
            let at = format!("{}:{col}", line.parse::<u32>().unwrap() + 2);
            let e = crate::site::parse("site.yaml", &format!("{base}{text}"))
                .unwrap_err()
                .to_string();
            assert!(!e.contains('\n'), "{e}");
            for part in [&format!("site.yaml:{at}")[..], key, valid] {
                assert!(e.contains(part), "{text:?}: {e} lacks {part:?}");
            }
        }
        let ok = crate::site::parse(
            "site.yaml",
            &format!("{base}power: {{enforce: queue, short_term: 1.5}}\n"),
        )
        .unwrap();
        assert_eq!(ok.power.enforce, PowerEnforce::Queue);
        assert_eq!(ok.power.short_term, Some(1.5));
        assert_eq!(
            crate::site::parse("s.yaml", base).unwrap().power,
            PowerSettings::default()
        );
        // Off unless written; a key left out takes its default.
        assert_eq!(PowerSettings::default().sample_clocks, None);
        let on = |text: &str| {
            crate::site::parse(
                "s.yaml",
                &format!("{base}power: {{sample_clocks: {text}}}\n"),
            )
            .unwrap()
            .power
            .sample_clocks
        };
        assert_eq!(
            on("{fraction: 0.05, max_slowdown: 0.2}"),
            Some(SampleClocks {
                fraction: 0.05,
                max_slowdown: 0.2
            })
        );
        assert_eq!(
            on("{}"),
            Some(SampleClocks {
                fraction: 0.02,
                max_slowdown: 0.1
            })
        );
        assert_eq!(on("{fraction: 0}").map(|c| c.fraction), Some(0.0));
    }

    #[test]
    fn racks_are_read_under_hres_and_each_mistake_is_one_line() {
        let base = "node_types: {x: {frequencies: [1.0, 2.0], power: {dynamic_w: 90, static_w: 10}}}\nnodes: {x: \"n[1-4]\"}\n";
        let parse = |text: &str| crate::site::parse("site.yaml", &format!("{base}{text}"));
        let ok = parse("power_cap: 400W\npower:\n  enforce: hres\n  racks:\n    r1: {nodes: \"n[1-2]\", power_cap: 200W}\n    r2: {nodes: n3, power_cap: 1kW}\n").unwrap();
        assert_eq!(ok.power.enforce, PowerEnforce::Hres);
        assert!(ok.power.enforce.in_slurm());
        assert_eq!(
            ok.power.racks["r1"],
            Rack {
                nodes: vec!["n1".into(), "n2".into()],
                power_cap_w: 200.0
            }
        );
        assert_eq!(ok.power.racks["r2"].power_cap_w, 1000.0);
        let bad = [
            (
                "power_cap: 400W\npower:\n  enforce: queue\n  racks:\n    r1: {nodes: n1, power_cap: 1kW}\n",
                "site.yaml:7:9",
                "racks only under power.enforce: hres",
            ),
            (
                "power:\n  enforce: hres\n",
                "site.yaml:4:12",
                "hres with a site `power_cap`",
            ),
            (
                "power_cap: 400W\npower:\n  enforce: hres\n  racks:\n    r1: {nodes: \"n[1-9]\", power_cap: 1kW}\n",
                "power.racks.r1.nodes",
                "node n5 is not in `nodes`",
            ),
            (
                "power_cap: 400W\npower:\n  enforce: hres\n  racks:\n    r1: {nodes: \"n[1-2]\", power_cap: 1kW}\n    r2: {nodes: \"n[2-3]\", power_cap: 1kW}\n",
                "power.racks.r2.nodes",
                "node n2 is already in rack r1",
            ),
            (
                "power_cap: 400W\npower:\n  enforce: hres\n  racks:\n    r1: {nodes: n1, power_cap: lots}\n",
                "power.racks.r1.power_cap",
                "a power above 0",
            ),
            (
                "power_cap: 400W\npower:\n  enforce: hres\n  racks:\n    r1: {nodes: n1}\n",
                "site.yaml:7",
                "power_cap",
            ),
        ];
        for (text, key, valid) in bad {
            let e = parse(text).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            for part in [key, valid] {
                assert!(e.contains(part), "{text:?}: {e} lacks {part:?}");
            }
        }
    }

    #[test]
    fn the_reserve_is_kept_out_of_whole_licenses() {
        let p = PowerSettings {
            reserve: 0.1,
            ..PowerSettings::default()
        };
        assert_eq!(p.grantable_w(1000.0), 900);
        assert_eq!(p.grantable_w(999.9), 899);
        assert_eq!(p.license_for(Some("debug")), "greenup_w_debug");
        assert_eq!(p.license_for(None), "greenup_w");
    }
}
