//! SQLite computes every value of the private plan with dpkit's code.
//!
//! SQLite's own functions differ from DataFusion's (its LIKE ignores case,
//! its `abs` raises an error on the smallest integer, its CAST of `'abc'`
//! gives 0), and an error raised on one person's row is an exact bit. So
//! each function, cast, LIKE, regular expression and arithmetic operation
//! of the plan becomes a call of a function registered on the connection,
//! which evaluates that one expression node with DataFusion on a one-row
//! batch: the embedded engine's semantics exactly, and never an error
//! (a value SQLite hands over in an unexpected form is NULL). SQLite keeps
//! only what it cannot get wrong: comparisons, AND/OR/NOT, IS NULL, IN,
//! BETWEEN, CASE, COUNT, GROUP BY and the window that caps each person,
//! and the cutting of a sum's `steps,count` text in two (`counted_sums`).
//!
//! One difference is SQLite's and cannot be helped: it has no NaN (it
//! stores NaN as NULL), so a NaN between two functions reads as NULL.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, new_null_array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};

use crate::error::{DatabaseError, Result};
use dpkit_functions::exact_sum::{RowSum, Steps};

/// A function a SQLite statement calls.
#[derive(Debug, Clone)]
pub(crate) enum Sqlite {
    /// One expression node, computed by DataFusion on its non-literal
    /// arguments (the columns of `schema`).
    Scalar {
        name: String,
        node: Arc<dyn PhysicalExpr>,
        schema: SchemaRef,
    },
    /// `dpkit_exact_sum` by `rule`: on its grid, after its clamp if any;
    /// `counted`: it counts its non-NULL values too, for a `count` of the
    /// same value (`counted_sums`), and returns `steps,count`.
    ExactSum {
        name: String,
        rule: Steps,
        counted: bool,
    },
    /// A group's quantile cells, as `cell:count` pairs (`1:40,2:3`).
    Cells { name: String },
}

fn bridge_error(error: impl std::fmt::Display) -> DatabaseError {
    DatabaseError::Sql(format!("cannot prepare the plan for SQLite: {error}"))
}

impl Sqlite {
    /// `expr` as a call `dpkit_f<number>(its non-literal children)`, and
    /// the function that computes it; an expression of literals only is
    /// computed now, as a literal.
    pub(crate) fn bridge(
        expr: Expr,
        schema: &DFSchema,
        number: usize,
    ) -> Result<(Expr, Option<Self>)> {
        let name = format!("dpkit_f{number}");
        let returns = expr.get_type(schema).map_err(bridge_error)?;
        let mut arguments = Vec::new();
        let mut fields = Vec::new();
        let node = expr
            .map_children(|child| {
                if matches!(child, Expr::Literal(..)) {
                    return Ok(datafusion::common::tree_node::Transformed::no(child));
                }
                let column = format!("a{}", arguments.len());
                fields.push(Field::new(&column, child.get_type(schema)?, true));
                arguments.push(child);
                Ok(datafusion::common::tree_node::Transformed::yes(
                    Expr::Column(Column::new_unqualified(column)),
                ))
            })
            .map_err(bridge_error)?
            .data;
        let arrow_schema = Arc::new(Schema::new(fields));
        let frame = DFSchema::try_from(arrow_schema.as_ref().clone()).map_err(bridge_error)?;
        let node = simplified(node, &frame)?;
        let node = create_physical_expr(
            &node,
            &frame,
            &ExecutionProps::new(),
            &datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext::default(
            ),
        )
        .map_err(bridge_error)?;
        if arguments.is_empty() {
            let options =
                datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(1));
            let value = RecordBatch::try_new_with_options(arrow_schema, vec![], &options)
                .map_err(bridge_error)
                .and_then(|row| scalar(&node, &row).map_err(bridge_error))?;
            return Ok((Expr::Literal(value, None), None));
        }
        let call = super::exprs::call(name.clone(), returns, arguments);
        Ok((
            call,
            Some(Self::Scalar {
                name,
                node,
                schema: arrow_schema,
            }),
        ))
    }

    /// The name of an exact sum.
    pub(crate) fn sum_name(&self) -> Option<String> {
        match self {
            Self::ExactSum { name, .. } => Some(name.clone()),
            _ => None,
        }
    }

    /// Makes an exact sum named in `names` count its values too.
    pub(crate) fn count_if_named(&mut self, names: &[String]) {
        if let Self::ExactSum { name, counted, .. } = self {
            *counted |= names.contains(name);
        }
    }

    /// Registers the function on `connection`.
    pub(crate) fn register(&self, connection: &rusqlite::Connection) -> rusqlite::Result<()> {
        let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
        match self {
            Self::Scalar { name, node, schema } => {
                let (node, schema) = (node.clone(), schema.clone());
                let arity = schema.fields().len() as i32;
                connection.create_scalar_function(name.as_str(), arity, flags, move |context| {
                    Ok(evaluate(&node, &schema, context))
                })
            }
            Self::ExactSum {
                name,
                rule,
                counted,
            } => connection.create_aggregate_function(
                name.as_str(),
                1,
                flags,
                ExactSumAggregate {
                    rule: *rule,
                    counted: *counted,
                },
            ),
            Self::Cells { name } => {
                connection.create_aggregate_function(name.as_str(), 1, flags, CellsAggregate)
            }
        }
    }
}

