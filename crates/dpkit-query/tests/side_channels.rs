//! Attacks on the query path, each written as a test that fails when its
//! hole is put back: failures that depend on one row, the per-person cap
//! switched off from FROM, types guessed from the data, keys that print
//! alike, staircase noise charged once over several groups, floating-point
//! sums that move by more than the bound, expressions deep enough to
//! overflow the stack.

#[path = "support/fixture.rs"]
mod fixture;

use dpkit_core::lattice::GridValue;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Ledger, MechanismChoice, QueryError, ReleaseSettings};
use dpkit_release::{Cell, ExactGroups, plan_noise};
use fixture::Fixture;

/// Four people; "dan" is the one the attacker targets.
const PEOPLE: &str = "id,age,name,salary,score\n\
    1,30,ann,1000,0.5\n\
    2,45,bob,2000,1.5\n\
    3,0,cat,-5,NaN\n\
    4,90,dan,9223372036854775807,-inf\n";

fn description(unit: &str) -> String {
    format!(
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\n{unit}\n[budget]\nepsilon = 1000.0\n\
         [columns.id]\ntype = \"integer\"\n\
         [columns.age]\ntype = \"integer\"\nbounds = [0, 120]\n\
         [columns.name]\ntype = \"text\"\n\
         [columns.salary]\ntype = \"integer\"\nbounds = [0, 10000]\n\
         [columns.score]\ntype = \"real\"\nbounds = [-2199023255552, 2199023255552]\n"
    )
}

fn table(name: &str, csv: &str, unit: &str) -> Fixture {
    Fixture::new(name, "t.csv", csv, &description(unit), 1000.0)
}

