#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-plot
//!
//! dpkit's figures, written as both PNG and SVG. Text is rendered with a
//! bundled DejaVu Sans (Bitstream Vera licence, `fonts/DejaVu-LICENSE.txt`),
//! so figures look the same on machines without system fonts.
//!
//! Three kinds of figure, each a [`Figure`]: [`HistogramFigure`] (overlaid
//! histograms with shaded spans), [`LineFigure`] (curves, markers and bands,
//! linear or log axes) and [`BarFigure`] (horizontal grouped bars with
//! min–max whiskers). [`draw`] writes any of them as PNG and SVG.
//!
//! ```no_run
//! use dpkit_plot::{HistogramFigure, HistogramSeries, draw};
//! let figure = HistogramFigure {
//!     title: "Two output distributions".into(),
//!     x_label: "output y".into(),
//!     y_label: "share of outputs".into(),
//!     series: vec![HistogramSeries {
//!         name: "q = 0".into(),
//!         bins: vec![(0.0, 1.0, 0.6), (1.0, 2.0, 0.4)],
//!     }],
//!     highlight: vec![(1.0, 2.0)],
//!     highlight_label: "separating event".into(),
//! };
//! let written = draw(&figure, std::path::Path::new("figure")).unwrap();
//! assert!(written[0].ends_with("figure.png"));
//! ```

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use thiserror::Error;

mod bars;
mod histogram;
mod legend;
mod lines;

pub use bars::{BarFigure, BarGroup};
pub use histogram::{HistogramFigure, HistogramSeries};
pub use lines::{Axis, Curve, CurveStyle, LineFigure};

/// The bundled font, registered as "sans-serif".
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
pub(crate) const FAMILY: &str = "sans-serif";
/// Figure size in pixels (PNG) and user units (SVG).
pub(crate) const SIZE: (u32, u32) = (960, 600);
/// Blank pixels around each plot, inside the figure.
pub(crate) const MARGIN: u32 = 18;
/// Series colours, colour-blind safe (the Okabe–Ito palette).
pub(crate) const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
];
pub(crate) const HIGHLIGHT: RGBColor = RGBColor(240, 228, 66);

/// A figure that could not be drawn or written.
#[derive(Debug, Error)]
pub enum PlotError {
    /// The figure has nothing to draw.
    #[error("nothing to plot: {0}")]
    Empty(&'static str),
    /// plotters failed (usually: the file could not be written).
    #[error("could not draw the figure: {0}")]
    Draw(String),
}

pub(crate) fn draw_error(error: impl std::fmt::Display) -> PlotError {
    PlotError::Draw(error.to_string())
}

fn register_bundled_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The bytes are a valid TrueType font, checked by the tests.
        let _ = register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// A figure that can render itself on any plotters backend.
pub trait Figure {
    /// Draws the figure on `root`.
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static;
}

/// Draws `figure` to `stem.png` and `stem.svg` and returns both paths
/// (the extensions follow the whole stem: `worst-1.0` gives `worst-1.0.png`).
pub fn draw(figure: &impl Figure, stem: &Path) -> Result<[PathBuf; 2], PlotError> {
    register_bundled_font();
    let [png, svg] = paths(stem);
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        figure.render(&root)?;
        root.present().map_err(draw_error)?;
    }
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        figure.render(&root)?;
        root.present().map_err(draw_error)?;
    }
    Ok([png, svg])
}

/// `stem.png` and `stem.svg`, the extensions after the whole stem.
pub fn paths(stem: &Path) -> [PathBuf; 2] {
    ["png", "svg"].map(|extension| {
        let mut name = stem.as_os_str().to_os_string();
        name.push(".");
        name.push(extension);
        PathBuf::from(name)
    })
}

/// An axis tick: at most four decimals, trailing zeros dropped, and
/// `1e-5`-style exponents outside 0.001..100000.
pub(crate) fn tick_label(value: f64) -> String {
    fn trim(text: &str) -> &str {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.')
        } else {
            text
        }
    }
    let magnitude = value.abs();
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    if (1e-3..1e5).contains(&magnitude) {
        return trim(&format!("{value:.4}")).to_string();
    }
    let text = format!("{value:.2e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => format!("{}e{exponent}", trim(mantissa)),
        None => text,
    }
}

/// The colour of series number `index`.
pub(crate) fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

#[cfg(test)]
mod tick_tests {
    #[test]
    fn a_stem_with_a_dot_keeps_it() {
        let [png, svg] = super::paths(std::path::Path::new("out/worst-eps1.0"));
        assert_eq!(png, std::path::Path::new("out/worst-eps1.0.png"));
        assert_eq!(svg, std::path::Path::new("out/worst-eps1.0.svg"));
        let [png, _] = super::paths(std::path::Path::new("figure"));
        assert_eq!(png, std::path::Path::new("figure.png"));
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(super::tick_label(9.999_999_999e-5), "1e-4");
        assert_eq!(super::tick_label(0.25), "0.25");
        assert_eq!(super::tick_label(100.0), "100");
        assert_eq!(super::tick_label(2.5e6), "2.5e6");
    }
}
