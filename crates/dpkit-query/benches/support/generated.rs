//! The generated table both benchmarks query: eight regions, cycling, and
//! one real value in [0, 100) from a fixed pseudo-random sequence.
#![allow(dead_code)]

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;

/// The regions, each of which is also the description's public domain.
pub const GROUPS: [&str; 8] = [
    "north", "south", "east", "west", "centre", "coast", "hills", "islands",
];

/// Row `i`'s region and value, for `count` rows.
pub fn rows(count: usize) -> impl Iterator<Item = (&'static str, f64)> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..count).map(move |i| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let value = (state >> 11) as f64 / (1u64 << 53) as f64 * 100.0;
        (GROUPS[i % GROUPS.len()], value)
    })
}

/// The rows as an in-memory table of `partitions` partitions.
pub fn table(count: usize, partitions: usize) -> Arc<MemTable> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("region", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]));
    let mut all = rows(count);
    let per_partition = count.div_ceil(partitions);
    let batches: Vec<Vec<RecordBatch>> = (0..partitions)
        .map(|p| {
            let size = per_partition.min(count.saturating_sub(p * per_partition));
            let mut batches = Vec::new();
            for start in (0..size).step_by(65_536) {
                let (regions, values): (Vec<&str>, Vec<f64>) =
                    all.by_ref().take(65_536.min(size - start)).unzip();
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(StringArray::from(regions)),
                    Arc::new(Float64Array::from(values)),
                ];
                batches.push(RecordBatch::try_new(schema.clone(), columns).unwrap());
            }
            batches
        })
        .collect();
    Arc::new(MemTable::try_new(schema, batches).unwrap())
}

/// The description of the table, with `source` (a `file = …` line or a
/// database's) under `[table]`.
pub fn description_text(source: &str) -> String {
    let domain = GROUPS.map(|g| format!("\"{g}\"")).join(", ");
    format!(
        "[table]\nname = \"t\"\n{source}\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1000\n[columns.region]\ntype = \"text\"\ndomain = [{domain}]\n\
         [columns.value]\ntype = \"real\"\nbounds = [0, 100]\n"
    )
}
