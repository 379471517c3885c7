//! Curves, markers and shaded bands over linear or logarithmic axes.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::legend::{self, Entry, Swatch};
use crate::{FAMILY, Figure, MARGIN, PlotError, colour, draw_error};

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Evenly spaced values.
    Linear,
    /// Evenly spaced decades; for data that spans several. Values ≤ 0 are left out.
    Log,
}

/// How a curve is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurveStyle {
    /// A solid line (closed forms).
    Line,
    /// A dashed line (a second closed form in the same colour).
    Dashed,
    /// Unjoined markers (measurements).
    Markers,
}

/// One named curve, and optionally a band around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Legend entry (empty: not in the legend).
    pub name: String,
    /// Colour number (curves that belong together share one).
    pub colour_index: usize,
    /// Line, dashed line or markers.
    pub style: CurveStyle,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// `(x, low, high)`, in x order, shaded translucent; empty for none.
    pub band: Vec<(f64, f64, f64)>,
}

/// Curves over two axes, each linear or logarithmic.
#[derive(Debug, Clone, PartialEq)]
pub struct LineFigure {
    /// Title above the plot.
    pub title: String,
    /// x-axis label, with units.
    pub x_label: String,
    /// y-axis label, with units.
    pub y_label: String,
    /// x-axis scale.
    pub x_axis: Axis,
    /// y-axis scale.
    pub y_axis: Axis,
    /// The curves, drawn in order.
    pub curves: Vec<Curve>,
}

/// The smallest and largest of `values` that the axis can show.
fn extent(values: impl Iterator<Item = f64>, axis: Axis) -> Option<(f64, f64)> {
    let usable = values.filter(|v| v.is_finite() && (axis == Axis::Linear || *v > 0.0));
    let (low, high) = usable.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    if low > high {
        return None;
    }
    Some(match axis {
        Axis::Log if low == high => (low / 2.0, high * 2.0),
        Axis::Log => (low / 1.25, high * 1.25),
        Axis::Linear if low == high => (low - 1.0, high + 1.0),
        Axis::Linear => {
            let pad = (high - low) * 0.05;
            (low - pad, high + pad)
        }
    })
}

impl LineFigure {
    /// The legend: every curve with a name, drawn as its style.
    fn legend(&self) -> Vec<Entry> {
        self.curves
            .iter()
            .filter(|c| !c.name.is_empty())
            .map(|c| {
                let colour = colour(c.colour_index);
                Entry {
                    name: c.name.clone(),
                    swatch: match c.style {
                        CurveStyle::Line => Swatch::Line(colour),
                        CurveStyle::Dashed => Swatch::Dashed(colour),
                        CurveStyle::Markers => Swatch::Marker(colour),
                    },
                }
            })
            .collect()
    }
}

impl Figure for LineFigure {
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static,
    {
        let xs = self.curves.iter().flat_map(|c| {
            c.points
                .iter()
                .map(|p| p.0)
                .chain(c.band.iter().map(|b| b.0))
        });
        let ys = self.curves.iter().flat_map(|c| {
            c.points
                .iter()
                .map(|p| p.1)
                .chain(c.band.iter().flat_map(|b| [b.1, b.2]))
        });
        let (Some(x), Some(y)) = (extent(xs, self.x_axis), extent(ys, self.y_axis)) else {
            return Err(PlotError::Empty("no curve has a point the axes can show"));
        };
        let (x, y) = (x.0..x.1, y.0..y.1);
        match (self.x_axis, self.y_axis) {
            (Axis::Linear, Axis::Linear) => render_on(root, self, x, y),
            (Axis::Linear, Axis::Log) => render_on(root, self, x, y.log_scale()),
            (Axis::Log, Axis::Linear) => render_on(root, self, x.log_scale(), y),
            (Axis::Log, Axis::Log) => render_on(root, self, x.log_scale(), y.log_scale()),
        }
    }
}

fn render_on<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    figure: &LineFigure,
    x: X,
    y: Y,
) -> Result<(), PlotError>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let visible_x = |v: f64| v.is_finite() && (figure.x_axis == Axis::Linear || v > 0.0);
    let visible_y = |v: f64| v.is_finite() && (figure.y_axis == Axis::Linear || v > 0.0);
    let entries = figure.legend();
    let (plot, panel) = legend::layout(root, &figure.title, &entries)?;
    let mut chart = ChartBuilder::on(&plot)
        .margin(MARGIN)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d(x, y)
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
    for curve in &figure.curves {
        let colour = colour(curve.colour_index);
        let band: Vec<(f64, f64, f64)> = curve
            .band
            .iter()
            .copied()
            .filter(|&(x, low, high)| visible_x(x) && visible_y(low) && visible_y(high))
            .collect();
        if band.len() >= 2 {
            let outline: Vec<(f64, f64)> = band
                .iter()
                .map(|&(x, low, _)| (x, low))
                .chain(band.iter().rev().map(|&(x, _, high)| (x, high)))
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    colour.mix(0.18).filled(),
                )))
                .map_err(draw_error)?;
        }
        let points: Vec<(f64, f64)> = curve
            .points
            .iter()
            .copied()
            .filter(|&(x, y)| visible_x(x) && visible_y(y))
            .collect();
        match curve.style {
            CurveStyle::Line => chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(draw_error)?,
            CurveStyle::Dashed => chart
                .draw_series(DashedLineSeries::new(points, 9, 6, colour.stroke_width(2)))
                .map_err(draw_error)?,
            CurveStyle::Markers => chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, colour.stroke_width(2))),
                )
                .map_err(draw_error)?,
        };
    }
    if let Some(panel) = panel {
        legend::draw(&panel, &entries)?;
    }
    Ok(())
}
