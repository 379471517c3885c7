//! The end-to-end auditor on neighbouring tables: every query shape passes
//! at its declared ε, and every closed hole, planted back with the
//! test-only `planted-holes` feature, is caught.
//!
//! Each audit draws 100,000 answers per table from a fixed seed and
//! reports a lower bound on the realised ε at confidence 1 − 10⁻⁶: a
//! correct query path is flagged with probability below 10⁻⁶ (and, with
//! the seed fixed, never flakes).

#[path = "support/fixture.rs"]
mod fixture;

use std::sync::Mutex;

use dpkit_audit::query::{QueryAudit, Statistic, audit_query, cell};
use dpkit_core::rng::InsecureSeededRng;
use dpkit_planted::{Hole, clear, plant};
use dpkit_query::{MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::{Cell, ReleasedTable};
use fixture::Fixture;

/// Planted holes are process-wide: tests in this file take turns.
static TURN: Mutex<()> = Mutex::new(());

const SAMPLES: usize = 100_000;
const CONFIDENCE: f64 = 1.0 - 1e-6;

/// Everyone but dan.
const BASE: &str = "1,30,ann,F,1000\n2,45,bob,M,2000\n3,0,cat,F,50\n5,41,eve,F,300\n\
                    6,44,fay,F,700\n7,52,gus,M,0\n";
const HEADER: &str = "id,age,name,sex,salary\n";

fn description(unit: &str, table_file: &str) -> String {
    format!(
        "[table]\nname = \"t\"\nfile = \"{table_file}\"\n[privacy_unit]\n{unit}\n[budget]\n\
         epsilon = 100.0\ndelta = 1e-3\n\
         [columns.id]\ntype = \"integer\"\n\
         [columns.age]\ntype = \"integer\"\nbounds = [0, 120]\n\
         [columns.name]\ntype = \"text\"\n\
         [columns.sex]\ntype = \"text\"\ndomain = [\"F\", \"M\"]\n\
         [columns.salary]\ntype = \"integer\"\nbounds = [0, 10000]\n"
    )
}

/// Two neighbouring tables: `base` plus `extra` rows, and `base` alone.
fn pair(name: &str, base: &str, extra: &str, unit: &str) -> (Fixture, Fixture) {
    let with = format!("{HEADER}{base}{extra}");
    let without = format!("{HEADER}{base}");
    (
        Fixture::new(
            &format!("{name}-a"),
            "t.csv",
            &with,
            &description(unit, "t.csv"),
            100.0,
        ),
        Fixture::new(
            &format!("{name}-b"),
            "t.csv",
            &without,
            &description(unit, "t.csv"),
            100.0,
        ),
    )
}

const ROW: &str = "kind = \"row\"";

fn settings(epsilon: f64, delta: f64, mechanism: MechanismChoice) -> ReleaseSettings {
    ReleaseSettings {
        epsilon,
        delta,
        mechanism,
        confidence: 0.95,
    }
}

/// The lower bound on ε and the ε charged.
fn run(
    first: &QueryEngine,
    second: &QueryEngine,
    sql: &str,
    settings: ReleaseSettings,
    statistic: &Statistic<'_>,
) -> (f64, f64) {
    let audit = QueryAudit {
        sql,
        settings,
        samples: SAMPLES,
        confidence: CONFIDENCE,
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(2024);
    let report = audit_query(first, second, &audit, statistic, &mut rng).unwrap();
    println!(
        "{sql}: ε ≥ {:.3} (charged {}), event {:?} with probabilities {:?}",
        report.epsilon_lower_bound,
        report.declared.epsilon(),
        report.event,
        report.event_probabilities()
    );
    (report.epsilon_lower_bound, report.declared.epsilon())
}

fn passes((bound, declared): (f64, f64), what: &str) {
    assert!(
        bound <= declared,
        "{what}: realised ε ≥ {bound} > {declared}"
    );
}

fn caught((bound, declared): (f64, f64), what: &str) {
    assert!(
        bound > declared,
        "{what}: the planted hole went unseen (ε ≥ {bound} ≤ {declared})"
    );
}

#[test]
fn counts_sums_averages_spreads_medians_and_domains_keep_their_epsilon() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    let (a, b) = pair("audit-shapes", BASE, "4,90,dan,M,10000\n", ROW);
    let auto = |e| settings(e, 0.0, MechanismChoice::Auto);
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    for (sql, statistic) in [
        (
            "SELECT COUNT(*) FROM t WHERE age > 40",
            &first as &Statistic<'_>,
        ),
        ("SELECT SUM(salary) FROM t", &first),
        ("SELECT AVG(age) FROM t", &first),
        ("SELECT STDDEV(age) FROM t", &first),
        ("SELECT MEDIAN(age) FROM t", &first),
        ("SELECT COUNT(DISTINCT age) FROM t", &first),
        (
            "SELECT sex, COUNT(*) FROM t GROUP BY sex",
            &|t: &ReleasedTable| cell(t, &["M"], 1),
        ),
    ] {
        passes(run(&a.engine, &b.engine, sql, auto(1.0), statistic), sql);
    }
    let thresholded = "SELECT name, COUNT(*) FROM t GROUP BY name";
    let dan = |t: &ReleasedTable| cell(t, &["dan"], 1);
    passes(
        run(
            &a.engine,
            &b.engine,
            thresholded,
            settings(1.0, 1e-6, MechanismChoice::Auto),
            &dan,
        ),
        thresholded,
    );
}

/// How many groups' answers lie within `width` of `centres`.
fn near(t: &ReleasedTable, centres: &[(&str, f64)], width: f64) -> f64 {
    centres
        .iter()
        .filter(|(key, centre)| (cell(t, &[key], 1) - centre).abs() <= width)
        .count() as f64
}

#[test]
fn staircase_over_groups_keeps_its_epsilon_and_charging_it_once_is_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // dan has two rows (k = 2), aged 120, one in each group: each group
    // moves by 120 = Δ/2 (Δ = k·120 per group).
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 2";
    let (a, b) = pair(
        "audit-staircase",
        BASE,
        "4,120,dan,F,0\n4,120,dan,M,0\n",
        unit,
    );
    let sql = "SELECT sex, SUM(age) FROM t GROUP BY sex";
    // Exact sums with dan: F 30+0+41+44+120, M 45+52+120.
    let centres = [("F", 235.0), ("M", 217.0)];
    let statistic = |t: &ReleasedTable| near(t, &centres, 24.0);
    // At ε = 2 each group's noise has ε = 1: the joint event "both groups
    // near dan's sums" has ratio e² (the charge). Charged once, it is e⁴.
    let staircase = settings(2.0, 0.0, MechanismChoice::Staircase);
    passes(
        run(&a.engine, &b.engine, sql, staircase, &statistic),
        "staircase over groups",
    );
    plant(Hole::StaircaseChargedOnce);
    caught(
        run(&a.engine, &b.engine, sql, staircase, &statistic),
        "staircase charged once",
    );
    clear();
}

