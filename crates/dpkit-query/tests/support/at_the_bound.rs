//! Many values at the bound in one group, summed exactly and released with
//! an interval that holds the truth, wherever the table lives. On a sum
//! saturating at 2^53 grid steps (2^30 steps per bound), 10^7 of them once
//! answered `SUM(v) = 536870912 ± 0` and `AVG(v) = 71.8435 ± 0`.
#![allow(dead_code)]

use dpkit_core::lattice::GridValue;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Ledger, MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::Cell;

/// A table `t` of an integer `v` and a real `w`, both bounded by [0, 90],
/// whose rows all hold `90` (the table itself is the caller's).
pub const DESCRIPTION: &str = "[table]\nname = \"t\"\nfile = \"generated\"\n\
    [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1000\n\
    [columns.v]\ntype = \"integer\"\nbounds = [0, 90]\n\
    [columns.w]\ntype = \"real\"\nbounds = [0, 90]\n";

/// [`DESCRIPTION`] with a public count of `people` in its table.
pub fn description_with_people(people: usize) -> String {
    DESCRIPTION.replacen(
        "[privacy_unit]",
        &format!("people = {people}\n[privacy_unit]"),
        1,
    )
}

/// `engine`'s table of `rows` rows of 90 gives exact sums and count, and
/// its SUM and AVG released at ε = 100 are within 10^-5 of the truth, with
/// intervals that hold it.
pub fn assert_exact_and_honest(engine: &QueryEngine, rows: usize, place: &str) {
    let n = rows as i128;
    let query = engine
        .plan("SELECT SUM(v) AS s, SUM(w) AS sw, COUNT(*) AS n FROM t")
        .unwrap();
    let exact = dpkit_query::internals::exact(engine, &query).unwrap();
    // In whole units, however fine the grid each sum was taken on.
    let whole = |value: GridValue| value.steps_on(0);
    assert_eq!(whole(exact.values[0][0]), Some(90 * n), "{place}: SUM(v)");
    assert_eq!(whole(exact.values[0][1]), Some(90 * n), "{place}: SUM(w)");
    assert_eq!(whole(exact.values[0][2]), Some(n), "{place}: COUNT(*)");
    let answer = released(engine, rows, place);
    let total = 90.0 * rows as f64;
    let truths = [total, 90.0, total, 90.0];
    for ((column, cell), truth) in answer.columns.iter().zip(&answer.rows[0]).zip(truths) {
        let Cell::Value {
            value, low, high, ..
        } = *cell
        else {
            panic!("{place}: {column} is a key");
        };
        // At ε = 100 the noise of a sum with Δ = 90 is a few units at
        // most; an error of 10^4 (10^-3 for an average) has probability
        // far below 10^-6 with any of the mechanisms `auto` picks. (At
        // this ε the staircase's noise is 0 with probability above 95%,
        // so an interval of width 0 can be honest: what matters is that
        // it holds the truth.)
        let tolerance = truth * 1e-5;
        assert!(
            (value - truth).abs() < tolerance,
            "{place}: {column} = {value}"
        );
        assert!(
            low <= truth && truth <= high,
            "{place}: {column} in [{low}, {high}]"
        );
        assert!(
            high - low < 2.0 * tolerance,
            "{place}: {column} in [{low}, {high}]"
        );
    }
}

/// SUM and AVG of both columns, released at ε = 100 from a fresh ledger.
fn released(engine: &QueryEngine, rows: usize, place: &str) -> dpkit_query::ReleasedTable {
    let folder = std::env::temp_dir().join(format!(
        "dpkit-at-the-bound-{place}-{rows}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&folder).unwrap();
    let ledger = Ledger::open(&folder.join("ledger.sqlite"), 1000.0, 0.0).unwrap();
    let sql = "SELECT SUM(v) AS s, AVG(v) AS a, SUM(w) AS sw, AVG(w) AS aw FROM t";
    let settings = ReleaseSettings {
        epsilon: 100.0,
        delta: 0.0,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(27);
    let answer = engine.answer(sql, &settings, &ledger, &mut rng);
    let _ = std::fs::remove_dir_all(&folder);
    answer.unwrap_or_else(|e| panic!("{place}: {e}"))
}
