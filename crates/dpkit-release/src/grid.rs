//! The public grid a quantile is chosen on.

/// The most cells a grid has: ln K enters the rank error, and 2¹⁶ cells
/// resolve the bounds to 0.0015%.
const MAX_CELLS: u64 = 1 << 16;

/// A public grid of `cells` equal cells of width `width` from `low`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    /// The lower bound.
    pub low: f64,
    /// The upper bound.
    pub high: f64,
    /// Each cell's width (a whole number for whole numbers).
    pub width: f64,
    /// How many cells.
    pub cells: usize,
    /// Whether the values are whole numbers (a cell of width 1 is one value).
    pub integer: bool,
}

impl Grid {
    /// The grid over `[low, high]`: for whole numbers, cells of a whole
    /// width, as narrow as keeps them at most 2¹⁶; else 2¹⁶ equal cells.
    ///
    /// ```
    /// let grid = dpkit_release::Grid::over(0.0, 9.0, true);
    /// assert_eq!((grid.cells, grid.value(3)), (10, 3.0));
    /// ```
    pub fn over(low: f64, high: f64, integer: bool) -> Self {
        let (width, cells) = if integer {
            let values = (high - low + 1.0).min(u64::MAX as f64) as u64;
            let width = values.div_ceil(MAX_CELLS).max(1);
            (width as f64, values.div_ceil(width) as usize)
        } else {
            ((high - low) / MAX_CELLS as f64, MAX_CELLS as usize)
        };
        Self {
            low,
            high,
            width,
            cells,
            integer,
        }
    }

    /// The smallest value in `cell`.
    pub fn lower_edge(&self, cell: usize) -> f64 {
        (self.low + cell as f64 * self.width).min(self.high)
    }

    /// The largest value in `cell`.
    pub fn upper_edge(&self, cell: usize) -> f64 {
        let next = self.low + (cell + 1) as f64 * self.width;
        let edge = if self.integer { next - 1.0 } else { next };
        edge.min(self.high)
    }

    /// The value released for `cell`: its one value, or its middle.
    pub fn value(&self, cell: usize) -> f64 {
        if self.integer && self.width == 1.0 {
            self.lower_edge(cell)
        } else {
            (self.lower_edge(cell) + self.upper_edge(cell)) / 2.0
        }
    }
}