fn without_dan() -> String {
    PEOPLE
        .lines()
        .filter(|l| !l.contains("dan"))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// What an outcome shows an analyst, with the noise left out.
fn outcome(sql: &str, result: &dpkit_query::Result<dpkit_query::ReleasedTable>) -> String {
    match result {
        Ok(answer) => format!(
            "answered {} row(s), notes {:?}",
            answer.rows.len(),
            answer.notes
        ),
        Err(QueryError::NotPrivate(reason)) => format!("refused: {reason}"),
        Err(QueryError::Sql(reason)) => format!("SQL: {reason}"),
        Err(other) => panic!("{sql}: a data-dependent failure: {other}"),
    }
}

#[test]
fn no_query_fails_only_because_of_one_persons_row() {
    let with = table("oracle-with", PEOPLE, "kind = \"row\"");
    let without = table("oracle-without", &without_dan(), "kind = \"row\"");
    let oracles = [
        "CASE WHEN name = 'dan' AND age <= 90 THEN 1/(age-age) ELSE 1 END = 1",
        "CASE WHEN name = 'dan' THEN age % (age-age) ELSE 1 END = 1",
        "CASE WHEN name = 'dan' THEN 1.0/(age-age) ELSE 1 END = 1",
        "CAST(CASE WHEN name = 'dan' THEN 'x' ELSE '1' END AS INT) = 1",
        "CAST(name AS BIGINT) IS NULL",
        "CAST(score AS BIGINT) > 0",
        "arrow_cast(name, 'Int64') = 1",
        "to_timestamp(name) IS NULL",
        "name ~ '('",
        "name ~ 'd.n'",
        "name LIKE 'd%\\'",
        "salary * 2 > 0",
        "salary + 1 > 0",
        "-(salary - 9223372036854775807 - 2) > 0",
        "abs(salary - 9223372036854775807 - 9223372036854775807) > 0",
        "length(repeat(name, age)) > 0",
        "substr(name, 1, age - 91) = 'x'",
        "substr(name, 1, -1) = 'x'",
        "left(name, 2) = 'da'",
        "sqrt(CAST(age AS DOUBLE) - 50) > 1",
        "power(age, 100) > 1",
        "age > 1/0",
        "random() < 0.5",
        "concat(name, name, name) = 'dandandan'",
        "greatest(age, salary) > 100",
        "CASE WHEN name = 'dan' THEN CAST('1e400' AS DOUBLE) ELSE 0 END > 1",
    ];
    for predicate in oracles {
        for sql in [
            format!("SELECT COUNT(*) FROM t WHERE {predicate}"),
            format!("SELECT COUNT(CASE WHEN {predicate} THEN 1 END) FROM t"),
        ] {
            let a = outcome(&sql, &with.answer(&sql, 1.0, 1));
            let b = outcome(&sql, &without.answer(&sql, 1.0, 1));
            assert_eq!(a, b, "{sql}");
        }
    }
}

/// A note on a literal outside a public domain comes from the query and
/// the description: the same whether the person it names is in the table.
#[test]
fn notes_on_literals_are_the_same_on_neighbouring_tables() {
    let described = description("kind = \"row\"").replace(
        "[columns.name]\ntype = \"text\"\n",
        "[columns.name]\ntype = \"text\"\ndomain = [\"ann\", \"bob\", \"cat\", \"dan\"]\n",
    );
    let with = Fixture::new("notes-with", "t.csv", PEOPLE, &described, 1000.0);
    let without = Fixture::new("notes-without", "t.csv", &without_dan(), &described, 1000.0);
    let sql = "SELECT COUNT(*) FROM t WHERE name = 'Dan' OR name IN ('dan', 'eve')";
    let notes = |fixture: &Fixture| fixture.answer(sql, 1.0, 1).unwrap().notes;
    let expected = [
        "'Dan' is not in the public domain of name: did you mean 'dan'?",
        "'eve' is not in the public domain of name, which lists 'ann', 'bob', 'cat', 'dan'",
    ];
    assert_eq!(notes(&with), expected);
    assert_eq!(notes(&without), expected);
}

/// With keys kept by a noisy threshold, the note says what the threshold
/// may withhold, never whether it withheld anything: the data have 4
/// groups with dan (alone in his) and 3 without, and nothing says which.
#[test]
fn notes_on_thresholded_groups_are_the_same_on_neighbouring_tables() {
    let with = table("threshold-notes-with", PEOPLE, "kind = \"row\"");
    let without = table("threshold-notes-without", &without_dan(), "kind = \"row\"");
    let sql = "SELECT name, COUNT(*) AS n FROM t GROUP BY name";
    let notes = |fixture: &Fixture, seed: u64| {
        let ledger = Ledger::open(&fixture.folder.join("delta.sqlite"), 1000.0, 0.5).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
        let settings = fixture::settings(1.0, 1e-3);
        let answer = fixture.engine.answer(sql, &settings, &ledger, &mut rng);
        answer.unwrap().notes
    };
    for seed in 0..4 {
        let shown = notes(&with, seed);
        assert!(
            shown.iter().any(|n| n.contains("noisy row count")),
            "{shown:?}"
        );
        assert_eq!(shown, notes(&without, seed));
    }
}

#[test]
fn conditional_aggregates_are_answered() {
    let t = table("conditional", PEOPLE, "kind = \"row\"");
    let answer = t
        .answer(
            "SELECT COUNT(CASE WHEN age > 40 THEN 1 END) AS older, \
             SUM(CASE WHEN name <> 'cat' THEN salary ELSE 0 END) AS paid FROM t",
            400.0,
            3,
        )
        .unwrap();
    let values: Vec<f64> = answer.rows[0]
        .iter()
        .map(|c| match c {
            Cell::Value { value, .. } => *value,
            Cell::Key(_) => f64::NAN,
        })
        .collect();
    assert!((values[0] - 2.0).abs() <= 1.0, "{values:?}");
    // ann 1000 + bob 2000 + dan clamped to 10000.
    assert!((values[1] - 13000.0).abs() < 500.0, "{values:?}");
}

#[test]
fn the_per_person_cap_applies_on_the_scan_whatever_from_says() {
    let mut csv = String::from("id,age,name,salary,score\n");
    for _ in 0..30 {
        csv.push_str("7,90,zed,1,1\n");
    }
    csv.push_str("8,40,amy,1,1\n");
    let t = table(
        "cap",
        &csv,
        "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1",
    );
    for sql in [
        "SELECT COUNT(*) FROM (SELECT age, age AS id FROM t) s WHERE age = 90",
        "SELECT COUNT(*) FROM (SELECT age, name AS id FROM t) AS s WHERE age = 90",
        "SELECT COUNT(*) FROM t WHERE age = 90",
    ] {
        let answer = t.answer(sql, 200.0, 5).unwrap();
        let Cell::Value { value, .. } = answer.rows[0][0] else {
            panic!()
        };
        assert!(value <= 2.0, "{sql}: one person counted {value} times");
    }
    let refused = t.answer(
        "SELECT COUNT(*) FROM (SELECT age, random() AS pid FROM t) s WHERE age = 90",
        1.0,
        5,
    );
    assert!(
        matches!(refused, Err(QueryError::NotPrivate(_))),
        "{refused:?}"
    );
    let raw = t.answer("SELECT COUNT(*) FROM __dpkit_raw_t", 1.0, 5);
    assert!(
        matches!(&raw, Err(QueryError::NotPrivate(m)) if m.contains("dpkit's own")),
        "{raw:?}"
    );
}

/// An integer id is one person only in its own text: `07` and `+7` are
/// not person 7 (read as 7, they made three people one, whose cap kept one
/// person's rows by another's). Such rows are no one's, and left out.
#[test]
fn an_integer_id_in_another_spelling_is_not_that_person() {
    let csv = "id,age,name,salary,score\n07,30,a,1,1\n+7,31,b,1,1\n7,32,c,1,1\n";
    let t = table(
        "id-spelling",
        csv,
        "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 5",
    );
    let answer = t.answer("SELECT COUNT(*) FROM t", 500.0, 5).unwrap();
    let Cell::Value { value, .. } = answer.rows[0][0] else {
        panic!()
    };
    assert_eq!(
        value.round(),
        1.0,
        "rows of 07, +7 and 7 counted as person 7"
    );
}

#[test]
fn column_types_come_from_the_description_not_the_data() {
    let odd = PEOPLE.replace("1,30,ann", "1,90.5,ann");
    let plain = table("types-plain", PEOPLE, "kind = \"row\"");
    let oddly = table("types-odd", &odd, "kind = \"row\"");
    let settings = fixture::settings(1.0, 0.0);
    for sql in [
        "SELECT SUM(age) FROM t",
        "SELECT age / 10 AS decade, COUNT(*) FROM t GROUP BY age / 10",
        "SELECT COUNT(*) FROM t WHERE age > 40",
    ] {
        let a = plain.engine.explain(sql, &settings).unwrap();
        let b = oddly.engine.explain(sql, &settings).unwrap();
        assert_eq!(a, b, "{sql}: the plan depends on one row");
    }
    let exact = |f: &Fixture| {
        let query = f.engine.plan("SELECT COUNT(age) FROM t").unwrap();
        dpkit_query::internals::exact(&f.engine, &query)
            .unwrap()
            .values[0][0]
            .to_f64()
    };
    assert_eq!(exact(&plain), 4.0);
    assert_eq!(exact(&oddly), 3.0, "the value that does not parse is NULL");
}

#[test]
fn keys_that_print_alike_are_released_once() {
    let t = table("nan-keys", PEOPLE, "kind = \"row\"");
    let key = "CASE WHEN age < 50 THEN acos(CAST(age AS DOUBLE)) \
               ELSE -acos(CAST(age AS DOUBLE)) END";
    let sql = format!("SELECT {key} AS k, COUNT(*) AS n FROM t GROUP BY {key}");
    let answer = t.answer(&sql, 1.0, 9).unwrap();
    let mut keys: Vec<String> = answer
        .rows
        .iter()
        .map(|row| match &row[0] {
            Cell::Key(k) => k.clone(),
            Cell::Value { .. } => panic!(),
        })
        .collect();
    let released = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), released, "a key was released twice: {keys:?}");
    let merged = ExactGroups::merged([
        (vec!["NaN".to_string()], vec![GridValue::whole(2)]),
        (vec!["NaN".to_string()], vec![GridValue::whole(3)]),
    ]);
    assert_eq!(
        (merged.keys.len(), merged.values[0][0]),
        (1, GridValue::whole(5))
    );
}

