//! Public tables: lookup tables anyone may see (`[public.NAME]` in the
//! description), read whole into memory when the engine opens, typed as
//! declared and with text cut to `max_length` as the private table is.
//!
//! Because their rows are public, dpkit reads facts from them without
//! noise: each text column's values (a public domain for GROUP BY) and
//! each number column's smallest and largest value (public bounds for
//! SUM and AVG), where the description does not declare them. Queries
//! never see the file itself: each table is registered under its name
//! from a scratch session, once: an engine rebuilt over the same
//! description reuses the tables it read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::datasource::MemTable;
use datafusion::functions_aggregate::expr_fn::{count, max};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, lit};
use datafusion::prelude::{SessionContext, col};

use crate::error::{QueryError, Result};
use crate::private_table::{column_size, register_raw, typed_as};
use dpkit_description::{ColumnFacts, ColumnKind, Description, PublicTable};
use dpkit_total::Sizes;

/// The most distinct values a public text column's domain is read for:
/// more would make GROUP BY release more groups than is useful.
pub const MOST_PUBLIC_DOMAIN_VALUES: usize = 10_000;

/// What the planner knows of one public table, and its rows.
#[derive(Debug, Clone)]
pub(crate) struct PublicFacts {
    /// Each column's facts: declared, or read from the table.
    pub(crate) columns: BTreeMap<String, ColumnFacts>,
    /// Each column's size, for the work bounds of expressions over it.
    pub(crate) sizes: Sizes,
    /// Its number of rows.
    pub(crate) rows: u64,
    /// Its rows, held in memory.
    table: Arc<MemTable>,
    /// The same rows, as batches (at least one, maybe empty): what a
    /// database is sent.
    pub(crate) batches: Vec<RecordBatch>,
}

/// The public tables by name.
pub(crate) type PublicTables = BTreeMap<String, PublicFacts>;

/// Reads every public table of `description` whole, with its facts.
pub(crate) async fn load_public(description: &Description) -> Result<PublicTables> {
    let mut tables = PublicTables::new();
    for (name, table) in &description.public {
        let batches = read(name, table).await?;
        let (columns, sizes) = facts_of(table, &batches);
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let schema = batches
            .first()
            .map(RecordBatch::schema)
            .ok_or_else(|| unreadable(name))?;
        let table =
            MemTable::try_new(schema, vec![batches.clone()]).map_err(|_| unreadable(name))?;
        let facts = PublicFacts {
            columns,
            sizes,
            rows,
            table: Arc::new(table),
            batches,
        };
        tables.insert(name.clone(), facts);
    }
    Ok(tables)
}

/// Registers each loaded public table under its name in `context`.
pub(crate) fn register_public(context: &SessionContext, tables: &PublicTables) -> Result<()> {
    for (name, facts) in tables {
        context
            .register_table(name.as_str(), facts.table.clone())
            .map_err(|_| unreadable(name))?;
    }
    Ok(())
}

fn unreadable(name: &str) -> QueryError {
    QueryError::Unreadable(format!("cannot read the public table '{name}'"))
}

/// The table's rows, typed as declared (at least one batch, maybe empty).
async fn read(name: &str, table: &PublicTable) -> Result<Vec<RecordBatch>> {
    let scratch = SessionContext::new();
    register_raw(&scratch, "raw", (&table.file, table.format), &table.columns)
        .await
        .map_err(|e| match e {
            QueryError::Description(reason) => {
                QueryError::Description(format!("public table '{name}': {reason}"))
            }
            _ => unreadable(name),
        })?;
    let raw = scratch.table("raw").await.map_err(|_| unreadable(name))?;
    let (raw, _) = crate::private_table::well_formed(raw).map_err(|_| unreadable(name))?;
    let typed: Vec<_> = raw
        .schema()
        .fields()
        .iter()
        .map(|field| typed_as(field.name(), table.columns.get(field.name())))
        .collect();
    let typed = raw.select(typed).map_err(|_| unreadable(name))?;
    let schema = typed.schema().inner().clone();
    let mut batches = typed.collect().await.map_err(|_| unreadable(name))?;
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(schema));
    }
    Ok(batches)
}

