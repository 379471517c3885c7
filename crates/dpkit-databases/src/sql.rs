//! The rewritten private plan as one SQL statement for a database.
//!
//! The plan is the one the embedded engine runs (the capped, typed view,
//! the total expressions, the clamps, the exact sums); only its spelling
//! changes, in four steps:
//! 1. **Expressions are mapped, with their types** ([`Translation`]):
//!    identity casts are dropped; on SQLite every function, cast, LIKE and
//!    regular expression becomes a call of a function that dpkit registers
//!    on the connection and computes with the embedded engine's own code
//!    (so the same rows give the same values, and nothing can raise a
//!    SQLite error); on PostgreSQL only what has a form that cannot fail is
//!    kept, and anything else is refused at planning, which spends nothing.
//! 2. **DataFusion's unparser** writes the plan as SQL.
//! 3. **The analyst's names are renamed** to names dpkit made, on the
//!    syntax tree, before anything is printed ([`super::renamed`]).
//! 4. **dpkit's functions are spelled** in the database's SQL on the syntax
//!    tree ([`spell_postgres`]), and the raw table is defined by a `WITH`
//!    clause that reads the database table with the declared types; the
//!    statement is checked to hold no name of the analyst's, read back as
//!    the database will read it and compared with the tree dpkit wrote.
//!    Before that check, on SQLite, a count of a value that the same
//!    `SELECT` sums is made by the sum's call ([`super::counted_sums`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, ScalarValue, TableReference};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{AggregateUDFImpl, BinaryExpr, Expr, ExprSchemable, LogicalPlan};
use datafusion::sql::unparser::Unparser;

use super::bridge::Sqlite;
use super::exprs::{call, clamp_reach};
use super::flavour::{Flavour, unavailable};
use super::placeholder::PlaceholderAggregate;
use crate::cut_column;
use crate::error::{DatabaseError, Result};
use dpkit_functions::exact_sum::{Steps, clamp_inside};

/// The SQL a database runs for a private plan.
#[derive(Debug, Clone)]
pub struct RemotePlan {
    /// The database it is written for.
    pub flavour: Flavour,
    /// The statement sent (what `--explain` shows).
    pub sql: String,
    /// Functions the statement calls that SQLite computes in dpkit's code.
    pub(crate) functions: Vec<Sqlite>,
}

fn unparse_error(error: impl std::fmt::Display) -> DatabaseError {
    DatabaseError::Sql(format!("cannot write the plan as SQL: {error}"))
}

/// `plan` as SQL for `flavour`; `raw_tables` are the names the plan reads,
/// each with the `SELECT` that defines it from the database's table, which
/// also reads each `(table, column, length)` of `cuts` cut (under
/// [`crate::cut_column`]'s name); the
/// tables' names and columns are `names` (sent as they are; every other
/// name is renamed); `rows_bound` a public bound on a group's rows, if
/// there is one.
pub(crate) fn remote_plan(
    plan: &LogicalPlan,
    flavour: Flavour,
    raw_tables: &[(String, &str)],
    cuts: &[(String, String, u32)],
    names: &[&str],
    rows_bound: Option<f64>,
) -> Result<RemotePlan> {
    let mut translation = Translation {
        flavour,
        functions: Vec::new(),
        rows_bound,
        cuts,
    };
    let mapped = plan
        .clone()
        .transform_up(|node| translation.node(node))
        .map_err(|e| match e {
            datafusion::error::DataFusionError::External(inner) => {
                match inner.downcast::<DatabaseError>() {
                    Ok(refusal) => *refusal,
                    Err(other) => unparse_error(other),
                }
            }
            other => unparse_error(other),
        })?
        .data;
    let mut statement = unparse(&mapped, flavour)?;
    let raw_names = raw_tables.iter().map(|(raw, _)| raw.as_str());
    let kept = names.iter().copied().chain(raw_names).map(str::to_string);
    let kept = kept.collect();
    super::renamed::rename(&mut statement, &kept);
    super::spelling::spell(&mut statement, flavour)?;
    if flavour == Flavour::Sqlite {
        super::counted_sums::counted_by_sums(&mut statement, &mut translation.functions)?;
    }
    super::renamed::renamed_everywhere(&statement.to_string(), &kept, flavour)?;
    let statement = super::spelling::reads_back(&statement, flavour)?;
    let defined: Vec<String> = raw_tables
        .iter()
        .map(|(raw, source)| format!("{} AS ({source})", flavour.quote(raw)))
        .collect();
    let sql = format!("WITH {} {statement}", defined.join(", "));
    super::spelling::unambiguous(&sql, flavour)?;
    Ok(RemotePlan {
        flavour,
        sql,
        functions: translation.functions,
    })
}

