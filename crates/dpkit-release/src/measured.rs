//! What a private query measures: its aggregates, the exact quantities
//! (measurements) behind each, how group keys are chosen and how the
//! answer's columns are laid out. The planner produces a [`MeasuredQuery`];
//! the privacy step prices it, adds the noise and builds the answer.

pub use crate::grid::Grid;

/// What one released aggregate is.
#[derive(Debug, Clone, PartialEq)]
pub enum AggregateKind {
    /// `COUNT(*)`: rows.
    CountRows,
    /// `COUNT(expression)`: rows where the expression is not NULL.
    CountColumn(String),
    /// `COUNT(DISTINCT id)` under the id privacy unit: the number of people.
    CountPeople,
    /// `COUNT(DISTINCT expression)`: how many values, each row adding at
    /// most one, so it moves as a count of rows does.
    CountDistinct(String),
    /// `SUM(expression)` with the values clamped to public bounds.
    Sum {
        /// The summed column or expression.
        column: String,
        /// Its public bounds (from the description and the query's literals).
        bounds: (f64, f64),
        /// Whether it holds whole numbers (integer noise can be used).
        integer: bool,
    },
    /// `AVG(expression)`: the centre plus a noisy sum of the values' distances
    /// from it over a noisy count, clamped to the bounds.
    Avg {
        /// The averaged column or expression.
        column: String,
        /// Its public bounds.
        bounds: (f64, f64),
        /// The middle of the bounds, which the summed values are centred on.
        centre: f64,
    },
    /// `VAR`, `STDDEV` and their population forms, from a noisy centred sum
    /// of squares, a noisy centred sum and a noisy count.
    Dispersion {
        /// The column or expression.
        column: String,
        /// Its public bounds.
        bounds: (f64, f64),
        /// The middle of the bounds, which the values are centred on.
        centre: f64,
        /// Which statistic.
        dispersion: Dispersion,
    },
    /// `MEDIAN` and percentiles: a cell of a public grid over the bounds
    /// chosen by the exponential mechanism, with an interval from two more.
    Quantile {
        /// The column or expression.
        column: String,
        /// Which quantile, in [0, 1].
        p: f64,
        /// The public grid.
        grid: Grid,
    },
}

/// Which of a quantile's three choices a measurement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantileRole {
    /// The quantile itself.
    Point,
    /// The interval's lower end: aimed below the quantile's rank by its own
    /// rank error bound, so that it falls below the quantile with the
    /// interval's confidence.
    Lower,
    /// The interval's upper end.
    Upper,
}

impl QuantileRole {
    /// Whether this choice for the quantile `p` is the grid's bound itself
    /// rather than a selection: MIN's lower end and MAX's upper end. The
    /// extreme can be no further; an end aimed past every rank would land
    /// anywhere within its error of the best cell, which may lie beyond a
    /// lone extreme value.
    ///
    /// ```
    /// use dpkit_release::QuantileRole;
    /// assert!(QuantileRole::Lower.is_bound(0.0) && QuantileRole::Upper.is_bound(1.0));
    /// assert!(!QuantileRole::Upper.is_bound(0.0) && !QuantileRole::Point.is_bound(0.0));
    /// ```
    pub fn is_bound(self, p: f64) -> bool {
        match self {
            QuantileRole::Point => false,
            QuantileRole::Lower => p == 0.0,
            QuantileRole::Upper => p == 1.0,
        }
    }
}

/// A variance or standard deviation, of a sample or of a population.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispersion {
    /// The standard deviation (the root) rather than the variance.
    pub root: bool,
    /// The sample statistic (divided by n − 1) rather than the population's (n).
    pub sample: bool,
}

impl Dispersion {
    /// The statistic an SQL aggregate's name asks for, as DataFusion names them.
    pub fn of(name: &str) -> Option<Self> {
        let (root, sample) = match name {
            "var" | "var_samp" | "var_sample" | "variance" | "variance_samp" => (false, true),
            "var_pop" | "variance_pop" => (false, false),
            "stddev" | "stddev_samp" | "std" | "stddev_sample" => (true, true),
            "stddev_pop" => (true, false),
            _ => return None,
        };
        Some(Self { root, sample })
    }

    /// Its name in `--explain`.
    pub fn name(self) -> &'static str {
        match (self.root, self.sample) {
            (false, true) => "VAR",
            (false, false) => "VAR_POP",
            (true, true) => "STDDEV",
            (true, false) => "STDDEV_POP",
        }
    }
}

