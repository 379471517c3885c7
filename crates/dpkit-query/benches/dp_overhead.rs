//! The cost of privacy in the query engine: a DP GROUP BY with COUNT and AVG
//! against the same non-private DataFusion query, on a generated table of
//! 10 million rows, in one run. `cargo bench -p dpkit-query --bench dp_overhead`
//! (`-- --rows N` for another size).

#[path = "support/generated.rs"]
mod generated;

use dpkit_query::{Description, QueryEngine};

fn main() {
    let rows = std::env::args()
        .skip_while(|a| a != "--rows")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000_000usize);
    let repeats = 7;
    let partitions = std::thread::available_parallelism().map_or(2, |n| n.get());
    let description = Description::from_toml(
        &generated::description_text("file = \"generated\""),
        std::path::Path::new("."),
    )
    .unwrap();
    let engine = QueryEngine::with_table(description, generated::table(rows, partitions)).unwrap();
    let sql = "SELECT region, COUNT(*) AS n, AVG(value) AS mean FROM t GROUP BY region";
    let (plain, private) = generated::measure(&engine, sql, repeats, || {
        generated::datafusion_seconds(&engine, sql)
    });
    println!("{rows} rows, {partitions} partitions, median of {repeats} alternating runs");
    println!("query: {sql}");
    println!("{:<44} {:>10.1} ms", "DataFusion, not private", plain * 1e3);
    println!(
        "{:<44} {:>10.1} ms",
        "dpkit (plan check, ledger, clamped plan, noise)",
        private * 1e3
    );
    println!("{:<44} {:>10.3}", "ratio (target ≤ 1.1)", private / plain);
}
