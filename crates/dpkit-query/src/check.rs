//! `dpkit check`: the data file read against its description, for the
//! curator who holds both, before the description is published.
//!
//! The query path keeps every fact of a description by force, and says
//! nothing when it does: a value that does not read as the declared type
//! is NULL, one outside the bounds is clamped, a value outside the domain
//! is never a released group, text past `max_length` is cut, a person's
//! rows past the cap are left out. A query may not say how often that
//! happened (it would be a fact about the data, without noise), so a wrong
//! fact gives confident answers about a table that is not the file.
//!
//! This module counts, per column, the values each fact changes, exactly,
//! with the first row of each. It reads the private data without noise and
//! charges nothing: it is the curator's tool, called by `dpkit check`, and
//! no analyst's path calls it (`workspace_shape.rs` keeps `dpkit serve`
//! from naming it). It reports counts and row numbers, never a value.

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::dataframe::DataFrame;
use datafusion::error::DataFusionError;
use datafusion::functions::expr_fn::character_length;
use datafusion::functions_aggregate::expr_fn::{count, min, sum};
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::{Expr, cast, lit, try_cast, when};
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::draft::MISSING_MARKERS;
use crate::error::{QueryError, Result};
use crate::private_table::{column, extra_field, register_file, typed_column};
use dpkit_databases::{declared_type, raw_table_name};
use dpkit_description::{ColumnKind, Description, PrivacyUnit, Source};

/// What a description's fact does to a value it does not expect.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Finding {
    /// The value does not read as the declared type: a query reads NULL.
    NotOfType,
    /// Below the lower bound: clamped up to it where it is summed.
    Below(f64),
    /// Above the upper bound: clamped down to it.
    Above(f64),
    /// Outside the public domain: never released as a group.
    OutsideDomain,
    /// Longer than `max_length` characters: cut to that length.
    TooLong(u32),
}

/// How many values of a column one fact changes, and the first data row
/// (counted from 1, the header row not counted) holding one.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The fact, and what it does.
    pub finding: Finding,
    /// How many values it changes.
    pub values: u64,
    /// The first row with such a value.
    pub first_row: u64,
}

/// One described column, read against its facts.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnCheck {
    /// The column.
    pub name: String,
    /// Its declared type.
    pub kind: ColumnKind,
    /// Values present: not NULL, not an empty field, and for a number not a
    /// missing-value marker such as `NA` (see `dpkit describe`).
    pub present: u64,
    /// What the facts change, one entry per fact that changes anything.
    pub found: Vec<Found>,
}

/// What the per-person cap does, for a description whose privacy unit is
/// an id column.
#[derive(Debug, Clone, PartialEq)]
pub struct CapCheck {
    /// People with more rows than `max_rows_per_person`.
    pub people_over: u64,
    /// Their rows past the cap, which no query reads.
    pub rows_left_out: u64,
    /// Rows with no id, which belong to no one and no query reads.
    pub rows_without_id: u64,
}

/// The data file read against its description.
#[derive(Debug, Clone, PartialEq)]
pub struct DataCheck {
    /// The file's data rows.
    pub rows: u64,
    /// Each described column, in the file's order.
    pub columns: Vec<ColumnCheck>,
    /// The cap's effect, for an id privacy unit.
    pub cap: Option<CapCheck>,
    /// Rows with more fields than the header, which no query reads, and
    /// the first of them (0 when none).
    pub longer_rows: (u64, u64),
}

impl DataCheck {
    /// Whether the data holds nothing the description does not expect.
    pub fn is_clean(&self) -> bool {
        self.columns.iter().all(|c| c.found.is_empty())
            && self.longer_rows.0 == 0
            && self
                .cap
                .as_ref()
                .is_none_or(|c| c.rows_left_out == 0 && c.rows_without_id == 0)
    }
}

/// Reads the description's CSV or Parquet file whole and counts, per
/// described column, the values its facts change (see the module's text).
///
/// ```
/// use dpkit_query::Description;
/// use dpkit_query::check::{Finding, check};
/// let folder = std::env::temp_dir().join(format!("doc-check-{}", std::process::id()));
/// std::fs::create_dir_all(&folder).unwrap();
/// std::fs::write(folder.join("p.csv"), "mass\n3750\n3800.5\nNA\n9000\n").unwrap();
/// let description = Description::from_toml(
///     "[table]\nname = \"p\"\nfile = \"p.csv\"\n[privacy_unit]\nkind = \"row\"\n\
///      [budget]\nepsilon = 1.0\n[columns.mass]\ntype = \"integer\"\nbounds = [2000, 7000]\n",
///     &folder,
/// )
/// .unwrap();
/// let report = check(&description).unwrap();
/// let mass = &report.columns[0];
/// assert_eq!((report.rows, mass.present), (4, 3));
/// assert_eq!(mass.found[0].finding, Finding::NotOfType);
/// assert_eq!((mass.found[0].values, mass.found[0].first_row), (1, 2));
/// assert_eq!(mass.found[1].finding, Finding::Above(7000.0));
/// # std::fs::remove_dir_all(&folder).unwrap();
/// ```
pub fn check(description: &Description) -> Result<DataCheck> {
    if description.source != Source::File {
        return Err(QueryError::Description(
            "dpkit check reads a CSV or Parquet file; this table lives in a database".into(),
        ));
    }
    if !description.file.is_file() {
        return Err(QueryError::Unreadable(format!(
            "cannot read {}: no such file",
            description.file.display()
        )));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| QueryError::Unreadable(format!("cannot start the runtime: {e}")))?;
    // The curator's own tool: the file is named (its rows never are).
    runtime
        .block_on(check_file(description))
        .map_err(|error| match error {
            QueryError::Unreadable(reason) => {
                QueryError::Unreadable(format!("{}: {reason}", description.file.display()))
            }
            other => other,
        })
}

