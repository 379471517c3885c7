//! A public table sent with the statement: its rows, as dpkit read them
//! from its file when the engine opened, written as a `VALUES` list that
//! defines the table by its name in the statement's `WITH` clause. The
//! database joins exactly the rows whose facts (domains, bounds, the most
//! matches per key) the plan was made with; nothing of the database's own
//! is trusted to be public.

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};

use super::flavour::Flavour;
use crate::error::{DatabaseError, Result};

/// The most rows of one public table sent with each statement.
pub(crate) const MOST_SENT_ROWS: usize = 10_000;

/// The `SELECT` that gives the public table `name` (whose rows are
/// `batches`) with its columns' names and types, in `flavour`'s SQL.
pub(crate) fn public_source(
    name: &str,
    batches: &[RecordBatch],
    flavour: Flavour,
) -> Result<String> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if rows > MOST_SENT_ROWS {
        return Err(DatabaseError::Description(format!(
            "public table '{name}' has more than {MOST_SENT_ROWS} rows, too many to send to {} \
             with each query: join it in the database, in a view the description names",
            flavour.name()
        )));
    }
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return Err(DatabaseError::Unreadable(format!(
            "public table '{name}' has no columns"
        )));
    };
    let types: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
    let mut written = Vec::with_capacity(rows);
    for batch in batches {
        for row in 0..batch.num_rows() {
            let cells: Result<Vec<String>> = batch
                .columns()
                .iter()
                .map(|column| cell(column.as_ref(), row, flavour, name))
                .collect();
            written.push(format!("({})", cells?.join(", ")));
        }
    }
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let list: Vec<String> = names
        .iter()
        .zip(&types)
        .enumerate()
        .map(|(i, (column, ty))| {
            let read = typed(&position(i, flavour), ty, flavour);
            format!("{read} AS {}", flavour.quote(column))
        })
        .collect();
    // No VALUES list is empty: a row of NULLs that no row passes.
    let none = written.is_empty();
    if none {
        written.push(format!("({})", vec!["NULL"; names.len()].join(", ")));
    }
    Ok(format!(
        "SELECT {} FROM {}{}",
        list.join(", "),
        values(&written, names.len(), flavour),
        if none { " WHERE 1 = 0" } else { "" }
    ))
}

/// The `VALUES` list as a table in `FROM`, its columns named by position.
fn values(rows: &[String], columns: usize, flavour: Flavour) -> String {
    let rows = rows.join(", ");
    match flavour {
        Flavour::Sqlite => format!("(VALUES {rows})"),
        Flavour::Postgres => format!("(VALUES {rows}) AS dpkit_public"),
        Flavour::Spark => {
            let names: Vec<String> = (0..columns).map(|i| position(i, flavour)).collect();
            format!("(VALUES {rows}) AS dpkit_public({})", names.join(", "))
        }
    }
}

/// The name the database gives the `i`th column of a `VALUES` list.
fn position(i: usize, flavour: Flavour) -> String {
    match flavour {
        Flavour::Spark => format!("col{}", i + 1),
        _ => format!("column{}", i + 1),
    }
}

/// `column` read as the type the plan reads: on PostgreSQL and Spark cast,
/// text with a byte-by-byte collation as the private tables' text is
/// ([`Flavour::cast_source`]); SQLite keeps each literal's own type.
fn typed(column: &str, ty: &DataType, flavour: Flavour) -> String {
    match (flavour, ty) {
        (Flavour::Sqlite, _) => column.to_string(),
        (_, DataType::Int64) => format!("CAST({column} AS BIGINT)"),
        (_, DataType::Float64) => format!("CAST({column} AS {})", flavour.double()),
        (Flavour::Spark, _) => format!("CAST({column} AS STRING)"),
        (_, _) => format!("CAST({column} AS TEXT) COLLATE \"C\""),
    }
}

/// One value as a literal of its type (NULL for a null).
fn cell(column: &dyn Array, row: usize, flavour: Flavour, name: &str) -> Result<String> {
    if column.is_null(row) {
        return Ok("NULL".into());
    }
    match column.data_type() {
        DataType::Int64 => {
            let value = column.as_primitive::<Int64Type>().value(row);
            Ok(match flavour {
                Flavour::Sqlite => value.to_string(),
                _ => format!("CAST({value} AS BIGINT)"),
            })
        }
        DataType::Float64 => {
            let value = column.as_primitive::<Float64Type>().value(row);
            if !value.is_finite() {
                return Err(DatabaseError::Description(format!(
                    "public table '{name}' holds a NaN or an infinity, which cannot be sent to {}",
                    flavour.name()
                )));
            }
            let real = match flavour {
                Flavour::Sqlite => "REAL",
                _ => flavour.double(),
            };
            Ok(format!("CAST('{value:e}' AS {real})"))
        }
        DataType::Utf8 => text(column.as_string::<i32>().value(row), flavour, name),
        other => Err(DatabaseError::Description(format!(
            "public table '{name}' has a column of type {other}, which dpkit does not send to {}",
            flavour.name()
        ))),
    }
}