#[test]
fn a_failure_on_one_row_is_caught_when_expressions_are_not_total() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    let (a, b) = pair("audit-failure", BASE, "4,90,dan,M,10000\n", ROW);
    let sql = "SELECT COUNT(*) FROM t WHERE CASE WHEN name = 'dan' THEN 1/(age-age) ELSE 1 END = 1";
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    passes(
        run(&a.engine, &b.engine, sql, auto, &first),
        "total expressions",
    );
    plant(Hole::FailingExpressions);
    caught(
        run(&a.engine, &b.engine, sql, auto, &first),
        "failing expressions",
    );
    clear();
}

#[test]
fn a_repeated_domain_value_is_released_once_and_caught_when_repeated() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    let (fa, fb) = pair("audit-repeat", BASE, "4,90,dan,F,10000\n", ROW);
    let repeat = |f: &Fixture| {
        let mut description = f.engine.description().clone();
        if let Some(sex) = description.columns.get_mut("sex") {
            sex.domain = Some(vec!["F".into(), "F".into(), "M".into()]);
        }
        QueryEngine::open(description).unwrap()
    };
    let (a, b) = (repeat(&fa), repeat(&fb));
    let sql = "SELECT sex, COUNT(*) FROM t GROUP BY sex";
    // With dan, F counts 5: how many F rows say at least 5?
    let statistic = |t: &ReleasedTable| {
        t.rows
            .iter()
            .filter(|row| row[0] == Cell::Key("F".into()))
            .filter(|row| matches!(row[1], Cell::Value { value, .. } if value >= 5.0))
            .count() as f64
    };
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    passes(run(&a, &b, sql, auto, &statistic), "one release per key");
    plant(Hole::RepeatedKeys);
    caught(run(&a, &b, sql, auto, &statistic), "repeated keys");
    clear();
}

