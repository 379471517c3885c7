//! The end-to-end auditor on neighbouring tables loaded at any place (the
//! embedded engine or a database): every query shape keeps its ε, joins of
//! private tables on the person keep theirs, and the per-person cap holds
//! where the rows live (and, planted after FROM with
//! the test-only `planted-holes` feature, is caught: a test of its own, run
//! only in the build with the holes).
//!
//! Each audit draws 100,000 answers per table from a fixed seed and gives
//! a lower bound on the realised ε at confidence 1 − 10⁻⁶, as in
//! `query_audit.rs`: a correct path is flagged with probability below
//! 10⁻⁶, and with the seed fixed never flakes.
#![allow(dead_code)]

use dpkit_audit::query::{QueryAudit, Statistic, audit_query, cell};
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::ReleasedTable;

use super::databases::Types;
use super::places::Place;

const SAMPLES: usize = 100_000;
const CONFIDENCE: f64 = 1.0 - 1e-6;

/// Everyone but dan.
const BASE: &str = "1,30,ann,F,1000\n2,45,bob,M,2000\n3,0,cat,F,50\n5,41,eve,F,300\n\
                    6,44,fay,F,700\n7,52,gus,M,0\n";
const HEADER: &str = "id,age,name,sex,salary\n";
const TYPES: Types<'static> = &[("id", "INTEGER"), ("age", "INTEGER"), ("salary", "INTEGER")];

fn description(unit: &str) -> String {
    format!(
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\n{unit}\n[budget]\n\
         epsilon = 100.0\ndelta = 1e-3\n\
         [columns.id]\ntype = \"integer\"\n\
         [columns.age]\ntype = \"integer\"\nbounds = [0, 120]\n\
         [columns.name]\ntype = \"text\"\n\
         [columns.sex]\ntype = \"text\"\ndomain = [\"F\", \"M\"]\n\
         [columns.salary]\ntype = \"integer\"\nbounds = [0, 10000]\n"
    )
}

/// Two neighbouring tables at `place`: everyone with `extra` rows, and
/// everyone without them.
fn pair(place: &Place<'_>, name: &str, extra: &str, unit: &str) -> (QueryEngine, QueryEngine) {
    let open = |suffix: &str, rows: &str| {
        place.open(
            &format!("{name}_{suffix}"),
            &format!("{HEADER}{rows}"),
            TYPES,
            &description(unit),
        )
    };
    (
        open("with", &format!("{BASE}{extra}")),
        open("without", BASE),
    )
}

fn settings(epsilon: f64, delta: f64) -> ReleaseSettings {
    ReleaseSettings {
        epsilon,
        delta,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    }
}

