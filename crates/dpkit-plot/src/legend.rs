//! The figures' title and legend: the legend sits in its own panel to the
//! right of the plot, so that it never covers a curve, a bar or a bin.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{FAMILY, MARGIN, PlotError, draw_error};

/// The legend's sample of how an entry is drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A solid line.
    Line(RGBColor),
    /// A dashed line.
    Dashed(RGBColor),
    /// A circle marker.
    Marker(RGBColor),
    /// A filled block (bars, bins and shaded spans).
    Block(RGBColor),
}

/// One legend entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The text; long texts wrap within the panel.
    pub name: String,
    /// How the entry is drawn.
    pub swatch: Swatch,
}

/// A part of the figure.
type Area<DB> = DrawingArea<DB, Shift>;

/// The legend's text size, in pixels.
const TEXT: u32 = 14;
/// The swatch's width, and the gaps around it and the text.
const SWATCH: i32 = 22;
const GAP: i32 = 8;
/// Blank pixels between the box and the figure's right edge.
const RIGHT: i32 = 12;
/// What a legend row needs beside its text: the swatch, its gaps, the
/// space right of the box.
const BESIDE_TEXT: i32 = SWATCH + 3 * GAP + RIGHT;
/// The widest the panel may be, as a share of the figure.
const MOST_SHARE: f64 = 0.36;

/// Fills `root` white, writes `title` across its top and splits what is
/// left into the plot area and, when there are `entries`, a legend panel on
/// the right as wide as the longest entry needs (at most about a third of
/// the figure; longer entries wrap).
pub(crate) fn layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    entries: &[Entry],
) -> Result<(Area<DB>, Option<Area<DB>>), PlotError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(draw_error)?;
    let body = root
        .margin(MARGIN / 2, 0, 0, 0)
        .titled(title, (FAMILY, 24))
        .map_err(draw_error)?;
    if entries.is_empty() {
        return Ok((body, None));
    }
    let (width, _) = body.dim_in_pixel();
    let most = (f64::from(width) * MOST_SHARE) as u32;
    let longest = entries
        .iter()
        .map(|e| text_width(&body, &e.name))
        .max()
        .unwrap_or(0);
    let panel = (longest + BESIDE_TEXT as u32).min(most);
    let (plot, legend) = body.split_horizontally(width.saturating_sub(panel));
    Ok((plot, Some(legend)))
}

fn text_width<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str) -> u32 {
    let style = TextStyle::from((FAMILY, TEXT).into_font());
    // A text that cannot be measured gets a generous guess (8 px per character).
    area.estimate_text_size(text, &style)
        .map_or(8 * text.chars().count() as u32, |size| size.0)
}

/// `text` broken at spaces into lines no wider than `width` pixels (a
/// single word wider than that keeps a line of its own).
fn wrapped<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    width: u32,
) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if text_width(area, &format!("{line} {word}")) <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// Draws `entries` down `panel` in a box, from the height of the plot's top
/// edge (the plots' `MARGIN` below the panel's top).
pub(crate) fn draw<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let top = MARGIN as i32;
    let (width, _) = panel.dim_in_pixel();
    let text_room = (width as i32 - BESIDE_TEXT).max(40) as u32;
    let line_height = TEXT as i32 + 5;
    let style = TextStyle::from((FAMILY, TEXT).into_font()).color(&BLACK);
    let mut y = top + GAP;
    let mut shapes: Vec<(i32, &Entry, Vec<String>)> = Vec::new();
    for entry in entries {
        let lines = wrapped(panel, &entry.name, text_room);
        let height = line_height * lines.len() as i32 + 4;
        shapes.push((y, entry, lines));
        y += height;
    }
    let right = width as i32 - RIGHT;
    panel
        .draw(&Rectangle::new(
            [(2, top), (right, y + GAP - 4)],
            BLACK.stroke_width(1),
        ))
        .map_err(draw_error)?;
    for (y, entry, lines) in shapes {
        draw_swatch(panel, entry.swatch, (GAP + 2, y + line_height / 2))?;
        for (k, line) in lines.iter().enumerate() {
            let at = (2 * GAP + 2 + SWATCH, y + k as i32 * line_height + 2);
            panel
                .draw(&Text::new(line.clone(), at, style.clone()))
                .map_err(draw_error)?;
        }
    }
    Ok(())
}

fn draw_swatch<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    swatch: Swatch,
    (x, y): (i32, i32),
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let drawn = match swatch {
        Swatch::Line(colour) => panel.draw(&PathElement::new(
            vec![(x, y), (x + SWATCH, y)],
            colour.stroke_width(2),
        )),
        Swatch::Dashed(colour) => {
            let style = colour.stroke_width(2);
            panel
                .draw(&PathElement::new(vec![(x, y), (x + 8, y)], style))
                .and_then(|_| {
                    panel.draw(&PathElement::new(vec![(x + 14, y), (x + SWATCH, y)], style))
                })
        }
        Swatch::Marker(colour) => {
            panel.draw(&Circle::new((x + SWATCH / 2, y), 4, colour.stroke_width(2)))
        }
        Swatch::Block(colour) => panel.draw(&Rectangle::new(
            [(x + 2, y - 6), (x + SWATCH - 2, y + 6)],
            colour.filled(),
        )),
    };
    drawn.map_err(draw_error)
}

