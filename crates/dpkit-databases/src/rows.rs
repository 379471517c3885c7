//! A database's result rows as one Arrow batch of the plan's output schema,
//! so that the embedded engine and every database share one reader
//! (`engine::groups_of`).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Decimal128Builder, Float64Builder, Int64Builder,
    ListBuilder, RecordBatch, StringBuilder, StructBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::{DatabaseError, Result};

/// One value as a database returned it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Cell<'a> {
    /// SQL NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A double.
    Real(f64),
    /// A whole number wider than 64 bits (Spark's `DECIMAL(38,0)`).
    #[cfg_attr(not(feature = "spark"), allow(dead_code))]
    Wide(i128),
    /// Text (PostgreSQL returns every value as text).
    Text(&'a str),
}

/// The result has a shape the plan did not ask for. Its message names no
/// value: which values came back must not show in an error. It may depend
/// on the rows (a type that comes back only when a group does), so its
/// cost is kept: only a database that cannot be reached is refunded.
pub(crate) fn shape_error() -> DatabaseError {
    DatabaseError::FailedWhileRunning("the database's result has an unexpected shape".into())
}

/// Builds a batch of `schema` row by row.
pub(crate) struct Rows {
    schema: SchemaRef,
    columns: Vec<Column>,
}

enum Column {
    Integer(Int64Builder),
    /// An exact sum's whole number of grid steps.
    Steps(Decimal128Builder),
    Real(Float64Builder),
    Text(StringBuilder),
    Boolean(BooleanBuilder),
    /// A quantile's cells and how many values each holds: text
    /// `cell:count` pairs, `1:40,2:3`, as a list of (cell, count).
    Cells(ListBuilder<StructBuilder>),
}

impl Rows {
    /// An empty result of `schema`; refuses a type no plan produces.
    pub(crate) fn new(schema: SchemaRef) -> Result<Self> {
        let columns = schema
            .fields()
            .iter()
            .map(|field| match field.data_type() {
                t if t.is_integer() => Ok(Column::Integer(Int64Builder::new())),
                DataType::Decimal128(_, 0) => Ok(Column::Steps(Decimal128Builder::new())),
                t if t.is_floating() => Ok(Column::Real(Float64Builder::new())),
                // A key that is NULL in every row (`CASE … THEN NULL END`)
                // is typed Null; it reads as text, which only NULLs fill.
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                    Ok(Column::Text(StringBuilder::new()))
                }
                DataType::Boolean => Ok(Column::Boolean(BooleanBuilder::new())),
                DataType::List(item) if item.data_type() == &DataType::Int64 => {
                    Ok(Column::Cells(ListBuilder::new(cell_counts())))
                }
                _ => Err(shape_error()),
            })
            .collect::<Result<_>>()?;
        Ok(Self { schema, columns })
    }

    /// For each column of a result named `names`, the schema's column it
    /// fills (a database orders a SELECT list its own way); every column of
    /// the schema must be named once.
    pub(crate) fn order<'a>(&self, names: impl Iterator<Item = &'a str>) -> Result<Vec<usize>> {
        let order: Vec<usize> = names
            .map(|name| self.schema.index_of(name).map_err(|_| shape_error()))
            .collect::<Result<_>>()?;
        let mut seen = order.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != order.len() || order.len() != self.columns.len() {
            return Err(shape_error());
        }
        Ok(order)
    }

    /// Appends `cell` to column `index`.
    pub(crate) fn push(&mut self, index: usize, cell: Cell<'_>) -> Result<()> {
        let column = self.columns.get_mut(index).ok_or_else(shape_error)?;
        match (column, cell) {
            (Column::Integer(b), Cell::Null) => b.append_null(),
            (Column::Steps(b), Cell::Null) => b.append_null(),
            (Column::Steps(b), cell) => b.append_value(wide(cell)?),
            (Column::Real(b), Cell::Null) => b.append_null(),
            (Column::Text(b), Cell::Null) => b.append_null(),
            (Column::Boolean(b), Cell::Null) => b.append_null(),
            (Column::Cells(b), Cell::Null) => b.append_null(),
            (Column::Integer(b), cell) => b.append_value(integer(cell)?),
            (Column::Real(b), cell) => b.append_value(real(cell)?),
            (Column::Text(b), Cell::Text(text)) => b.append_value(text),
            (Column::Boolean(b), cell) => b.append_value(boolean(cell)?),
            (Column::Cells(b), Cell::Text(text)) => {
                for (cell, count) in cell_counts_of(text)? {
                    let pairs = b.values();
                    append_integer(pairs, 0, cell)?;
                    append_integer(pairs, 1, count)?;
                    pairs.append(true);
                }
                b.append(true);
            }
            _ => return Err(shape_error()),
        }
        Ok(())
    }

    /// The batch: the schema's names, with the types read (integers as
    /// Int64, exact sums' steps as Decimal128(38, 0), reals as Float64,
    /// every column nullable).
    pub(crate) fn finish(self) -> Result<RecordBatch> {
        let arrays: Vec<ArrayRef> = self
            .columns
            .into_iter()
            .map(|column| -> Result<ArrayRef> {
                Ok(match column {
                    Column::Integer(mut b) => Arc::new(b.finish()) as ArrayRef,
                    Column::Steps(mut b) => Arc::new(
                        b.finish()
                            .with_precision_and_scale(38, 0)
                            .map_err(|_| shape_error())?,
                    ),
                    Column::Real(mut b) => Arc::new(b.finish()),
                    Column::Text(mut b) => Arc::new(b.finish()),
                    Column::Boolean(mut b) => Arc::new(b.finish()),
                    Column::Cells(mut b) => Arc::new(b.finish()),
                })
            })
            .collect::<Result<_>>()?;
        let fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .zip(&arrays)
            .map(|(field, array)| Field::new(field.name(), array.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|_| shape_error())
    }
}