/// Step 2: DataFusion's unparser, in the database's dialect.
fn unparse(
    plan: &LogicalPlan,
    flavour: Flavour,
) -> Result<datafusion::sql::sqlparser::ast::Statement> {
    use datafusion::sql::unparser::dialect::{PostgreSqlDialect, SqliteDialect};
    match flavour {
        Flavour::Sqlite => Unparser::new(&SqliteDialect {}).plan_to_sql(plan),
        Flavour::Postgres => Unparser::new(&PostgreSqlDialect {}).plan_to_sql(plan),
        Flavour::Spark => Unparser::new(&SparkDialect).plan_to_sql(plan),
    }
    .map_err(unparse_error)
}

/// Spark SQL for the unparser: backticks, `DOUBLE`, `BIGINT` and `STRING`,
/// an alias on every derived table, no `QUALIFY` (the per-person cap's
/// window is filtered in a subquery) and no frame on window functions
/// (Spark refuses one on `row_number`).
struct SparkDialect;

impl datafusion::sql::unparser::dialect::Dialect for SparkDialect {
    fn identifier_quote_style(&self, _identifier: &str) -> Option<char> {
        Some('`')
    }

    fn float64_ast_dtype(&self) -> datafusion::sql::sqlparser::ast::DataType {
        datafusion::sql::sqlparser::ast::DataType::Double(
            datafusion::sql::sqlparser::ast::ExactNumberInfo::None,
        )
    }

    fn int64_cast_dtype(&self) -> datafusion::sql::sqlparser::ast::DataType {
        datafusion::sql::sqlparser::ast::DataType::BigInt(None)
    }

    fn utf8_cast_dtype(&self) -> datafusion::sql::sqlparser::ast::DataType {
        datafusion::sql::sqlparser::ast::DataType::String(None)
    }

    fn requires_derived_table_alias(&self) -> bool {
        true
    }

    fn supports_qualify(&self) -> bool {
        false
    }

    fn window_func_support_window_frame(
        &self,
        _func_name: &str,
        _start_bound: &datafusion::sql::sqlparser::ast::WindowFrameBound,
        _end_bound: &datafusion::sql::sqlparser::ast::WindowFrameBound,
    ) -> bool {
        false
    }
}

/// The expression mapping of step 1.
struct Translation<'a> {
    flavour: Flavour,
    functions: Vec<Sqlite>,
    rows_bound: Option<f64>,
    /// The columns the tables' typed reads also give cut, by table.
    cuts: &'a [(String, String, u32)],
}

type Step<T> = datafusion::error::Result<Transformed<T>>;

fn refusal(error: DatabaseError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(error))
}

