//! What a charge costs on a ledger that holds 10,000 charges, and what
//! opening it costs (where its account's chain is verified whole). Timed,
//! not asserted: run it with
//! `cargo test -p dpkit-ledger --release --test cost -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use dpkit_core::accounting::PrivacyLoss;
use dpkit_ledger::Ledger;

/// Charges made before the timing.
const HELD: usize = 10_000;
/// Batches timed, of [`BATCH`] charges each.
const BATCHES: usize = 20;
const BATCH: usize = 50;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[test]
#[ignore = "a timing, run by hand"]
fn time_per_charge_and_open_on_a_ledger_of_ten_thousand_charges() {
    let path =
        std::env::temp_dir().join(format!("dpkit-ledger-cost-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cost = PrivacyLoss::pure(0.001).unwrap();
    let ledger = Ledger::open(&path, 1000.0, 1e-6).unwrap();
    let filled = Instant::now();
    for i in 0..HELD {
        ledger
            .charge(cost, &format!("SELECT COUNT(*) FROM t -- {i}"))
            .unwrap();
    }
    let filled = filled.elapsed();
    drop(ledger);
    let opens: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            drop(Ledger::open(&path, 1000.0, 1e-6).unwrap());
            start.elapsed()
        })
        .collect();
    let ledger = Ledger::open(&path, 1000.0, 1e-6).unwrap();
    let batches: Vec<Duration> = (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                ledger.charge(cost, "SELECT COUNT(*) FROM t").unwrap();
            }
            start.elapsed() / BATCH as u32
        })
        .collect();
    let state = Instant::now();
    for _ in 0..1_000 {
        ledger.state().unwrap();
    }
    let state = state.elapsed() / 1_000;
    println!(
        "{HELD} charges filled in {filled:.2?} ({:.2?} each); open: median {:.2?} of 5; \
         charge: median {:.2?} over {BATCHES} batches of {BATCH} (min {:.2?}, max {:.2?}); \
         state read: {state:.2?}",
        filled / HELD as u32,
        median(opens),
        median(batches.clone()),
        batches.iter().min().unwrap(),
        batches.iter().max().unwrap(),
    );
    drop(ledger);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