/// The row number's column.
const ROW: &str = "__dpkit_row";

/// A failure while reading: the file's own text is not quoted, only the
/// line the reader stopped at, when it says.
fn unreadable(error: DataFusionError) -> QueryError {
    let line = line_of(&error.to_string()).map_or(String::new(), |n| format!(" at line {n}"));
    QueryError::Unreadable(format!(
        "the data file does not parse{line} (details withheld: they could quote its values)"
    ))
}

/// The number after the last "line " of an Arrow CSV error, which ends
/// with it ("… for line 3, expected 2 got 1", "… at line 5"): the last,
/// since a quoted value may come before it.
fn line_of(text: &str) -> Option<u64> {
    let after = &text[text.rfind("line ")? + "line ".len()..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// One partition, so that row numbers follow the file.
async fn check_file(description: &Description) -> Result<DataCheck> {
    let config = SessionConfig::new()
        .with_target_partitions(1)
        .with_repartition_file_scans(false);
    let context = SessionContext::new_with_config(config);
    register_file(&context, description).await?;
    let raw = context
        .table(raw_table_name(&description.table).as_str())
        .await
        .map_err(unreadable)?;
    let planned = planned_columns(description, &raw);
    let mut aggregates = vec![count(lit(1i64))];
    for column in &planned {
        aggregates.push(tally(column.present.clone()).map_err(unreadable)?);
        for (_, predicate) in &column.checks {
            aggregates.push(tally(predicate.clone()).map_err(unreadable)?);
            aggregates.push(first_row(predicate.clone()).map_err(unreadable)?);
        }
    }
    let cap = cap_counts(description, &raw, &mut aggregates)?;
    let longer = raw
        .schema()
        .has_column_with_unqualified_name(&extra_field(0))
        .then(|| column(&extra_field(0)).is_not_null());
    if let Some(longer) = &longer {
        aggregates.push(tally(longer.clone()).map_err(unreadable)?);
        aggregates.push(first_row(longer.clone()).map_err(unreadable)?);
    }
    // Named by position: two tests may print alike.
    let aggregates = aggregates
        .into_iter()
        .enumerate()
        .map(|(i, aggregate)| aggregate.alias(format!("__dpkit_check_{i}")))
        .collect();
    let numbered = raw
        .window(vec![row_number().alias(ROW)])
        .map_err(unreadable)?;
    let totals = one_row(numbered.aggregate(vec![], aggregates).map_err(unreadable)?).await?;
    let mut next = totals.into_iter();
    let rows = next.next().unwrap_or(0);
    let columns = planned
        .into_iter()
        .map(|planned| planned.read(&mut next))
        .collect();
    let cap = match cap {
        Some(per_person) => {
            let counts = one_row(per_person).await?;
            Some(CapCheck {
                people_over: counts.first().copied().unwrap_or(0),
                rows_left_out: counts.get(1).copied().unwrap_or(0),
                rows_without_id: next.next().unwrap_or(0),
            })
        }
        None => None,
    };
    let longer_rows = match longer {
        Some(_) => (next.next().unwrap_or(0), next.next().unwrap_or(0)),
        None => (0, 0),
    };
    Ok(DataCheck {
        rows,
        columns,
        cap,
        longer_rows,
    })
}

/// A column's presence test and its facts' tests, in the order their
/// counts are read back.
struct PlannedColumn {
    name: String,
    kind: ColumnKind,
    present: Expr,
    checks: Vec<(Finding, Expr)>,
}

impl PlannedColumn {
    fn read(self, next: &mut impl Iterator<Item = u64>) -> ColumnCheck {
        let present = next.next().unwrap_or(0);
        let found = self
            .checks
            .into_iter()
            .map(|(finding, _)| Found {
                finding,
                values: next.next().unwrap_or(0),
                first_row: next.next().unwrap_or(0),
            })
            .filter(|found| found.values > 0)
            .collect();
        ColumnCheck {
            name: self.name,
            kind: self.kind,
            present,
            found,
        }
    }
}

/// The described columns in the file's order, with their tests.
fn planned_columns(description: &Description, raw: &DataFrame) -> Vec<PlannedColumn> {
    raw.schema()
        .fields()
        .iter()
        .filter_map(|field| {
            let facts = description.column(field.name())?;
            let value = column(field.name());
            let textual = matches!(
                field.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            );
            let present = presence(value.clone(), textual, facts.kind, &description.missing);
            let typed = try_cast(value, declared_type(facts.kind));
            let mut checks = vec![(
                Finding::NotOfType,
                present.clone().and(typed.clone().is_null()),
            )];
            // A missing value is never out of bounds or of the domain.
            let missing_aside =
                |(finding, test): (Finding, Expr)| (finding, present.clone().and(test));
            checks.extend(fact_checks(typed, facts).into_iter().map(missing_aside));
            Some(PlannedColumn {
                name: field.name().clone(),
                kind: facts.kind,
                present,
                checks,
            })
        })
        .collect()
}

/// A value is present unless NULL, an empty field, one of the
/// description's `missing` markers (in any column, as queries read them),
/// or, in a column of numbers, a common missing-value marker.
fn presence(value: Expr, textual: bool, kind: ColumnKind, declared: &[String]) -> Expr {
    let mut present = value.clone().is_not_null();
    if textual {
        present = present.and(value.clone().not_eq(lit("")));
        let mut markers: Vec<Expr> = declared
            .iter()
            .filter(|m| !m.is_empty())
            .map(|m| lit(m.as_str()))
            .collect();
        if kind != ColumnKind::Text {
            markers.extend(MISSING_MARKERS.iter().map(|m| lit(*m)));
        }
        if !markers.is_empty() {
            present = present.and(value.in_list(markers, true));
        }
    }
    present
}

/// The tests of a column's bounds, domain and length on its typed value.
fn fact_checks(typed: Expr, facts: &dpkit_description::ColumnFacts) -> Vec<(Finding, Expr)> {
    let mut checks = Vec::new();
    if let Some((low, high)) = facts.bounds {
        checks.push((Finding::Below(low), typed.clone().lt(lit(low))));
        checks.push((Finding::Above(high), typed.clone().gt(lit(high))));
    }
    if let Some(domain) = &facts.domain {
        let listed = domain.iter().map(|v| lit(v.as_str())).collect();
        let as_text = cast(typed.clone(), DataType::Utf8);
        checks.push((Finding::OutsideDomain, as_text.in_list(listed, true)));
    }
    if facts.kind == ColumnKind::Text {
        let longest = i64::from(facts.max_length());
        let length = character_length(typed);
        checks.push((
            Finding::TooLong(facts.max_length()),
            length.gt(lit(longest)),
        ));
    }
    checks
}

/// The number of rows where `predicate` holds (NULL counts as not).
fn tally(predicate: Expr) -> datafusion::error::Result<Expr> {
    let one = when(predicate, lit(1i64)).otherwise(lit(0i64))?;
    Ok(cast(sum(one), DataType::Int64))
}

/// The first row where `predicate` holds (NULL, read as 0, if none does).
fn first_row(predicate: Expr) -> datafusion::error::Result<Expr> {
    let row = when(predicate, column(ROW)).end()?;
    Ok(cast(min(row), DataType::Int64))
}

/// For an id privacy unit: adds the count of rows without an id to
/// `aggregates`, and returns the frame of the per-person counts (people
/// over the cap, their rows past it), read separately.
fn cap_counts(
    description: &Description,
    raw: &DataFrame,
    aggregates: &mut Vec<Expr>,
) -> Result<Option<DataFrame>> {
    let PrivacyUnit::Id {
        column: id,
        max_rows,
    } = &description.privacy_unit
    else {
        return Ok(None);
    };
    // The id as the view reads it: typed, and cut if it is text.
    let typed = typed_column(description, id).unalias();
    aggregates.push(tally(typed.clone().is_null()).map_err(unreadable)?);
    let limit = i64::try_from(*max_rows).unwrap_or(i64::MAX);
    let over = column("n").gt(lit(limit));
    let past = when(over.clone(), column("n") - lit(limit)).otherwise(lit(0i64));
    raw.clone()
        .select(vec![typed.alias("id")])
        .and_then(|p| p.filter(column("id").is_not_null()))
        .and_then(|p| p.aggregate(vec![column("id")], vec![count(lit(1i64)).alias("n")]))
        .and_then(|p| {
            p.aggregate(
                vec![],
                vec![tally(over)?, cast(sum(past?), DataType::Int64)],
            )
        })
        .map(Some)
        .map_err(unreadable)
}

/// The one row of an aggregate without groups, each column an Int64 (NULL,
/// from an empty table, as 0).
async fn one_row(frame: DataFrame) -> Result<Vec<u64>> {
    let batches: Vec<RecordBatch> = frame.collect().await.map_err(unreadable)?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(Vec::new());
    };
    batch
        .columns()
        .iter()
        .map(|c| match c.as_primitive_opt::<Int64Type>() {
            Some(values) if values.is_valid(0) => Ok(u64::try_from(values.value(0)).unwrap_or(0)),
            Some(_) => Ok(0),
            None => Err(QueryError::Unreadable(
                "the check's result has an unexpected shape".into(),
            )),
        })
        .collect()
}