/// A text as a literal: as it is when it holds no quote, backslash,
/// control character or dollar sign, otherwise from its UTF-8 bytes in
/// hexadecimal, one flat literal however many such characters it holds
/// (written in pieces, a text of many quotes is an expression too deep for
/// SQLite). A NUL is refused: PostgreSQL text cannot hold one, and
/// SQLite's functions stop at it.
fn text(text: &str, flavour: Flavour, name: &str) -> Result<String> {
    if text.contains('\0') {
        return Err(DatabaseError::Description(format!(
            "public table '{name}' holds a text with a NUL character, which cannot be sent to {}",
            flavour.name()
        )));
    }
    let plain = |c: char| !(c == '\\' || c == '\'' || c.is_control() || c == '$');
    if text.chars().all(plain) {
        return Ok(format!("'{text}'"));
    }
    let hex: String = text.bytes().map(|b| format!("{b:02X}")).collect();
    Ok(match flavour {
        Flavour::Sqlite => format!("CAST(X'{hex}' AS TEXT)"),
        Flavour::Postgres => format!("convert_from(decode('{hex}', 'hex'), 'UTF8')"),
        Flavour::Spark => format!("CAST(X'{hex}' AS STRING)"),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};

    use super::*;

    const AWKWARD: &str = "it's \\ a\nline; -- not a comment $1";

    fn batch(rows: usize) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("x", DataType::Float64, true),
            Field::new("label", DataType::Utf8, true),
        ]);
        let n = Int64Array::from(vec![Some(i64::MIN), None, Some(7)]);
        let x = Float64Array::from(vec![Some(0.1), Some(-2.5e300), None]);
        let label = StringArray::from(vec![Some(AWKWARD), Some("plain"), None]);
        let columns: Vec<Arc<dyn Array>> = vec![Arc::new(n), Arc::new(x), Arc::new(label)];
        let columns = columns.into_iter().map(|c| c.slice(0, rows)).collect();
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    /// What SQLite reads from the source: each row's three values.
    fn read_in_sqlite(source: &str) -> Vec<(Option<i64>, Option<f64>, Option<String>)> {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let mut statement = db.prepare(source).unwrap();
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap();
        rows.map(|row| row.unwrap()).collect()
    }

    #[test]
    fn sqlite_reads_back_every_value_as_it_was() {
        let source = public_source("p", &[batch(3)], Flavour::Sqlite).unwrap();
        let expected = vec![
            (Some(i64::MIN), Some(0.1), Some(AWKWARD.to_string())),
            (None, Some(-2.5e300), Some("plain".to_string())),
            (Some(7), None, None),
        ];
        assert_eq!(read_in_sqlite(&source), expected);
        assert!(
            read_in_sqlite(&public_source("p", &[batch(0)], Flavour::Sqlite).unwrap()).is_empty()
        );
    }

    #[test]
    fn every_source_is_written_without_quotes_or_comments_in_its_literals() {
        for flavour in [Flavour::Sqlite, Flavour::Postgres, Flavour::Spark] {
            for rows in [0, 3] {
                let source = public_source("p", &[batch(rows)], flavour).unwrap();
                super::super::spelling::unambiguous(&source, flavour)
                    .unwrap_or_else(|e| panic!("{flavour:?}: {e}: {source}"));
            }
        }
    }

    #[test]
    fn a_text_of_many_quotes_is_one_flat_literal() {
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let quotes = "'".repeat(5000) + "\\$";
        let column = StringArray::from(vec![Some(quotes.as_str())]);
        let batch = RecordBatch::try_new(schema, vec![Arc::new(column)]).unwrap();
        let source = public_source("p", &[batch], Flavour::Sqlite).unwrap();
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let read: String = db.query_row(&source, [], |row| row.get(0)).unwrap();
        assert_eq!(read, quotes);
    }

    #[test]
    fn tables_too_large_or_not_finite_are_one_line() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, true)]));
        let many = Float64Array::from(vec![1.0; MOST_SENT_ROWS + 1]);
        let many = RecordBatch::try_new(schema.clone(), vec![Arc::new(many)]).unwrap();
        let nan = RecordBatch::try_new(schema, vec![Arc::new(Float64Array::from(vec![f64::NAN]))]);
        let text = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let nul = StringArray::from(vec![Some("a\0b")]);
        let nul = RecordBatch::try_new(text, vec![Arc::new(nul)]).unwrap();
        let refused = [
            (many, "more than 10000 rows"),
            (nan.unwrap(), "a NaN"),
            (nul, "a NUL character"),
        ];
        for (batch, says) in refused {
            let refused = public_source("p", &[batch], Flavour::Postgres).unwrap_err();
            assert!(refused.to_string().contains(says), "{refused}");
        }
    }
}
