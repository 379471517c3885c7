//! What one row can cost, timed: for every allowed text function, a column
//! whose `max_length` puts the function at the planning bound
//! (`dpkit_total::MAX_WORK` units), filled with the values that cost it most,
//! and the query's time per row against the bound. Twice that length is
//! refused at planning.
//!
//! Timings are the least of several runs (interference only adds time)
//! over a few hundred rows, less a plain query over the same rows, which
//! reads them too. The bound allows 4 ns per unit, against the 1–2 ns the
//! weights were set from (`crates/dpkit-total/src/work.rs`), so that a slower or busier
//! machine does not fail it; a pattern or function whose cost grows with
//! anything but the bytes it reads (a backtracking regex, a string built
//! without bound) is many times over it. `--no-capture` prints the figures
//! the book quotes (docs/book/src/query/sql.md).

#[path = "support/fixture.rs"]
mod fixture;

use std::time::Instant;

use dpkit_query::QueryError;
use dpkit_total::MAX_WORK;
use fixture::Fixture;

/// Rows of the adversarial table.
const ROWS: usize = 64;
/// Runs per query; the least is kept.
const RUNS: usize = 3;
/// The time per unit of work a row may take at most, in nanoseconds.
const NANOSECONDS_PER_UNIT: f64 = 4.0;

/// Values that cost text functions most: case mappings that grow (`ΐ`
/// uppercases to three characters, `İ` lowercases to two), characters of
/// four bytes, and text an automaton walks without a quick exit.
const FILLERS: [&str; 4] = ["ΐ", "İ", "🙂", "ab"];

/// One function at its bound: the expression, and how many units per
/// byte of the column it costs.
struct Case {
    expr: &'static str,
    units_per_byte: u64,
}

const CASES: &[Case] = &[
    Case {
        expr: "upper(a) = 'x'",
        units_per_byte: 16,
    },
    Case {
        expr: "initcap(a) = 'x'",
        units_per_byte: 16,
    },
    Case {
        expr: "lower(a) = 'x'",
        units_per_byte: 4,
    },
    Case {
        expr: "reverse(a) = 'x'",
        units_per_byte: 4,
    },
    Case {
        expr: "btrim(a) = 'x'",
        units_per_byte: 1,
    },
    Case {
        expr: "substr(a, 2, 40000) = 'x'",
        units_per_byte: 1,
    },
    Case {
        expr: "length(a) = 3",
        units_per_byte: 1,
    },
    Case {
        expr: "strpos(a, 'zz') = 3",
        units_per_byte: 1,
    },
    Case {
        expr: "CAST(a AS BIGINT) = 3",
        units_per_byte: 1,
    },
    Case {
        expr: "a LIKE '%zz%'",
        units_per_byte: 1,
    },
    Case {
        expr: "a ILIKE '%zz%'",
        units_per_byte: 1,
    },
    Case {
        expr: "a LIKE '%a_b_a%'",
        units_per_byte: 1,
    },
    Case {
        expr: "a ~ 'a[ab]{8}[^ab]'",
        units_per_byte: 1,
    },
    Case {
        expr: "a ~* '(?-u:\\b)[[:alpha:]]{3}z'",
        units_per_byte: 1,
    },
    Case {
        expr: "a IN ('x', 'y')",
        units_per_byte: 1,
    },
    Case {
        expr: "concat(a, 'x') = 'y'",
        units_per_byte: 1,
    },
];

fn description(max_length: u64) -> String {
    format!(
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1.0\n\
         [columns.a]\ntype = \"text\"\nmax_length = {max_length}\n"
    )
}

/// A table of `ROWS` values of `filler` repeated to `characters`.
fn table(name: &str, filler: &str, characters: u64) -> Fixture {
    table_of(name, filler, characters, ROWS)
}

/// A table of `rows` values of `filler` repeated to `characters`.
fn table_of(name: &str, filler: &str, characters: u64, rows: usize) -> Fixture {
    let repeats = characters as usize / filler.chars().count();
    let value = filler.repeat(repeats);
    let mut csv = String::with_capacity((value.len() + 1) * rows + 2);
    csv.push_str("a\n");
    for _ in 0..rows {
        csv.push_str(&value);
        csv.push('\n');
    }
    Fixture::new(name, "t.csv", &csv, &description(characters), 1.0)
}

