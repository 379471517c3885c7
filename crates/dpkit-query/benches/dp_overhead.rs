//! The cost of privacy in the query engine: a DP GROUP BY with COUNT and AVG
//! against the same non-private DataFusion query, on a generated table of
//! 10 million rows, in one run. `cargo bench -p dpkit-query --bench dp_overhead`
//! (`-- --rows N` for another size).

#[path = "support/generated.rs"]
mod generated;

use std::hint::black_box;
use std::time::Instant;

use dpkit_core::rng::SecureRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings};

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

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
    let sql = "SELECT region, COUNT(*) AS n, AVG(value) AS mean FROM t GROUP BY region";
    let mut rng = SecureRng::from_os().unwrap();
    let (mut plain, mut private) = (Vec::new(), Vec::new());
    // Warm-up, then alternate so that both see the same machine state.
    for round in 0..=repeats {
        let start = Instant::now();
        let batches = engine
            .block_on(async { engine.session().sql(sql).await?.collect().await })
            .unwrap();
        black_box(batches);
        let plain_time = start.elapsed().as_secs_f64();
        let start = Instant::now();
        black_box(engine.answer(sql, &settings, &ledger, &mut rng).unwrap());
        let private_time = start.elapsed().as_secs_f64();
        if round > 0 {
            plain.push(plain_time);
            private.push(private_time);
        }
    }
    let (plain, private) = (median(plain), median(private));
    println!("{rows} rows, {partitions} partitions, median of {repeats} alternating runs");
    println!("query: {sql}");
    println!("{:<44} {:>10.1} ms", "DataFusion, not private", plain * 1e3);
    println!(
        "{:<44} {:>10.1} ms",
        "dpkit (plan check, ledger, clamped plan, noise)",
        private * 1e3
    );
    println!("{:<44} {:>10.3}", "ratio (target ≤ 1.25)", private / plain);
    let _ = std::fs::remove_file(&ledger_path);
}
