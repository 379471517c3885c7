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
/// at the bound (4 bytes a character), less what the rest of the query
/// costs (its other operations, once a row and once a batch).
fn bound_length(units_per_byte: u64) -> u64 {
    (MAX_WORK - REST_OF_THE_QUERY) / (4 * units_per_byte)
}

/// What a count with one condition costs but for its text function.
const REST_OF_THE_QUERY: u64 = 8192;

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

/// A CASE of `branches` numeric branches that no row takes, so every
/// branch runs on every row that reaches it: `function(argument, 1.001)`
/// between bounds that its values never reach.
fn untaken_branches(function: &str, argument: &str, branches: u32) -> String {
    let arms: String = (0..branches)
        .map(|i| {
            let low = 0.5 + f64::from(i) * 1e-3;
            format!(
                " WHEN {function}({argument}, 1.001) BETWEEN {low} AND {} THEN 1",
                low + 1e-3
            )
        })
        .collect();
    format!("(CASE{arms} ELSE 0 END) < 0")
}

/// Two neighbouring tables: 47 people with two rows each of `x = 1`, and
/// in `with` one more, the target, whose `rows` rows (`x` negative,
/// values libm finds slow) are all that reach the query's costly part; and
/// a public table `p` of `public_rows` rows. (Two rows each: a join on the
/// person takes a slower path as soon as any key repeats, at a cost that
/// does not grow with the rows, which a table of one row per person
/// would put on the target alone: see the book's "What timing can still
/// show".)
struct Neighbours {
    with: Fixture,
    without: Fixture,
}

impl Neighbours {
    fn new(name: &str, rows: usize, public_rows: usize) -> Self {
        let others: String = (1..48).map(|id| format!("{id},1\n{id},1\n")).collect();
        let slow = ["-1e-310", "-3.7", "-1e300", "-0.000123"];
        let target: String = (0..rows)
            .map(|row| format!("0,{}\n", slow[row % slow.len()]))
            .collect();
        let public: String = std::iter::once("k\n".to_string())
            .chain((0..public_rows).map(|k| format!("{}\n", k % 7)))
            .collect();
        let description = format!(
            "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"id\"\n\
             column = \"id\"\nmax_rows_per_person = {}\n[budget]\nepsilon = 1.0\n\
             [columns.id]\ntype = \"integer\"\n\
             [columns.x]\ntype = \"real\"\nbounds = [-10, 10]\n\
             [public.p]\nfile = \"p.csv\"\n[public.p.columns.k]\ntype = \"integer\"\n",
            rows.max(2)
        );
        let table = |side: &str, csv: String| {
            Fixture::with_files(
                &format!("{name}-{side}"),
                &[("t.csv", &csv), ("p.csv", &public)],
                &description,
                1.0,
            )
        };
        Self {
            with: table("with", format!("id,x\n{others}{target}")),
            without: table("without", format!("id,x\n{others}")),
        }
    }

    /// The planned work per person of `sql`, and the seconds the target's
    /// rows add to its run ([`median_difference`]).
    fn extra(&self, sql: &str) -> (u64, f64) {
        let plan = |fixture: &Fixture| {
            fixture
                .engine
                .plan(sql)
                .unwrap_or_else(|e| panic!("refused: {e}"))
        };
        let (with, without) = (plan(&self.with), plan(&self.without));
        assert_eq!(with.work(), without.work(), "the bound is public");
        (
            with.work(),
            median_difference((&self.with, &with), (&self.without, &without)),
        )
    }
}

