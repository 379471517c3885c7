//! Overlaid histograms with shaded spans of the x axis.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::legend::{self, Entry, Swatch};
use crate::{FAMILY, Figure, HIGHLIGHT, MARGIN, PlotError, colour, draw_error};

/// One histogram: bins `(left, right, height)`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSeries {
    /// Legend entry (empty: not in the legend).
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
    /// The histograms, drawn translucent over each other (two read well;
    /// more blur into one colour where they overlap: draw those as curves
    /// in a [`crate::LineFigure`]).
    pub series: Vec<HistogramSeries>,
    /// Spans `(left, right)` of the x axis to shade; the x axis reaches
    /// every finite edge, so that no span is cut off.
    pub highlight: Vec<(f64, f64)>,
    /// Legend entry of the shaded spans.
    pub highlight_label: String,
}

impl HistogramFigure {
    /// The shaded spans first (when any is drawn), then each histogram.
    fn legend(&self, shaded: bool) -> Vec<Entry> {
        let spans = shaded.then(|| Entry {
            name: self.highlight_label.clone(),
            swatch: Swatch::Block(HIGHLIGHT),
        });
        let series = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.name.is_empty());
        let series = series.map(|(index, s)| Entry {
            name: s.name.clone(),
            swatch: Swatch::Block(colour(index)),
        });
        spans.into_iter().chain(series).collect()
    }

    /// The x range: every bin, and the finite edges of every shaded span,
    /// so that a span in the tails is shown, not cut off.
    fn x_range(&self) -> Option<(f64, f64)> {
        let edges = self
            .series
            .iter()
            .flat_map(|s| s.bins.iter().flat_map(|b| [b.0, b.1]));
        let (left, right) = edges.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, r), v| {
            (l.min(v), r.max(v))
        });
        if left.partial_cmp(&right) != Some(std::cmp::Ordering::Less) {
            return None;
        }
        let spans = self.highlight.iter().flat_map(|&(a, b)| [a, b]);
        let (left, right) = spans
            .filter(|v| v.is_finite())
            .fold((left, right), |(l, r), v| (l.min(v), r.max(v)));
        let pad = if self.highlight.is_empty() {
            0.0
        } else {
            0.02 * (right - left)
        };
        Some((left - pad, right + pad))
    }
}

impl Figure for HistogramFigure {
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static,
    {
        let figure = self;
        let top = figure
            .series
            .iter()
            .flat_map(|s| s.bins.iter().map(|b| b.2))
            .fold(0.0f64, f64::max);
        let Some((left, right)) = figure.x_range().filter(|_| top > 0.0) else {
            return Err(PlotError::Empty("the histograms have no mass"));
        };
        let top = top * 1.05;
        let shaded: Vec<(f64, f64)> = figure
            .highlight
            .iter()
            .map(|&(a, b)| (a.max(left), b.min(right)))
            .filter(|(a, b)| a <= b)
            .collect();
        let entries = figure.legend(!shaded.is_empty());
        let (plot, panel) = legend::layout(root, &figure.title, &entries)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(MARGIN)
            .x_label_area_size(52)
            .y_label_area_size(80)
            .build_cartesian_2d(left..right, 0.0..top)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc(&figure.x_label)
            .y_desc(&figure.y_label)
            .x_label_formatter(&|v| crate::tick_label(*v))
            .y_label_formatter(&|v| crate::tick_label(*v))
            .label_style((FAMILY, 15))
            .axis_desc_style((FAMILY, 17))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(draw_error)?;
        chart
            .draw_series(
                shaded.iter().map(|&(a, b)| {
                    Rectangle::new([(a, 0.0), (b, top)], HIGHLIGHT.mix(0.45).filled())
                }),
            )
            .map_err(draw_error)?;
        for (index, series) in figure.series.iter().enumerate() {
            let colour = colour(index);
            chart
                .draw_series(series.bins.iter().map(|&(l, r, h)| {
                    Rectangle::new([(l, 0.0), (r, h)], colour.mix(0.35).filled())
                }))
                .map_err(draw_error)?;
            chart
                .draw_series(LineSeries::new(
                    outline(&series.bins),
                    colour.stroke_width(2),
                ))
                .map_err(draw_error)?;
        }
        if let Some(panel) = panel {
            legend::draw(&panel, &entries)?;
        }
        Ok(())
    }
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
        let [png, svg] = crate::draw(&figure, &directory.join("two")).unwrap();
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
            crate::draw(&figure, &path),
            Err(PlotError::Empty(_))
        ));
    }
}
