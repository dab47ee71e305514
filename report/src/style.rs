//! Colours, fonts and sizes shared by the two charts.

use plotters::prelude::{BLACK, IntoFont};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{RGBColor, TextStyle};

/// The font family of every label (the SVG names it; the viewer picks the face).
pub(crate) const FONT: &str = "sans-serif";

/// Tableau's ten categorical colours: distinct for the usual colour-vision deficiencies.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the `index`-th implementation (cycling after ten).
pub(crate) fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// Black text of `size` pixels, anchored at `h`/`v`.
pub(crate) fn text(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(&BLACK).pos(Pos::new(h, v))
}

/// A rough width in pixels of `s` at `size` pixels (sans-serif averages about 0.55 em a glyph).
pub(crate) fn text_width(s: &str, size: u32) -> u32 {
    (s.chars().count() as f64 * f64::from(size) * 0.55).ceil() as u32
}