#[test]
fn staircase_noise_over_groups_divides_epsilon_by_the_groups_one_person_moves() {
    let settings = ReleaseSettings {
        mechanism: MechanismChoice::Staircase,
        ..fixture::settings(1.0, 1e-6)
    };
    for (k, share) in [(1u64, 1.0), (2, 0.5), (3, 1.0 / 3.0)] {
        let t = table(
            &format!("staircase-{k}"),
            PEOPLE,
            &format!("kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = {k}"),
        );
        let grouped = t
            .engine
            .plan("SELECT name, SUM(score) FROM t GROUP BY name")
            .unwrap();
        let noise = plan_noise(&grouped.measured, &settings).unwrap();
        let measured = noise.noises[0].epsilon; // ε/2: the sum and the threshold's count
        assert!(
            (noise.noises[0].noise_epsilon - measured * share).abs() < 1e-12,
            "k = {k}"
        );
        assert_eq!(noise.cost.epsilon(), 1.0);
        let single = t.engine.plan("SELECT SUM(score) FROM t").unwrap();
        let noise = plan_noise(&single.measured, &settings).unwrap();
        assert_eq!(noise.noises[0].noise_epsilon, 1.0, "one value keeps its ε");
    }
}

#[test]
fn sums_are_exact_however_the_magnitudes_are_crafted() {
    // Values near 2^40 with small parts that a floating-point sum rounds
    // away in an order-dependent way.
    let big = 2f64.powi(40);
    let mut csv = String::from("id,age,name,salary,score\n");
    let mut steps: i128 = 0;
    let grid = 1.0; // bounds of 2^41 sum on a grid of 1 (never coarser)
    for i in 0..2000 {
        let value = if i % 2 == 0 { big + 0.5 } else { -big + 0.75 };
        steps += (value / grid + 0.5).floor() as i128;
        csv.push_str(&format!("{i},1,x,1,{value}\n"));
    }
    let t = table("fp-sum", &csv, "kind = \"row\"");
    let query = t.engine.plan("SELECT SUM(score) FROM t").unwrap();
    let exact = dpkit_query::internals::exact(&t.engine, &query)
        .unwrap()
        .values[0][0]
        .to_f64();
    assert_eq!(exact, steps as f64 * grid);
}

