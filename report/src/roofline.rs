//! The roofline chart: achieved GFLOP/s against arithmetic intensity, log-log, with the measured
//! bandwidth and compute ceilings, one point per workload and implementation.

use plotters::backend::SVGBackend;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use crate::analysis::Analysis;
use crate::error::{ReportError, render};
use crate::input::Ceilings;
use crate::num::{short, si};
use crate::style::{FONT, colour, text, text_width};

const CHART: &str = "roofline.svg";
const PLOT_W: u32 = 1000;
const HEIGHT: u32 = 720;
const POINT_RADIUS: i32 = 5;

/// One point: a row with positive GFLOP/s and GB/s.
struct Point {
    ai: f64,
    gflops: f64,
    impl_index: usize,
    workload_number: usize,
}

/// Renders the roofline as SVG text. Rows with no positive GFLOP/s and GB/s are not drawn (the
/// Markdown report lists them); every other row of a workload tcc ran is one `<circle>`.
pub(crate) fn roofline_svg(analysis: &Analysis<'_>, ceilings: &Ceilings, device: &str) -> Result<String, ReportError> {
    let points = points(analysis);
    let bw = ceilings.bandwidth_gbps;
    let peaks: Vec<f64> = ceilings.compute.iter().map(|c| c.gflops).collect();
    let max_peak = peaks.iter().copied().fold(f64::MIN_POSITIVE, f64::max);

    let xs = points.iter().map(|p| p.ai).chain(peaks.iter().map(|p| p / bw));
    let ys = points.iter().map(|p| p.gflops).chain(peaks.iter().copied());
    let (x_lo, x_hi) = decade_bounds(xs, 2.0);
    let (y_lo, y_hi) = decade_bounds(ys, 4.0);

    let key_w = analysis
        .workloads
        .iter()
        .map(|g| text_width(&format!("{}  {}", g.number, g.name), 13))
        .max()
        .unwrap_or(0)
        .clamp(180, 460)
        + 30;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_W + key_w, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(render(CHART))?;
        let (left, right) = root.split_horizontally(PLOT_W);
        let mut chart = ChartBuilder::on(&left)
            .caption(format!("Roofline on {device}"), (FONT, 22))
            .margin(18)
            .x_label_area_size(56)
            .y_label_area_size(72)
            .build_cartesian_2d(
                (x_lo..x_hi).log_scale().with_key_points(decades(x_lo, x_hi)).with_light_points(minors(x_lo, x_hi)),
                (y_lo..y_hi).log_scale().with_key_points(decades(y_lo, y_hi)).with_light_points(minors(y_lo, y_hi)),
            )
            .map_err(render(CHART))?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity, FLOP per byte (= GFLOP/s / GB/s)")
            .y_desc("achieved GFLOP/s")
            .x_label_formatter(&|v| si(*v))
            .y_label_formatter(&|v| si(*v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(render(CHART))?;

        // Ceilings: the bandwidth diagonal up to the highest compute roof, each roof from its ridge.
        let roof = ShapeStyle::from(&RGBColor(60, 60, 60)).stroke_width(2);
        let bw_start = x_lo.max(y_lo / bw);
        let bw_end = x_hi.min(max_peak / bw).min(y_hi / bw);
        if bw_start < bw_end {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(bw_start, bw * bw_start), (bw_end, bw * bw_end)],
                    roof,
                )))
                .map_err(render(CHART))?;
            let first = format!("bandwidth {} GB/s", short(bw, 4));
            let second = format!("({})", ceilings.bandwidth_method);
            let width = text_width(&first, 14).max(text_width(&second, 14)) as i32;
            let (sx, sy) = chart.backend_coord(&(bw_start, bw * bw_start));
            let (ex, ey) = chart.backend_coord(&(bw_end, bw * bw_end));
            // Above-left of the diagonal is above the roof, so empty: end the label just left of
            // the line, far enough right that the text stays inside the plot.
            let want = (sx + width + 24).max((sx + ex) / 2).min(ex);
            let t = if ex == sx { 1.0 } else { f64::from(want - sx) / f64::from(ex - sx) };
            let py = sy + (f64::from(ey - sy) * t).round() as i32;
            root.draw(&Text::new(first, (want - 10, py - 22), text(14, HPos::Right, VPos::Bottom)))
                .map_err(render(CHART))?;
            root.draw(&Text::new(second, (want - 10, py - 4), text(14, HPos::Right, VPos::Bottom)))
                .map_err(render(CHART))?;
        }
        // Each compute roof is solid from its ridge on and dashed to its left, where its label
        // goes when it fits (above the diagonal nothing is plotted; at the right end the label
        // would collide with the points of compute-bound workloads).
        let guide = ShapeStyle::from(&RGBColor(150, 150, 150)).stroke_width(1);
        for c in &ceilings.compute {
            let ridge = x_lo.max(c.gflops / bw);
            if c.gflops < y_lo || c.gflops > y_hi || ridge >= x_hi {
                continue;
            }
            chart
                .draw_series(std::iter::once(PathElement::new(vec![(ridge, c.gflops), (x_hi, c.gflops)], roof)))
                .map_err(render(CHART))?;
            if ridge > x_lo {
                chart
                    .draw_series(DashedLineSeries::new(vec![(x_lo, c.gflops), (ridge, c.gflops)], 6, 5, guide))
                    .map_err(render(CHART))?;
            }
            let label = format!("{} {} GFLOP/s", c.label, short(c.gflops, 4));
            let (lx, y) = chart.backend_coord(&(x_lo, c.gflops));
            let (rx, _) = chart.backend_coord(&(ridge, c.gflops));
            let (ex, _) = chart.backend_coord(&(x_hi, c.gflops));
            let style = if lx + 8 + text_width(&label, 14) as i32 + 16 < rx {
                Text::new(label, (lx + 8, y - 5), text(14, HPos::Left, VPos::Bottom))
            } else {
                Text::new(label, (ex - 8, y - 5), text(14, HPos::Right, VPos::Bottom))
            };
            root.draw(&style).map_err(render(CHART))?;
        }

        // Points, one series per implementation: tcc's filled, peers' hollow.
        let tcc_names: Vec<&str> =
            analysis.workloads.iter().flat_map(|g| g.tcc.iter()).map(|r| r.implementation.as_str()).collect();
        for (i, name) in analysis.impls.iter().enumerate() {
            let is_tcc = tcc_names.contains(name);
            let c = colour(i);
            let style = if is_tcc { c.filled() } else { c.stroke_width(2) };
            let mine: Vec<&Point> = points.iter().filter(|p| p.impl_index == i).collect();
            if mine.is_empty() {
                continue;
            }
            chart
                .draw_series(mine.iter().map(|p| Circle::new((p.ai, p.gflops), POINT_RADIUS, style)))
                .map_err(render(CHART))?
                .label(*name)
                .legend(move |(x, y)| Rectangle::new([(x - 5, y - 5), (x + 5, y + 5)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(render(CHART))?;

        // Workload numbers under each workload's lowest point (above it is the roof and its
        // label), merged where points coincide and pushed down where labels would overlap.
        let mut anchors: Vec<((i32, i32), String)> = Vec::new();
        for g in &analysis.workloads {
            let low =
                points.iter().filter(|p| p.workload_number == g.number).min_by(|a, b| a.gflops.total_cmp(&b.gflops));
            let Some(low) = low else { continue };
            let (px, py) = chart.backend_coord(&(low.ai, low.gflops));
            match anchors.iter_mut().find(|((lx, ly), _)| (*lx - px).abs() < 12 && (*ly - py).abs() < 40) {
                Some(((_, ly), t)) => {
                    t.push_str(&format!(",{}", g.number));
                    *ly = (*ly).max(py);
                }
                None => anchors.push(((px, py), g.number.to_string())),
            }
        }
        for (x, y, t) in place_labels(anchors, 13) {
            root.draw(&Text::new(t, (x, y), text(13, HPos::Center, VPos::Top))).map_err(render(CHART))?;
        }

        // The key from workload numbers to names.
        right.draw(&Text::new("Workloads", (6, 60), text(16, HPos::Left, VPos::Top))).map_err(render(CHART))?;
        let n = analysis.workloads.len().max(1) as i32;
        let step = ((HEIGHT as i32 - 120) / n).clamp(8, 20);
        for (k, g) in analysis.workloads.iter().enumerate() {
            let y = 88 + step * k as i32;
            right
                .draw(&Text::new(format!("{}  {}", g.number, g.name), (6, y), text(13, HPos::Left, VPos::Top)))
                .map_err(render(CHART))?;
        }
        right
            .draw(&Text::new("filled: tcc; hollow: peers", (6, HEIGHT as i32 - 40), text(13, HPos::Left, VPos::Top)))
            .map_err(render(CHART))?;
        root.present().map_err(render(CHART))?;
    }
    Ok(svg)
}

/// The plottable rows of every workload, each tagged with its implementation's index.
fn points(analysis: &Analysis<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for g in &analysis.workloads {
        for r in g.all_rows() {
            let (Some(ai), Some(gflops)) = (r.arithmetic_intensity(), r.gflops) else {
                continue;
            };
            let impl_index = analysis.impls.iter().position(|n| *n == r.implementation).unwrap_or(0);
            out.push(Point { ai, gflops, impl_index, workload_number: g.number });
        }
    }
    out
}

/// Places centred labels of `size` pixels under their anchors, moving each down past the labels
/// already placed that it would overlap. Returns (centre x, top y, text).
fn place_labels(mut anchors: Vec<((i32, i32), String)>, size: u32) -> Vec<(i32, i32, String)> {
    anchors.sort_by_key(|((x, y), _)| (*x, *y));
    let line = size as i32 + 2;
    let mut placed: Vec<(i32, i32, i32, String)> = Vec::new(); // (left, right, top, text)
    for ((x, y), t) in anchors {
        let half = text_width(&t, size) as i32 / 2 + 2;
        let mut top = y + POINT_RADIUS + 3;
        while placed.iter().any(|(l, r, pt, _)| x - half < *r && x + half > *l && (top - pt).abs() < line) {
            top += line;
        }
        placed.push((x - half, x + half, top, t));
    }
    placed.into_iter().map(|(l, r, top, t)| ((l + r) / 2, top, t)).collect()
}

/// The powers of ten from `lo` to `hi` (both powers of ten, as [`decade_bounds`] makes them).
fn decades(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().round() as i32, hi.log10().round() as i32);
    (a..=b).map(|e| 10f64.powi(e)).collect()
}

/// 2 to 9 times each power of ten from `lo` up to `hi`: the light grid lines.
fn minors(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    for d in decades(lo, hi) {
        out.extend((2..10).map(|m| f64::from(m) * d).filter(|v| *v < hi));
    }
    out
}

/// Whole decades around the positive values, with `pad` times headroom on each side.
fn decade_bounds(values: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 {
        return (0.1, 10.0);
    }
    let lo = 10f64.powf((lo / pad).log10().floor());
    let hi = 10f64.powf((hi * pad).log10().ceil());
    (lo, hi)
}
