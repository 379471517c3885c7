//! From SQL to a private plan: the query's logical plan is checked node by
//! node and rewritten into one that computes only clamped exact aggregates
//! of total expressions (see [`crate::total`]) over the typed, per-person
//! capped table (see `source`). dpkit then adds the noise to that small
//! result.
//!
//! The steps, one module each: `input` rewrites what is below the
//! aggregate (filters and subqueries), `keys` the GROUP BY, `aggregates`
//! the aggregates (with `bounds` for the bounds of an aggregate's
//! argument), and `outputs` the SELECT list, ORDER BY and LIMIT.

mod aggregates;
mod bounds;
mod input;
mod keys;
mod lineage;
mod moments;
mod outputs;
mod quantiles;

pub use quantiles::Grid;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, LogicalPlanBuilder, SortExpr};

use crate::description::Description;
use crate::error::{QueryError, Result};
use crate::total::{Size, Sizes};

/// What one released aggregate is.
#[derive(Debug, Clone, PartialEq)]
pub enum AggregateKind {
    /// `COUNT(*)`: rows.
    CountRows,
    /// `COUNT(expression)`: rows where the expression is not NULL.
    CountColumn(String),
    /// `COUNT(DISTINCT id)` under the id privacy unit: the number of people.
    CountPeople,
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
        /// [`crate::release::ExactGroups`]).
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
}

/// A query dpkit can answer privately.
#[derive(Debug, Clone)]
pub struct PrivateQuery {
    /// The SQL as given.
    pub sql: String,
    /// Group key names, in GROUP BY order.
    pub group_names: Vec<String>,
    /// The aggregates, in SELECT order.
    pub aggregates: Vec<AggregateRequest>,
    /// The answer's columns, in SELECT order.
    pub outputs: Vec<(String, OutputColumn)>,
    /// Measurements, in the rewritten plan's column order after the keys;
    /// `measurement_of[i]` lists aggregate i's measurements.
    pub measurements: Vec<Measurement>,
    /// Which measurements each aggregate uses.
    pub measurement_of: Vec<Vec<usize>>,
    /// The measurement used to threshold keys, if any.
    pub threshold_measurement: Option<usize>,
    /// How keys are chosen.
    pub keys: KeySelection,
    /// ORDER BY on answer columns: (output index, ascending).
    pub order_by: Vec<(usize, bool)>,
    /// LIMIT on the answer.
    pub limit: Option<usize>,
    /// The rewritten plan: keys, then one column per measurement.
    pub plan: LogicalPlan,
    /// Rows per person.
    pub rows_per_person: u64,
    /// Which neighbouring tables the ε holds for.
    pub neighbouring: dpkit_core::sensitivity::Neighbouring,
    /// A public upper bound on any count (the declared number of people).
    pub count_ceiling: Option<f64>,
    /// The plan as the SQL a database runs, when the table lives in one.
    pub remote: Option<crate::backend::RemotePlan>,
}

fn not_private(reason: impl Into<String>) -> QueryError {
    QueryError::NotPrivate(reason.into())
}

fn sql_error(error: impl std::fmt::Display) -> QueryError {
    QueryError::Sql(error.to_string())
}

/// Strips aliases.
fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

/// The SELECT's pieces, peeled off the logical plan.
struct Shape<'a> {
    projection: &'a [Expr],
    aggregate: &'a Aggregate,
    sort: Option<&'a [SortExpr]>,
    limit: Option<usize>,
}

fn peel(plan: &LogicalPlan) -> Result<Shape<'_>> {
    let mut node = plan;
    let mut limit = None;
    let mut sort = None;
    if let LogicalPlan::Limit(l) = node {
        if l.skip.is_some() {
            return Err(not_private("OFFSET is not supported"));
        }
        limit = match l.fetch.as_deref() {
            None => None,
            Some(Expr::Literal(ScalarValue::Int64(Some(n)), _)) if *n >= 0 => Some(*n as usize),
            Some(_) => return Err(not_private("LIMIT must be a whole number")),
        };
        node = &l.input;
    }
    if let LogicalPlan::Sort(s) = node {
        if let Some(fetch) = s.fetch {
            limit = Some(limit.map_or(fetch, |l: usize| l.min(fetch)));
        }
        sort = Some(s.expr.as_slice());
        node = &s.input;
    }
    let LogicalPlan::Projection(projection) = node else {
        return Err(not_private(
            "dpkit answers SELECT … FROM table [WHERE …] [GROUP BY …] with COUNT, SUM, AVG, VAR, STDDEV, MEDIAN or PERCENTILE_CONT",
        ));
    };
    let LogicalPlan::Aggregate(aggregate) = projection.input.as_ref() else {
        return match projection.input.as_ref() {
            LogicalPlan::Filter(_) if has_aggregate_below(&projection.input) => Err(not_private(
                "HAVING is not supported: it would filter on exact aggregates; \
                 filter the released answer instead, which costs nothing more",
            )),
            LogicalPlan::Sort(_) => Err(not_private("ORDER BY must name columns of the answer")),
            _ => Err(not_private(
                "every query must aggregate (COUNT, SUM, AVG, VAR, STDDEV, MEDIAN or PERCENTILE_CONT): dpkit never releases rows",
            )),
        };
    };
    Ok(Shape {
        projection: &projection.expr,
        aggregate,
        sort,
        limit,
    })
}

