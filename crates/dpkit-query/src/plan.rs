//! From SQL to a private plan: the query's logical plan is checked node by
//! node and rewritten into one that computes only clamped,
//! contribution-bounded exact aggregates with DataFusion's built-in
//! functions. dpkit then adds the noise to that small result.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, ScalarValue};
use datafusion::functions_aggregate::expr_fn::{count, sum};
use datafusion::logical_expr::{
    Aggregate, Expr, ExprFunctionExt, LogicalPlan, LogicalPlanBuilder, SortExpr, cast, lit, when,
};

use crate::clamp::clamp_to_bounds;
use crate::description::{ColumnKind, Description, PrivacyUnit};
use crate::error::{QueryError, Result};

/// What one released aggregate is.
#[derive(Debug, Clone, PartialEq)]
pub enum AggregateKind {
    /// `COUNT(*)`: rows.
    CountRows,
    /// `COUNT(column)`: rows where the column is not NULL.
    CountColumn(String),
    /// `SUM(column)` with the column clamped to its public bounds.
    Sum {
        /// The column.
        column: String,
        /// Its public bounds.
        bounds: (f64, f64),
        /// Whether it holds whole numbers (integer noise can be used).
        integer: bool,
    },
    /// `AVG(column)`: a noisy sum over a noisy count, clamped to the bounds.
    Avg {
        /// The column.
        column: String,
        /// Its public bounds.
        bounds: (f64, f64),
    },
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
    /// A number of rows (sensitivity: rows per person).
    Count,
    /// A clamped sum (sensitivity: rows per person × max |bound|).
    Sum {
        /// The larger absolute bound.
        magnitude: f64,
        /// Whether the summed values are whole numbers.
        integer: bool,
    },
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
    /// A public upper bound on any count (the declared number of people).
    pub count_ceiling: Option<f64>,
}

/// Enough domain cells: a GROUP BY over more combinations is refused.
const MAX_DOMAIN_CELLS: usize = 100_000;
/// An integer column's values are enumerated to find its bins' domain.
const MAX_ENUMERATED_VALUES: f64 = 1_000_000.0;

fn not_private(reason: impl Into<String>) -> QueryError {
    QueryError::NotPrivate(reason.into())
}

/// Strips aliases.
fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

/// Refuses subqueries anywhere in an expression.
fn refuse_subqueries(expr: &Expr) -> Result<()> {
    let found = expr
        .exists(|e| {
            Ok(matches!(
                e,
                Expr::ScalarSubquery(_)
                    | Expr::InSubquery(_)
                    | Expr::Exists(_)
                    | Expr::SetComparison(_)
            ))
        })
        .map_err(|e| QueryError::Sql(e.to_string()))?;
    if found {
        return Err(not_private("subqueries are not supported"));
    }
    Ok(())
}