impl Translation<'_> {
    fn node(&mut self, node: LogicalPlan) -> Step<LogicalPlan> {
        let schema = input_schema(&node);
        let flavour = self.flavour;
        let mapped = node.map_expressions(|expr| {
            let named = match flavour {
                Flavour::Sqlite => Transformed::no(expr),
                Flavour::Postgres | Flavour::Spark => super::planned::name_planned(expr)?,
            };
            named.transform_data(|e| e.transform_up(|e| self.expr(e, &schema).map_err(refusal)))
        })?;
        mapped
            .transform_data(|node| one_zero_per_key(node, &schema))?
            .transform_data(|node| cells_by_group(node, flavour))
    }

    fn expr(&mut self, expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        let type_of = |e: &Expr| e.get_type(schema).map_err(unparse_error);
        if let Some(cut) = self.read_cut(&expr) {
            return Ok(Transformed::yes(cut));
        }
        match expr {
            Expr::TryCast(ref cast) if type_of(&cast.expr)? == *cast.field.data_type() => {
                Ok(Transformed::yes(*cast.expr.clone()))
            }
            Expr::Cast(ref cast) if type_of(&cast.expr)? == *cast.field.data_type() => {
                Ok(Transformed::yes(*cast.expr.clone()))
            }
            Expr::AggregateFunction(aggregate) => self.aggregate(aggregate),
            // The cap's random draw per row (`keep = "random"`), the
            // database's own generator's (see `spelling`).
            Expr::ScalarFunction(ref f) if f.name() == "random" && f.args.is_empty() => {
                Ok(Transformed::no(expr))
            }
            other => match self.flavour {
                Flavour::Sqlite => self.sqlite(other, schema),
                Flavour::Postgres | Flavour::Spark => {
                    super::safe_sql::expr(other, &type_of, self.flavour)
                }
            },
        }
    }

    /// `expr`, if it is a cut that a table's typed read already makes
    /// (`dpkit_cut_text` of its column, at the length it is read cut to), as
    /// that read's cut column: the same value, `SUBSTR(column, 1, length)`.
    fn read_cut(&self, expr: &Expr) -> Option<Expr> {
        let Expr::ScalarFunction(function) = expr else {
            return None;
        };
        let [
            Expr::Column(column),
            Expr::Literal(ScalarValue::Int64(Some(length)), _),
        ] = function.args.as_slice()
        else {
            return None;
        };
        let table = column.relation.as_ref()?;
        let read = function.name() == "dpkit_cut_text"
            && self.cuts.iter().any(|(t, c, n)| {
                *table == TableReference::bare(t.as_str())
                    && *c == column.name
                    && i64::from(*n) == *length
            });
        read.then(|| Expr::Column(Column::new(Some(table.clone()), cut_column(&column.name))))
    }

    /// SQLite: whatever DataFusion computes per value, dpkit computes.
    fn sqlite(&mut self, expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        if let Some(native) = integer_as_double(&expr, schema)? {
            return Ok(Transformed::yes(native));
        }
        let computed = match &expr {
            // Spelled in SQLite's SQL (see `spelling`): they run once per
            // row and value in every private query.
            Expr::ScalarFunction(f)
                if ["dpkit_clamp", "dpkit_cut_text", "dpkit_key"].contains(&f.name()) =>
            {
                false
            }
            Expr::ScalarFunction(_) | Expr::Cast(_) | Expr::TryCast(_) | Expr::Like(_) => true,
            Expr::BinaryExpr(BinaryExpr { op, .. }) => !super::safe_sql::comparison(*op),
            Expr::Negative(_) => true,
            _ => false,
        };
        if !computed {
            return Ok(Transformed::no(expr));
        }
        let (call, function) = Sqlite::bridge(expr, schema, self.functions.len())?;
        self.functions.extend(function);
        Ok(Transformed::yes(call))
    }

    /// Exact sums are named by their grid; the rest are the database's own.
    fn aggregate(&mut self, aggregate: AggregateFunction) -> Result<Transformed<Expr>> {
        let name = aggregate.func.name().to_string();
        if let Some(exponent) = dpkit_functions::exact_sum::grid_exponent(&aggregate.func) {
            let bounded = matches!(aggregate.params.args.as_slice(), [value] if steps_fit(value, exponent))
                && (self.flavour != Flavour::Spark
                    || self.rows_bound.is_some_and(|n| n < SPARK_SPLIT_ROWS));
            let placeholder = PlaceholderAggregate::exact_sum(exponent, bounded);
            if self.flavour == Flavour::Sqlite {
                let sum = self.sqlite_sum(aggregate, placeholder, exponent);
                return Ok(Transformed::yes(sum));
            }
            return Ok(Transformed::yes(placeholder_call(placeholder, aggregate)));
        }
        match name.as_str() {
            "count" => Ok(Transformed::no(Expr::AggregateFunction(aggregate))),
            "array_agg" if self.flavour != Flavour::Sqlite => {
                let placeholder = PlaceholderAggregate::cells(CELL_COUNT);
                Ok(Transformed::yes(placeholder_call(placeholder, aggregate)))
            }
            "array_agg" => {
                let placeholder = PlaceholderAggregate::cells("dpkit_cells");
                self.functions.push(Sqlite::Cells {
                    name: placeholder.name().to_string(),
                });
                Ok(Transformed::yes(placeholder_call(placeholder, aggregate)))
            }
            other => Err(unavailable(self.flavour, &format!("the aggregate {other}"))),
        }
    }
}

