//! `greenup power`: each power cap now (its watts, the watts granted under it, the watts
//! its nodes draw, the stranded watts granted but not drawn) and over the last hours, as
//! tables, `--json`, or an SVG plot. The figures are cluster totals, so anyone may read them.

use std::path::{Path, PathBuf};

use greenup_core::quantity::Watts;
use greenup_proto::live_power::{CapTimeline, HOURS_KEPT, PowerPoint, PowerView};
use plotters::prelude::*;

use crate::daemon_cmds::{DaemonConn, remote, table};
use crate::{Failure, Outcome, emit, print_json};

/// Options of `greenup power`.
#[derive(Debug, Clone, clap::Args)]
pub struct PowerArgs {
    #[command(flatten)]
    pub conn: DaemonConn,
    /// Hours of timeline to show (at most the 6 greenupd keeps).
    #[arg(long, default_value_t = HOURS_KEPT)]
    pub hours: f64,
    /// Rows of timeline per cap in the text output (neighbouring points averaged).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub rows: u32,
    /// Also draw the timeline of every cap into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Run `greenup power`.
pub fn run(a: &PowerArgs) -> Outcome {
    if !(a.hours.is_finite() && a.hours > 0.0 && a.hours <= HOURS_KEPT) {
        return Err(Failure::option(
            "--hours",
            a.hours,
            format!("hours above 0, at most {HOURS_KEPT}"),
        ));
    }
    let view = a
        .conn
        .client()?
        .power_status(Some(a.hours))
        .map_err(remote)?;
    if let Some(file) = &a.plot {
        plot(&view, file)?;
    }
    if a.conn.json {
        return print_json(&view);
    }
    emit(text(&view, a.rows as usize).trim_end());
    Ok(())
}

fn w(v: Watts) -> String {
    format!("{:.0}", v.0)
}

fn cap_w(v: Option<Watts>) -> String {
    v.map_or_else(|| "none".into(), w)
}

/// Unix seconds as the UTC time of day.
fn clock(t: i64) -> String {
    let s = t.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The present and the timelines as text tables.
fn text(v: &PowerView, rows: usize) -> String {
    let mut out = format!(
        "power at {} UTC (nodes report every {} s; warning after {} s over the grant)\n",
        clock(v.at),
        v.interval_s.0,
        v.over_grant_window_s.0
    );
    let mut t = table(&[
        "CAP",
        "CAP_W",
        "GRANTED_W",
        "MEASURED_W",
        "GPU_W",
        "STRANDED_W",
        "GIVEN_BACK_W",
        "NODES",
        "OVER_GRANT",
    ]);
    for c in &v.caps {
        t.add_row(vec![
            c.scope.clone(),
            cap_w(c.cap_w),
            w(c.granted_w),
            w(c.measured_w),
            w(c.measured_gpu_w),
            w(c.stranded_w),
            w(c.given_back_w),
            match c.unopened_nodes {
                0 => c.nodes.to_string(),
                u => format!("{} ({u} unopened)", c.nodes),
            },
            c.over_grant_since
                .map_or_else(|| "-".into(), |s| format!("since {}", clock(s))),
        ]);
    }
    out.push_str(&format!("{t}\n"));
    if rows == 0 {
        return out;
    }
    for line in &v.timelines {
        let (step, points) = thinned(line, rows);
        out.push_str(&format!(
            "\n{}: {} points, one per {:.0} s\n",
            line.scope,
            points.len(),
            step
        ));
        if points.is_empty() {
            out.push_str("  no reports in this span\n");
            continue;
        }
        let mut t = table(&["UTC", "CAP_W", "GRANTED_W", "MEASURED_W", "STRANDED_W"]);
        for p in points {
            t.add_row(vec![
                clock(p.t),
                cap_w(p.cap_w),
                w(p.granted_w),
                w(p.measured_w),
                w(p.stranded_w),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    out
}

/// At most `rows` points, neighbours averaged; with the span each then covers.
fn thinned(line: &CapTimeline, rows: usize) -> (f64, Vec<PowerPoint>) {
    let per = line.points.len().div_ceil(rows.max(1)).max(1);
    let points = line
        .points
        .chunks(per)
        .map(|c| {
            let n = c.len() as f64;
            let mean = |f: fn(&PowerPoint) -> Watts| c.iter().map(f).sum::<Watts>() / n;
            PowerPoint {
                t: c[c.len() - 1].t,
                measured_w: mean(|p| p.measured_w),
                granted_w: mean(|p| p.granted_w),
                cap_w: c[c.len() - 1].cap_w,
                stranded_w: mean(|p| p.stranded_w),
            }
        })
        .collect();
    (line.step_s.0 * per as f64, points)
}

const WIDTH: u32 = 960;
const PANEL_HEIGHT: u32 = 360;
/// Line colours that stay apart on white and for common colour blindness.
const CAP: RGBColor = RGBColor(213, 94, 0);
const GRANTED: RGBColor = RGBColor(0, 114, 178);
const MEASURED: RGBColor = RGBColor(0, 158, 115);
const STRANDED: RGBColor = RGBColor(150, 150, 150);

/// Draw each cap's timeline, one panel per cap, into `file` (written whole or not at all).
fn plot(v: &PowerView, file: &Path) -> Outcome {
    let fail = |e: &dyn std::fmt::Display| {
        Failure::Runtime(format!("cannot draw {}: {e}", file.display()))
    };
    let doc = svg(v).map_err(|e| fail(&e))?;
    greenup_core::fs::write_atomic(file, doc.as_bytes()).map_err(|e| fail(&e))
}

fn svg(v: &PowerView) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut buf = String::new();
    {
        let height = PANEL_HEIGHT * v.timelines.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let panels = root.split_evenly((v.timelines.len().max(1), 1));
        for (line, area) in v.timelines.iter().zip(panels.iter()) {
            panel(line, v.at, area)?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(buf)
}

/// One cap's panel: watts against hours before now.
fn panel(
    line: &CapTimeline,
    at: i64,
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let hours = |p: &PowerPoint| (p.t - at) as f64 / 3600.0;
    let x0 = line.points.first().map_or(-1.0, hours).min(-1.0 / 60.0);
    let top = line
        .points
        .iter()
        .flat_map(|p| [p.measured_w.0, p.granted_w.0, p.cap_w.map_or(0.0, |w| w.0)])
        .fold(1.0_f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("power cap '{}'", line.scope), ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..0.0, 0.0..top * 1.08)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(244, 244, 244))
        .x_desc("hours before now")
        .y_desc("W")
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(|e| err(&e))?;
    type Get = fn(&PowerPoint) -> Option<f64>;
    let series: [(&str, RGBColor, Get); 4] = [
        ("cap", CAP, |p| p.cap_w.map(|w| w.0)),
        ("granted", GRANTED, |p| Some(p.granted_w.0)),
        ("measured", MEASURED, |p| Some(p.measured_w.0)),
        ("stranded", STRANDED, |p| Some(p.stranded_w.0)),
    ];
    for (name, colour, get) in series {
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| get(p).map(|y| (hours(p), y)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(120, 120, 120))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup_core::quantity::Seconds;
    use greenup_proto::live_power::CapPower;

    fn view(points: usize) -> PowerView {
        let p = |i: usize| PowerPoint {
            t: 1_795_000_000 + 5 * i as i64,
            measured_w: Watts(100.0 * i as f64),
            granted_w: Watts(1000.0),
            cap_w: Some(Watts(2000.0)),
            stranded_w: Watts((1000.0 - 100.0 * i as f64).max(0.0)),
        };
        PowerView {
            at: 1_795_000_000 + 5 * points as i64,
            interval_s: Seconds(5.0),
            over_grant_window_s: Seconds(60.0),
            caps: vec![CapPower {
                scope: "site".into(),
                cap_w: Some(Watts(2000.0)),
                granted_w: Watts(1000.0),
                measured_w: Watts(400.0),
                measured_gpu_w: Watts(0.0),
                stranded_w: Watts(600.0),
                nodes: 4,
                over_grant_since: None,
                over_grant_episodes: 0,
                given_back_w: Watts(0.0),
                unopened_nodes: 0,
            }],
            timelines: vec![CapTimeline {
                scope: "site".into(),
                step_s: Seconds(5.0),
                points: (0..points).map(p).collect(),
            }],
        }
    }

    #[test]
    fn text_averages_neighbours_into_the_rows_asked() {
        let v = view(4);
        let (step, rows) = thinned(&v.timelines[0], 2);
        // (0 + 100) / 2 and (200 + 300) / 2 W measured; stranded (1000 + 900) / 2, (800 + 700) / 2.
        assert_eq!(step, 10.0);
        let m: Vec<(f64, f64)> = rows
            .iter()
            .map(|p| (p.measured_w.0, p.stranded_w.0))
            .collect();
        assert_eq!(m, vec![(50.0, 950.0), (250.0, 750.0)]);
        let out = text(&v, 2);
        assert!(out.contains("site: 2 points, one per 10 s"), "{out}");
        assert!(out.contains("600"), "{out}");
    }

    #[test]
    fn the_plot_is_an_svg_with_every_series() {
        let doc = svg(&view(30)).unwrap();
        assert!(doc.starts_with("<svg"));
        for name in [
            "cap",
            "granted",
            "measured",
            "stranded",
            "power cap",
            "site",
        ] {
            assert!(doc.contains(name), "{name}");
        }
        // No points yet: still a plot, of nothing.
        assert!(svg(&view(0)).unwrap().starts_with("<svg"));
    }
}