/// `node` on the row of arguments in `context`; NULL if anything fails.
fn evaluate(node: &Arc<dyn PhysicalExpr>, schema: &SchemaRef, context: &Context<'_>) -> Value {
    let columns: Option<Vec<ArrayRef>> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| argument(context.get_raw(i), field.data_type()))
        .collect();
    let Some(columns) = columns else {
        return Value::Null;
    };
    let options = datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(1));
    let Ok(batch) = RecordBatch::try_new_with_options(schema.clone(), columns, &options) else {
        return Value::Null;
    };
    scalar(node, &batch).map_or(Value::Null, |value| sqlite_value(&value))
}

/// `node`'s value on the one row of `row`.
fn scalar(
    node: &Arc<dyn PhysicalExpr>,
    row: &RecordBatch,
) -> datafusion::error::Result<ScalarValue> {
    node.evaluate(row)
        .and_then(|value| value.into_array(1))
        .and_then(|array| ScalarValue::try_from_array(&array, 0))
}

/// DataFusion computes some functions only once its simplifier has
/// rewritten them (`coalesce` becomes a CASE); every node is simplified as
/// the embedded engine's optimiser would.
fn simplified(node: Expr, frame: &DFSchema) -> Result<Expr> {
    use datafusion::logical_expr::simplify::SimplifyContext;
    use datafusion::optimizer::simplify_expressions::ExprSimplifier;
    let context = SimplifyContext::builder()
        .with_schema(Arc::new(frame.clone()))
        .build();
    ExprSimplifier::new(context)
        .simplify(node)
        .map_err(bridge_error)
}

/// One SQLite value as a one-row array of `data_type` (NULL when it does
/// not convert; Arrow's cast never fails on a value, it gives NULL).
fn argument(value: ValueRef<'_>, data_type: &DataType) -> Option<ArrayRef> {
    let scalar = match value {
        ValueRef::Integer(i) => ScalarValue::Int64(Some(i)),
        ValueRef::Real(x) => ScalarValue::Float64(Some(x)),
        ValueRef::Text(text) => ScalarValue::Utf8(std::str::from_utf8(text).ok().map(String::from)),
        ValueRef::Null | ValueRef::Blob(_) => return Some(new_null_array(data_type, 1)),
    };
    let array = scalar.to_array_of_size(1).ok()?;
    if array.data_type() == data_type {
        return Some(array);
    }
    Some(cast(&array, data_type).unwrap_or_else(|_| new_null_array(data_type, 1)))
}

/// A DataFusion value as SQLite stores it (booleans are 0 and 1, every
/// integer type an integer, every float type a real).
fn sqlite_value(value: &ScalarValue) -> Value {
    if value.is_null() {
        return Value::Null;
    }
    let target = match value.data_type() {
        DataType::Boolean => DataType::Int64,
        t if t.is_integer() => DataType::Int64,
        t if t.is_floating() => DataType::Float64,
        _ => DataType::Utf8,
    };
    let converted = value
        .to_array_of_size(1)
        .and_then(|a| Ok(cast(&a, &target)?))
        .and_then(|a| ScalarValue::try_from_array(&a, 0));
    match converted {
        Ok(ScalarValue::Int64(Some(i))) => Value::Integer(i),
        Ok(ScalarValue::Float64(Some(x))) => Value::Real(x),
        Ok(ScalarValue::Utf8(Some(text))) => Value::Text(text),
        _ => Value::Null,
    }
}

/// The embedded engine's exact sum, row by row, and with `counted` the
/// count of its non-NULL values, as SQLite's `count` counts them.
struct ExactSumAggregate {
    rule: Steps,
    counted: bool,
}

/// Its steps leave SQLite as text: 128 bits do not fit an SQLite integer.
impl Aggregate<(RowSum, i64), String> for ExactSumAggregate {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<(RowSum, i64)> {
        Ok((RowSum::default(), 0))
    }

    fn step(&self, context: &mut Context<'_>, state: &mut (RowSum, i64)) -> rusqlite::Result<()> {
        let (sum, count) = state;
        match context.get_raw(0) {
            ValueRef::Real(x) => sum.add(x, &self.rule),
            ValueRef::Integer(i) => sum.add(i as f64, &self.rule),
            ValueRef::Null => return Ok(()),
            ValueRef::Text(_) | ValueRef::Blob(_) => {}
        }
        // Fewer rows than an i64 counts can reach SQLite.
        *count += 1;
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut Context<'_>,
        state: Option<(RowSum, i64)>,
    ) -> rusqlite::Result<String> {
        let (sum, count) = state.unwrap_or_default();
        let steps = sum.steps();
        Ok(if self.counted {
            format!("{steps},{count}")
        } else {
            steps.to_string()
        })
    }
}

/// A group's quantile cells, counted as they come (at most one entry per
/// cell of the public grid, whatever the number of rows), as `cell:count`
/// pairs: a list of every row's cell would grow with the group until it
/// met SQLite's limit on a value's size, a threshold one row could cross.
struct CellsAggregate;

impl Aggregate<std::collections::BTreeMap<i64, u64>, String> for CellsAggregate {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<std::collections::BTreeMap<i64, u64>> {
        Ok(std::collections::BTreeMap::new())
    }

    fn step(
        &self,
        context: &mut Context<'_>,
        cells: &mut std::collections::BTreeMap<i64, u64>,
    ) -> rusqlite::Result<()> {
        if let ValueRef::Integer(i) = context.get_raw(0) {
            *cells.entry(i).or_insert(0) += 1;
        }
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut Context<'_>,
        cells: Option<std::collections::BTreeMap<i64, u64>>,
    ) -> rusqlite::Result<String> {
        let pairs: Vec<String> = cells
            .unwrap_or_default()
            .iter()
            .map(|(cell, count)| format!("{cell}:{count}"))
            .collect();
        Ok(pairs.join(","))
    }
}
