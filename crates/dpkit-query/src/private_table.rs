//! The table queries see: the data file read with the types the description
//! declares, and at most `max_rows_per_person` rows of each person.
//!
//! Both are decided here, below anything a query can write:
//! - **Types come from the description, never from the data.** DataFusion
//!   would infer a CSV schema from the first rows, so one person's `90.5` or
//!   `NA` would change a column's type (and with it which queries plan, and
//!   what they answer). The file is read as text and each described column
//!   is `TRY_CAST` to its declared type: a value that does not parse is
//!   NULL. Columns the description does not list are text, and text values
//!   are cut to their column's `max_length` (1,024 characters by default),
//!   so that what an expression builds from one row, and the time it takes,
//!   stays within what `dpkit_total` bounds at planning.
//! - **The per-person cap is applied on the scan**, by the described id
//!   column, before any filter or subquery of the query: a query that
//!   renames or recomputes the id (`random() AS pid`) cannot switch it off.
//!   Rows without an id belong to no one and are left out.
//!
//! The query names the capped, typed table; the raw file is registered
//! under a name queries are refused from reading.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::TableProvider;
use datafusion::common::Column;
use datafusion::logical_expr::{Expr, ExprFunctionExt, LogicalPlan, SortExpr, lit, try_cast};
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};

use crate::error::{QueryError, Result};
use dpkit_databases::{declared_type, raw_table_name};
use dpkit_description::{
    ColumnFacts, ColumnKind, DEFAULT_MAX_LENGTH, Description, FileFormat, KeptRows, PrivacyUnit,
};

/// The longest header row read.
const MAX_HEADER_BYTES: u64 = 1 << 20;
const ROW_NUMBER: &str = "__dpkit_row_of_person";

fn data_error(reason: impl Into<String>) -> QueryError {
    QueryError::Unreadable(reason.into())
}

/// The column names of a CSV header row (RFC 4180 quoting).
fn parse_header(line: &str) -> Vec<String> {
    let line = line
        .trim_start_matches('\u{feff}')
        .trim_end_matches(['\r', '\n']);
    let mut names = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => names.push(std::mem::take(&mut current)),
            (c, _) => current.push(c),
        }
    }
    names.push(current);
    names
}

/// The header row of `path`.
pub(crate) fn csv_header(path: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(path)
        .map_err(|e| data_error(format!("cannot read {}: {e}", path.display())))?;
    let mut line = String::new();
    BufReader::new(file)
        .take(MAX_HEADER_BYTES)
        .read_line(&mut line)
        .map_err(|_| data_error(format!("{}: the header row is not UTF-8", path.display())))?;
    if line.trim().is_empty() {
        return Err(data_error(format!(
            "{}: no header row (the first line must name the columns)",
            path.display()
        )));
    }
    Ok(parse_header(&line))
}

