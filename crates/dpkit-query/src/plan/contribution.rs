//! Bounds on what one person contributes per group: at most
//! `max_groups_per_person` groups (L0) and `max_rows_per_group` rows in each
//! (L∞), kept by truncating each person's rows just before the aggregate,
//! after every filter and join, so that the bounds hold for the groups the
//! query makes. dpkit-core's `sensitivity::Contribution` turns them into
//! each measurement's move.
//!
//! Which rows are kept: within a group, a person's first rows in the order
//! of their own values (every column, as the per-person cap on the scan
//! orders them);
//! across groups, their groups whose keys come first in the keys' own order
//! (a public order: the keys are what the answer shows). Both are decided
//! by the person's own rows alone, so the truncation maps each person's
//! rows to at most `g·r` of them and never looks at anyone else's.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Column;
use datafusion::functions_window::expr_fn::{dense_rank, row_number};
use datafusion::logical_expr::{
    Expr, ExprFunctionExt, ExprSchemable, LogicalPlan, LogicalPlanBuilder, lit,
};
use dpkit_core::sensitivity::Contribution;

use super::lineage::Lineage;
use super::{not_private, sql_error};
use crate::error::Result;
use dpkit_description::Description;

const ROW_IN_GROUP: &str = "__dpkit_row_in_group";
const GROUP_OF_PERSON: &str = "__dpkit_group_of_person";

/// What one person may contribute to this query: `rows` (after joins) and
/// the description's bounds per group, if any.
pub(super) fn of(description: &Description, rows: u64) -> Result<Contribution> {
    let groups = description.max_groups_per_person.unwrap_or(rows);
    let per_group = description.max_rows_per_group.unwrap_or(rows);
    Contribution::bounded(rows, groups, per_group)
        .map_err(|e| not_private(format!("the contribution bounds: {e}")))
}

/// `input` with each person's rows truncated to `contribution`'s groups and
/// rows per group, over the GROUP BY `keys`; `input` unchanged when the
/// description bounds neither.
pub(super) fn truncated(
    input: LogicalPlan,
    keys: &[Expr],
    contribution: Contribution,
    lineage: &Lineage<'_>,
) -> Result<LogicalPlan> {
    let description = lineage.description;
    if description.max_groups_per_person.is_none() && description.max_rows_per_group.is_none() {
        return Ok(input);
    }
    #[cfg(feature = "planted-holes")]
    if dpkit_planted::is_planted(dpkit_planted::Hole::UntruncatedGroups) {
        return Ok(input);
    }
    let id = person_column(&input, lineage)?;
    let keys: Vec<Expr> = keys.iter().map(|k| k.clone().unalias()).collect();
    for key in &keys {
        injective_key(key, &input)?;
    }
    // One window node per ordering: DataFusion plans each node's window
    // expressions with one sort.
    let mut numbered = Vec::new();
    // Ordered by every column of the row (after a random draw under keep =
    // "random"): which rows are kept is then a function of the person's own
    // rows, never of where other people's rows happen to be read (a
    // red-team helper saw sums move by 3,700 where Δ was 500 when a
    // zero-valued person was added, before). See `kept_order`.
    let columns: Vec<Expr> = input
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let order = crate::private_table::kept_order(description.keep, &columns);
    let in_group = row_number()
        .partition_by([vec![id.clone()], keys.clone()].concat())
        .order_by(order)
        .build()
        .map_err(sql_error)?
        .alias(ROW_IN_GROUP);
    numbered.push(in_group);
    let mut keep = column(ROW_IN_GROUP).lt_eq(lit(contribution.rows_per_group as i64));
    if !keys.is_empty() && contribution.groups < contribution.rows {
        let order = keys.iter().map(|k| k.clone().sort(true, true)).collect();
        let of_person = dense_rank()
            .partition_by(vec![id])
            .order_by(order)
            .build()
            .map_err(sql_error)?
            .alias(GROUP_OF_PERSON);
        numbered.push(of_person);
        keep = keep.and(column(GROUP_OF_PERSON).lt_eq(lit(contribution.groups as i64)));
    }
    let mut builder = LogicalPlanBuilder::from(input);
    for window in numbered {
        builder = builder.window(vec![window]).map_err(sql_error)?;
    }
    builder
        .filter(keep)
        .and_then(|b| b.project(columns))
        .and_then(LogicalPlanBuilder::build)
        .map_err(sql_error)
}

/// Refuses a key of real numbers: the answer keys groups by how they print,
/// and reals that differ can print alike (`NaN` and `-NaN`), so one
/// released group could join several groups the truncation kept apart,
/// each with its r rows. Integers, texts and booleans print apart.
fn injective_key(key: &Expr, input: &LogicalPlan) -> Result<()> {
    let data_type = key.get_type(input.schema()).map_err(sql_error)?;
    if data_type.is_integer()
        || matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
        )
    {
        return Ok(());
    }
    Err(not_private(
        "with bounds per group, GROUP BY takes integer, text or boolean keys: \
         CAST a real-valued bin to BIGINT",
    ))
}

fn column(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

/// The person each row of `input` belongs to: one of its private tables'
/// own person columns (followed through subqueries and joins, never by a
/// name the query gives) that no outer join pads with NULLs. Joins of
/// private tables are on the person (see `person_joins`), so all such
/// columns are equal on every row. A padded column would name no one on
/// the rows it pads, and truncating those rows together would let one
/// person's rows displace another's (a red-team helper moved a sum by 2Δ
/// so, before).
fn person_column(input: &LogicalPlan, lineage: &Lineage<'_>) -> Result<Expr> {
    input
        .schema()
        .columns()
        .into_iter()
        .find(|c| lineage.is_person_on_every_row(c))
        .map(Expr::Column)
        .ok_or_else(|| {
            not_private(
                "bounds per group truncate each person's rows: keep the person column (the id \
                 column, or a [private] table's person) of a table whose every row reaches the \
                 aggregate, not only of one an outer join pads with NULLs",
            )
        })
}