/// The median of 101 paired differences between the runs of two planned
/// queries, alternating: enough pairs to span the slow spells of a shared
/// machine (25 moved the median by up to 300 µs from run to run).
fn median_difference(
    (a, query_a): (&Fixture, &dpkit_query::plan::PrivateQuery),
    (b, query_b): (&Fixture, &dpkit_query::plan::PrivateQuery),
) -> f64 {
    let time = |fixture: &Fixture, query| {
        let started = Instant::now();
        dpkit_query::internals::exact(&fixture.engine, query).unwrap();
        started.elapsed().as_secs_f64()
    };
    let mut differences: Vec<f64> = (0..101)
        .map(|_| time(a, query_a) - time(b, query_b))
        .collect();
    differences.sort_by(f64::total_cmp);
    differences[differences.len() / 2]
}

/// Numbers and joins: what one person's rows add to a query that makes
/// them, and only them, expensive, against the query's planned work per
/// person (`PrivateQuery::work`, at most 4 ns a unit). Numeric calls were
/// free before, and a join's fan-out multiplied only text: 280 `atan2`
/// branches on one person's rows through a join of 8,405 public rows per
/// row took 3.6 s through `dpkit serve` (issue 63).
#[test]
fn numbers_and_joins_cost_one_person_within_their_planned_work() {
    let negative = "CASE WHEN x < 0 THEN";
    let cases = [
        (
            "atan2, 30 branches",
            Neighbours::new("numeric-atan2", 1, 1),
            format!(
                "SELECT COUNT(*) FROM t WHERE {negative} {} ELSE false END",
                untaken_branches("atan2", "x", 30)
            ),
        ),
        (
            "pow, 30 branches",
            Neighbours::new("numeric-pow", 1, 1),
            format!(
                "SELECT COUNT(*) FROM t WHERE {negative} {} ELSE false END",
                untaken_branches("pow", "x", 30)
            ),
        ),
        (
            "atan2, 24 branches, 12 rows",
            Neighbours::new("numeric-rows", 12, 1),
            format!(
                "SELECT COUNT(*) FROM t WHERE {negative} {} ELSE false END",
                untaken_branches("atan2", "x", 24)
            ),
        ),
        (
            "a join of 5 rows, then atan2",
            Neighbours::new("numeric-join-case", 1, 5),
            format!(
                "SELECT COUNT(*) FROM t JOIN p ON true WHERE {negative} {} ELSE false END",
                untaken_branches("atan2", "x + p.k", 6)
            ),
        ),
        (
            "a join of 20 public rows",
            Neighbours::new("numeric-join-wide", 1, 20),
            "SELECT COUNT(*) FROM t JOIN p ON true WHERE t.x < 0 AND p.k >= 0".to_string(),
        ),
        (
            "a self-join of 14 rows",
            Neighbours::new("numeric-self-join", 14, 1),
            // Every side holds rows with or without the target. A build
            // side that only the target reaches is src/probe_always.rs's,
            // whose tests count the probe side's rows on neighbours.
            "SELECT COUNT(*) FROM t a JOIN t b ON a.id = b.id WHERE a.x <= b.x".to_string(),
        ),
    ];
    for (what, neighbours, sql) in cases {
        let (work, extra) = neighbours.extra(&sql);
        let allowed = work as f64 * NANOSECONDS_PER_UNIT * 1e-9;
        println!(
            "{what:<30} {work:>7} units: {:>8.1} µs more with the person, {:.2} of its bound",
            extra * 1e6,
            extra / allowed
        );
        assert!(
            extra <= allowed,
            "{what}: {:.1} µs more, over {:.1} µs for {work} units",
            extra * 1e6,
            allowed * 1e6
        );
        assert!(work <= MAX_WORK, "{what}: {work}");
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
/// person's row cost 119 ms (twenty patterns, on Adult); twenty-four here (thirty-two
/// passed the work bound once every node cost its batches).
struct BranchAttack {
    attack: String,
    reached: Fixture,
    unreached: Fixture,
}

impl BranchAttack {
    /// The tables, in folders named after `name`.
    fn new(name: &str) -> Self {
        // Twenty-four patterns that differ, so that the optimiser cannot
        // merge them into one (it keeps one copy of a repeated expression).
        let theta = "θ".repeat(950);
        let branch = (0..24)
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