fn integer(cell: Cell<'_>) -> Result<i64> {
    match cell {
        Cell::Integer(i) => Ok(i),
        Cell::Text(text) => text.trim().parse().map_err(|_| shape_error()),
        _ => Err(shape_error()),
    }
}

/// A whole number of any size up to 128 bits: PostgreSQL's `numeric`
/// sums arrive as text, Spark's `DECIMAL(38,0)` as wide integers.
fn wide(cell: Cell<'_>) -> Result<i128> {
    match cell {
        Cell::Integer(i) => Ok(i128::from(i)),
        Cell::Wide(i) => Ok(i),
        Cell::Text(text) => text.trim().parse().map_err(|_| shape_error()),
        _ => Err(shape_error()),
    }
}

fn real(cell: Cell<'_>) -> Result<f64> {
    match cell {
        Cell::Real(x) => Ok(x),
        Cell::Integer(i) => Ok(i as f64),
        Cell::Text("NaN") => Ok(f64::NAN),
        Cell::Text("Infinity") => Ok(f64::INFINITY),
        Cell::Text("-Infinity") => Ok(f64::NEG_INFINITY),
        Cell::Text(text) => text.trim().parse().map_err(|_| shape_error()),
        Cell::Null | Cell::Wide(_) => Err(shape_error()),
    }
}

fn boolean(cell: Cell<'_>) -> Result<bool> {
    match cell {
        Cell::Integer(i) => Ok(i != 0),
        Cell::Text("t" | "true") => Ok(true),
        Cell::Text("f" | "false") => Ok(false),
        _ => Err(shape_error()),
    }
}

/// The builder of a list item: a cell and how many values it holds (the
/// engine reads such lists as counted cells, see `engine::groups_of`).
fn cell_counts() -> StructBuilder {
    let fields = vec![
        Field::new("cell", DataType::Int64, false),
        Field::new("count", DataType::Int64, false),
    ];
    let builders: Vec<Box<dyn ArrayBuilder>> =
        vec![Box::new(Int64Builder::new()), Box::new(Int64Builder::new())];
    StructBuilder::new(fields, builders)
}

fn append_integer(pairs: &mut StructBuilder, field: usize, value: i64) -> Result<()> {
    pairs
        .field_builder::<Int64Builder>(field)
        .ok_or_else(shape_error)?
        .append_value(value);
    Ok(())
}

/// `1:40,2:3` as (cell, count) pairs (an empty text has none).
fn cell_counts_of(text: &str) -> Result<Vec<(i64, i64)>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|pair| {
            let (cell, count) = pair.split_once(':').ok_or_else(shape_error)?;
            let number = |n: &str| n.trim().parse::<i64>().map_err(|_| shape_error());
            Ok((number(cell)?, number(count)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{Decimal128Type, Int64Type};

    #[test]
    fn text_and_native_values_build_the_schema_types() {
        let item = Arc::new(Field::new("item", DataType::Int64, true));
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Float64, true),
            Field::new("c", DataType::List(item), true),
            Field::new("steps", DataType::Decimal128(38, 0), true),
        ]));
        let mut rows = Rows::new(schema).unwrap();
        for (i, cell) in [
            Cell::Text("Male"),
            Cell::Text("42"),
            Cell::Text("-Infinity"),
            Cell::Text("3:2,1:5"),
            Cell::Text("15099494400000000000"),
        ]
        .into_iter()
        .enumerate()
        {
            rows.push(i, cell).unwrap();
        }
        for (i, cell) in [
            Cell::Null,
            Cell::Integer(7),
            Cell::Real(0.5),
            Cell::Text(""),
            Cell::Wide(-(1 << 100)),
        ]
        .into_iter()
        .enumerate()
        {
            rows.push(i, cell).unwrap();
        }
        let batch = rows.finish().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert!(batch.column(0).is_null(1));
        assert_eq!(batch.column(1).as_primitive::<Int64Type>().value(0), 42);
        let lists = batch.column(3).as_list::<i32>();
        let pairs = lists.value(0);
        let pairs = pairs.as_struct();
        assert_eq!(
            pairs.column(0).as_primitive::<Int64Type>().values(),
            &[3, 1]
        );
        assert_eq!(
            pairs.column(1).as_primitive::<Int64Type>().values(),
            &[2, 5]
        );
        assert_eq!(lists.value(1).len(), 0);
        let steps = batch.column(4).as_primitive::<Decimal128Type>();
        assert_eq!(steps.values(), &[15_099_494_400_000_000_000, -(1 << 100)]);
    }

    #[test]
    fn values_of_the_wrong_kind_are_a_shape_error_without_the_value() {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let mut rows = Rows::new(schema).unwrap();
        let error = rows.push(0, Cell::Text("secret-42x")).unwrap_err();
        assert!(!error.to_string().contains("secret"));
        assert!(rows.push(1, Cell::Integer(1)).is_err());
    }
}