#[test]
fn the_cap_on_the_scan_holds_and_a_cap_after_from_is_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1";
    // dan has 30 rows; a subquery renames a per-row column as the id.
    let many: String = (0..30).map(|i| format!("4,90,dan,M,{i}\n")).collect();
    let (a, b) = pair("audit-cap", BASE, &many, unit);
    let sql = "SELECT COUNT(*) FROM (SELECT age, salary AS id FROM t) s WHERE age = 90";
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    passes(
        run(&a.engine, &b.engine, sql, auto, &first),
        "cap on the scan",
    );
    plant(Hole::CapAfterFrom);
    let (a, b) = pair("audit-cap-planted", BASE, &many, unit);
    caught(
        run(&a.engine, &b.engine, sql, auto, &first),
        "cap after FROM",
    );
    clear();
}

#[test]
fn declared_types_hold_and_inferred_types_are_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // dan's age does not parse as an integer; the forties count.
    let forties: String = (0..20)
        .map(|i| format!("{},{},p{i},F,1\n", 100 + i, 41 + i % 9))
        .collect();
    let base = format!("{forties}{BASE}");
    let with = format!("{HEADER}4,90.5,dan,M,1\n{base}");
    let without = format!("{HEADER}{base}");
    let open =
        |name: &str, csv: &str| Fixture::new(name, "t.csv", csv, &description(ROW, "t.csv"), 100.0);
    let sql = "SELECT COUNT(*) FROM t WHERE age / 10 = 4";
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    let (a, b) = (
        open("audit-types-a", &with),
        open("audit-types-b", &without),
    );
    passes(
        run(&a.engine, &b.engine, sql, auto, &first),
        "declared types",
    );
    plant(Hole::InferredTypes);
    let (a, b) = (
        open("audit-types-c", &with),
        open("audit-types-d", &without),
    );
    caught(
        run(&a.engine, &b.engine, sql, auto, &first),
        "inferred types",
    );
    clear();
}

#[test]
fn sums_move_by_at_most_the_bound_and_floating_point_sums_are_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // dan adds 2^53 (the bound) first; after it, every 3 that follows
    // rounds up to 4 in floating point, so his row would move the sum by
    // more than the bound.
    let bound = 2f64.powi(53);
    let threes: String = (0..64).map(|i| format!("{},1,x,F,3\n", 100 + i)).collect();
    let description = description(ROW, "t.csv").replace(
        "[columns.salary]\ntype = \"integer\"\nbounds = [0, 10000]",
        "[columns.salary]\ntype = \"real\"\nbounds = [0, 9007199254740992]",
    );
    let moved = || {
        let with = format!("{HEADER}4,90,dan,M,9007199254740992\n{threes}");
        let without = format!("{HEADER}{threes}");
        let sums = [("fp-a", with), ("fp-b", without)].map(|(name, csv)| {
            let f = Fixture::new(name, "t.csv", &csv, &description, 1.0);
            let query = f.engine.plan("SELECT SUM(salary) FROM t").unwrap();
            dpkit_query::internals::exact(&f.engine, &query)
                .unwrap()
                .values[0][0]
                .to_f64()
        });
        (sums[0] - sums[1]).abs()
    };
    assert!(moved() <= bound, "exact sums move by at most the bound");
    plant(Hole::FloatingPointSums);
    assert!(
        moved() > bound,
        "floating-point sums moved by no more than the bound"
    );
    clear();
}

#[test]
fn a_changed_person_is_covered_when_the_description_says_replace() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // dan moves from M to F: both groups move by one.
    let tables = |name: &str, unit: &str| {
        let open = |suffix: &str, sex: &str| {
            let csv = format!("{HEADER}{BASE}4,90,dan,{sex},1\n");
            Fixture::new(
                &format!("{name}-{suffix}"),
                "t.csv",
                &csv,
                &description(unit, "t.csv"),
                100.0,
            )
        };
        (open("m", "M"), open("f", "F"))
    };
    let sql = "SELECT sex, COUNT(*) FROM t GROUP BY sex";
    // With dan as M: M counts 3, F 4. Is M still ≥ 3 and F still ≤ 4?
    let statistic = |t: &ReleasedTable| {
        f64::from(cell(t, &["M"], 1) >= 3.0) + f64::from(cell(t, &["F"], 1) <= 4.0)
    };
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    let (a, b) = tables("audit-replace", "kind = \"row\"\nneighbours = \"replace\"");
    passes(
        run(&a.engine, &b.engine, sql, auto, &statistic),
        "calibrated for replacement",
    );
    // Calibrated for addition and removal only, a change costs up to 2ε,
    // as the README and the book say.
    let (a, b) = tables("audit-add-remove", ROW);
    caught(
        run(&a.engine, &b.engine, sql, auto, &statistic),
        "add-remove only",
    );
}