#[test]
fn deep_expressions_are_refused_without_overflowing_the_stack() {
    let t = table("deep", PEOPLE, "kind = \"row\"");
    for depth in [100, 5_000, 30_000] {
        let chain = vec!["age"; depth].join(" + ");
        let nested = format!("{}age{}", "(".repeat(depth), ")".repeat(depth));
        for predicate in [format!("{chain} > 0"), format!("{nested} > 0")] {
            let sql = format!("SELECT COUNT(*) FROM t WHERE {predicate}");
            let error = t.answer(&sql, 1.0, 1).unwrap_err();
            assert!(
                matches!(error, QueryError::NotPrivate(_) | QueryError::Sql(_)),
                "{error}"
            );
        }
    }
    assert_eq!(
        t.ledger.state().unwrap().queries,
        0,
        "refusals spend nothing"
    );
    // A service's worker plans on its own stack. The longest chain the
    // size limit lets through reaches DataFusion's planner there, which
    // recurses through each of its levels before the total rewrite refuses
    // it by its depth; the parser refuses deep parentheses; a deeper query
    // is refused by its size first.
    let refusals = dpkit_query::spawn_planning_thread("worker".into(), || {
        let t = table("deep-worker", PEOPLE, "kind = \"row\"");
        let refusal = |predicate: String| {
            let sql = format!("SELECT COUNT(*) FROM t WHERE {predicate} > 0");
            t.engine.plan(&sql).map(|_| ()).unwrap_err().to_string()
        };
        let nested = |depth| format!("{}age{}", "(".repeat(depth), ")".repeat(depth));
        [
            refusal(vec!["age"; 990].join(" + ")),
            refusal(nested(490)),
            refusal(nested(30_000)),
        ]
    });
    let [chain, nested, too_long] = refusals.unwrap().join().unwrap();
    assert!(chain.contains("48 levels"), "{chain}");
    assert!(nested.contains("RecursionLimitExceeded"), "{nested}");
    assert!(too_long.contains("operators"), "{too_long}");
}

