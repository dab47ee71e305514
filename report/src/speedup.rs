//! The speedup chart: one horizontal bar per workload and tcc implementation, from 1 (parity) to
//! best peer `median_ms` / tcc `median_ms`, on a log axis so 2x faster and 2x slower look alike.

use plotters::backend::SVGBackend;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use crate::analysis::Analysis;
use crate::error::{ReportError, render};
use crate::num::{short, si};
use crate::style::{FONT, colour, text, text_width};

const CHART: &str = "speedup.svg";
const PLOT_W: u32 = 900;
const NOTE_W: u32 = 330;
const BAR_H: u32 = 30;

/// One bar.
struct Bar<'a> {
    workload: &'a str,
    impl_index: usize,
    speedup: f64,
    peer: &'a str,
}

/// Renders the speedup chart as SVG text: one `<rect>` bar per tcc row whose workload has a peer.
pub(crate) fn speedup_svg(analysis: &Analysis<'_>, device: &str) -> Result<String, ReportError> {
    let bars = bars(analysis);
    let label_w = bars.iter().map(|b| text_width(b.workload, 14)).max().unwrap_or(0).clamp(80, 400) + 20;
    let n = bars.len();
    let height = 170 + BAR_H * n.max(3) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_W + NOTE_W, height)).into_drawing_area();
        root.fill(&WHITE).map_err(render(CHART))?;
        let caption = format!("Speedup over the best peer on {device}");
        if bars.is_empty() {
            root.draw(&Text::new(caption, (20, 20), text(22, HPos::Left, VPos::Top))).map_err(render(CHART))?;
            root.draw(&Text::new(
                "No workload has both a tcc row and a peer row.",
                (20, 80),
                text(16, HPos::Left, VPos::Top),
            ))
            .map_err(render(CHART))?;
            root.present().map_err(render(CHART))?;
            drop(root);
            return Ok(svg);
        }
        let (left, right) = root.split_horizontally(PLOT_W);
        let lo = bars.iter().map(|b| b.speedup).fold(1.0_f64, f64::min) / 1.5;
        let hi = bars.iter().map(|b| b.speedup).fold(1.0_f64, f64::max) * 1.5;
        let mut chart = ChartBuilder::on(&left)
            .caption(caption, (FONT, 22))
            .margin(18)
            .x_label_area_size(56)
            .y_label_area_size(label_w)
            .build_cartesian_2d((lo..hi).log_scale().with_key_points(ticks(lo, hi)), (0..n - 1).into_segmented())
            .map_err(render(CHART))?;
        // Bar k sits in segment n-1-k so the first workload is on top.
        let name_of = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) if *i < n => bars[n - 1 - *i].workload.to_string(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&name_of)
            .x_label_formatter(&|v| si(*v))
            .x_desc("best peer median_ms / tcc median_ms (log scale; right of 1: tcc is faster)")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(render(CHART))?;

        for i in 0..analysis.impls.len() {
            let mine: Vec<(usize, &Bar<'_>)> = bars.iter().enumerate().filter(|(_, b)| b.impl_index == i).collect();
            if mine.is_empty() {
                continue;
            }
            let style = colour(i).filled();
            chart
                .draw_series(mine.iter().map(|(k, b)| {
                    let slot = n - 1 - k;
                    let mut r = Rectangle::new(
                        [(1.0, SegmentValue::Exact(slot)), (b.speedup, SegmentValue::Exact(slot + 1))],
                        style,
                    );
                    r.set_margin(5, 5, 0, 0);
                    r
                }))
                .map_err(render(CHART))?;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Exact(n))],
                ShapeStyle::from(&BLACK).stroke_width(2),
            )))
            .map_err(render(CHART))?;

        // The value of every bar, beside the plot at the bar's height.
        right
            .draw(&Text::new("speedup, best peer", (6, 34), text(15, HPos::Left, VPos::Center)))
            .map_err(render(CHART))?;
        for (k, b) in bars.iter().enumerate() {
            let slot = n - 1 - k;
            let (_, y) = chart.backend_coord(&(1.0, SegmentValue::CenterOf(slot)));
            let t = format!("{}x  vs {}", short(b.speedup, 3), b.peer);
            right.draw(&Text::new(t, (6, y), text(14, HPos::Left, VPos::Center))).map_err(render(CHART))?;
        }
        // The colour key, under the values: one entry per tcc implementation with a bar.
        let (_, bottom) = chart.backend_coord(&(1.0, SegmentValue::Exact(0)));
        let mut y = bottom + 24;
        for (i, name) in analysis.impls.iter().enumerate() {
            if !bars.iter().any(|b| b.impl_index == i) {
                continue;
            }
            right.draw(&Rectangle::new([(6, y - 6), (18, y + 6)], colour(i).filled())).map_err(render(CHART))?;
            right.draw(&Text::new(*name, (26, y), text(14, HPos::Left, VPos::Center))).map_err(render(CHART))?;
            y += 22;
        }
        root.present().map_err(render(CHART))?;
    }
    Ok(svg)
}

/// Tick values between `lo` and `hi` (0 < lo < hi): 1-2-5 steps per decade, or finer steps
/// when that gives fewer than four.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let steps: [&[f64]; 2] = [&[1.0, 2.0, 5.0], &[1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]];
    let mut out = Vec::new();
    for mantissas in steps {
        out.clear();
        let first = lo.log10().floor() as i32;
        let last = hi.log10().ceil() as i32;
        for e in first..=last {
            for m in mantissas {
                let v = m * 10f64.powi(e);
                if (lo..=hi).contains(&v) {
                    out.push(v);
                }
            }
        }
        if out.len() >= 4 {
            break;
        }
    }
    out
}

/// One bar per tcc row of a workload that has a best peer, in table order.
fn bars<'a>(analysis: &Analysis<'a>) -> Vec<Bar<'a>> {
    let mut out = Vec::new();
    for g in &analysis.workloads {
        let Some(best) = g.best_peer else { continue };
        for r in &g.tcc {
            out.push(Bar {
                workload: g.name,
                impl_index: analysis.impls.iter().position(|n| *n == r.implementation).unwrap_or(0),
                speedup: best.median_ms / r.median_ms,
                peer: &best.implementation,
            });
        }
    }
    out
}
