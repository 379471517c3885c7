//! Horizontal grouped bars, with min–max whiskers.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::legend::{self, Entry, Swatch};
use crate::{FAMILY, Figure, MARGIN, PlotError, colour, draw_error};

/// One group of bars: one value per category.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    /// Legend entry.
    pub name: String,
    /// One value per category (NaN for "not measured": no bar).
    pub values: Vec<f64>,
    /// One `(min, max)` whisker per category, or empty for none.
    pub ranges: Vec<(f64, f64)>,
}

/// Horizontal bars: one row per category, one bar per group in each row.
#[derive(Debug, Clone, PartialEq)]
pub struct BarFigure {
    /// Title above the plot.
    pub title: String,
    /// Label of the value axis, with units.
    pub value_label: String,
    /// Row names, top to bottom.
    pub categories: Vec<String>,
    /// The groups, drawn side by side within each row.
    pub groups: Vec<BarGroup>,
}

impl BarFigure {
    /// One block per group.
    fn legend(&self) -> Vec<Entry> {
        let entry = |(index, g): (usize, &BarGroup)| Entry {
            name: g.name.clone(),
            swatch: Swatch::Block(colour(index)),
        };
        self.groups.iter().enumerate().map(entry).collect()
    }

    /// The share of a plot `width` pixels wide left of zero, for the row
    /// names (about 8 px per character), so that they never overlap the bars.
    fn name_share(&self, width: u32) -> f64 {
        let longest = self.categories.iter().map(|c| c.chars().count()).max();
        let room = f64::from(width.saturating_sub(2 * MARGIN + 8)).max(1.0);
        (longest.unwrap_or(0) as f64 * 8.0 / room).min(0.45)
    }
}

impl Figure for BarFigure {
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static,
    {
        let rows = self.categories.len();
        let largest = self
            .groups
            .iter()
            .flat_map(|g| g.values.iter().copied().chain(g.ranges.iter().map(|r| r.1)))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        if rows == 0 || largest <= 0.0 {
            return Err(PlotError::Empty("no positive bar"));
        }
        let entries = self.legend();
        let (plot, panel) = legend::layout(root, &self.title, &entries)?;
        let right = largest * 1.12;
        let share = self.name_share(plot.dim_in_pixel().0);
        let left = -right * share / (1.0 - share);
        let mut chart = ChartBuilder::on(&plot)
            .margin(MARGIN)
            .x_label_area_size(52)
            .y_label_area_size(8)
            .build_cartesian_2d(left..right, 0.0..rows as f64)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(&self.value_label)
            .x_label_formatter(&|v| {
                if *v < 0.0 {
                    String::new()
                } else {
                    crate::tick_label(*v)
                }
            })
            .label_style((FAMILY, 15))
            .axis_desc_style((FAMILY, 17))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(draw_error)?;
        let row_bottom = |row: usize| (rows - 1 - row) as f64;
        let name_style = TextStyle::from((FAMILY, 15).into_font())
            .pos(Pos::new(HPos::Right, VPos::Center))
            .color(&BLACK);
        chart
            .draw_series(self.categories.iter().enumerate().map(|(row, name)| {
                Text::new(
                    name.clone(),
                    (left * 0.02, row_bottom(row) + 0.5),
                    name_style.clone(),
                )
            }))
            .map_err(draw_error)?;
        let count = self.groups.len().max(1) as f64;
        let thickness = 0.8 / count;
        for (index, group) in self.groups.iter().enumerate() {
            let colour = colour(index);
            let slot = |row: usize| row_bottom(row) + 0.9 - (index as f64 + 1.0) * thickness;
            chart
                .draw_series(
                    group
                        .values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(row, &v)| {
                            let y = slot(row);
                            Rectangle::new(
                                [(0.0, y + 0.08 * thickness), (v, y + 0.92 * thickness)],
                                colour.mix(0.8).filled(),
                            )
                        }),
                )
                .map_err(draw_error)?;
            chart
                .draw_series(group.ranges.iter().enumerate().map(|(row, &(low, high))| {
                    let middle = slot(row) + 0.5 * thickness;
                    PathElement::new(vec![(low, middle), (high, middle)], BLACK.stroke_width(2))
                }))
                .map_err(draw_error)?;
        }
        if let Some(panel) = panel {
            legend::draw(&panel, &entries)?;
        }
        Ok(())
    }
}
