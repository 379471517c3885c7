//! Exact at any scale: 10^7 and 10^8 values at the bound in one group are
//! summed exactly and released with an interval that holds the truth. On
//! a sum saturating at 2^53 grid steps (2^30 steps per bound) they once
//! answered `SUM(v) = 536870912 ± 0` and `AVG(v) = 71.8435 ± 0`.
#[path = "support/fixture.rs"]
mod fixture;

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use dpkit_core::lattice::GridValue;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, QueryEngine};
use fixture::{settings, value};

const BATCH: usize = 1 << 16;

/// `rows` rows of `v = 90` (an integer) and `w = 90.0` (a real), in two
/// partitions; every full batch shares one batch's buffers, so 10^8 rows
/// take the memory of one.
fn at_the_bound(rows: usize) -> Arc<MemTable> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("v", DataType::Int64, false),
        Field::new("w", DataType::Float64, false),
    ]));
    let batch = |size: usize| {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![90; size])),
            Arc::new(Float64Array::from(vec![90.0; size])),
        ];
        RecordBatch::try_new(schema.clone(), columns).unwrap()
    };
    let full = batch(BATCH);
    let mut batches = vec![full; rows / BATCH];
    if !rows.is_multiple_of(BATCH) {
        batches.push(batch(rows % BATCH));
    }
    let second = batches.split_off(batches.len() / 2);
    Arc::new(MemTable::try_new(schema, vec![batches, second]).unwrap())
}

fn engine(rows: usize) -> QueryEngine {
    let description = Description::from_toml(
        "[table]\nname = \"t\"\nfile = \"generated\"\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1000\n\
         [columns.v]\ntype = \"integer\"\nbounds = [0, 90]\n\
         [columns.w]\ntype = \"real\"\nbounds = [0, 90]\n",
        std::path::Path::new("."),
    )
    .unwrap();
    QueryEngine::with_table(description, at_the_bound(rows)).unwrap()
}

#[test]
fn ten_million_values_at_the_bound_sum_exactly_and_are_released_with_honest_intervals() {
    at_the_bound_exactly(10_000_000);
}

#[test]
fn a_hundred_million_values_at_the_bound_sum_exactly_and_are_released_with_honest_intervals() {
    at_the_bound_exactly(100_000_000);
}

fn at_the_bound_exactly(rows: usize) {
    let n = rows as i128;
    let engine = engine(rows);
    let query = engine
        .plan("SELECT SUM(v) AS s, SUM(w) AS sw, COUNT(*) AS n FROM t")
        .unwrap();
    let exact = engine.exact(&query).unwrap();
    // In whole units, however fine the grid each sum was taken on.
    let whole = |value: GridValue| value.steps_on(0);
    assert_eq!(whole(exact.values[0][0]), Some(90 * n), "SUM(v)");
    assert_eq!(whole(exact.values[0][1]), Some(90 * n), "SUM(w)");
    assert_eq!(whole(exact.values[0][2]), Some(n), "COUNT(*)");

    let folder = std::env::temp_dir().join(format!("dpkit-scale-{rows}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let ledger = Ledger::open(&folder.join("ledger.sqlite"), 1000.0, 0.0).unwrap();
    let sql = "SELECT SUM(v) AS s, AVG(v) AS a, SUM(w) AS sw, AVG(w) AS aw FROM t";
    let mut rng = InsecureSeededRng::from_seed_for_testing(27);
    let answer = engine
        .answer(sql, &settings(100.0, 0.0), &ledger, &mut rng)
        .unwrap();
    let _ = std::fs::remove_dir_all(&folder);
    let total = 90.0 * rows as f64;
    let truths = [total, 90.0, total, 90.0];
    for ((column, cell), truth) in answer.columns.iter().zip(&answer.rows[0]).zip(truths) {
        let (released, low, high) = value(cell);
        // At ε = 100 the noise of a sum with Δ = 90 is a few units at
        // most; an error of 10^4 (10^-3 for an average) has probability
        // far below 10^-6 with any of the mechanisms `auto` picks. (At
        // this ε the staircase's noise is 0 with probability above 95%,
        // so an interval of width 0 can be honest: what matters is that
        // it holds the truth.)
        let tolerance = truth * 1e-5;
        assert!(
            (released - truth).abs() < tolerance,
            "{column} = {released}"
        );
        assert!(low <= truth && truth <= high, "{column}: [{low}, {high}]");
        assert!(high - low < 2.0 * tolerance, "{column}: [{low}, {high}]");
    }
}

/// Magnitudes far past 2^63 grid steps: once every row was saturated at
/// 2^63 steps of a grid no coarser than 1, so a thousand values of 10^20
/// summed to 9.2·10^21 with a tight interval, and a deviation of 5·10^9
/// came out as 3.04·10^9.
#[test]
fn magnitudes_past_sixty_four_bits_of_steps_sum_exactly() {
    let rows: String = (0..1000)
        .map(|i| format!("1e20,1e300,{}\n", if i % 2 == 0 { "0" } else { "1e10" }))
        .collect();
    let description = "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n\
        [budget]\nepsilon = 1000\n\
        [columns.x]\ntype = \"real\"\nbounds = [0, 1e20]\n\
        [columns.y]\ntype = \"real\"\nbounds = [-1e300, 1e300]\n\
        [columns.r]\ntype = \"real\"\nbounds = [0, 1e10]\n";
    let t = fixture::Fixture::new(
        "huge",
        "t.csv",
        &format!("x,y,r\n{rows}"),
        description,
        1000.0,
    );
    let sql = "SELECT SUM(x) AS x, AVG(x) AS mean, SUM(y) AS y, STDDEV(r) AS sd FROM t";
    let answer = t.answer(sql, 1000.0, 27).unwrap();
    // STDDEV is the sample deviation, as in SQL.
    let truths = [1e23, 1e20, 1e303, 5e9 * (1000.0f64 / 999.0).sqrt()];
    for ((column, cell), truth) in answer.columns.iter().zip(&answer.rows[0]).zip(truths) {
        let (released, low, high) = value(cell);
        // Noise at ε = 1000 is below 10^-2 of a bound; rounding to the
        // grid below 2^-30 of it per row.
        assert!(
            ((released - truth) / truth).abs() < 1e-2,
            "{column} = {released}"
        );
        assert!(low <= truth && truth <= high, "{column}: [{low}, {high}]");
    }
}
