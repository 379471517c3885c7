//! The answer's columns (GROUP BY keys and aggregates, in SELECT order),
//! ORDER BY over them and LIMIT.

use datafusion::logical_expr::{Aggregate, Expr};

use super::{AggregateRequest, OutputColumn, Shape, not_private, sql_error, unalias};
use crate::error::{QueryError, Result};

/// The answer's columns and its ORDER BY (output index, ascending).
pub(super) type Outputs = (Vec<(String, OutputColumn)>, Vec<(usize, bool)>);

/// Plans the SELECT list and ORDER BY; aggregates take their shown names.
pub(super) fn plan(
    shape: &Shape<'_>,
    aggregate: &Aggregate,
    aggregates: &mut [AggregateRequest],
) -> Result<Outputs> {
    let mut outputs = Vec::new();
    for expr in shape.projection {
        let Expr::Column(column) = unalias(expr) else {
            return Err(not_private(
                "the SELECT list takes GROUP BY keys and aggregates, not expressions over them: \
                 ask for each aggregate and combine the released values (a ratio of two, say), \
                 which costs nothing more",
            ));
        };
        let position = aggregate
            .schema
            .index_of_column(column)
            .map_err(sql_error)?;
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
    no_clash(&outputs)?;
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
    Ok((outputs, order_by))
}

/// Refuses a column that an aggregate's interval would overwrite in CSV and
/// in Python's DataFrames (`"native-country" AS n_low` beside `COUNT(*) AS
/// n` would lose the keys). Free: the names are the query's own.
fn no_clash(outputs: &[(String, OutputColumn)]) -> Result<()> {
    for (name, output) in outputs {
        if !matches!(output, OutputColumn::Aggregate(_)) {
            continue;
        }
        let [low, high] = dpkit_release::interval_columns(name);
        if let Some((clash, _)) = outputs
            .iter()
            .find(|(other, _)| *other == low || *other == high)
        {
            return Err(QueryError::Sql(format!(
                "the column '{clash}' would clash with the interval of '{name}', shown as \
                 '{low}' and '{high}': rename one of them with AS"
            )));
        }
    }
    Ok(())
}