#[cfg(test)]
mod tests {
    use crate::{Axis, Curve, CurveStyle, Figure, HistogramFigure, HistogramSeries, LineFigure};
    use plotters::prelude::*;

    const SIZE: (u32, u32) = crate::SIZE;

    /// The figure's pixels, as RGB bytes row by row.
    fn pixels(figure: &impl Figure) -> Vec<u8> {
        crate::register_bundled_font();
        let mut buffer = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buffer, SIZE).into_drawing_area();
            figure.render(&root).unwrap();
            root.present().unwrap();
        }
        buffer
    }

    /// For each pixel column, whether some pixel in it has exactly `colour`.
    fn columns_with(buffer: &[u8], colour: RGBColor) -> Vec<bool> {
        let (width, height) = (SIZE.0 as usize, SIZE.1 as usize);
        (0..width)
            .map(|x| {
                (0..height).any(|y| {
                    let at = 3 * (y * width + x);
                    buffer[at..at + 3] == [colour.0, colour.1, colour.2]
                })
            })
            .collect()
    }

    /// Between the first and the last column that hold `colour`, no more
    /// than two columns in a row lack it (a line's ends may miss a pixel; a
    /// legend over it hides a hundred).
    fn unbroken(buffer: &[u8], colour: RGBColor) -> bool {
        let columns = columns_with(buffer, colour);
        let first = columns.iter().position(|&c| c).unwrap();
        let last = columns.iter().rposition(|&c| c).unwrap();
        let mut missing = 0;
        columns[first..=last].iter().all(|&c| {
            missing = if c { 0 } else { missing + 1 };
            missing <= 2
        })
    }

    fn curve(name: &str, colour_index: usize, points: Vec<(f64, f64)>) -> Curve {
        let style = CurveStyle::Line;
        let band = Vec::new();
        let name = name.into();
        Curve {
            name,
            colour_index,
            style,
            points,
            band,
        }
    }

    /// The last pixel column holding `colour`.
    fn last_column(buffer: &[u8], colour: RGBColor) -> usize {
        columns_with(buffer, colour)
            .iter()
            .rposition(|&c| c)
            .unwrap()
    }

    #[test]
    fn a_curve_into_the_top_right_corner_is_not_covered_by_the_legend() {
        // A curve that ends in the top-right corner of the plot, one along
        // its bottom edge as far right, neither in the legend (so that
        // their colours are only in the plot), and four long legend
        // entries, as in the lab's accuracy figure.
        let diagonal = (0..=100).map(|k| (f64::from(k), f64::from(k))).collect();
        let mut curves = vec![
            curve("", 0, diagonal),
            curve("", 5, vec![(0.0, 0.0), (100.0, 0.0)]),
        ];
        for index in 1..5 {
            let flat = vec![(0.0, 0.0), (1.0, 0.0)];
            curves.push(curve("another curve with a long legend entry", index, flat));
        }
        let figure = LineFigure {
            title: "corner".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_axis: Axis::Linear,
            y_axis: Axis::Linear,
            curves,
        };
        let buffer = pixels(&figure);
        assert!(unbroken(&buffer, crate::colour(0)));
        // Both reach as far right: nothing covers the corner.
        let (corner, bottom) = (crate::colour(0), crate::colour(5));
        assert!(last_column(&buffer, corner) + 3 >= last_column(&buffer, bottom));
    }

    #[test]
    fn the_tallest_bins_at_the_right_are_not_covered_by_the_legend() {
        // Rising bins, the first histogram the tallest (and without a legend
        // entry, so that its colour is only in the plot).
        let bin = |k: u32, scale: f64| (f64::from(k), f64::from(k + 1), scale * f64::from(k));
        let rising = |scale: f64| (5..40).map(|k| bin(k, scale)).collect();
        let series = (0..4)
            .map(|index| HistogramSeries {
                name: match index {
                    0 => String::new(),
                    _ => format!("a histogram with a long legend entry, number {index}"),
                },
                bins: rising(1.0 - 0.2 * f64::from(index)),
            })
            .collect();
        let figure = HistogramFigure {
            title: "corner".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series,
            highlight: vec![],
            highlight_label: String::new(),
        };
        assert!(unbroken(&pixels(&figure), crate::colour(0)));
    }

    #[test]
    fn a_shaded_span_beyond_the_bins_is_shown_not_cut_off() {
        let figure = HistogramFigure {
            title: "tail event".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![HistogramSeries {
                name: "outputs".into(),
                bins: vec![(0.0, 1.0, 0.6), (1.0, 2.0, 0.4)],
            }],
            highlight: vec![(3.0, f64::INFINITY)],
            highlight_label: "event: y ≥ 3".into(),
        };
        let buffer = pixels(&figure);
        // The span is drawn translucent: yellow mixed with white, unlike the
        // legend's solid swatch.
        let pure = [crate::HIGHLIGHT.0, crate::HIGHLIGHT.1, crate::HIGHLIGHT.2];
        let shaded = buffer.chunks(3).filter(|p| {
            p != &pure && p[0] > 200 && p[1] > 200 && u16::from(p[2]) + 40 < u16::from(p[0])
        });
        assert!(shaded.count() > 1000);
    }
}