/// The least time of `RUNS` runs of `sql`'s exact aggregates.
fn seconds(fixture: &Fixture, sql: &str) -> f64 {
    let query = fixture
        .engine
        .plan(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            dpkit_query::internals::exact(&fixture.engine, &query).unwrap();
            started.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// The `max_length` that puts one use of a function of `units_per_byte`
/// at the bound (4 bytes a character, and a few units for the rest of
/// the expression).
fn bound_length(units_per_byte: u64) -> u64 {
    (MAX_WORK / (4 * units_per_byte)).saturating_sub(16)
}

#[test]
fn every_text_function_stays_within_the_per_row_bound_on_its_worst_values() {
    let bound = MAX_WORK as f64 * NANOSECONDS_PER_UNIT * 1e-9;
    println!("bound per row: {:.0} µs ({MAX_WORK} units)", bound * 1e6);
    for (index, case) in CASES.iter().enumerate() {
        let characters = bound_length(case.units_per_byte);
        let sql = format!("SELECT COUNT(*) FROM t WHERE {}", case.expr);
        let mut worst: (f64, &str) = (0.0, "");
        for (f, filler) in FILLERS.iter().enumerate() {
            let fixture = table(&format!("row-cost-{index}-{f}"), filler, characters);
            let plain = seconds(&fixture, "SELECT COUNT(*) FROM t WHERE a IS NOT NULL");
            let per_row = (seconds(&fixture, &sql) - plain).max(0.0) / ROWS as f64;
            if per_row >= worst.0 {
                worst = (per_row, filler);
            }
        }
        println!(
            "{:<40} max_length {characters:>6}: worst {:>7.1} µs per row ({}), {:.2} of the bound",
            case.expr,
            worst.0 * 1e6,
            worst.1,
            worst.0 / bound
        );
        assert!(
            worst.0 <= bound,
            "{}: {:.1} µs per row on {:?} values, over the {:.1} µs bound",
            case.expr,
            worst.0 * 1e6,
            worst.1,
            bound * 1e6
        );
    }
}

#[test]
fn twice_the_work_is_refused_at_planning() {
    for (index, case) in CASES.iter().enumerate() {
        let characters = bound_length(case.units_per_byte);
        let fixture = Fixture::new(
            &format!("row-cost-refused-{index}"),
            "t.csv",
            "a\nx\n",
            &description(characters),
            1.0,
        );
        let once = format!("SELECT COUNT(*) FROM t WHERE {}", case.expr);
        assert!(fixture.engine.plan(&once).is_ok(), "{once}");
        let twice = format!("SELECT COUNT(*) FROM t WHERE {0} OR {0}", case.expr);
        match fixture.engine.plan(&twice) {
            Err(QueryError::NotPrivate(reason)) => {
                assert!(reason.contains("units of work"), "{twice}: {reason}")
            }
            other => panic!("{twice}: planned past the bound: {:?}", other.map(|_| ())),
        }
    }
}

/// The first timing attack: a pattern whose automaton explodes, on one
/// person's long value. Refused at planning; with Arrow's regex engine put
/// back, one row costs many times the bound (370 ms at 65,536 characters
/// before the change).
#[cfg(feature = "planted-holes")]
#[test]
fn an_exploding_pattern_is_refused_and_caught_when_backtracking_is_put_back() {
    use dpkit_planted::{Hole, clear, plant};
    let attack = "SELECT COUNT(*) FROM t WHERE a ~ 'a[ab]{900}[^ab]'";
    // a and b in no pattern a lazy DFA could settle into (a period of
    // two, say, keeps its states few).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let value: String = (0..bound_length(1))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if state & 1 == 0 { 'a' } else { 'b' }
        })
        .collect();
    let rows = 4;
    let fixture = table_of("row-cost-attack", &value, bound_length(1), rows);
    match fixture.engine.plan(attack) {
        Err(QueryError::NotPrivate(reason)) => assert!(reason.contains("automaton"), "{reason}"),
        other => panic!("planned: {:?}", other.map(|_| ())),
    }
    plant(Hole::BacktrackingPatterns);
    let plain = seconds(&fixture, "SELECT COUNT(*) FROM t WHERE a IS NOT NULL");
    let per_row = (seconds(&fixture, attack) - plain) / rows as f64;
    clear();
    let bound = MAX_WORK as f64 * NANOSECONDS_PER_UNIT * 1e-9;
    println!("backtracking: {:.1} µs per row", per_row * 1e6);
    assert!(per_row > 10.0 * bound, "{per_row} s per row");
}

