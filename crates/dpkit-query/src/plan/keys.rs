//! GROUP BY: which keys a query may release. Each key is a text column
//! whose values the WHERE lists (`WHERE region IN ('N', 'S')`: the list is
//! public, being the analyst's), a column with a public domain, a total
//! expression of one bounded integer column (its domain is enumerated from
//! the bounds), or, without a domain, a column whose keys are thresholded.

use datafusion::common::ExprSchema;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, LogicalPlan, Operator, expr::InList, lit, when,
};

use super::lineage::Lineage;
use super::{DomainOf, KeySelection, not_private, sql_error, text_of, unalias};
use crate::error::Result;
use dpkit_description::ColumnKind;
use dpkit_total::{Sizes, Totaliser, Ty};

/// Enough domain cells: a GROUP BY over more combinations is refused.
const MAX_DOMAIN_CELLS: usize = 100_000;
/// An integer column's values are enumerated to find its bins' domain.
const MAX_ENUMERATED_VALUES: f64 = 1_000_000.0;

/// The planned GROUP BY.
pub(super) struct Keys {
    /// Key expressions for the rewritten aggregate.
    pub(super) exprs: Vec<Expr>,
    /// Their names in the answer.
    pub(super) names: Vec<String>,
    /// How keys are chosen.
    pub(super) selection: KeySelection,
    /// Their work per row (see `dpkit_total::MAX_WORK`).
    pub(super) work: u64,
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

/// Plans the GROUP BY of `aggregate` over an input with `schema`.
pub(super) fn plan(
    aggregate: &Aggregate,
    schema: &DFSchema,
    sizes: &Sizes,
    lineage: &Lineage<'_>,
    domain_of: &mut DomainOf<'_>,
) -> Result<Keys> {
    let mut exprs = Vec::new();
    let mut domains = Vec::new();
    let mut names = Vec::new();
    let mut totaliser = Totaliser::new(schema, sizes);
    for (index, expr) in aggregate.group_expr.iter().enumerate() {
        if matches!(expr, Expr::GroupingSet(_)) {
            return Err(not_private(
                "GROUP BY GROUPING SETS, CUBE and ROLLUP are not supported",
            ));
        }
        names.push(aggregate.schema.field(index).name().clone());
        let total = totaliser.total(expr)?;
        // A text key is hashed and compared once per row.
        if total.ty == Ty::Text {
            totaliser.charge(total.bytes)?;
        }
        let total = total.expr;
        let (rewritten, domain) = match listed_keys(expr, &aggregate.input) {
            Some(listed) => (total, Some(deduplicated(listed))),
            None => key(expr, total, schema, lineage, domain_of)?,
        };
        exprs.push(rewritten.alias(format!("__dpkit_key_{index}")));
        domains.push(domain);
    }
    let selection = if exprs.is_empty() {
        KeySelection::Single
    } else if domains.iter().all(Option::is_some) {
        KeySelection::Domain(cells(domains.into_iter().flatten().collect())?)
    } else {
        KeySelection::Threshold
    };
    Ok(Keys {
        exprs,
        names,
        selection,
        work: totaliser.work(),
    })
}

/// One key: its rewritten expression and its public domain, if it has one.
fn key(
    original: &Expr,
    total: Expr,
    schema: &DFSchema,
    lineage: &Lineage<'_>,
    domain_of: &mut DomainOf<'_>,
) -> Result<(Expr, Option<Vec<String>>)> {
    let columns = columns_of(original);
    // The description's facts, only for the table's own column.
    let refs: Vec<&Column> = original.column_refs().into_iter().collect();
    let facts = match refs.as_slice() {
        [only] => lineage.facts(only),
        _ => None,
    };
    let bare_column = matches!(unalias(original), Expr::Column(_));
    match (columns.as_slice(), facts) {
        ([_], Some(facts)) if bare_column && facts.domain.is_some() => {
            Ok((total, facts.domain.clone().map(deduplicated)))
        }
        ([column], Some(facts)) if facts.kind == ColumnKind::Integer && facts.bounds.is_some() => {
            let (low, high) = facts.bounds.unwrap_or((0.0, 0.0));
            if high - low >= MAX_ENUMERATED_VALUES || low.fract() != 0.0 || high.fract() != 0.0 {
                return Err(not_private(format!(
                    "GROUP BY over '{column}' needs whole-number bounds less than 10⁶ apart"
                )));
            }
            // The column must hold integers here too: a subquery can give a
            // computed column of another type the same name.
            if !is_integer_column(original, schema) {
                return Err(not_private(format!(
                    "GROUP BY over '{column}' needs it to be the table's integer column"
                )));
            }
            let (low, high) = (low as i64, high as i64);
            let domain = domain_of(&total, column, (low, high))?;
            Ok((
                clamp_column(total, refs[0], low, high)?,
                Some(deduplicated(domain)),
            ))
        }
        ([column], _) if bare_column => {
            if facts.is_some_and(|f| f.kind == ColumnKind::Real) {
                return Err(not_private(format!(
                    "GROUP BY over the real-valued '{column}' needs bins: group by an \
                     expression over a bounded integer column"
                )));
            }
            Ok((total, None))
        }
        ([], _) => Err(not_private("GROUP BY a constant is not supported")),
        _ => Err(not_private(
            "GROUP BY takes columns, or expressions over one bounded integer column",
        )),
    }
}

/// The texts a WHERE directly below the GROUP BY allows a bare text key column
/// (`col IN ('a', 'b')` or `col = 'a'`, as one of its AND-ed conditions):
/// no row with another value reaches the aggregate, so these keys are all
/// there can be. They come from the query alone, so releasing exactly them
/// (each with noise, even when empty) needs no threshold.
fn listed_keys(key: &Expr, input: &LogicalPlan) -> Option<Vec<String>> {
    let (Expr::Column(column), LogicalPlan::Filter(filter)) = (unalias(key), input) else {
        return None;
    };
    // Only text keys: a number's key prints as the engine formats it, which
    // a literal such as '030' compared with an integer need not match.
    let text = filter
        .input
        .schema()
        .field_from_column(column)
        .is_ok_and(|f| f.data_type() == &datafusion::arrow::datatypes::DataType::Utf8);
    if !text {
        return None;
    }
    let is_key = |expr: &Expr| matches!(unalias(expr), Expr::Column(c) if c == column);
    split_conjunction(&filter.predicate)
        .into_iter()
        .find_map(|condition| match condition {
            Expr::InList(InList {
                expr,
                list,
                negated: false,
            }) if is_key(expr) => list.iter().map(text_literal).collect(),
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) => match (is_key(left), is_key(right)) {
                (true, _) => text_literal(right),
                (_, true) => text_literal(left),
                _ => None,
            }
            .map(|t| vec![t]),
            _ => None,
        })
}