impl Translation<'_> {
    /// SQLite's exact sum, in dpkit's code; a clamp of its value with
    /// literal bounds is done there too, in the same call, as the embedded
    /// engine's sum does it (`dpkit_functions::exact_sum::clamp_inside`),
    /// instead of SQLite's `max`, `min` and subtraction per row.
    fn sqlite_sum(
        &mut self,
        mut aggregate: AggregateFunction,
        placeholder: PlaceholderAggregate,
        exponent: i32,
    ) -> Expr {
        let (name, rule) = match clamp_inside(&aggregate) {
            Some((value, rule)) => {
                aggregate.params.args = vec![value];
                (format!("dpkit_clamped_sum_{}", self.functions.len()), rule)
            }
            None => (placeholder.name().to_string(), Steps::plain(exponent)),
        };
        self.functions.push(Sqlite::ExactSum {
            name: name.clone(),
            rule,
            counted: false,
        });
        placeholder_call(PlaceholderAggregate::sum_named(name), aggregate)
    }
}

/// An integer read as a double (every integer column that is summed or
/// averaged) in SQLite's own `CAST`: it rounds as DataFusion's cast does
/// (a C conversion, to nearest) and cannot fail, on every value an `Int64`
/// expression can hold there (an integer or NULL: the typed view admits
/// nothing else, and every computed integer comes from dpkit's code).
/// Through dpkit's code (three calls a row, one per use in the clamp),
/// `SUM` of 10^6 integers took 4.96 s; with the `CAST`, 0.50 s.
fn integer_as_double(expr: &Expr, schema: &DFSchema) -> Result<Option<Expr>> {
    let (inner, to) = match expr {
        Expr::Cast(cast) => (&cast.expr, cast.field.data_type()),
        Expr::TryCast(cast) => (&cast.expr, cast.field.data_type()),
        _ => return Ok(None),
    };
    let from = inner.get_type(schema).map_err(unparse_error)?;
    Ok(
        (from == DataType::Int64 && *to == DataType::Float64).then(|| {
            Expr::Cast(datafusion::logical_expr::Cast::new(
                inner.clone(),
                DataType::Float64,
            ))
        }),
    )
}

/// Spark adds bounded steps as two `bigint` sums of 16 bits each, exact up
/// to 2^47 rows in a group (`spelling::exact_sum`); past that, or when no
/// public count of people bounds a group's rows, in `DECIMAL(38,0)`, exact
/// up to 2^63 rows.
const SPARK_SPLIT_ROWS: f64 = 140_737_488_355_328.0; // 2^47

/// Whether every value of `value` is a clamp to finite literal bounds (or
/// the square of one, see `planned`) whose grid steps (on the grid
/// `2^exponent`) lie within ±2^32 (with 2^30 steps per bound, every bound
/// below 2^31), so that a database need not saturate them row by row and
/// Spark can add them as two `bigint`s.
fn steps_fit(value: &Expr, exponent: i32) -> bool {
    let Expr::ScalarFunction(function) = value else {
        return false;
    };
    let reach = match (function.name(), function.args.as_slice()) {
        ("dpkit_clamp", _) => clamp_reach(value),
        ("dpkit_square", [clamp]) => clamp_reach(clamp).map(|r| r * r),
        _ => None,
    };
    reach.is_some_and(|reach| reach * 2f64.powi(-exponent) <= 2f64.powi(32))
}