impl AggregateKind {
    /// How far the answer moves per unit of each of its measurements'
    /// noise, to first order, for splitting its ε (see
    /// [`dpkit_core::accounting::split`]). Only public facts: an average is
    /// `c + S/n` with `S` the centred sum, so its error is about
    /// `(Z_S − (μ − c)·Z_n)/n`; the mean `μ` is not public, so the count's
    /// weight is `E|μ − c| = (U − L)/4` for a mean anywhere in `[L, U]`
    /// (uniformly). The common factor `1/n` does not change the split.
    ///
    /// A variance is `(S₂ − S₁²/n)/n` from the centred sums of squares and
    /// of values; to first order its error is
    /// `(Z₂ − 2m·Z₁ + (m² − V)·Z_n)/n` with `m` the centred mean and `V`
    /// the variance. With `r = (U − L)/2`, a mean uniform in the bounds
    /// gives `E|2m| = r`, and `|m² − V| ≤ r²` is taken at `r²/3`, its value
    /// for a uniform mean and no spread. A standard deviation divides all
    /// three by `2σ`, which does not change the split.
    pub fn error_weights(&self) -> Vec<f64> {
        match self {
            Self::Avg { bounds, .. } => vec![1.0, (bounds.1 - bounds.0) / 4.0],
            Self::Dispersion { bounds, .. } => {
                let r = (bounds.1 - bounds.0) / 2.0;
                vec![1.0, r, r * r / 3.0]
            }
            // The quantile counts four times each end of its interval: half
            // the ε for the answer, a quarter for each end.
            Self::Quantile { .. } => vec![4.0, 1.0, 1.0],
            _ => vec![1.0],
        }
    }
}

/// One aggregate of the SELECT list.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateRequest {
    /// The output column's name.
    pub name: String,
    /// What it computes.
    pub kind: AggregateKind,
}

/// One exact quantity the rewritten plan computes per group, which dpkit
/// releases with noise.
#[derive(Debug, Clone, PartialEq)]
pub enum Measurement {
    /// A number of rows.
    Count,
    /// A number of distinct people (each counts once per group).
    People,
    /// An exact sum of values clamped to `bounds` (each a multiple of the
    /// summation grid, so that rounding to it stays within them).
    Sum {
        /// The bounds every summed value lies within.
        bounds: (f64, f64),
        /// Whether the summed values are whole numbers.
        integer: bool,
        /// The summation grid `2^exponent`: every sum is a whole number
        /// of its steps, read and released as such (see
        /// [`crate::ExactGroups`]).
        exponent: i32,
    },
    /// How many values fall in each cell of a grid (one of a quantile's
    /// three choices, which all read the same counts).
    Quantile {
        /// The grid.
        grid: Grid,
        /// Which quantile.
        p: f64,
        /// Which choice.
        role: QuantileRole,
    },
}

impl Measurement {
    /// What one row can add to it, for dpkit-core's accounting.
    pub fn row_values(&self) -> dpkit_core::sensitivity::RowValues {
        match self {
            // A row moves every cell's rank utility by at most one, like a
            // count (see dpkit_core::mechanism::QuantileSelection).
            Self::Count | Self::Quantile { .. } => dpkit_core::sensitivity::RowValues::Count,
            Self::People => dpkit_core::sensitivity::RowValues::People,
            Self::Sum {
                bounds, integer, ..
            } => dpkit_core::sensitivity::RowValues::Bounded {
                lower: bounds.0,
                upper: bounds.1,
                integer: *integer,
            },
        }
    }
}

/// How the released group keys are chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySelection {
    /// No GROUP BY: one row.
    Single,
    /// Every combination of the public domains, whether or not in the data.
    Domain(Vec<Vec<String>>),
    /// Keys seen in the data whose noisy row count passes a threshold (costs δ).
    Threshold,
}

/// One column of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputColumn {
    /// Group key number i.
    Group(usize),
    /// Aggregate number i.
    Aggregate(usize),
    /// Combination number i: arithmetic over released aggregates.
    Combined(usize),
}

