//! Exact at any scale on the embedded engine: 10^7 and 10^8 values at the
//! bound in one group (`support/at_the_bound.rs`; the databases' 10^7 are
//! in `backends.rs`), and magnitudes past 64 bits of grid steps.
#[path = "support/at_the_bound.rs"]
mod at_the_bound;
#[path = "support/fixture.rs"]
mod fixture;

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use dpkit_query::{Description, QueryEngine};
use fixture::value;

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
    let description =
        Description::from_toml(at_the_bound::DESCRIPTION, std::path::Path::new(".")).unwrap();
    QueryEngine::with_table(description, at_the_bound(rows)).unwrap()
}

#[test]
fn ten_million_values_at_the_bound_sum_exactly_and_are_released_with_honest_intervals() {
    at_the_bound::assert_exact_and_honest(&engine(10_000_000), 10_000_000, "embedded");
}

#[test]
fn a_hundred_million_values_at_the_bound_sum_exactly_and_are_released_with_honest_intervals() {
    at_the_bound::assert_exact_and_honest(&engine(100_000_000), 100_000_000, "embedded");
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

/// Bounds at the ends of what noise can carry: integer noise stops at
/// Δ = 10^15, so `auto` answers a wider integer sum with Laplace rather
/// than refusing it; a span no grid can hold (10^-300) is refused for free,
/// in one short line that names the column (its bounds as the plan holds
/// them, rounded out to a grid, in scientific notation).
#[test]
fn bounds_at_the_ends_of_what_noise_carries_are_answered_or_refused_in_one_line() {
    let rows: String = (0..100).map(|_| "1000000000000000,1e-301\n").collect();
    let description = "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n\
        [budget]\nepsilon = 10\n\
        [columns.k]\ntype = \"integer\"\nbounds = [0, 2500000000000000]\n\
        [columns.tiny]\ntype = \"real\"\nbounds = [0, 1e-300]\n";
    let t = fixture::Fixture::new(
        "ends",
        "t.csv",
        &format!("k,tiny\n{rows}"),
        description,
        10.0,
    );
    let answer = t.answer("SELECT SUM(k) AS k FROM t", 1.0, 27).unwrap();
    let (released, _, _) = value(&answer.rows[0][0]);
    // Laplace with b = 2.5e15 misses the sum of 10^17 by more than 5·10^16
    // with probability e^-20.
    assert!((released - 1e17).abs() < 5e16, "SUM(k) = {released}");
    let spent = t.ledger.state().unwrap().spent_epsilon;
    let refused = t
        .answer("SELECT SUM(tiny) AS s FROM t", 1.0, 27)
        .unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("sum of tiny in [0, ")
            && message.contains("e-300]")
            && !message.contains('\n'),
        "{message}"
    );
    assert!(message.len() < 400, "{message}");
    assert_eq!(
        t.ledger.state().unwrap().spent_epsilon,
        spent,
        "refused for free"
    );
}