/// An aggregate's real group keys, as `dpkit_key(k)` (`k + 0.0`): −0 and
/// 0 are equal, so a database puts them in one group, and returns the key
/// as the first row it met spelled it; `−0 + 0.0` is `0`, so every row of
/// the group spells it alike, as the answer prints it.
fn one_zero_per_key(node: LogicalPlan, schema: &DFSchema) -> Step<LogicalPlan> {
    let LogicalPlan::Aggregate(mut aggregate) = node else {
        return Ok(Transformed::no(node));
    };
    let mut changed = false;
    for key in &mut aggregate.group_expr {
        let Expr::Alias(alias) = key else {
            continue;
        };
        if alias.expr.get_type(schema)? == DataType::Float64 {
            let inner =
                std::mem::replace(alias.expr.as_mut(), Expr::Literal(ScalarValue::Null, None));
            *alias.expr = call("dpkit_key".into(), DataType::Float64, vec![inner]);
            changed = true;
        }
    }
    let node = LogicalPlan::Aggregate(aggregate);
    Ok(if changed {
        Transformed::yes(node)
    } else {
        Transformed::no(node)
    })
}

/// A quantile's cells counted by the database, as a group key: its cell.
const CELL_COUNT: &str = "dpkit_cell_count";

/// The queries with quantiles [`cells_by_group`] cannot count by cell.
const QUANTILES_APART: &str = "a query with quantiles of two different expressions, \
    or a quantile and COUNT(DISTINCT …),";

/// PostgreSQL and Spark count a quantile's values per cell by grouping
/// them by their cell too, so each result row holds one cell and its count
/// (`dpkit_cell_count`), and dpkit adds the rows of a group together
/// (`ExactGroups::merged_with_histograms`). A list of every value's cell
/// would grow with the group until it met PostgreSQL's limit on an array
/// (2^27 values) or a Spark executor's memory: a failure (or a crash,
/// which is refunded as an I/O failure) one row could bring about. This
/// needs one cell expression (a query's quantiles all of one argument) and
/// no `COUNT(DISTINCT id)`, which rows of one group by cell cannot add up;
/// other queries with quantiles are refused, free, at planning.
fn cells_by_group(node: LogicalPlan, flavour: Flavour) -> Step<LogicalPlan> {
    let LogicalPlan::Aggregate(mut aggregate) = node else {
        return Ok(Transformed::no(node));
    };
    let mut cells: Vec<Expr> = Vec::new();
    let mut distinct = false;
    for expr in &aggregate.aggr_expr {
        let _ = expr.apply(|e| {
            if let Expr::AggregateFunction(f) = e {
                distinct |= f.params.distinct;
                if f.func.name() == CELL_COUNT && !cells.contains(&f.params.args[0]) {
                    cells.push(f.params.args[0].clone());
                }
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        });
    }
    if cells.is_empty() {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let [cell] = cells.as_slice() else {
        return Err(refusal(unavailable(flavour, QUANTILES_APART)));
    };
    if distinct {
        return Err(refusal(unavailable(flavour, QUANTILES_APART)));
    }
    let outputs: Vec<Expr> = aggregate
        .schema
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    aggregate
        .group_expr
        .push(cell.clone().alias("__dpkit_cell"));
    let grouped = datafusion::logical_expr::LogicalPlanBuilder::from(LogicalPlan::Aggregate(
        datafusion::logical_expr::Aggregate::try_new(
            aggregate.input,
            aggregate.group_expr,
            aggregate.aggr_expr,
        )?,
    ))
    .project(outputs)?
    .build()?;
    Ok(Transformed::yes(grouped))
}

/// The schema a node's expressions are written over.
fn input_schema(node: &LogicalPlan) -> DFSchema {
    match node.inputs().as_slice() {
        [input] => input.schema().as_ref().clone(),
        _ => node.schema().as_ref().clone(),
    }
}

/// The aggregate `aggregate` with its arguments, computed by `placeholder`.
fn placeholder_call(placeholder: PlaceholderAggregate, aggregate: AggregateFunction) -> Expr {
    Expr::AggregateFunction(AggregateFunction::new_udf(
        Arc::new(placeholder.into()),
        aggregate.params.args,
        false,
        None,
        vec![],
        None,
    ))
}
