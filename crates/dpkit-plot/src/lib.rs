#![deny(missing_docs)]
//! # dpkit-plot
//!
//! dpkit's figures, written as both PNG and SVG. Text is rendered with a
//! bundled DejaVu Sans (Bitstream Vera licence, `fonts/DejaVu-LICENSE.txt`),
//! so figures look the same on machines without system fonts.
//!
//! ```no_run
//! use dpkit_plot::{HistogramFigure, HistogramSeries, draw_histograms};
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
//! let written = draw_histograms(&figure, std::path::Path::new("figure")).unwrap();
//! assert!(written[0].ends_with("figure.png"));
//! ```

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use thiserror::Error;

/// The bundled font, registered as "sans-serif".
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
/// Figure size in pixels (PNG) and user units (SVG).
const SIZE: (u32, u32) = (960, 600);
/// Series colours, colour-blind safe (Okabe–Ito blue, vermillion, green, purple).
const PALETTE: [RGBColor; 4] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
];
const HIGHLIGHT: RGBColor = RGBColor(240, 228, 66);

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

fn draw_error(error: impl std::fmt::Display) -> PlotError {
    PlotError::Draw(error.to_string())
}

/// One histogram: bins `(left, right, height)`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSeries {
    /// Legend entry.
    pub name: String,
    /// `(left edge, right edge, height)` per bin.
    pub bins: Vec<(f64, f64, f64)>,
}

/// Overlaid histograms, with shaded spans of the x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramFigure {
    /// Title above the plot.
    pub title: String,
    /// x-axis label, with units.
    pub x_label: String,
    /// y-axis label, with units.
    pub y_label: String,
    /// The histograms, drawn translucent over each other.
    pub series: Vec<HistogramSeries>,
    /// Spans `(left, right)` of the x axis to shade (clipped to the plot).
    pub highlight: Vec<(f64, f64)>,
    /// Legend entry of the shaded spans.
    pub highlight_label: String,
}

fn register_bundled_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The bytes are a valid TrueType font, checked by the tests.
        let _ = register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// Draws `figure` to `stem.png` and `stem.svg` and returns both paths.
pub fn draw_histograms(figure: &HistogramFigure, stem: &Path) -> Result<[PathBuf; 2], PlotError> {
    register_bundled_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        render_histograms(&root, figure)?;
        root.present().map_err(draw_error)?;
    }
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        render_histograms(&root, figure)?;
        root.present().map_err(draw_error)?;
    }
    Ok([png, svg])
}

fn render_histograms<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &HistogramFigure,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let bins = figure.series.iter().flat_map(|s| s.bins.iter());
    let (mut left, mut right, mut top) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(l, r, h) in bins {
        left = left.min(l);
        right = right.max(r);
        top = top.max(h);
    }
    if left.partial_cmp(&right) != Some(std::cmp::Ordering::Less) || top <= 0.0 {
        return Err(PlotError::Empty("the histograms have no mass"));
    }
    let top = top * 1.3; // headroom for the legend
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(root)
        .caption(&figure.title, (FAMILY, 24))
        .margin(18)
        .x_label_area_size(52)
        .y_label_area_size(80)
        .build_cartesian_2d(left..right, 0.0..top)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc(&figure.x_label)
        .y_desc(&figure.y_label)
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(draw_error)?;
    let shaded: Vec<(f64, f64)> = figure
        .highlight
        .iter()
        .map(|&(a, b)| (a.max(left), b.min(right)))
        .filter(|(a, b)| a <= b)
        .collect();
    if !shaded.is_empty() {
        chart
            .draw_series(
                shaded.iter().map(|&(a, b)| {
                    Rectangle::new([(a, 0.0), (b, top)], HIGHLIGHT.mix(0.45).filled())
                }),
            )
            .map_err(draw_error)?
            .label(&figure.highlight_label)
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], HIGHLIGHT.filled()));
    }
    for (index, series) in figure.series.iter().enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        chart
            .draw_series(
                series.bins.iter().map(|&(l, r, h)| {
                    Rectangle::new([(l, 0.0), (r, h)], colour.mix(0.35).filled())
                }),
            )
            .map_err(draw_error)?;
        chart
            .draw_series(LineSeries::new(
                outline(&series.bins),
                colour.stroke_width(2),
            ))
            .map_err(draw_error)?
            .label(&series.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    Ok(())
}

/// The histogram's outline as one step path: it drops to zero only at gaps
/// between bins, so adjacent bins share one vertical edge.
fn outline(bins: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(2 * bins.len() + 2);
    let mut previous_right: Option<f64> = None;
    for &(left, right, height) in bins {
        if previous_right != Some(left) {
            if let Some(end) = previous_right {
                points.push((end, 0.0));
            }
            points.push((left, 0.0));
        }
        points.push((left, height));
        points.push((right, height));
        previous_right = Some(right);
    }
    if let Some(end) = previous_right {
        points.push((end, 0.0));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_valid_png_and_svg() {
        let directory = std::env::temp_dir().join(format!("dpkit-plot-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let figure = HistogramFigure {
            title: "Outputs from two inputs".into(),
            x_label: "output y".into(),
            y_label: "share of outputs".into(),
            series: vec![
                HistogramSeries {
                    name: "q = 0".into(),
                    bins: vec![(0.0, 1.0, 0.7), (1.0, 2.0, 0.3)],
                },
                HistogramSeries {
                    name: "q = 1".into(),
                    bins: vec![(0.0, 1.0, 0.4), (1.0, 2.0, 0.6)],
                },
            ],
            highlight: vec![(1.0, 5.0)],
            highlight_label: "event".into(),
        };
        let [png, svg] = draw_histograms(&figure, &directory.join("two")).unwrap();
        let png_bytes = std::fs::read(&png).unwrap();
        assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        assert!(svg_text.starts_with("<svg") && svg_text.contains("Outputs from two inputs"));
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn the_outline_touches_zero_only_at_gaps() {
        let bins = [(0.0, 1.0, 0.5), (1.0, 2.0, 0.3), (3.0, 4.0, 0.2)];
        let path = outline(&bins);
        let at_zero: Vec<f64> = path.iter().filter(|p| p.1 == 0.0).map(|p| p.0).collect();
        assert_eq!(at_zero, vec![0.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn an_empty_figure_is_an_error_not_a_panic() {
        let figure = HistogramFigure {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: vec![],
            highlight: vec![],
            highlight_label: String::new(),
        };
        let path = std::env::temp_dir().join("dpkit-plot-empty");
        assert!(matches!(
            draw_histograms(&figure, &path),
            Err(PlotError::Empty(_))
        ));
    }
}