/// The lower bound on ε and the ε charged, for a query that runs on both
/// tables (two failures would pass an audit without showing anything).
fn run(
    pair: &(QueryEngine, QueryEngine),
    sql: &str,
    settings: ReleaseSettings,
    statistic: &Statistic<'_>,
) -> (f64, f64) {
    for engine in [&pair.0, &pair.1] {
        let query = engine.plan(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        dpkit_query::internals::exact(engine, &query).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let audit = QueryAudit {
        sql,
        settings,
        samples: SAMPLES,
        confidence: CONFIDENCE,
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(2024);
    let report = audit_query(&pair.0, &pair.1, &audit, statistic, &mut rng).unwrap();
    println!(
        "{sql}: ε ≥ {:.3} (charged {})",
        report.epsilon_lower_bound,
        report.declared.epsilon()
    );
    (report.epsilon_lower_bound, report.declared.epsilon())
}

fn passes(place: &Place<'_>, (bound, declared): (f64, f64), what: &str) {
    assert!(
        bound <= declared,
        "{}: {what}: realised ε ≥ {bound} > {declared}",
        place.name()
    );
}

/// Counts, sums, averages, spreads, medians, public-domain keys and
/// thresholded keys keep their ε at `place`.
pub fn shapes_keep_their_epsilon(place: &Place<'_>) {
    let tables = pair(
        place,
        "audit_shapes",
        "4,90,dan,M,10000\n",
        "kind = \"row\"",
    );
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    for sql in [
        "SELECT COUNT(*) FROM t WHERE age > 40",
        "SELECT SUM(salary) FROM t",
        // Without dan the sum is over no row at all.
        "SELECT SUM(salary) FROM t WHERE name = 'dan'",
        "SELECT AVG(age) FROM t",
        "SELECT STDDEV(age) FROM t",
        "SELECT MEDIAN(age) FROM t",
    ] {
        passes(place, run(&tables, sql, settings(1.0, 0.0), &first), sql);
    }
    let by_sex = "SELECT sex, COUNT(*) FROM t GROUP BY sex";
    let men = |t: &ReleasedTable| cell(t, &["M"], 1);
    passes(
        place,
        run(&tables, by_sex, settings(1.0, 0.0), &men),
        by_sex,
    );
    let thresholded = "SELECT name, COUNT(*) FROM t GROUP BY name";
    let dan = |t: &ReleasedTable| cell(t, &["dan"], 1);
    passes(
        place,
        run(&tables, thresholded, settings(1.0, 1e-6), &dan),
        thresholded,
    );
}

/// dan has 30 rows under the id unit with one row per person; a subquery
/// renames a per-row column as the id.
const CAP_UNIT: &str = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1";
const CAP_SQL: &str = "SELECT COUNT(*) FROM (SELECT age, salary AS id FROM t) s WHERE age = 90";

fn dans_rows() -> String {
    (0..30).map(|i| format!("4,90,dan,M,{i}\n")).collect()
}

/// The cap on the scan, run by the database, keeps one of dan's rows.
pub fn the_cap_holds_where_the_rows_live(place: &Place<'_>) {
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let tables = pair(place, "audit_cap", &dans_rows(), CAP_UNIT);
    passes(
        place,
        run(&tables, CAP_SQL, settings(1.0, 0.0), &first),
        "cap on the scan",
    );
}

/// Bounds per group, run by the database: dan's three rows in group M
/// count once (one row per group, two groups), and the released count of
/// M keeps its ε.
pub fn bounds_per_group_hold_where_the_rows_live(place: &Place<'_>) {
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 3\n\
                max_groups_per_person = 2\nmax_rows_per_group = 1";
    let dan = "4,90,dan,M,0\n4,91,dan,M,0\n4,92,dan,M,0\n";
    let tables = pair(place, "audit_groups", dan, unit);
    let sql = "SELECT sex, COUNT(*) FROM t GROUP BY sex";
    let men = |t: &ReleasedTable| cell(t, &["M"], 1);
    passes(
        place,
        run(&tables, sql, settings(1.0, 0.0), &men),
        "bounds per group",
    );
}

/// Two neighbouring datasets of people `t` and their visits `v` at
/// `place`, in one database each: everyone's visits are of kind M; with
/// dan (sex M, age 90) and his two visits, and without him.
fn joined_pair(place: &Place<'_>, name: &str) -> (QueryEngine, QueryEngine) {
    let unit = "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1";
    let text = format!(
        "{}[private.v]\nfile = \"v.csv\"\nperson = \"person\"\nmax_rows_per_person = 2\n\
         [private.v.columns.person]\ntype = \"integer\"\n\
         [private.v.columns.kind]\ntype = \"text\"\n",
        description(unit)
    );
    let visit_types: Types<'static> = &[("person", "INTEGER")];
    let open = |suffix: &str, dan: (&str, &str)| {
        let people = format!("{HEADER}{BASE}{}", dan.0);
        let visits = format!("person,kind\n1,M\n2,M\n3,M\n5,M\n6,M\n7,M\n{}", dan.1);
        let tables = [
            ("t", people.as_str(), TYPES),
            ("v", visits.as_str(), visit_types),
        ];
        place.open_tables(&format!("{name}_{suffix}"), (&tables, &[]), &text)
    };
    (
        open("with", ("4,90,dan,M,0\n", "4,M\n4,M\n")),
        open("without", ("", "")),
    )
}

const ON_THE_PERSON: &str = "SELECT COUNT(*) FROM t JOIN v ON t.id = v.person";
/// dan's row meets everyone's visits: 8 rows where the bound is 2.
const ON_ANY_KEY: &str = "SELECT COUNT(*) FROM t JOIN v ON t.sex = v.kind WHERE t.age = 90";

/// A join of two private tables on the person, run where the rows live,
/// keeps its ε.
pub fn joins_keep_their_epsilon_where_the_rows_live(place: &Place<'_>) {
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let tables = joined_pair(place, "audit_join");
    passes(
        place,
        run(&tables, ON_THE_PERSON, settings(1.0, 0.0), &first),
        "a join on the person",
    );
    assert!(
        tables.0.plan(ON_ANY_KEY).is_err(),
        "a join on any key is refused"
    );
}

/// With joins on any key accepted, the auditor sees dan's row meet
/// everyone's visits.
#[cfg(feature = "planted-holes")]
pub fn a_join_on_any_key_is_caught(place: &Place<'_>) {
    use dpkit_planted::{Hole, clear, plant};
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    let tables = joined_pair(place, "audit_join_planted");
    plant(Hole::PersonJoinOnAnyKey);
    let (bound, declared) = run(&tables, ON_ANY_KEY, settings(1.0, 0.0), &first);
    clear();
    assert!(
        bound > declared,
        "{}: a join on any key went unseen (ε ≥ {bound} ≤ {declared})",
        place.name()
    );
}

/// With the cap planted after FROM, the auditor sees dan's 30 rows.
#[cfg(feature = "planted-holes")]
pub fn a_cap_after_from_is_caught(place: &Place<'_>) {
    use dpkit_planted::{Hole, clear, plant};
    let first = |t: &ReleasedTable| cell(t, &[], 0);
    plant(Hole::CapAfterFrom);
    let tables = pair(place, "audit_cap_planted", &dans_rows(), CAP_UNIT);
    let (bound, declared) = run(&tables, CAP_SQL, settings(1.0, 0.0), &first);
    clear();
    assert!(
        bound > declared,
        "{}: a cap after FROM went unseen (ε ≥ {bound} ≤ {declared})",
        place.name()
    );
}