/// The second timing attack: a costly branch that only rows meeting a
/// condition reach. Work done once per batch that a row reaches (Arrow
/// compiled ILIKE's pattern as a regular expression there) made one
/// person's row cost 119 ms (twenty patterns, on Adult); thirty-two here.
struct BranchAttack {
    attack: String,
    reached: Fixture,
    unreached: Fixture,
}

impl BranchAttack {
    /// The tables, in folders named after `name`.
    fn new(name: &str) -> Self {
        // Thirty-two patterns that differ, so that the optimiser cannot
        // merge them into one (it keeps one copy of a repeated expression).
        let theta = "θ".repeat(950);
        let branch = (0..32)
            .map(|i| format!("a ILIKE '%{theta}{i}%'"))
            .collect::<Vec<_>>()
            .join(" OR ");
        let attack = format!(
            "SELECT COUNT(CASE WHEN a = 'x' THEN CASE WHEN {branch} THEN 1 ELSE 2 END END) FROM t"
        );
        let description = description(16);
        let folder = |side| format!("{name}-{side}");
        let reached = Fixture::new(&folder("reached"), "t.csv", "a\nx\nÿ\n", &description, 1.0);
        let unreached = Fixture::new(
            &folder("unreached"),
            "t.csv",
            "a\ny\nÿ\n",
            &description,
            1.0,
        );
        BranchAttack {
            attack,
            reached,
            unreached,
        }
    }

    /// Seconds the table whose row reaches the branch takes beyond the
    /// other's. Runs alternate between the tables, and the median of the
    /// pairs' differences is kept: a process still running beside the test
    /// (a server an earlier test stopped) slows both runs of a pair alike,
    /// where the least of each side once differed by more than the bound
    /// with no branch reached.
    fn extra(&self) -> f64 {
        let (with, without) = (
            self.reached.engine.plan(&self.attack).unwrap(),
            self.unreached.engine.plan(&self.attack).unwrap(),
        );
        let time = |fixture: &Fixture, query| {
            let started = Instant::now();
            dpkit_query::internals::exact(&fixture.engine, query).unwrap();
            started.elapsed().as_secs_f64()
        };
        let mut differences: Vec<f64> = (0..25)
            .map(|_| time(&self.reached, &with) - time(&self.unreached, &without))
            .collect();
        differences.sort_by(f64::total_cmp);
        differences[differences.len() / 2]
    }
}

/// A branch reached by one row costs what one row may.
#[test]
fn a_branch_one_row_reaches_costs_what_one_row_may() {
    let difference = BranchAttack::new("row-cost").extra();
    let bound = MAX_WORK as f64 * NANOSECONDS_PER_UNIT * 1e-9;
    println!("a branch one row reaches: {:.1} µs more", difference * 1e6);
    assert!(difference <= bound, "{:.1} µs more", difference * 1e6);
}

/// With Arrow's matcher put back, the branch one row reaches is caught.
#[cfg(feature = "planted-holes")]
#[test]
fn a_branch_one_row_reaches_is_caught_when_arrows_ilike_is_put_back() {
    use dpkit_planted::{Hole, clear, plant};
    let attack = BranchAttack::new("row-cost-planted");
    plant(Hole::BacktrackingPatterns);
    let difference = attack.extra();
    clear();
    let bound = MAX_WORK as f64 * NANOSECONDS_PER_UNIT * 1e-9;
    println!("with Arrow's ILIKE: {:.1} µs more", difference * 1e6);
    assert!(difference > 3.0 * bound, "{:.1} µs more", difference * 1e6);
}
