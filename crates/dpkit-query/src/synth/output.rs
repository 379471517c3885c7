//! Synthetic codes turned back into values, and written as CSV or Parquet
//! with the description's column types. Post-processing: any generator
//! serves, and nothing here reads the private rows.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use dpkit_core::sampling::uniform_below;
use rand_core::CryptoRng;

use super::coding::{CodedTable, Coding};
use crate::error::{QueryError, Result};

/// The synthetic rows as a record batch: text columns as text, integer
/// columns as 64-bit integers, each integer drawn uniformly within its
/// bin; the missing code is NULL.
pub fn decode<R: CryptoRng + ?Sized>(
    table: &CodedTable,
    codes: &dpkit_synth::Table,
    rng: &mut R,
) -> Result<RecordBatch> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (i, (name, coding)) in table.columns.iter().enumerate() {
        let column = codes.column(i);
        match coding {
            Coding::Text(values) => {
                let text = column
                    .iter()
                    .map(|&c| values.get(c as usize).map(String::as_str));
                fields.push(Field::new(name, DataType::Utf8, true));
                arrays.push(Arc::new(text.collect::<StringArray>()));
            }
            Coding::Integer { .. } | Coding::Declared { .. } => {
                let mut numbers = Vec::with_capacity(column.len());
                for &code in column {
                    numbers.push(match coding.bin(code) {
                        Some((first, last)) => {
                            let span = (last - first + 1) as u64;
                            Some(first + uniform_below(span, rng) as i64)
                        }
                        None => None,
                    });
                }
                fields.push(Field::new(name, DataType::Int64, true));
                arrays.push(Arc::new(Int64Array::from(numbers)));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| QueryError::Unreadable(format!("cannot build the synthetic table: {e}")))
}

/// The table's columns as JSON, for front ends that build their own
/// frames (Python): each `{"name", "type": "text" | "integer", "values"}`,
/// NULL for the missing code.
pub fn to_json(batch: &RecordBatch) -> serde_json::Value {
    use serde_json::{Value, json};
    let schema = batch.schema();
    let columns: Vec<Value> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            let (kind, values): (&str, Vec<Value>) =
                if let Some(text) = column.as_any().downcast_ref::<StringArray>() {
                    (
                        "text",
                        text.iter()
                            .map(|v| v.map_or(Value::Null, Value::from))
                            .collect(),
                    )
                } else if let Some(numbers) = column.as_any().downcast_ref::<Int64Array>() {
                    (
                        "integer",
                        numbers
                            .iter()
                            .map(|v| v.map_or(Value::Null, Value::from))
                            .collect(),
                    )
                } else {
                    ("text", vec![Value::Null; column.len()])
                };
            json!({ "name": field.name(), "type": kind, "values": values })
        })
        .collect();
    Value::Array(columns)
}

/// A synthetic table's output file, made before anything is charged so
/// that a path that cannot be written is refused for free.
pub struct Output {
    file: std::fs::File,
    path: std::path::PathBuf,
    parquet: bool,
}

/// An output file that could not be made or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {reason}")]
pub struct OutputError {
    path: String,
    reason: String,
}

impl Output {
    /// Creates (or empties) `path`: Parquet when it ends in `.parquet`,
    /// else CSV with a header row (NULL as an empty field).
    pub fn create(path: &Path) -> std::result::Result<Self, OutputError> {
        let file = std::fs::File::create(path).map_err(|e| failed(path, e.to_string()))?;
        let parquet = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
        Ok(Self {
            file,
            path: path.to_path_buf(),
            parquet,
        })
    }

    /// Writes `batch` and closes the file.
    pub fn write(self, batch: &RecordBatch) -> std::result::Result<(), OutputError> {
        let path = self.path;
        let failed = |e: String| failed(&path, e);
        if self.parquet {
            let mut writer =
                datafusion::parquet::arrow::ArrowWriter::try_new(self.file, batch.schema(), None)
                    .map_err(|e| failed(e.to_string()))?;
            writer.write(batch).map_err(|e| failed(e.to_string()))?;
            writer.close().map_err(|e| failed(e.to_string()))?;
            return Ok(());
        }
        let mut out = std::io::BufWriter::new(self.file);
        write_csv(batch, &mut out).map_err(|e| failed(e.to_string()))
    }

    /// Removes the file, when nothing is written to it.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn failed(path: &Path, reason: String) -> OutputError {
    OutputError {
        path: path.display().to_string(),
        reason,
    }
}

fn write_csv(batch: &RecordBatch, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let schema = batch.schema();
    let names: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| csv_field(f.name()))
        .collect();
    writeln!(out, "{}", names.join(","))?;
    for row in 0..batch.num_rows() {
        let mut fields = Vec::with_capacity(batch.num_columns());
        for column in batch.columns() {
            fields.push(if column.is_null(row) {
                String::new()
            } else if let Some(text) = column.as_any().downcast_ref::<StringArray>() {
                csv_field(text.value(row))
            } else if let Some(numbers) = column.as_any().downcast_ref::<Int64Array>() {
                numbers.value(row).to_string()
            } else {
                String::new()
            });
        }
        writeln!(out, "{}", fields.join(","))?;
    }
    out.flush()
}

/// A CSV field, quoted when it holds a comma, a quote or a line break, or
/// when it is empty (so that an empty text reads apart from NULL).
fn csv_field(text: &str) -> String {
    if text.is_empty() || text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}