/// The attack on computed columns: a subquery's column named like the
/// table's whole-number column `level` (bounds [−8, 8]) holds −0.5 for
/// everyone but dan, who holds 8. Borrowing the real column's `integer`
/// fact put the sum on integer noise over the total rounded half away
/// from zero: −2.5 → −3 without dan, 5.5 → 6 with him, a move of 9 > Δ = 8,
/// which the discrete staircase charges about twice for. Now the column's
/// range comes from its CASE ([−0.5, 8], not whole), and whole-number sums
/// round each value ties upwards; each defence alone closes it.
#[test]
fn a_computed_column_borrows_no_fact_and_rounding_is_translation_invariant() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    let description = "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n\
                       [budget]\nepsilon = 100.0\n\
                       [columns.name]\ntype = \"text\"\n\
                       [columns.level]\ntype = \"integer\"\nbounds = [-8, 8]\n";
    let others: String = (0..5).map(|i| format!("p{i},0\n")).collect();
    let open = |name: &str, csv: &str| Fixture::new(name, "t.csv", csv, description, 100.0);
    let with = open("audit-borrow-a", &format!("name,level\ndan,0\n{others}"));
    let without = open("audit-borrow-b", &format!("name,level\n{others}"));
    let sql = "SELECT SUM(level) FROM \
               (SELECT CASE WHEN name = 'dan' THEN 8 ELSE -0.5 END AS level FROM t) s";
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let staircase = settings(1.0, 0.0, MechanismChoice::Staircase);
    let audit = || run(&with.engine, &without.engine, sql, staircase, &first);
    let whole = || {
        let query = with.engine.plan(sql).unwrap();
        matches!(
            query.measured.measurements[0],
            dpkit_release::Measurement::Sum { integer: true, .. }
        )
    };
    assert!(!whole(), "the computed column is not whole-numbered");
    passes(audit(), "no borrowed facts, values rounded one by one");
    plant(Hole::BorrowedFacts);
    assert!(whole(), "the planted hole borrows the fact");
    passes(audit(), "borrowed facts, but values rounded one by one");
    clear();
    plant(Hole::RoundedTotals);
    passes(audit(), "totals rounded, but no borrowed facts");
    plant(Hole::BorrowedFacts);
    caught(audit(), "borrowed facts and rounded totals");
    clear();
}

#[test]
fn a_join_counts_every_row_a_key_meets_and_ignoring_repeats_is_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // A public table in which dan's key, M, repeats: each of his rows
    // becomes two, and the count moves by 2 (Δ = 2, not 1).
    let codes = ("codes.csv", "sex,label\nF,female\nM,male\nM,man\n");
    let with_codes = format!(
        "{}[public.codes]\nfile = \"codes.csv\"\n",
        description(ROW, "t.csv")
    );
    let open = |name: &str, extra: &str| {
        let data = format!("{HEADER}{BASE}{extra}");
        Fixture::with_files(name, &[("t.csv", &data), codes], &with_codes, 100.0)
    };
    let sql = "SELECT COUNT(*) FROM t JOIN codes c ON t.sex = c.sex WHERE t.age = 90";
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    let (a, b) = (
        open("audit-join-a", "4,90,dan,M,10000\n"),
        open("audit-join-b", ""),
    );
    passes(run(&a.engine, &b.engine, sql, auto, &first), "a join");
    plant(Hole::JoinFanout);
    caught(
        run(&a.engine, &b.engine, sql, auto, &first),
        "a join's repeated key ignored",
    );
    clear();
}

#[test]
fn a_distinct_count_moves_by_a_persons_rows_and_keeps_its_epsilon() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // dan has two rows with two names no one else has: the distinct count
    // of names moves by 2 (k = 2), as a count of rows would.
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 2";
    let (a, b) = pair(
        "audit-distinct",
        BASE,
        "4,90,dan,M,0\n4,91,dave,M,0\n",
        unit,
    );
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let sql = "SELECT COUNT(DISTINCT name) FROM t";
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    passes(run(&a.engine, &b.engine, sql, auto, &first), sql);
}