fn has_aggregate_below(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Aggregate(_))
        || plan.inputs().iter().any(|p| has_aggregate_below(p))
}

/// Evaluates a GROUP BY expression over every value of one bounded integer
/// column (its name and bounds), giving the public domain of its bins.
pub(crate) type DomainOf<'a> = dyn FnMut(&Expr, &str, (i64, i64)) -> Result<Vec<String>> + 'a;

/// Plans `sql` privately against `description`; `domain_of` evaluates a
/// GROUP BY expression over every value of one bounded integer column.
pub(crate) fn plan_private(
    sql: &str,
    logical: &LogicalPlan,
    description: &Description,
    view: &LogicalPlan,
    domain_of: &mut DomainOf<'_>,
) -> Result<PrivateQuery> {
    let shape = peel(logical)?;
    let aggregate = shape.aggregate;
    let base = base_sizes(view, description);
    let (input, sizes, filter_work) =
        input::rewrite(&aggregate.input, &description.table, view, &base)?;
    #[cfg(feature = "planted-holes")]
    let input = planted_cap_after_from(input, description)?;
    let reads_table = input::reads_table_directly(&aggregate.input, &description.table, view);
    let lineage = lineage::Lineage {
        plan: &aggregate.input,
        table: &description.table,
        view,
        description,
    };
    let keys = keys::plan(aggregate, input.schema(), &sizes, &lineage, domain_of)?;
    let mut measured = aggregates::plan(aggregate, input.schema(), &sizes, &lineage, reads_table)?;
    crate::total::check_work(
        filter_work
            .saturating_add(keys.work)
            .saturating_add(measured.work),
    )?;
    let threshold_measurement =
        (keys.selection == KeySelection::Threshold).then(|| measured.threshold_count());
    let (outputs, order_by) = outputs::plan(&shape, aggregate, &mut measured.aggregates)?;
    let plan = LogicalPlanBuilder::from(input)
        .aggregate(keys.exprs, measured.exprs)
        .and_then(LogicalPlanBuilder::build)
        .map_err(sql_error)?;
    let rows_per_person = description.privacy_unit.rows_per_person();
    Ok(PrivateQuery {
        sql: sql.to_string(),
        group_names: keys.names,
        aggregates: measured.aggregates,
        outputs,
        measurements: measured.measurements,
        measurement_of: measured.measurement_of,
        threshold_measurement,
        keys: keys.selection,
        order_by,
        limit: shape.limit,
        plan,
        rows_per_person,
        neighbouring: description.neighbouring,
        count_ceiling: description
            .public_rows
            .and_then(|people| people.checked_mul(rows_per_person))
            .map(|rows| rows as f64),
        remote: None,
    })
}

/// The [`Size`] of each of the table's columns: text at most its
/// `max_length` characters, anything else a number's length.
fn base_sizes(view: &LogicalPlan, description: &Description) -> Sizes {
    view.schema()
        .fields()
        .iter()
        .map(|field| {
            let bytes = if field.data_type() == &datafusion::arrow::datatypes::DataType::Utf8 {
                crate::total_work::bytes_of_characters(description.max_length(field.name()))
            } else {
                crate::total_work::NUMBER_AS_TEXT_BYTES
            };
            (field.name().clone(), Size::base(bytes))
        })
        .collect()
}

/// The hole: the cap partitioned by whatever the query's FROM calls the id.
#[cfg(feature = "planted-holes")]
fn planted_cap_after_from(input: LogicalPlan, description: &Description) -> Result<LogicalPlan> {
    use datafusion::common::Column;
    use datafusion::logical_expr::{ExprFunctionExt, lit};
    let planted = crate::planted::is_planted(crate::planted::Hole::CapAfterFrom);
    let crate::description::PrivacyUnit::Id { column, max_rows } = &description.privacy_unit else {
        return Ok(input);
    };
    if !planted {
        return Ok(input);
    }
    let numbered = datafusion::functions_window::expr_fn::row_number()
        .partition_by(vec![Expr::Column(Column::new_unqualified(column))])
        .build()
        .map_err(sql_error)?
        .alias("__dpkit_planted_row");
    // The input's own columns after the filter, as the real cap keeps
    // them: a database's SQL then reads the numbered rows as a subquery.
    let columns: Vec<Expr> = input
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    LogicalPlanBuilder::from(input)
        .window(vec![numbered])
        .and_then(|b| {
            b.filter(
                Expr::Column(Column::new_unqualified("__dpkit_planted_row"))
                    .lt_eq(lit(*max_rows as i64)),
            )
        })
        .and_then(|b| b.project(columns))
        .and_then(LogicalPlanBuilder::build)
        .map_err(sql_error)
}