/// What a private query measures and how its answer is built from the
/// measurements: everything the privacy step needs, and nothing of how the
/// measurements are computed (that is the planner's).
#[derive(Debug, Clone)]
pub struct MeasuredQuery {
    /// The SQL as given.
    pub sql: String,
    /// Group key names, in GROUP BY order.
    pub group_names: Vec<String>,
    /// The aggregates, in SELECT order.
    pub aggregates: Vec<AggregateRequest>,
    /// The answer's columns, in SELECT order.
    pub outputs: Vec<(String, OutputColumn)>,
    /// Arithmetic over released aggregates that the answer shows
    /// ([`OutputColumn::Combined`]).
    pub combinations: Vec<crate::combined::Combination>,
    /// Measurements, in the rewritten plan's column order after the keys;
    /// `measurement_of[i]` lists aggregate i's measurements.
    pub measurements: Vec<Measurement>,
    /// Which measurements each aggregate uses.
    pub measurement_of: Vec<Vec<usize>>,
    /// The measurement used to threshold keys, if any.
    pub threshold_measurement: Option<usize>,
    /// How keys are chosen.
    pub keys: KeySelection,
    /// HAVING on the released values: rows that do not satisfy it are left
    /// out of the answer (post-processing, before ORDER BY and LIMIT).
    pub having: Option<crate::having::Condition>,
    /// ORDER BY on answer columns: (output index, ascending).
    pub order_by: Vec<(usize, bool)>,
    /// LIMIT on the answer.
    pub limit: Option<usize>,
    /// What one person may contribute (rows, after any joins with public
    /// tables; groups; rows per group), as the plan truncates it.
    pub contribution: dpkit_core::sensitivity::Contribution,
    /// What each join with a public table does to a row of the private
    /// table, which `contribution` accounts for (`--explain` says it).
    pub joins: Vec<String>,
    /// Which neighbouring tables the ε holds for.
    pub neighbouring: dpkit_core::sensitivity::Neighbouring,
    /// A public upper bound on any count (the declared number of people).
    pub count_ceiling: Option<f64>,
    /// Notes for the analyst drawn from the query and the description
    /// alone (a literal outside a column's public domain, say), shown with
    /// the answer and by `--explain`. They never depend on the data.
    pub notes: Vec<String>,
}

impl AggregateKind {
    /// What its measurement `position` measures, as `--explain` prints it.
    pub fn measurement_label(&self, position: usize) -> String {
        match (self, position) {
            (AggregateKind::CountRows, _) => "count of rows".to_string(),
            (AggregateKind::CountColumn(c), _) => format!("count of {c}"),
            (AggregateKind::CountPeople, _) => "distinct people".to_string(),
            (AggregateKind::CountDistinct(c), _) => format!("count of distinct {c}"),
            (AggregateKind::Sum { column, bounds, .. }, _) => {
                format!(
                    "sum of {column} in [{}, {}]",
                    short(bounds.0),
                    short(bounds.1)
                )
            }
            (AggregateKind::Avg { column, centre, .. }, 0) => format!("sum of {column} − {centre}"),
            (AggregateKind::Dispersion { column, centre, .. }, 0) => {
                format!("sum of ({column} − {centre})²")
            }
            (AggregateKind::Dispersion { column, centre, .. }, 1) => {
                format!("sum of {column} − {centre}")
            }
            (AggregateKind::Avg { column, .. } | AggregateKind::Dispersion { column, .. }, _) => {
                format!("count of {column}")
            }
            (AggregateKind::Quantile { column, p, .. }, 0) => format!("quantile {p} of {column}"),
            (AggregateKind::Quantile { column, .. }, 1) => format!("lower end for {column}"),
            (AggregateKind::Quantile { column, .. }, _) => format!("upper end for {column}"),
        }
    }
}

impl MeasuredQuery {
    /// What one person may move among the released groups: the truncated
    /// contribution, with its groups lowered to the number of released keys
    /// when they are a public domain (fixed before any row is read; see
    /// `Contribution::within_released`, whose argument is in dpkit-core).
    pub fn released_contribution(&self) -> dpkit_core::sensitivity::Contribution {
        match &self.keys {
            KeySelection::Domain(keys) => self.contribution.within_released(keys.len() as u64),
            KeySelection::Single | KeySelection::Threshold => self.contribution,
        }
    }

    /// How many ways aggregate `a`'s interval level is split: an aggregate
    /// used by a combination of `j` aggregates has its interval at level
    /// 1 − α/j, so that the combination's holds at 1 − α (see
    /// [`crate::combined`]); one used by several takes the largest `j`.
    pub fn interval_divisor(&self, a: usize) -> usize {
        self.combinations
            .iter()
            .map(crate::combined::Combination::aggregates)
            .filter(|used| used.contains(&a))
            .map(|used| used.len())
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// What its measurement `m` measures, as `--explain` prints it.
    pub fn measurement_label(&self, m: usize) -> Option<String> {
        let (a, position) = self.measurement_of.iter().enumerate().find_map(|(a, ms)| {
            ms.iter()
                .position(|&x| x == m)
                .map(|position| (a, position))
        })?;
        Some(self.aggregates[a].kind.measurement_label(position))
    }
}

/// `x` as written, or in scientific notation where that would run to
/// more than about sixteen digits (a bound of 1e300 or 1e-300).
fn short(x: f64) -> String {
    if x == 0.0 || (1e-6..1e16).contains(&x.abs()) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}