#[test]
fn bounds_per_group_hold_and_bounds_without_truncation_are_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // dan has three rows in group M; each person counts once per group.
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 3\n\
                max_groups_per_person = 2\nmax_rows_per_group = 1";
    let dan = "4,90,dan,M,0\n4,91,dan,M,0\n4,92,dan,M,0\n";
    let (a, b) = pair("audit-groups", BASE, dan, unit);
    let sql = "SELECT sex, COUNT(*) FROM t GROUP BY sex";
    let m = |t: &ReleasedTable| cell(t, &["M"], 1);
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    passes(run(&a.engine, &b.engine, sql, auto, &m), "bounds per group");
    plant(Hole::UntruncatedGroups);
    caught(
        run(&a.engine, &b.engine, sql, auto, &m),
        "rows not truncated",
    );
    clear();
}

#[test]
fn distinct_people_over_a_public_domain_move_at_most_its_groups() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // Everyone visits kind A once; dan (12 rows allowed) visits A, B and C,
    // so the people per kind, summed over the three, move by 3: Δ = 3, the
    // domain's size, not 12.
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1";
    let with_visits = format!(
        "{}[private.v]\nfile = \"v.csv\"\nperson = \"person\"\nmax_rows_per_person = 12\n\
         [private.v.columns.person]\ntype = \"integer\"\n\
         [private.v.columns.kind]\ntype = \"text\"\ndomain = [\"A\", \"B\", \"C\"]\n",
        description(unit, "t.csv")
    );
    let open = |name: &str, dan: (&str, &str)| {
        let people = format!("{HEADER}{BASE}{}", dan.0);
        let visits = format!("person,kind\n1,A\n2,A\n3,A\n5,A\n6,A\n7,A\n{}", dan.1);
        let files = [("t.csv", people.as_str()), ("v.csv", visits.as_str())];
        Fixture::with_files(name, &files, &with_visits, 100.0)
    };
    let (a, b) = (
        open(
            "audit-domain-people-a",
            ("4,90,dan,M,0\n", "4,A\n4,B\n4,C\n"),
        ),
        open("audit-domain-people-b", ("", "")),
    );
    let every_kind = |t: &ReleasedTable| ["A", "B", "C"].iter().map(|k| cell(t, &[k], 1)).sum();
    let sql = "SELECT v.kind, COUNT(DISTINCT v.person) FROM t JOIN v ON t.id = v.person \
               GROUP BY v.kind";
    let laplace = settings(1.0, 0.0, MechanismChoice::Laplace);
    passes(
        run(&a.engine, &b.engine, sql, laplace, &every_kind),
        "distinct people over a public domain",
    );
}

#[test]
fn a_join_of_private_tables_on_the_person_holds_and_one_on_any_key_is_caught() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    clear();
    // Everyone's visits are of kind M; dan (sex M, age 90) has two.
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1";
    let with_visits = format!(
        "{}[private.v]\nfile = \"v.csv\"\nperson = \"person\"\nmax_rows_per_person = 2\n\
         [private.v.columns.person]\ntype = \"integer\"\n\
         [private.v.columns.kind]\ntype = \"text\"\n",
        description(unit, "t.csv")
    );
    let open = |name: &str, dan: (&str, &str)| {
        let people = format!("{HEADER}{BASE}{}", dan.0);
        let visits = format!("person,kind\n1,M\n2,M\n3,M\n5,M\n6,M\n7,M\n{}", dan.1);
        let files = [("t.csv", people.as_str()), ("v.csv", visits.as_str())];
        Fixture::with_files(name, &files, &with_visits, 100.0)
    };
    let (a, b) = (
        open("audit-person-join-a", ("4,90,dan,M,0\n", "4,M\n4,M\n")),
        open("audit-person-join-b", ("", "")),
    );
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let auto = settings(1.0, 0.0, MechanismChoice::Auto);
    let on_the_person = "SELECT COUNT(*) FROM t JOIN v ON t.id = v.person";
    passes(
        run(&a.engine, &b.engine, on_the_person, auto, &first),
        "a join on the person",
    );
    // dan's two visits count him once: Δ = 1 through the join.
    let people = "SELECT COUNT(DISTINCT v.person) FROM t JOIN v ON t.id = v.person";
    passes(
        run(&a.engine, &b.engine, people, auto, &first),
        "distinct people through a join",
    );
    // dan's row meets everyone's visits: 8 rows where the bound is 2.
    let on_any_key = "SELECT COUNT(*) FROM t JOIN v ON t.sex = v.kind WHERE t.age = 90";
    assert!(a.engine.plan(on_any_key).is_err(), "refused when closed");
    plant(Hole::PersonJoinOnAnyKey);
    caught(
        run(&a.engine, &b.engine, on_any_key, auto, &first),
        "a join of private tables on any key",
    );
    clear();
}
