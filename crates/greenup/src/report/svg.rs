//! SVG plots for `greenup report --plot`: the landscape the policy searched
//! (predicted time against energy, the Pareto front, the caps, the choice and
//! the baseline), and EE against node count.
//!
//! plotters' SVG backend writes text as SVG `<text>` elements, so no font
//! library is linked; the viewer's font draws the labels.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::ReportError;
use super::landscape::{EeCurves, Kind, Landscape};

const WIDTH: u32 = 960;
/// Curve colours that stay apart on white and for common colour blindness.
const CURVES: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(120, 94, 20),
];
const HEIGHT: u32 = 640;

fn plot_err<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// A display unit for an axis: the divisor and its name.
fn energy_unit(max_j: f64) -> (f64, &'static str) {
    if max_j >= 1e9 {
        (1e9, "GJ")
    } else if max_j >= 1e6 {
        (1e6, "MJ")
    } else if max_j >= 1e3 {
        (1e3, "kJ")
    } else {
        (1.0, "J")
    }
}

fn time_unit(max_s: f64) -> (f64, &'static str) {
    if max_s >= 3.0 * 3600.0 {
        (3600.0, "h")
    } else if max_s >= 180.0 {
        (60.0, "min")
    } else {
        (1.0, "s")
    }
}

/// A padded range around `lo..hi` that is never empty.
fn padded(lo: f64, hi: f64) -> (f64, f64) {
    let span = (hi - lo).abs().max(hi.abs() * 0.05).max(1e-9);
    ((lo - 0.08 * span).max(0.0), hi + 0.08 * span)
}

/// A chart on f64 axes, as [`chart`] hands it to the code that draws the series.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The frame every greenup plot shares.
struct Frame<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    /// Room left of the plot for the y labels, in pixels.
    y_label_area: u32,
    x: (f64, f64),
    y: (f64, f64),
    /// Label only whole numbers on the x axis (node counts).
    x_integers: bool,
}

/// An SVG document: white page, caption, light mesh with the axis names, whatever
/// `draw` adds, then the legend box at the upper right.
fn chart(
    f: &Frame,
    draw: impl FnOnce(&mut Chart) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(f.title, ("sans-serif", 22))
            .margin(18)
            .x_label_area_size(50)
            .y_label_area_size(f.y_label_area)
            .build_cartesian_2d(f.x.0..f.x.1, f.y.0..f.y.1)
            .map_err(plot_err)?;
        let integers = |v: &f64| {
            if (v - v.round()).abs() < 1e-6 {
                format!("{}", v.round())
            } else {
                String::new()
            }
        };
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(RGBColor(244, 244, 244))
            .x_desc(f.x_desc)
            .y_desc(f.y_desc)
            .axis_desc_style(("sans-serif", 16))
            .label_style(("sans-serif", 13));
        if f.x_integers {
            mesh.x_label_formatter(&integers);
        }
        mesh.draw().map_err(plot_err)?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(120, 120, 120))
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(buf)
}