#[test]
fn errors_never_list_a_first_line_that_may_be_data() {
    // No header row: the first line is a person's data.
    let t = Fixture::new(
        "no-header",
        "t.csv",
        "secret-ann,4711\nbob,12\n",
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1.0\n",
        1.0,
    );
    // A name close to one in the first line makes DataFusion suggest it.
    let error = t
        .answer("SELECT COUNT(*) FROM t WHERE secret_ann = 1", 1.0, 1)
        .unwrap_err();
    let message = error.to_string();
    assert!(
        !message.contains("secret-ann") && !message.contains("4711"),
        "{message}"
    );
}

#[test]
fn text_values_are_cut_when_read_so_one_row_costs_a_bounded_amount() {
    let long = "z".repeat(100_000);
    let csv = format!("id,age,name,salary,score\n1,30,{long},1,1\n2,40,bob,1,1\n");
    let count = |t: &Fixture, length: usize| {
        let sql = format!("SELECT COUNT(CASE WHEN length(name) = {length} THEN 1 END) FROM t");
        let query = t.engine.plan(&sql).unwrap();
        dpkit_query::internals::exact(&t.engine, &query)
            .unwrap()
            .values[0][0]
            .to_f64()
    };
    // 1,024 characters unless the description says otherwise.
    let t = table("long-text", &csv, "kind = \"row\"");
    assert_eq!(count(&t, 1024), 1.0);
    let declared = description("kind = \"row\"").replace(
        "[columns.name]\ntype = \"text\"",
        "[columns.name]\ntype = \"text\"\nmax_length = 20000",
    );
    let t = Fixture::new("long-text-declared", "t.csv", &csv, &declared, 1000.0);
    assert_eq!(count(&t, 20_000), 1.0);
}

/// What one row can cost is bounded at planning, from public facts: a
/// text function on a column costs units per byte of its `max_length`
/// (4 bytes a character), and a query past `MAX_WORK` is refused, free.
#[test]
fn work_per_row_is_bounded_at_planning_from_public_lengths() {
    let t = table("work-bound", PEOPLE, "kind = \"row\"");
    let refused = |sql: &str| match t.engine.plan(sql) {
        Err(QueryError::NotPrivate(reason)) => reason.contains("units of work"),
        _ => false,
    };
    // upper costs 16 units a byte: 16 × 4,096 = 65,536, half the limit.
    let upper = "upper(name) = 'X'";
    assert!(!refused(&format!("SELECT COUNT(*) FROM t WHERE {upper}")));
    assert!(refused(&format!(
        "SELECT COUNT(*) FROM t WHERE {upper} OR {upper}"
    )));
    // A computed column's work counts wherever it is used.
    let inner = "(SELECT name, upper(name) AS u FROM t) s";
    assert!(!refused(&format!(
        "SELECT COUNT(*) FROM {inner} WHERE u = 'X'"
    )));
    assert!(refused(&format!(
        "SELECT COUNT(*) FROM {inner} WHERE u = 'X' OR u = 'Y'"
    )));
    // Strings built from literals count what they build.
    let half = format!("'{}'", "x".repeat(20_000));
    let built = format!("(SELECT name, concat({half}, {half}) AS x FROM t) s");
    assert!(!refused(&format!(
        "SELECT COUNT(*) FROM {built} WHERE x = name"
    )));
    assert!(refused(&format!(
        "SELECT COUNT(*) FROM {built} WHERE x = name OR x > name OR x < name OR x = 'a'"
    )));
    let max_work = dpkit_total::MAX_WORK;
    assert_eq!(max_work, 1 << 17);
}

