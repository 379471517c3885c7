//! The answer's columns (GROUP BY keys and aggregates, in SELECT order),
//! ORDER BY over them and LIMIT.

use datafusion::logical_expr::{Aggregate, Expr};
use dpkit_release::combined::Combination;

use super::{AggregateRequest, OutputColumn, Shape, arithmetic, not_private, output_of, unalias};
use crate::error::{QueryError, Result};

/// The answer's columns, its ORDER BY (output index, ascending) and the
/// arithmetic its combined columns do.
pub(super) type Outputs = (
    Vec<(String, OutputColumn)>,
    Vec<(usize, bool)>,
    Vec<Combination>,
);

/// Plans the SELECT list and ORDER BY; aggregates take their shown names.
pub(super) fn plan(
    shape: &Shape<'_>,
    aggregate: &Aggregate,
    aggregates: &mut [AggregateRequest],
) -> Result<Outputs> {
    let mut outputs = Vec::new();
    let mut combinations = Vec::new();
    for expr in shape.projection {
        let Expr::Column(column) = unalias(expr) else {
            let shown = match expr {
                Expr::Alias(alias) => alias.name.clone(),
                _ => expr.schema_name().to_string(),
            };
            combinations.push(arithmetic::combined(expr, aggregate)?);
            outputs.push((shown, OutputColumn::Combined(combinations.len() - 1)));
            continue;
        };
        let output = output_of(aggregate, column)?;
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
    Ok((outputs, order_by, combinations))
}

/// Refuses a column that an aggregate's interval would overwrite in CSV and
/// in Python's DataFrames (`"native-country" AS n_low` beside `COUNT(*) AS
/// n` would lose the keys). Free: the names are the query's own.
fn no_clash(outputs: &[(String, OutputColumn)]) -> Result<()> {
    for (name, output) in outputs {
        if !matches!(
            output,
            OutputColumn::Aggregate(_) | OutputColumn::Combined(_)
        ) {
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
