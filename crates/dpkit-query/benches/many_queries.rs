//! A budget that lasts (issue 30): on Adult, with a total budget of
//! (ε, δ) = (1, 10⁻⁶), the mean |error| of each COUNT when k COUNTs share
//! the budget (k = 10, 100, 1,000).
//!
//! * **Plain sums** (the ledger before the concentrated accountant): each of
//!   the k counts gets ε/k, and δ/k for Gaussian noise.
//! * **Both accountants** (the ledger now): each count gets the largest ε
//!   (at δ = 10⁻¹² for Gaussian noise) at which a fresh ledger still says
//!   `how_many_more` ≥ k, found by bisection; then the k counts are charged
//!   to that ledger, which must admit them all.
//!
//! Each way answers at least 1,000 counts (several fresh ledgers when k is
//! small) and averages |answer − exact|; the exact count is the answer at
//! ε = 1,000 with geometric noise (which is 0 but with probability e⁻¹⁰⁰⁰).
//!
//! `cargo bench --workspace --profile dev --bench many_queries`.

use std::path::{Path, PathBuf};

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::Cell;

const SQL: &str = "SELECT COUNT(*) FROM adult WHERE age > 40";
const EPSILON: f64 = 1.0;
const DELTA: f64 = 1e-6;
/// δ each Gaussian count asks for under both accountants: the concentrated
/// one does not count it, and plain sums cannot pay for 10 of them anyway.
const GAUSSIAN_DELTA: f64 = 1e-12;
const ANSWERS: usize = 1_000;

fn engine() -> QueryEngine {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult/adult.toml");
    QueryEngine::open_in_memory(Description::load(&path).unwrap()).unwrap()
}

fn settings(epsilon: f64, gaussian: bool, delta: f64) -> ReleaseSettings {
    ReleaseSettings {
        epsilon,
        delta: if gaussian { delta } else { 0.0 },
        mechanism: match gaussian {
            true => MechanismChoice::Gaussian,
            false => MechanismChoice::Geometric,
        },
        confidence: 0.95,
    }
}

/// A fresh ledger file with the total (ε, δ).
fn fresh(name: &str, epsilon: f64, delta: f64) -> (Ledger, PathBuf) {
    let path = std::env::temp_dir().join(format!("dpkit-many-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    (Ledger::open(&path, epsilon, delta).unwrap(), path)
}

/// The one answer of `SQL`.
fn answer(
    engine: &QueryEngine,
    settings: &ReleaseSettings,
    ledger: &Ledger,
    rng: &mut InsecureSeededRng,
) -> f64 {
    let released = engine.answer(SQL, settings, ledger, rng).unwrap();
    match &released.rows[0][0] {
        Cell::Value { value, .. } => *value,
        other => panic!("a count, not {other:?}"),
    }
}

/// The largest ε per count at which a fresh (1, 10⁻⁶) ledger admits `k`.
fn largest_epsilon(engine: &QueryEngine, k: u64, gaussian: bool) -> f64 {
    let (ledger, path) = fresh("search", EPSILON, DELTA);
    let fits = |epsilon: f64| {
        let (_, cost) = engine
            .explain_with_cost(SQL, &settings(epsilon, gaussian, GAUSSIAN_DELTA))
            .unwrap();
        ledger.how_many_more(cost).unwrap() >= k
    };
    let (mut low, mut high) = (EPSILON / k as f64, 10.0);
    assert!(fits(low), "plain sums' share fits");
    for _ in 0..40 {
        let middle = (low * high).sqrt();
        if fits(middle) {
            low = middle
        } else {
            high = middle
        }
    }
    std::fs::remove_file(&path).unwrap();
    low
}

/// Mean |answer − exact| over at least `ANSWERS` counts, `k` to a fresh
/// ledger of `total` each time, all of them admitted.
fn mean_error(
    engine: &QueryEngine,
    k: usize,
    settings: &ReleaseSettings,
    total: (f64, f64),
    exact: f64,
) -> f64 {
    let mut rng = InsecureSeededRng::from_seed_for_testing(k as u64);
    let rounds = ANSWERS.div_ceil(k);
    let mut sum = 0.0;
    for round in 0..rounds {
        let (ledger, path) = fresh(&format!("run-{k}-{round}"), total.0, total.1);
        for _ in 0..k {
            sum += (answer(engine, settings, &ledger, &mut rng) - exact).abs();
        }
        std::fs::remove_file(&path).unwrap();
    }
    sum / (rounds * k) as f64
}

fn main() {
    let engine = engine();
    let (ledger, path) = fresh("exact", dpkit_ledger::MAX_EPSILON, 0.0);
    let exact = answer(
        &engine,
        &settings(1000.0, false, 0.0),
        &ledger,
        &mut InsecureSeededRng::from_seed_for_testing(1),
    );
    std::fs::remove_file(&path).unwrap();
    println!("Adult, {SQL}: exact {exact}; budget (ε, δ) = ({EPSILON}, {DELTA})");
    println!(
        "{:>6} {:>28} {:>28} {:>30} {:>30}",
        "k",
        "plain sums, geometric",
        "plain sums, Gaussian",
        "both accountants, Gaussian",
        "both accountants, geometric"
    );
    for k in [10usize, 100, 1_000] {
        let share = EPSILON / k as f64;
        // Plain sums: ε/k and δ/k each, charged to a ledger with room to spare.
        let room = (dpkit_ledger::MAX_EPSILON, 0.5);
        let plain_geometric = mean_error(&engine, k, &settings(share, false, 0.0), room, exact);
        let plain_gaussian = mean_error(
            &engine,
            k,
            &settings(share, true, DELTA / k as f64),
            room,
            exact,
        );
        let cell = |gaussian: bool| {
            let epsilon = largest_epsilon(&engine, k as u64, gaussian);
            let error = mean_error(
                &engine,
                k,
                &settings(epsilon, gaussian, GAUSSIAN_DELTA),
                (EPSILON, DELTA),
                exact,
            );
            format!("{error:.1} (ε = {epsilon:.4})")
        };
        println!(
            "{k:>6} {:>28} {:>28} {:>30} {:>30}",
            format!("{plain_geometric:.1} (ε = {share})"),
            format!("{plain_gaussian:.1}"),
            cell(true),
            cell(false)
        );
    }
}