/// `CASE WHEN <one row> THEN (CASE WHEN atan2(…) BETWEEN … THEN 1 … END) < 0
/// ELSE false END`, with `branches` numeric branches on `column`: the
/// timing attack of issue 63, whose numeric calls cost no unit before.
fn numeric_branches(target: &str, function: &str, column: &str, branches: u32) -> String {
    let arms: String = (0..branches)
        .map(|i| {
            let low = 0.5 + f64::from(i) * 1e-3;
            format!(
                " WHEN {function}({column}, 1.001) BETWEEN {low} AND {} THEN 1",
                low + 1e-3
            )
        })
        .collect();
    format!("CASE WHEN {target} THEN (CASE{arms} ELSE 0 END) < 0 ELSE false END")
}

fn refused_for_work(engine: &dpkit_query::QueryEngine, sql: &str) -> bool {
    match engine.plan(sql) {
        Err(QueryError::NotPrivate(reason)) => reason.contains("units of work"),
        Err(other) => panic!("{sql}: {other}"),
        Ok(_) => false,
    }
}

/// Issue 63's attacks, refused for free: numeric work on one person's rows,
/// multiplied by a join's fan-out (41 × 41 × 5 public rows per row of
/// Adult) or by a self-join of one person's visits. Before, numeric nodes
/// cost nothing and both were accepted at any ε; through `dpkit serve` the
/// first took 3,652 ms with the person against 46 ms without.
#[test]
fn numeric_work_through_joins_is_bounded_per_person() {
    let adult = dpkit_query::QueryEngine::open(fixture::adult_with_public_tables()).unwrap();
    let from = "FROM adult a JOIN countries c1 ON true JOIN countries c2 ON true \
                JOIN (SELECT * FROM education_levels WHERE typical_years <= 9) e ON true";
    let target = "a.age = 37 AND a.fnlwgt = 280464";
    for branches in [280, 1] {
        let case = numeric_branches(target, "atan2", "a.age", branches);
        let attack = format!("SELECT COUNT(*) {from} WHERE {case}");
        assert!(refused_for_work(&adult, &attack), "{branches} branches");
    }
    // A few branches on one row each, or a join that repeats no key, are
    // answered.
    let case = numeric_branches(target, "atan2", "a.age", 20);
    assert!(!refused_for_work(
        &adult,
        &format!("SELECT COUNT(*) FROM adult a WHERE {case}")
    ));
    assert!(!refused_for_work(
        &adult,
        "SELECT c.region, COUNT(*) FROM adult a JOIN countries c \
         ON a.\"native-country\" = c.country GROUP BY c.region"
    ));
    let clinic = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/clinic");
    let clinic = dpkit_query::Description::load(&clinic.join("clinic.toml")).unwrap();
    let clinic = dpkit_query::QueryEngine::open(clinic).unwrap();
    let case = numeric_branches("v1.person = 17", "pow", "v1.cost", 250);
    let attack = format!(
        "SELECT COUNT(*) FROM visits v1 JOIN visits v2 ON v1.person = v2.person WHERE {case}"
    );
    assert!(refused_for_work(&clinic, &attack));
}

/// The bound is per person: the same query costs each of a person's rows,
/// so a cap of one row allows what a cap of a thousand does not.
#[test]
fn the_work_bound_multiplies_by_the_rows_one_person_holds() {
    let case = numeric_branches("name = 'dan'", "atan2", "age", 10);
    let sql = format!("SELECT COUNT(*) FROM t WHERE {case}");
    let one = table("work-one-row", PEOPLE, "kind = \"row\"");
    assert!(!refused_for_work(&one.engine, &sql));
    let many = table(
        "work-many-rows",
        PEOPLE,
        "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1000",
    );
    assert!(refused_for_work(&many.engine, &sql));
}