/// The landscape plot as an SVG document.
pub fn landscape(l: &Landscape) -> Result<String, ReportError> {
    let mut ts: Vec<f64> = l.candidates.iter().map(|c| c.time_s).collect();
    let mut es: Vec<f64> = l.candidates.iter().map(|c| c.energy_j).collect();
    for (t, e) in l.chosen.iter().chain(l.baseline.iter()) {
        ts.push(*t);
        es.push(*e);
    }
    ts.retain(|v| v.is_finite());
    es.retain(|v| v.is_finite());
    if ts.is_empty() || es.is_empty() {
        return Err(ReportError::Plot(
            "nothing to plot: no candidate configurations".into(),
        ));
    }
    let (tmin, tmax) = ts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let (mut emin, mut emax) = es
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    // Show the energy cap when it is near the points; a far cap is named in the legend only.
    let cap_visible = l
        .energy_cap_j
        .is_some_and(|c| c <= emax * 1.5 && c >= emin * 0.5);
    if let (true, Some(c)) = (cap_visible, l.energy_cap_j) {
        emin = emin.min(c);
        emax = emax.max(c);
    }
    let (tdiv, tname) = time_unit(tmax);
    let (ediv, ename) = energy_unit(emax);
    let (x0, x1) = padded(tmin / tdiv, tmax / tdiv);
    let (y0, y1) = padded(emin / ediv, emax / ediv);

    let x_desc = format!("predicted time ({tname})");
    let y_desc = format!("predicted energy ({ename})");
    let frame = Frame {
        title: &l.title,
        x_desc: &x_desc,
        y_desc: &y_desc,
        y_label_area: 80,
        x: (x0, x1),
        y: (y0, y1),
        x_integers: false,
    };
    chart(&frame, |chart| {
        let pt = |t: f64, e: f64| (t / tdiv, e / ediv);
        let styles: [(Kind, &str, RGBAColor); 3] = [
            (
                Kind::Mixed,
                "mixed frequency vectors",
                RGBColor(150, 150, 150).mix(0.45),
            ),
            (
                Kind::Uniform,
                "uniform frequency",
                RGBColor(230, 140, 20).mix(0.9),
            ),
            (
                Kind::Sweep,
                "exact-sweep bounds",
                RGBColor(40, 110, 200).mix(0.8),
            ),
        ];
        for (kind, label, color) in styles {
            let pts: Vec<(f64, f64)> = l
                .candidates
                .iter()
                .filter(|c| c.kind == kind)
                .map(|c| pt(c.time_s, c.energy_j))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let size = if kind == Kind::Mixed { 2 } else { 3 };
            chart
                .draw_series(
                    pts.into_iter()
                        .map(move |p| Circle::new(p, size, color.filled())),
                )
                .map_err(plot_err)?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }

        let front: Vec<(f64, f64)> = l.front().into_iter().map(|(t, e)| pt(t, e)).collect();
        if front.len() > 1 {
            chart
                .draw_series(LineSeries::new(front, BLACK.stroke_width(2)))
                .map_err(plot_err)?
                .label("Pareto front")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                });
        }

        let red = RGBColor(210, 30, 30);
        if let Some(cap) = l.energy_cap_j {
            let label = format!("energy cap {}", super::text::fmt_energy(cap));
            if cap_visible {
                let y = cap / ediv;
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(x0, y), (x1, y)],
                        8,
                        5,
                        red.stroke_width(2),
                    ))
                    .map_err(plot_err)?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2))
                    });
            } else {
                chart
                    .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                    .map_err(plot_err)?
                    .label(format!("{label} (off the plot)"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2))
                    });
            }
        }
        if let Some(p) = l.power_cap_w {
            // E = P * T in display units: e/ediv = (p * tdiv / ediv) * (t/tdiv).
            let slope = p * tdiv / ediv;
            let green = RGBColor(20, 150, 60);
            let xa = x0.max(y0 / slope);
            let xb = x1.min(y1 / slope);
            let label = format!("power cap {} (E = P*T)", super::text::fmt_power(p));
            let seg = if xa < xb {
                vec![(xa, slope * xa), (xb, slope * xb)]
            } else {
                Vec::new()
            };
            let label = if seg.is_empty() {
                format!("{label}, off the plot")
            } else {
                label
            };
            chart
                .draw_series(DashedLineSeries::new(seg, 8, 5, green.stroke_width(2)))
                .map_err(plot_err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], green.stroke_width(2))
                });
        }
        if let Some((t, e)) = l.baseline {
            let p = pt(t, e);
            chart
                .draw_series(std::iter::once(TriangleMarker::new(p, 9, BLACK.filled())))
                .map_err(plot_err)?
                .label("baseline: all nodes at max frequency")
                .legend(|(x, y)| TriangleMarker::new((x + 10, y), 6, BLACK.filled()));
        }
        if let Some((t, e)) = l.chosen {
            let p = pt(t, e);
            chart
                .draw_series(std::iter::once(Circle::new(p, 8, red.filled())))
                .map_err(plot_err)?
                .label("chosen")
                .legend(move |(x, y)| Circle::new((x + 10, y), 6, red.filled()));
            chart
                .draw_series(std::iter::once(Circle::new(p, 12, BLACK.stroke_width(2))))
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

/// The EE-against-node-count plot as an SVG document, one curve per frequency.
pub fn ee_vs_nodes(c: &EeCurves) -> Result<String, ReportError> {
    let pts: Vec<_> = c.points.iter().filter(|p| p.ee.is_finite()).collect();
    if pts.is_empty() {
        return Err(ReportError::Plot(
            "nothing to plot: the model defines no EE".into(),
        ));
    }
    let nmin = pts.iter().map(|p| p.nodes).min().unwrap_or(1) as f64;
    let nmax = pts.iter().map(|p| p.nodes).max().unwrap_or(1) as f64;
    let emax = pts.iter().map(|p| p.ee).fold(0.0f64, f64::max);
    let emin = pts.iter().map(|p| p.ee).fold(f64::INFINITY, f64::min);
    let (y0, y1) = padded(emin, emax.max(1.0));
    let (x0, x1) = (nmin - 0.5, nmax + 0.5);
    let mut freqs: Vec<f64> = pts.iter().map(|p| p.freq_ghz).collect();
    freqs.sort_by(|a, b| b.total_cmp(a));
    freqs.dedup_by(|a, b| (*a - *b).abs() < 1e-9);

    let frame = Frame {
        title: &c.title,
        x_desc: "nodes (p)",
        y_desc: "EE = E1 / Ep",
        y_label_area: 70,
        x: (x0, x1),
        y: (y0, y1),
        x_integers: true,
    };
    chart(&frame, |chart| {
        for (i, f) in freqs.iter().enumerate() {
            let color = CURVES[i % CURVES.len()].to_rgba();
            let mut line: Vec<(f64, f64)> = pts
                .iter()
                .filter(|p| (p.freq_ghz - f).abs() < 1e-9)
                .map(|p| (p.nodes as f64, p.ee))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(plot_err)?
                .label(format!("{f:.2} GHz"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    line.into_iter()
                        .map(move |p| Circle::new(p, 3, color.filled())),
                )
                .map_err(plot_err)?;
        }
        if let Some((n, ee)) = c.chosen {
            let red = RGBColor(210, 30, 30);
            chart
                .draw_series(std::iter::once(Circle::new(
                    (n as f64, ee),
                    8,
                    red.filled(),
                )))
                .map_err(plot_err)?
                .label("chosen")
                .legend(move |(x, y)| Circle::new((x + 10, y), 6, red.filled()));
        }
        Ok(())
    })
}