/// A text written in the query.
fn text_literal(expr: &Expr) -> Option<String> {
    match unalias(expr) {
        Expr::Literal(value, _) => text_of(value).cloned(),
        _ => None,
    }
}

/// Keys are compared as the answer prints them: values that print alike
/// (+NaN and −NaN, say) are one key, released once.
fn deduplicated(mut domain: Vec<String>) -> Vec<String> {
    #[cfg(feature = "planted-holes")]
    if dpkit_planted::is_planted(dpkit_planted::Hole::RepeatedKeys) {
        return domain;
    }
    let mut seen = std::collections::HashSet::new();
    domain.retain(|value| seen.insert(value.clone()));
    domain
}

/// `expr` with `column` clamped to `[low, high]`, so that its values stay in
/// the enumerated domain.
fn clamp_column(expr: Expr, column: &Column, low: i64, high: i64) -> Result<Expr> {
    // Qualified as the query wrote it: a join can hold two columns of one
    // name.
    let value = Expr::Column(column.clone());
    let clamped = when(value.clone().lt(lit(low)), lit(low))
        .when(value.clone().gt(lit(high)), lit(high))
        .otherwise(value)
        .map_err(sql_error)?;
    expr.transform(|e| match e {
        Expr::Column(c) if c == *column => Ok(Transformed::yes(clamped.clone())),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
    .map_err(sql_error)
}

/// Every combination of the domains.
fn cells(domains: Vec<Vec<String>>) -> Result<Vec<Vec<String>>> {
    let mut cells: Vec<Vec<String>> = vec![vec![]];
    for domain in &domains {
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
    Ok(cells)
}

/// Whether every column `expr` reads is an Int64 column of `schema`.
fn is_integer_column(expr: &Expr, schema: &DFSchema) -> bool {
    expr.column_refs().into_iter().all(|c| {
        schema
            .field_from_column(c)
            .is_ok_and(|f| f.data_type() == &datafusion::arrow::datatypes::DataType::Int64)
    })
}