/// Found by red-teaming the rewrite: each must be refused or answered alike
/// on both tables.
#[test]
fn renamed_columns_long_patterns_and_nested_subqueries_cannot_fail_or_overcount() {
    let with = table(
        "redteam-with",
        PEOPLE,
        "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 3",
    );
    let without = table(
        "redteam-without",
        &without_dan(),
        "kind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 3",
    );
    let long_like = format!("a%{}", "_".repeat(30_000));
    let c64 = vec!["c"; 64].join(", ");
    let n64 = vec!["name"; 64].join(", ");
    let queries = [
        // A computed text column named like a bounded integer one.
        "SELECT age, COUNT(*) FROM (SELECT CASE WHEN name = 'dan' THEN 'x' ELSE '20' END AS age \
         FROM t) s GROUP BY age"
            .to_string(),
        "SELECT age, COUNT(*) FROM (SELECT name = 'dan' AS age FROM t) s GROUP BY age".to_string(),
        // LIKE patterns are compiled by Arrow only when a row reaches them.
        format!("SELECT COUNT(*) FROM t WHERE CASE WHEN name = 'dan' THEN name LIKE '{long_like}' ELSE true END"),
        "SELECT COUNT(*) FROM t WHERE CASE WHEN name = 'dan' THEN name LIKE 'd#%' ESCAPE '#' ELSE true END"
            .to_string(),
        // Subqueries multiply sizes once DataFusion inlines them.
        format!(
            "SELECT COUNT(*) FROM (SELECT concat({c64}) AS d FROM (SELECT concat({n64}) AS c FROM t) s) u \
             WHERE d <> ''"
        ),
    ];
    for sql in &queries {
        let a = outcome(sql, &with.answer(sql, 1.0, 1));
        let b = outcome(sql, &without.answer(sql, 1.0, 1));
        assert_eq!(a, b, "{sql}");
        assert!(a.starts_with("refused"), "{sql}: {a}");
    }
    // A renamed "id" would count one person's rows as several people: it
    // is a distinct count of another column, whose Δ is the rows per
    // person (3), not the one of a count of people (1).
    let renamed = "SELECT COUNT(DISTINCT id) FROM (SELECT age AS id FROM t) s";
    let settings = dpkit_query::ReleaseSettings {
        epsilon: 1.0,
        delta: 0.0,
        mechanism: dpkit_query::MechanismChoice::Auto,
        confidence: 0.95,
    };
    let explained = with.engine.explain(renamed, &settings).unwrap();
    assert!(explained.contains("count of distinct id"), "{explained}");
    assert!(explained.contains("Δ = 3:"), "{explained}");
}

/// Counts the random words a release draws.
struct Counting(dpkit_core::rng::InsecureSeededRng, usize);

impl rand_core::TryRng for Counting {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        self.1 += 1;
        self.0.try_next_u32()
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.1 += 1;
        self.0.try_next_u64()
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.1 += dst.len().div_ceil(8);
        self.0.try_fill_bytes(dst)
    }
}

impl rand_core::TryCryptoRng for Counting {}

/// Red team: a key held by one person, never released, made a thresholded
/// MEDIAN keep a 2¹⁶-cell histogram per choice and run three exponential
/// mechanisms over it (+12 ms and 1.5 MiB per key in a debug build). Now
/// histograms hold only non-empty cells, and a key that fails the threshold
/// costs one noisy count: the work it adds does not depend on the grid.
#[test]
fn a_key_held_by_one_person_costs_one_noisy_count_in_a_thresholded_median() {
    let base: String = (0..40)
        .map(|i| format!("{},30,x,0,{i}.5\n", 100 + i))
        .collect();
    let header = "id,age,name,salary,score\n";
    let with = Fixture::new(
        "median-key-a",
        "t.csv",
        &format!("{header}{base}4,90,zed,0,1.25\n"),
        &description("kind = \"row\""),
        1000.0,
    );
    let without = Fixture::new(
        "median-key-b",
        "t.csv",
        &format!("{header}{base}"),
        &description("kind = \"row\""),
        1000.0,
    );
    let sql = "SELECT name, MEDIAN(score) FROM t GROUP BY name";
    let settings = ReleaseSettings {
        delta: 1e-6,
        ..fixture::settings(1.0, 0.0)
    };
    let words = |f: &Fixture| {
        let query = f.engine.plan(sql).unwrap();
        let plan = plan_noise(&query.measured, &settings).unwrap();
        let exact = dpkit_query::internals::exact(&f.engine, &query).unwrap();
        let cells: usize = exact.histograms.iter().flatten().map(Vec::len).sum();
        let mut rng = Counting(
            dpkit_core::rng::InsecureSeededRng::from_seed_for_testing(9),
            0,
        );
        let answer =
            dpkit_release::release(&query.measured, &plan, &exact, 0.95, &mut rng).unwrap();
        assert!(
            answer
                .rows
                .iter()
                .all(|row| row[0] != Cell::Key("zed".into()))
        );
        (rng.1, cells)
    };
    let ((words_with, cells_with), (words_without, cells_without)) =
        (words(&with), words(&without));
    // zed's key (released after x's, which sort first, so x's draws are the
    // same in both runs): one noisy count, a word or two, and one non-empty
    // cell in each of the median's three choices.
    assert!(
        words_with - words_without <= 3,
        "{words_with} vs {words_without} words"
    );
    assert_eq!(cells_with - cells_without, 3);
}