/// The columns an expression reads.
fn columns_of(expr: &Expr) -> Vec<String> {
    let mut names: Vec<String> = expr
        .column_refs()
        .into_iter()
        .map(|c| c.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `CASE WHEN c < low THEN low WHEN c > high THEN high ELSE c END`.
fn clamp(value: Expr, low: Expr, high: Expr) -> Result<Expr> {
    when(value.clone().lt(low.clone()), low)
        .when(value.clone().gt(high.clone()), high)
        .otherwise(value)
        .map_err(|e| QueryError::Sql(e.to_string()))
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
            "dpkit answers SELECT … FROM table [WHERE …] [GROUP BY …] with COUNT, SUM or AVG",
        ));
    };
    let LogicalPlan::Aggregate(aggregate) = projection.input.as_ref() else {
        return match projection.input.as_ref() {
            LogicalPlan::Filter(_) if has_aggregate_below(&projection.input) => Err(not_private(
                "HAVING is not supported: it would filter on exact aggregates",
            )),
            LogicalPlan::Sort(_) => Err(not_private("ORDER BY must name columns of the answer")),
            _ => Err(not_private(
                "every query must aggregate (COUNT, SUM, AVG): dpkit never releases rows",
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

/// Checks the input below the aggregate: filters over one scan of the table.
fn check_input(plan: &LogicalPlan, table: &str) -> Result<()> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            if scan.table_name.table() != table {
                return Err(QueryError::Sql(format!(
                    "unknown table '{}'",
                    scan.table_name
                )));
            }
            for filter in &scan.filters {
                refuse_subqueries(filter)?;
            }
            Ok(())
        }
        LogicalPlan::Filter(filter) => {
            refuse_subqueries(&filter.predicate)?;
            check_input(&filter.input, table)
        }
        LogicalPlan::Projection(projection) => {
            for expr in &projection.expr {
                refuse_subqueries(expr)?;
            }
            check_input(&projection.input, table)
        }
        LogicalPlan::SubqueryAlias(alias) => check_input(&alias.input, table),
        LogicalPlan::Join(_) => Err(not_private("joins are not supported")),
        LogicalPlan::Union(_) => Err(not_private("UNION is not supported")),
        LogicalPlan::Window(_) => Err(not_private("window functions are not supported")),
        LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => Err(not_private(
            "nested aggregation and DISTINCT subqueries are not supported",
        )),
        LogicalPlan::Limit(_) | LogicalPlan::Sort(_) => Err(not_private(
            "ORDER BY and LIMIT are only supported on the answer",
        )),
        _ => Err(not_private(
            "subqueries and table functions are not supported",
        )),
    }
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
    table_type_of: &dyn Fn(&str) -> Option<DataType>,
    domain_of: &mut DomainOf<'_>,
) -> Result<PrivateQuery> {
    let shape = peel(logical)?;
    let aggregate = shape.aggregate;
    check_input(&aggregate.input, &description.table)?;
    let rows_per_person = description.privacy_unit.rows_per_person();

    // GROUP BY: each key is a public-domain column, a function of one bounded
    // integer column (its domain is enumerated from the bounds), or, without
    // a domain, keys are thresholded.
    let mut group_exprs = Vec::new();
    let mut domains: Vec<Option<Vec<String>>> = Vec::new();
    let mut group_names = Vec::new();
    for (index, expr) in aggregate.group_expr.iter().enumerate() {
        refuse_subqueries(expr)?;
        if matches!(expr, Expr::GroupingSet(_)) {
            return Err(not_private(
                "GROUPING SETS, CUBE and ROLLUP are not supported",
            ));
        }
        group_names.push(aggregate.schema.field(index).name().clone());
        let columns = columns_of(expr);
        let facts = columns.first().and_then(|c| description.column(c));
        let bare_column = matches!(unalias(expr), Expr::Column(_));
        let (rewritten, domain) = match (columns.as_slice(), facts) {
            ([_], Some(facts)) if bare_column && facts.domain.is_some() => {
                (expr.clone(), facts.domain.clone())
            }
            ([column], Some(facts))
                if facts.kind == ColumnKind::Integer && facts.bounds.is_some() =>
            {
                let (low, high) = facts.bounds.unwrap_or((0.0, 0.0));
                if high - low >= MAX_ENUMERATED_VALUES || low.fract() != 0.0 || high.fract() != 0.0
                {
                    return Err(not_private(format!(
                        "GROUP BY over '{column}' needs whole-number bounds less than 10⁶ apart"
                    )));
                }
                let (low, high) = (low as i64, high as i64);
                let clamped = clamp(
                    Expr::Column(Column::new_unqualified(column.clone())),
                    lit(low),
                    lit(high),
                )?;
                let rewritten = expr
                    .clone()
                    .transform(|e| match e {
                        Expr::Column(c) if &c.name == column => {
                            Ok(Transformed::yes(clamped.clone()))
                        }
                        other => Ok(Transformed::no(other)),
                    })
                    .map_err(|e| QueryError::Sql(e.to_string()))?
                    .data;
                let domain = domain_of(expr, column, (low, high))?;
                (rewritten, Some(domain))
            }
            ([column], _) if bare_column => {
                if description
                    .column(column)
                    .is_some_and(|f| f.kind == ColumnKind::Real)
                {
                    return Err(not_private(format!(
                        "GROUP BY over the real-valued '{column}' needs bins: group by an \
                         expression over a bounded integer column"
                    )));
                }
                (expr.clone(), None)
            }
            ([], _) => return Err(not_private("GROUP BY a constant is not supported")),
            _ => {
                return Err(not_private(
                    "GROUP BY takes columns, or expressions over one bounded integer column",
                ));
            }
        };
        group_exprs.push(rewritten.alias(format!("__dpkit_key_{index}")));
        domains.push(domain);
    }
    let keys = if group_exprs.is_empty() {
        KeySelection::Single
    } else if domains.iter().all(Option::is_some) {
        let mut cells: Vec<Vec<String>> = vec![vec![]];
        for domain in domains.iter().flatten() {
            if cells.len().saturating_mul(domain.len()) > MAX_DOMAIN_CELLS {
                return Err(not_private(format!(
                    "the GROUP BY domains have more than {MAX_DOMAIN_CELLS} combinations"
                )));
            }
            cells = cells
                .iter()
                .flat_map(|cell| {
                    domain.iter().map(move |value| {
                        let mut next = cell.clone();
                        next.push(value.clone());
                        next
                    })
                })
                .collect();
        }
        KeySelection::Domain(cells)
    } else {
        KeySelection::Threshold
    };

    // Aggregates: COUNT(*), COUNT(col), SUM(col), AVG(col).
    let mut aggregates = Vec::new();
    let mut measurements = Vec::new();
    let mut measurement_exprs = Vec::new();
    let mut measurement_of = Vec::new();
    for (index, expr) in aggregate.aggr_expr.iter().enumerate() {
        let name = aggregate
            .schema
            .field(aggregate.group_expr.len() + index)
            .name()
            .clone();
        let Expr::AggregateFunction(function) = unalias(expr) else {
            return Err(not_private(format!(
                "'{name}' is not an aggregate dpkit supports"
            )));
        };
        let params = &function.params;
        if params.distinct {
            return Err(not_private("DISTINCT aggregates are not supported"));
        }
        if params.filter.is_some() || !params.order_by.is_empty() {
            return Err(not_private(
                "FILTER and ORDER BY inside aggregates are not supported",
            ));
        }
        let function_name = function.func.name().to_ascii_lowercase();
        let argument = params.args.first().map(unalias);
        let column_argument = match argument {
            Some(Expr::Column(c)) => Some(c.name.clone()),
            _ => None,
        };
        let kind = match (function_name.as_str(), argument, &column_argument) {
            ("count", Some(Expr::Literal(value, _)), _) if !value.is_null() => {
                AggregateKind::CountRows
            }
            ("count", None, _) => AggregateKind::CountRows,
            ("count", _, Some(column)) => AggregateKind::CountColumn(column.clone()),
            ("sum" | "avg", _, Some(column)) => {
                let facts = description.column(column).ok_or_else(|| {
                    not_private(format!(
                        "'{column}' has no public bounds in the data description"
                    ))
                })?;
                let data_type = table_type_of(column);
                if !data_type.as_ref().is_some_and(DataType::is_numeric)
                    || facts.kind == ColumnKind::Text
                {
                    return Err(not_private(format!(
                        "{} needs a numeric column; '{column}' is not",
                        function_name.to_uppercase()
                    )));
                }
                let bounds = facts.bounds.ok_or_else(|| {
                    not_private(format!(
                        "'{column}' has no public bounds in the data description"
                    ))
                })?;
                if function_name == "sum" {
                    AggregateKind::Sum {
                        column: column.clone(),
                        bounds,
                        integer: facts.kind == ColumnKind::Integer
                            && bounds.0.fract() == 0.0
                            && bounds.1.fract() == 0.0,
                    }
                } else {
                    AggregateKind::Avg {
                        column: column.clone(),
                        bounds,
                    }
                }
            }
            ("sum" | "avg", _, None) => {
                return Err(not_private(format!(
                    "{} takes one column",
                    function_name.to_uppercase()
                )));
            }
            (other, _, _) => {
                return Err(not_private(format!(
                    "{}() is not supported: use COUNT, SUM or AVG",
                    other.to_uppercase()
                )));
            }
        };
        let clamped_sum = |column: &str, (low, high): (f64, f64)| -> Result<Expr> {
            let value = cast(
                Expr::Column(Column::new_unqualified(column)),
                DataType::Float64,
            );
            Ok(sum(clamp_to_bounds(value, low, high)))
        };
        let mut mine = Vec::new();
        let mut add = |measurement: Measurement, expr: Expr| {
            mine.push(measurements.len());
            measurement_exprs.push(expr.alias(format!("__dpkit_measure_{}", measurements.len())));
            measurements.push(measurement);
        };
        match &kind {
            AggregateKind::CountRows => add(Measurement::Count, count(lit(1i64))),
            AggregateKind::CountColumn(column) => add(
                Measurement::Count,
                count(Expr::Column(Column::new_unqualified(column))),
            ),
            AggregateKind::Sum {
                column,
                bounds,
                integer,
            } => add(
                Measurement::Sum {
                    magnitude: bounds.0.abs().max(bounds.1.abs()),
                    integer: *integer,
                },
                clamped_sum(column, *bounds)?,
            ),
            AggregateKind::Avg { column, bounds } => {
                add(
                    Measurement::Sum {
                        magnitude: bounds.0.abs().max(bounds.1.abs()),
                        integer: false,
                    },
                    clamped_sum(column, *bounds)?,
                );
                add(
                    Measurement::Count,
                    count(Expr::Column(Column::new_unqualified(column))),
                );
            }
        }
        for &m in &mine {
            if let Measurement::Sum { magnitude, .. } = measurements[m]
                && magnitude == 0.0
            {
                return Err(not_private(format!(
                    "the bounds of '{name}' are [0, 0]: nothing to sum"
                )));
            }
        }
        measurement_of.push(mine);
        aggregates.push(AggregateRequest { name, kind });
    }
    // Thresholded keys need a noisy row count: the query's own COUNT(*) if it
    // has one (released and thresholded, both post-processing of one noisy
    // value), else a count of its own.
    let own_count = aggregates
        .iter()
        .position(|a| a.kind == AggregateKind::CountRows)
        .map(|a| measurement_of[a][0]);
    let threshold_measurement = (keys == KeySelection::Threshold).then(|| {
        own_count.unwrap_or_else(|| {
            measurement_exprs
                .push(count(lit(1i64)).alias(format!("__dpkit_measure_{}", measurements.len())));
            measurements.push(Measurement::Count);
            measurements.len() - 1
        })
    });

    // The answer's columns, in SELECT order.
    let mut outputs = Vec::new();
    for expr in shape.projection {
        let Expr::Column(column) = unalias(expr) else {
            return Err(not_private(
                "the SELECT list takes GROUP BY keys and aggregates, not expressions over them",
            ));
        };
        let position = aggregate
            .schema
            .index_of_column(column)
            .map_err(|e| QueryError::Sql(e.to_string()))?;
        let output = if position < aggregate.group_expr.len() {
            OutputColumn::Group(position)
        } else {
            OutputColumn::Aggregate(position - aggregate.group_expr.len())
        };
        let shown = match expr {
            Expr::Alias(alias) => alias.name.clone(),
            _ => column.name.clone(),
        };
        if let OutputColumn::Aggregate(a) = output {
            aggregates[a].name = shown.clone();
        }
        outputs.push((shown, output));
    }
    let mut order_by = Vec::new();
    for sort in shape.sort.unwrap_or_default() {
        let Expr::Column(column) = unalias(&sort.expr) else {
            return Err(not_private("ORDER BY must name columns of the answer"));
        };
        let position = outputs
            .iter()
            .position(|(name, _)| name == &column.name)
            .ok_or_else(|| not_private("ORDER BY must name columns of the answer"))?;
        order_by.push((position, sort.asc));
    }

    // The rewritten plan: the original input (its filters), contribution
    // bounding, then one aggregate of keys and measurements.
    let mut builder = LogicalPlanBuilder::from(aggregate.input.as_ref().clone());
    if let PrivacyUnit::Id { column, max_rows } = &description.privacy_unit {
        let numbered = datafusion::functions_window::expr_fn::row_number()
            .partition_by(vec![Expr::Column(Column::new_unqualified(column))])
            .build()
            .map_err(|e| QueryError::Sql(e.to_string()))?
            .alias("__dpkit_row_of_person");
        builder = builder
            .window(vec![numbered])
            .and_then(|b| {
                b.filter(
                    Expr::Column(Column::new_unqualified("__dpkit_row_of_person"))
                        .lt_eq(lit(*max_rows as i64)),
                )
            })
            .map_err(|e| QueryError::Sql(e.to_string()))?;
    }
    let plan = builder
        .aggregate(group_exprs, measurement_exprs)
        .and_then(LogicalPlanBuilder::build)
        .map_err(|e| QueryError::Sql(e.to_string()))?;
    Ok(PrivateQuery {
        sql: sql.to_string(),
        group_names,
        aggregates,
        outputs,
        measurements,
        measurement_of,
        threshold_measurement,
        keys,
        order_by,
        limit: shape.limit,
        plan,
        rows_per_person,
        count_ceiling: description
            .public_rows
            .map(|people| (people * rows_per_person) as f64),
    })
}