/// Refuses a description whose columns the file does not have. The message
/// names only described columns: a file without a header would otherwise
/// put a row of data into it.
fn check_columns(described: &BTreeMap<String, ColumnFacts>, names: &[String]) -> Result<()> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    if sorted.windows(2).any(|w| w[0] == w[1]) || names.iter().any(String::is_empty) {
        return Err(QueryError::Description(
            "the data file's header has an empty or repeated column name".into(),
        ));
    }
    let missing: Vec<&str> = described
        .keys()
        .filter(|c| !names.contains(c))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(QueryError::Description(format!(
            "the data file has no column named {} (is its first line a header row?)",
            missing
                .iter()
                .map(|m| format!("'{m}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

/// Registers the description's file, typed and capped, under its table name.
pub(crate) async fn register_file(
    context: &SessionContext,
    description: &Description,
) -> Result<LogicalPlan> {
    let raw = raw_table_name(&description.table);
    #[cfg(feature = "planted-holes")]
    if description.format == FileFormat::Csv
        && dpkit_planted::is_planted(dpkit_planted::Hole::InferredTypes)
    {
        let path = description.file.to_string_lossy().into_owned();
        let options = CsvReadOptions::new().has_header(true);
        context
            .register_csv(raw.as_str(), &path, options)
            .await
            .map_err(|_| data_error(format!("cannot read {path}")))?;
        return register_view(context, description, true).await;
    }
    register_raw(
        context,
        &raw,
        (&description.file, description.format),
        &description.columns,
    )
    .await?;
    register_view(context, description, true).await
}

/// Fields past the header's that a CSV row may have and still be read (as
/// a row that is left out: see [`well_formed`]). Two cover the common slip
/// (an unquoted comma in a text). Each costs every row of every query a
/// column read: with 16, one person's rows moved a query's time by up to
/// 4 times its work bound in `tests/row_cost.rs` (3 runs of 3 failed; with
/// 2, none of 3, as with none).
const EXTRA_FIELDS: usize = 2;

/// What the columns of a CSV row's fields past the header's are named by.
const EXTRA_FIELD: &str = "__dpkit_extra_field_";

/// The name of a CSV row's `i`th field past the header's.
pub(crate) fn extra_field(i: usize) -> String {
    format!("{EXTRA_FIELD}{i}")
}

/// The rows of a raw table that have the header's number of fields (or
/// fewer: the missing ones are NULL), without the columns that hold a
/// longer row's extra fields. A row with more fields is nobody's: left
/// out, as a row without an id is, by a test of that row alone. Read
/// strictly, one such row made every query on the file fail (after its
/// charge), an unnoised bit about one person; rows with more than
/// [`EXTRA_FIELDS`] extra fields still do, and `dpkit check` names them.
pub(crate) fn well_formed(
    raw: datafusion::dataframe::DataFrame,
) -> datafusion::error::Result<(datafusion::dataframe::DataFrame, Vec<String>)> {
    let names: Vec<String> = raw
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| !n.starts_with(EXTRA_FIELD))
        .collect();
    if names.len() == raw.schema().fields().len() {
        return Ok((raw, names));
    }
    let kept = raw
        .filter(column(&extra_field(0)).is_null())?
        .select_columns(&names.iter().map(String::as_str).collect::<Vec<_>>())?;
    Ok((kept, names))
}

/// Registers the CSV or Parquet `file` as `name`, every CSV column read as
/// text, after checking that it has the `described` columns. A CSV row may
/// have fewer fields than the header (the others are NULL) or up to
/// [`EXTRA_FIELDS`] more, read into columns of their own that
/// [`well_formed`] leaves out with the row.
pub(crate) async fn register_raw(
    context: &SessionContext,
    name: &str,
    (file, format): (&Path, FileFormat),
    described: &BTreeMap<String, ColumnFacts>,
) -> Result<()> {
    let path = file.to_string_lossy().into_owned();
    let unreadable = |_| data_error(format!("cannot read {path} as {format:?}"));
    match format {
        FileFormat::Csv => {
            let names = csv_header(file)?;
            check_columns(described, &names)?;
            let extras = (0..EXTRA_FIELDS).map(extra_field);
            let schema = Schema::new(
                names
                    .iter()
                    .cloned()
                    .chain(extras)
                    .map(|n| Field::new(n, DataType::Utf8, true))
                    .collect::<Vec<_>>(),
            );
            let extension = file
                .extension()
                .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
            let options = CsvReadOptions::new()
                .has_header(true)
                .schema(&schema)
                .truncated_rows(true)
                .file_extension(&extension);
            context
                .register_csv(name, &path, options)
                .await
                .map_err(unreadable)
        }
        FileFormat::Parquet => context
            .register_parquet(name, &path, ParquetReadOptions::default())
            .await
            .map_err(unreadable),
    }
}

/// Registers `provider` as the raw table, then the typed, capped view of
/// it (not capped again when its rows are [`capped_table`]'s).
pub(crate) async fn register_provider(
    context: &SessionContext,
    description: &Description,
    (provider, capped): (Arc<dyn TableProvider>, bool),
) -> Result<LogicalPlan> {
    context
        .register_table(raw_table_name(&description.table).as_str(), provider)
        .map_err(|e| data_error(e.to_string()))?;
    register_view(context, description, !capped).await
}

pub(crate) fn column(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

/// Each column read as its declared type (a value that does not parse is
/// NULL), text cut to its `max_length`.
fn typed_columns(description: &Description, names: &[String]) -> Vec<Expr> {
    names
        .iter()
        .map(|name| typed_column(description, name))
        .collect()
}

/// The column `name` as the view reads it: its declared type (columns the
/// description does not list are text), text cut to its `max_length`.
pub(crate) fn typed_column(description: &Description, name: &str) -> Expr {
    #[cfg(feature = "planted-holes")]
    if dpkit_planted::is_planted(dpkit_planted::Hole::InferredTypes) {
        return column(name).alias(name);
    }
    let facts = description.column(name);
    let person =
        matches!(&description.privacy_unit, PrivacyUnit::Id { column, .. } if column == name);
    let typed = match facts {
        Some(facts) if person && facts.kind == ColumnKind::Text => {
            whole_or_no_one(name, facts.max_length())
        }
        Some(facts) if person && facts.kind == ColumnKind::Integer => own_integer_or_no_one(name),
        _ => typed_as(name, facts),
    };
    let kind = facts.map_or(ColumnKind::Text, |f| f.kind);
    markers_as_null(typed, name, kind, &description.missing)
}

/// `typed` (the column `name` as read), NULL where it is one of the
/// description's `missing` markers: compared after the column is typed and
/// cut, so that the comparison costs what a bounded value costs. A number
/// column compares the markers that read as its numbers (the others do not
/// parse, so they are NULL already); the empty field is NULL as read.
fn markers_as_null(typed: Expr, name: &str, kind: ColumnKind, missing: &[String]) -> Expr {
    use datafusion::common::ScalarValue;
    let marked = missing.iter().filter(|m| !m.is_empty());
    let (markers, null): (Vec<ScalarValue>, ScalarValue) = match kind {
        ColumnKind::Text => (
            marked.map(|m| ScalarValue::Utf8(Some(m.clone()))).collect(),
            ScalarValue::Utf8(None),
        ),
        ColumnKind::Integer => (
            marked
                .filter_map(|m| m.trim().parse::<i64>().ok())
                .map(|m| ScalarValue::Int64(Some(m)))
                .collect(),
            ScalarValue::Int64(None),
        ),
        ColumnKind::Real => (
            marked
                .filter_map(|m| m.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
                .map(|m| ScalarValue::Float64(Some(m)))
                .collect(),
            ScalarValue::Float64(None),
        ),
    };
    if markers.is_empty() {
        return typed;
    }
    let value = typed.unalias();
    let matched = markers
        .into_iter()
        .map(|m| value.clone().eq(Expr::Literal(m, None)))
        .reduce(Expr::or)
        .expect("at least one marker");
    // `otherwise` fails only on a CASE without branches, which this is not;
    // were it to, the column would be read without its markers.
    match datafusion::logical_expr::when(matched, Expr::Literal(null, None))
        .otherwise(value.clone())
    {
        Ok(case) => case.alias(name),
        Err(_) => value.alias(name),
    }
}

/// An integer person column as the view reads it: the integer, or NULL
/// (the row is then no one's, and left out) when its text is not that
/// integer's own (`07`, `+7`): read as 7, it would make two people one,
/// whose cap would then keep one's rows by the other's. A value already
/// stored as an integer is its own text.
fn own_integer_or_no_one(name: &str) -> Expr {
    use datafusion::logical_expr::expr::Case;
    let number = try_cast(column(name), DataType::Int64);
    let text = |expr: Expr| try_cast(expr, DataType::Utf8);
    let own = text(number.clone()).eq(text(column(name)));
    let no_one = Expr::Literal(datafusion::common::ScalarValue::Int64(None), None);
    let case = Case::new(
        None,
        vec![(Box::new(own), Box::new(number))],
        Some(Box::new(no_one)),
    );
    Expr::Case(case).alias(name)
}

/// A text person column as the view reads it: whole, or NULL (the row is
/// then no one's, and left out) when it is longer than `max_length`. Cut,
/// two people whose ids begin alike would be one person, whose cap would
/// then keep one's rows by the other's (a red-team helper joined one
/// person's row to another's visits so). Written with `dpkit_cut_text`
/// alone, which every database backend runs: a text is at most `length`
/// characters when cutting it at `length + 1` cuts nothing more.
fn whole_or_no_one(name: &str, length: u32) -> Expr {
    use datafusion::logical_expr::expr::Case;
    let text = try_cast(column(name), DataType::Utf8);
    let cut = |at: u32| dpkit_functions::cut_text::cut_text(text.clone(), at);
    let whole = cut(length.saturating_add(1)).eq(cut(length));
    let no_one = Expr::Literal(datafusion::common::ScalarValue::Utf8(None), None);
    let case = Case::new(
        None,
        vec![(Box::new(whole), Box::new(cut(length)))],
        Some(Box::new(no_one)),
    );
    Expr::Case(case).alias(name)
}

/// The [`dpkit_total::Size`] of a column as the typed view reads it: text
/// at most `max_length` characters, anything else a number's length.
pub(crate) fn column_size(text: bool, max_length: u32) -> dpkit_total::Size {
    dpkit_total::Size::base(match text {
        true => dpkit_total::bytes_of_characters(max_length),
        false => dpkit_total::NUMBER_AS_TEXT_BYTES,
    })
}

/// The column `name` read as `facts` declare (text when they are `None`),
/// text cut to its `max_length`.
pub(crate) fn typed_as(name: &str, facts: Option<&ColumnFacts>) -> Expr {
    let kind = facts.map_or(ColumnKind::Text, |f| f.kind);
    let typed = try_cast(column(name), declared_type(kind));
    let bounded = match kind {
        ColumnKind::Text => {
            let length = facts.map_or(DEFAULT_MAX_LENGTH, ColumnFacts::max_length);
            dpkit_functions::cut_text::cut_text(typed, length)
        }
        _ => typed,
    };
    bounded.alias(name)
}

/// The raw table registered under the description's table, and its column names.
async fn raw_table(
    context: &SessionContext,
    description: &Description,
) -> datafusion::error::Result<(datafusion::dataframe::DataFrame, Vec<String>)> {
    let raw = context
        .table(raw_table_name(&description.table).as_str())
        .await?;
    well_formed(raw)
}

/// The table's view read whole: its rows typed as declared and capped per
/// person, as every query reads them. Held in memory, neither the casts nor
/// the cap (a sort of the whole table) cost anything per query.
pub(crate) async fn capped_table(
    context: &SessionContext,
    name: &str,
) -> Result<(
    datafusion::arrow::datatypes::SchemaRef,
    Vec<datafusion::arrow::array::RecordBatch>,
)> {
    let unreadable = |_| {
        data_error(
            "the data file does not parse (details withheld: they could quote private values)",
        )
    };
    let view = context.table(name).await.map_err(unreadable)?;
    let schema = view.schema().inner().clone();
    Ok((schema, view.collect().await.map_err(unreadable)?))
}

/// The order in which a cap keeps each person's first rows: their own
/// values, every column in turn, after a random draw per row under
/// `keep = "random"`. Which rows are kept depends on the person's own rows
/// alone, never on where other people's rows are read (the values order
/// them; with the draw, each row's draw is independent of every value and
/// of every other draw, so the person's kept rows are a uniformly random
/// choice among theirs whatever the rest of the table: coupling the draws
/// of the rows two neighbouring tables share, every other person keeps the
/// same rows in both, so each cap's sensitivity holds for every draw, and
/// so for their mixture). The draws come from DataFusion's `random()`,
/// which reads the thread's OS-seeded generator.
pub(crate) fn kept_order(keep: KeptRows, columns: &[Expr]) -> Vec<SortExpr> {
    let draw = (keep == KeptRows::Random)
        .then(|| datafusion::functions::math::expr_fn::random().sort(true, true));
    let values = columns.iter().map(|c| c.clone().sort(true, true));
    draw.into_iter().chain(values).collect()
}

/// Registers the view, capped per person when `cap` says so, and returns
/// its plan: the planner inlines it into queries, where `plan::input`
/// recognises it.
async fn register_view(
    context: &SessionContext,
    description: &Description,
    cap: bool,
) -> Result<LogicalPlan> {
    let failed = |e: datafusion::error::DataFusionError| data_error(e.to_string());
    let (raw, names) = raw_table(context, description).await.map_err(failed)?;
    check_columns(&description.columns, &names)?;
    let typed = typed_columns(description, &names);
    let mut view = raw.select(typed).map_err(failed)?;
    #[cfg(feature = "planted-holes")]
    let capped = cap && !dpkit_planted::is_planted(dpkit_planted::Hole::CapAfterFrom);
    #[cfg(not(feature = "planted-holes"))]
    let capped = cap;
    if let (
        PrivacyUnit::Id {
            column: id,
            max_rows,
        },
        true,
    ) = (&description.privacy_unit, capped)
    {
        let columns: Vec<Expr> = names.iter().map(|n| column(n)).collect();
        let numbered = datafusion::functions_window::expr_fn::row_number()
            .partition_by(vec![column(id)])
            .order_by(kept_order(description.keep, &columns))
            .build()
            .map_err(failed)?
            .alias(ROW_NUMBER);
        let limit = i64::try_from(*max_rows).unwrap_or(i64::MAX);
        view = view
            .filter(column(id).is_not_null())
            .and_then(|v| v.window(vec![numbered]))
            .and_then(|v| v.filter(column(ROW_NUMBER).lt_eq(lit(limit))))
            .and_then(|v| v.select(names.iter().map(|n| column(n)).collect::<Vec<Expr>>()))
            .map_err(failed)?;
    }
    let plan = view.logical_plan().clone();
    context
        .register_table(description.table.as_str(), view.into_view())
        .map_err(failed)?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::parse_header;

    #[test]
    fn headers_follow_csv_quoting() {
        assert_eq!(parse_header("a,b-c,\"d,e\"\r\n"), ["a", "b-c", "d,e"]);
        assert_eq!(parse_header("\u{feff}x,\"y\"\"z\""), ["x", "y\"z"]);
    }
}
