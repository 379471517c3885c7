//! What both benchmarks share: the generated table they query (eight
//! regions, cycling, and one real value in [0, 100) from a fixed
//! pseudo-random sequence) and the alternating timing of a plain query
//! against dpkit's private answer.
#![allow(dead_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use dpkit_core::rng::SecureRng;
use dpkit_query::{Ledger, MechanismChoice, QueryEngine, ReleaseSettings};

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

pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Median seconds of `plain` and of dpkit's private answer, alternating,
/// after one warm-up round.
pub fn measure(
    engine: &QueryEngine,
    sql: &str,
    repeats: usize,
    mut plain: impl FnMut() -> f64,
) -> (f64, f64) {
    let ledger_path =
        std::env::temp_dir().join(format!("dpkit-bench-ledger-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&ledger_path);
    let ledger = Ledger::open(&ledger_path, 1000.0, 0.0).unwrap();
    let settings = ReleaseSettings {
        epsilon: 1.0,
        delta: 0.0,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    };
    let mut rng = SecureRng::from_os().unwrap();
    let (mut plain_times, mut private_times) = (Vec::new(), Vec::new());
    for round in 0..=repeats {
        let plain_time = plain();
        let start = Instant::now();
        black_box(engine.answer(sql, &settings, &ledger, &mut rng).unwrap());
        let private_time = start.elapsed().as_secs_f64();
        if round > 0 {
            plain_times.push(plain_time);
            private_times.push(private_time);
        }
    }
    drop(ledger);
    let _ = std::fs::remove_file(&ledger_path);
    (median(plain_times), median(private_times))
}

/// Seconds `work` takes.
pub fn timed(work: impl FnOnce()) -> f64 {
    let start = Instant::now();
    work();
    start.elapsed().as_secs_f64()
}

/// Seconds the plain `sql` takes on the engine's own DataFusion session.
pub fn datafusion_seconds(engine: &QueryEngine, sql: &str) -> f64 {
    timed(|| {
        let batches = engine
            .block_on(async {
                dpkit_query::internals::session(engine)
                    .sql(sql)
                    .await?
                    .collect()
                    .await
            })
            .unwrap();
        black_box(batches);
    })
}