/// Each column's facts: the declared ones, with a text column's values as
/// its domain and a number column's extremes as its bounds where the
/// description gives none.
fn facts_of(
    table: &PublicTable,
    batches: &[RecordBatch],
) -> (BTreeMap<String, ColumnFacts>, Sizes) {
    let schema = batches[0].schema();
    let mut columns = BTreeMap::new();
    let mut sizes = Sizes::new();
    for (index, field) in schema.fields().iter().enumerate() {
        let mut facts = table.columns.get(field.name()).cloned().unwrap_or_default();
        let arrays: Vec<_> = batches.iter().map(|b| b.column(index).clone()).collect();
        match field.data_type() {
            DataType::Utf8 if facts.domain.is_none() => facts.domain = text_values(&arrays),
            DataType::Int64 | DataType::Float64 if facts.bounds.is_none() => {
                facts.bounds = extremes(&arrays);
            }
            _ => {}
        }
        let size = column_size(facts.kind == ColumnKind::Text, facts.max_length());
        sizes.insert(field.name().clone(), size);
        columns.insert(field.name().clone(), facts);
    }
    (columns, sizes)
}

/// The distinct non-NULL texts, sorted, if there are any and not too many.
fn text_values(arrays: &[Arc<dyn Array>]) -> Option<Vec<String>> {
    let mut values = BTreeSet::new();
    for array in arrays {
        for value in array.as_string::<i32>().iter().flatten() {
            values.insert(value.to_string());
            if values.len() > MOST_PUBLIC_DOMAIN_VALUES {
                return None;
            }
        }
    }
    (!values.is_empty()).then(|| values.into_iter().collect())
}

/// The smallest and largest non-NULL finite number, if there is one.
fn extremes(arrays: &[Arc<dyn Array>]) -> Option<(f64, f64)> {
    let mut range: Option<(f64, f64)> = None;
    let mut see = |value: f64| {
        if value.is_finite() {
            range = Some(range.map_or((value, value), |(l, h)| (l.min(value), h.max(value))));
        }
    };
    for array in arrays {
        match array.data_type() {
            DataType::Int64 => array
                .as_primitive::<Int64Type>()
                .iter()
                .flatten()
                .for_each(|v| see(v as f64)),
            _ => array
                .as_primitive::<Float64Type>()
                .iter()
                .flatten()
                .for_each(&mut see),
        }
    }
    range
}

/// The most rows of the public `plan` that share one value of `keys` (all
/// its rows when there are no keys; NULL counted as a value): how many
/// rows one private row can meet in a join on those keys. Exact, and
/// charged nothing: `plan` reads only public tables.
pub(crate) async fn most_matches(
    context: &SessionContext,
    plan: LogicalPlan,
    keys: Vec<Expr>,
) -> Result<u64> {
    let failed = |e: datafusion::error::DataFusionError| {
        QueryError::Sql(format!("cannot count a public table's matches: {e}"))
    };
    let counted = LogicalPlanBuilder::from(plan)
        .aggregate(keys, vec![count(lit(1)).alias("matches")])
        .and_then(|b| b.aggregate(Vec::<Expr>::new(), vec![max(col("matches"))]))
        .and_then(LogicalPlanBuilder::build)
        .map_err(failed)?;
    let batches = context
        .execute_logical_plan(counted)
        .await
        .map_err(failed)?
        .collect()
        .await
        .map_err(failed)?;
    let most = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| b.column(0).as_primitive::<Int64Type>())
        .filter(|column| column.is_valid(0))
        .map_or(0, |column| column.value(0));
    Ok(u64::try_from(most).unwrap_or(0))
}