/// `dpkit query`'s path: an answer leaves no earlier than its deadline,
/// the run's end past it at a noisy time; a refusal at planning, which
/// reads no data, at once. Fails with the sleep taken out.
#[test]
fn the_command_lines_answers_wait_for_their_deadline() {
    use dpkit_query::timing::Deadlines;
    use std::time::{Duration, Instant};
    let t = table("deadline", PEOPLE, "kind = \"row\"");
    let deadlines = Deadlines {
        floor: Duration::from_millis(300),
        ..Deadlines::default()
    };
    let settings = fixture::settings(1.0, 0.0);
    let mut rng = InsecureSeededRng::from_seed_for_testing(3);
    let answer = |sql: &str, rng: &mut InsecureSeededRng| {
        let started = Instant::now();
        let outcome = t
            .engine
            .answer_by_deadline(sql, &settings, &t.ledger, &deadlines, rng);
        (started.elapsed(), outcome)
    };
    let (took, answered) = answer("SELECT COUNT(*) FROM t", &mut rng);
    assert!(answered.is_ok(), "{answered:?}");
    assert!(took >= Duration::from_millis(300), "left after {took:?}");
    let (took, refused) = answer("SELECT * FROM t", &mut rng);
    assert!(
        matches!(refused, Err(QueryError::NotPrivate(_))),
        "{refused:?}"
    );
    assert!(
        took < Duration::from_millis(300),
        "a refusal waited {took:?}"
    );
}

/// A join of private tables on the person reads its probe side whether or
/// not any row reaches its build side: DataFusion alone skips it when the
/// build side is empty, so a filter that only one person's rows pass would
/// show in the time the other table's scan takes. The engine's session
/// gives every such join a row that matches nothing (`probe_always.rs`,
/// whose tests count the rows read on neighbouring tables).
#[test]
fn joins_of_private_tables_read_their_probe_side_whatever_passes() {
    use datafusion::physical_plan::displayable;
    let clinic = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/clinic");
    let clinic = dpkit_query::Description::load(&clinic.join("clinic.toml")).unwrap();
    let clinic = dpkit_query::QueryEngine::open(clinic).unwrap();
    let session = dpkit_query::internals::session(&clinic);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for sql in [
        "SELECT COUNT(*) FROM people p JOIN visits v ON p.id = v.person WHERE p.age < 0",
        "SELECT COUNT(*) FROM visits v JOIN people p ON p.id = v.person WHERE v.cost < 0",
        "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON p.id = v.person WHERE p.age < 0",
    ] {
        let plan = runtime.block_on(async {
            let frame = session.sql(sql).await.unwrap();
            frame.create_physical_plan().await.unwrap()
        });
        let shown = displayable(plan.as_ref()).indent(true).to_string();
        assert!(
            shown.contains("HashJoinExec") && shown.contains("__dpkit_real_row@"),
            "{sql}\n{shown}"
        );
    }
}
