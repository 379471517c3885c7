//! The same private plans on SQLite, on a real PostgreSQL server and on a
//! real Spark cluster (both started by the tests): the same exact
//! aggregates as the embedded engine (on Adult and on extreme values), no
//! failure that depends on one person's row, the end-to-end auditor's
//! bounds, and one clear line, with nothing spent, for bad connections,
//! servers that go away mid-query and tables that differ from their
//! descriptions.

#[path = "support/at_the_bound.rs"]
mod at_the_bound;
#[path = "support/audits.rs"]
mod audits;
#[path = "support/clinic.rs"]
mod clinic;
#[path = "support/databases.rs"]
mod databases;
#[path = "support/fixture.rs"]
mod fixture;
#[path = "support/places.rs"]
mod places;
#[path = "support/postgres.rs"]
mod postgres;
#[path = "support/spark.rs"]
mod spark;

use std::path::PathBuf;
use std::time::Duration;

use databases::{ADULT_TYPES, adult_text, in_database, sqlite_file};
use dpkit_core::lattice::GridValue;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{
    Description, Ledger, MechanismChoice, QueryEngine, QueryError, ReleaseSettings, RunLimits,
};
use places::Place;
use postgres::Postgres;

fn folder(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dpkit-backends-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&path).unwrap();
    path
}

fn adult_csv() -> String {
    let (_, data) = adult_text();
    std::fs::read_to_string(data.join("adult.data.csv")).unwrap()
}

/// Queries every backend runs, covering the rewrite: counts, sums, means,
/// spreads, quantiles, filters, CASE, IN, LIKE, integer arithmetic, binned
/// and public-domain keys.
const SHARED: &[&str] = &[
    "SELECT sex, COUNT(*) AS n, SUM(age) AS s FROM adult GROUP BY sex",
    "SELECT race, AVG(\"hours-per-week\") AS h, COUNT(*) AS n FROM adult \
     WHERE age > 30 AND education LIKE 'B%' GROUP BY race",
    "SELECT COUNT(CASE WHEN \"capital-gain\" > 0 THEN 1 END) AS gains, \
     SUM(\"capital-loss\") AS losses FROM adult WHERE workclass IN ('Private', 'State-gov')",
    "SELECT sex, race, SUM(CASE WHEN age * 2 - \"education-num\" > 60 THEN age ELSE 0 END) AS x \
     FROM adult GROUP BY sex, race",
    "SELECT COUNT(*) AS n FROM adult WHERE age / 10 = 3 OR age % 7 = 0",
    "SELECT \"education-num\", COUNT(*) AS n FROM adult GROUP BY \"education-num\"",
    "SELECT MEDIAN(age) AS m, VAR_SAMP(age) AS v FROM adult",
    "SELECT sex, MIN(age) AS lo, MAX(age) AS hi FROM adult GROUP BY sex HAVING COUNT(*) > 10",
    "SELECT \"native-country\" AS c, COUNT(*) AS n FROM adult \
     WHERE \"native-country\" IN ('Mexico', 'Canada') GROUP BY \"native-country\"",
    "SELECT sex, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY \"hours-per-week\") AS p, \
     STDDEV_POP(\"capital-gain\") AS s FROM adult GROUP BY sex",
    "SELECT race, COUNT(DISTINCT occupation) AS o, SUM(age) / COUNT(*) AS r FROM adult \
     GROUP BY race",
];

/// Arithmetic on real numbers: IEEE 754 on Spark, but PostgreSQL raises
/// errors on a double's overflow and underflow, so it refuses them.
const REAL_ARITHMETIC: &[&str] = &[
    "SELECT sex, COUNT(*) AS n FROM adult \
     WHERE CAST(age AS DOUBLE) * 1.5 - \"hours-per-week\" / 4.0 > 40.0 GROUP BY sex",
    "SELECT COUNT(*) AS n FROM adult WHERE -(CAST(age AS DOUBLE) / 0.0) IS NULL \
     OR 1.0 / (0.0 * -1.0) IS NULL",
];

/// Queries only the embedded engine and SQLite run (math and text
/// functions, regular expressions).
const SQLITE_ONLY: &[&str] = &[
    "SELECT sex, COUNT(*) AS n FROM adult WHERE sqrt(CAST(age AS DOUBLE)) * 1.5 > 9.0 GROUP BY sex",
    "SELECT COUNT(*) AS n FROM adult WHERE lower(occupation) LIKE '%sales%' \
     AND length(\"native-country\") > 5 AND education ~ '^[A-Z]'",
];

type Group = (Vec<String>, Vec<GridValue>, Vec<dpkit_release::Histogram>);

/// The exact groups of `sql`, in key order (engines order groups their own way).
fn exact(engine: &QueryEngine, sql: &str) -> Vec<Group> {
    let query = engine.plan(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let groups =
        dpkit_query::internals::exact(engine, &query).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows: Vec<Group> = groups
        .keys
        .into_iter()
        .zip(groups.values)
        .zip(groups.histograms)
        .map(|((k, v), h)| (k, v, h))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

/// `database` gives `embedded`'s exact aggregates for every query, and
/// refuses `refused` at planning, saying why.
fn assert_same_exact(
    database: &QueryEngine,
    embedded: &QueryEngine,
    queries: &[&str],
    refused: &[&str],
) {
    for sql in queries {
        assert_eq!(exact(database, sql), exact(embedded, sql), "{sql}");
    }
    for sql in refused {
        match database.plan(sql) {
            Err(QueryError::NotPrivate(reason)) => {
                assert!(reason.contains("is not available on"), "{reason}")
            }
            other => panic!("{sql}: expected a refusal, got {other:?}"),
        }
    }
}

fn fixture_adult() -> Description {
    let (text, folder) = adult_text();
    Description::from_toml(&text, &folder).unwrap()
}

/// Adult loaded at `place`: its exact aggregates are the embedded engine's,
/// and `--explain` shows the SQL sent.
fn adult_runs_at(place: &Place<'_>, queries: &[&str], refused: &[&str]) {
    let (text, _) = adult_text();
    let engine = place.open("adult", &adult_csv(), ADULT_TYPES, &text);
    let embedded = QueryEngine::open(fixture_adult()).unwrap();
    assert_same_exact(&engine, &embedded, queries, refused);
    if !matches!(place, Place::Embedded) {
        let explained = engine.explain(SHARED[0], &settings(1.0)).unwrap();
        assert!(explained.contains("SQL sent to "), "{explained}");
    }
    if matches!(place, Place::Postgres(_) | Place::Spark(_)) {
        // A quantile's values are counted per cell by grouping (at most one
        // row per cell and group), never listed one by one.
        let explained = engine
            .explain("SELECT MEDIAN(age) AS m FROM adult", &settings(1.0))
            .unwrap();
        let sent = explained.split("SQL sent to").nth(1).unwrap();
        assert!(sent.contains("GROUP BY"), "{sent}");
        assert!(
            !sent.contains("array_agg") && !sent.contains("collect_list"),
            "{sent}"
        );
    }
}

/// Extreme values (NaN, ±∞, ±10³⁰⁸, subnormals, −0, NULL, out of bounds)
/// in real and integer columns, and text with quotes and backslashes;
/// SQLite stores NaN as NULL, so it gets the table without it.
fn extremes(with_nan: bool) -> String {
    let rows = [
        "1,a,NaN,5,o'neil",
        "2,a,Infinity,-5,d\\n",
        "3,a,-Infinity,200,back\\",
        "4,b,,50,",
        "5,b,1e308,,x",
        "6,b,-1e308,7,",
        "7,a,5e-324,100,",
        "8,b,-0.0,0,",
        "9,a,3.25,99,",
        "10,b,11,1,",
        "11,a,-11,2,",
        "12,b,1e-160,3,",
        "13,a,2.5e-155,4,",
        "14,b,9.999999999999998,98,",
        "15,a,1,1,true",
    ];
    let body: String = rows
        .iter()
        .filter(|r| with_nan || !r.contains("NaN"))
        .map(|r| format!("{r}\n"))
        .collect();
    format!("id,grp,score,n,note\n{body}")
}

const EXTREME_TYPES: databases::Types<'static> =
    &[("id", "INTEGER"), ("score", "REAL"), ("n", "INTEGER")];
const EXTREME_DESCRIPTION: &str = "[table]\nname = \"x\"\nfile = \"x.csv\"\n\
    [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1000.0\n\
    [columns.id]\ntype = \"integer\"\n\
    [columns.grp]\ntype = \"text\"\ndomain = [\"a\", \"b\"]\n\
    [columns.score]\ntype = \"real\"\nbounds = [-10, 10]\n\
    [columns.n]\ntype = \"integer\"\nbounds = [0, 100]\n";
const EXTREME_QUERIES: &[&str] = &[
    "SELECT grp, COUNT(score) AS c, SUM(score) AS s, AVG(score) AS a FROM x GROUP BY grp",
    "SELECT SUM(n) AS s, AVG(n) AS a, STDDEV(score) AS d, VAR_POP(n) AS v FROM x",
    "SELECT COUNT(*) AS c FROM x WHERE score > 0.5 OR score IS NULL OR n BETWEEN 3 AND 7",
    // Sums over no value at all are 0, in a group and without one.
    "SELECT grp, SUM(CASE WHEN grp = 'a' THEN n END) AS s, AVG(CASE WHEN grp = 'b' THEN score END) \
     AS a, VAR_SAMP(CASE WHEN id < 0 THEN n END) AS v FROM x GROUP BY grp",
    "SELECT SUM(n) AS s, AVG(score) AS a, STDDEV(n) AS d FROM x WHERE id > 100",
    "SELECT MEDIAN(score) AS m, COUNT(*) AS c, AVG(n) AS a FROM x WHERE id > 100",
    "SELECT grp, MEDIAN(n) AS m FROM x WHERE id > 100 GROUP BY grp",
    "SELECT SUM(COALESCE(score, 3.0)) AS s, COUNT(CASE WHEN n / (0 - 1) < -50 THEN 1 END) AS t \
     FROM x",
    // A key that is always NULL, in groups that exist and in none.
    "SELECT CASE WHEN n > 1000 THEN NULL END AS k, COUNT(*) AS c FROM x WHERE id = 1 \
     GROUP BY CASE WHEN n > 1000 THEN NULL END",
    "SELECT CASE WHEN n > 1000 THEN NULL END AS k, COUNT(*) AS c FROM x WHERE id = 42 \
     GROUP BY CASE WHEN n > 1000 THEN NULL END",
    // −0 and 0 are one group, whichever row a database meets first.
    "SELECT CASE WHEN n < 50 THEN -0.0 ELSE 0.0 END AS k, COUNT(*) AS c FROM x \
     GROUP BY CASE WHEN n < 50 THEN -0.0 ELSE 0.0 END",
    "SELECT CASE WHEN n = 5 THEN -0.0 ELSE 0.0 END AS k, COUNT(*) AS c FROM x \
     GROUP BY CASE WHEN n = 5 THEN -0.0 ELSE 0.0 END",
    // Text literals are the analyst's values, never SQL of theirs (Spark
    // reads a backslash in a literal as an escape).
    "SELECT COUNT(*) AS c FROM x WHERE note = 'd\\n' OR note = 'o''neil' OR note LIKE 'x%'",
    "SELECT COUNT(*) AS c FROM x WHERE note = 'back\\' OR note = ') OR (1 = 1) OR (''='",
    // sqlparser prints a quote after a backslash, and a pair of quotes, as
    // they are: this literal would end at `x\` and run the analyst's SQL,
    // and `o''neil` would be read as `o'neil`.
    "SELECT COUNT(*) AS c FROM x WHERE note = 'x\\'' OR 1 = 1 OR note = '' --'",
    "SELECT grp, COUNT(*) AS c FROM x WHERE note = 'o''''neil' OR note = '''' GROUP BY grp",
    // `-(-x)` printed bare is `--x`, a comment to the end of the line,
    // which a line break in a literal would end.
    "SELECT COUNT(*) AS c FROM x WHERE -(-(score)) > 1 OR note = 'line\nbreak'",
    "SELECT COUNT(*) AS c FROM x WHERE -(-(score)) > 1 OR note = 'a\n) OR (1 = 1) OR (note = '''",
    // Spark substitutes `${…}` in the SQL text, quoted or not.
    "SELECT COUNT(*) AS c FROM x WHERE note = '${spark.sql.variable.substitute}'",
    // Integer arithmetic at the ends of bigint: the remainder by −1 of
    // its least value is 0, its quotient and its magnitude are NULL, as
    // are overflows and zero divisors.
    "SELECT COUNT(CASE WHEN (id - id - 9223372036854775807 - 1) % (n - n - 1) = 0 THEN 1 END) AS m, \
     COUNT(CASE WHEN (id - id - 9223372036854775807 - 1) / (n - n - 1) IS NULL THEN 1 END) AS q, \
     COUNT(CASE WHEN abs(id - id - 9223372036854775807 - 1) IS NULL THEN 1 END) AS a, \
     COUNT(CASE WHEN abs(id - id - 9223372036854775807) > 0 THEN 1 END) AS b, \
     COUNT(CASE WHEN n * 92233720368547758 > 0 THEN 1 END) AS o, \
     COUNT(CASE WHEN (0 - n) * 92233720368547758 - 8 < 0 THEN 1 END) AS u, \
     COUNT(CASE WHEN n / (n - n) IS NULL AND n % (n - n) IS NULL THEN 1 END) AS z, \
     COUNT(CASE WHEN (id * 7 - 60) / 4 = -6 OR (id * 7 - 60) % 4 = -3 THEN 1 END) AS s FROM x",
    // Literals a database reads as 32-bit integers: their least value has
    // no 32-bit magnitude, and their sums pass 32 bits, on one row only.
    "SELECT COUNT(CASE WHEN abs(CASE WHEN id = 3 THEN -2147483648 END) > 0 THEN 1 END) AS a, \
     COUNT(CASE WHEN (CASE WHEN id = 3 THEN 2147483647 END) + 1 > 2147483647 THEN 1 END) AS p, \
     COUNT(CASE WHEN (CASE WHEN id = 3 THEN -2147483648 END) * -1 > 0 THEN 1 END) AS m, \
     COUNT(CASE WHEN (CASE WHEN id = 3 THEN -2147483648 END) / -1 > 0 THEN 1 END) AS q FROM x",
];

/// Quantiles of two different arguments: PostgreSQL and Spark count a
/// quantile's values by grouping them by cell too, which one cell
/// expression allows, so they refuse these.
const QUANTILE_PAIRS: &[&str] = &[
    "SELECT grp, MEDIAN(score) AS m, PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY n) AS q \
     FROM x GROUP BY grp",
    "SELECT grp, MEDIAN(n) AS m, MEDIAN(score) AS s FROM x GROUP BY grp",
];

/// Names that differ only in case: SQLite and Spark would take the alias
/// `"GRP"` for the column `grp` below it, and read a number where the plan
/// reads text (a failure that came, or not, with the rows the WHERE
/// keeps), if the alias were sent; it is sent as a name dpkit made.
const NAMES_BY_CASE: &str = "SELECT grp, COUNT(*) AS c FROM \
    (SELECT score AS \"GRP\", grp FROM x WHERE score > 3) AS u GROUP BY grp";

/// SQLite has no NaN; printed, a NaN literal would name a column.
const NAN_LITERAL: &str = "SELECT COUNT(*) AS c FROM \
    (SELECT n, score AS nan FROM x) AS u WHERE n < CAST('NaN' AS DOUBLE)";

/// Names a database would misread if they were sent: printed, `a""b`
/// would be read as `a"b`, and Spark substitutes `${…}`. They are sent as
/// names dpkit made, so the query means there what it means here.
const QUOTED_NAMES: &str = "SELECT COUNT(*) AS c FROM \
    (SELECT score AS \"a\"\"b\", n AS \"a\"\"\"\"b\", grp AS \"${grp}\" FROM x) AS s \
    WHERE \"a\"\"\"\"b\" > 5 AND \"${grp}\" IS NOT NULL";

/// Sums over names a printer would confuse with their neighbour's (`a""b`
/// printed in double quotes reads back as `a"b`, ``c``d`` in backticks as
/// ``c`d``): the spellings print their arguments and read them back, so
/// the names are renamed before, or a sum would read the other column.
const QUOTED_SUMS: &str = "SELECT SUM(\"a\"\"\"\"b\") AS s, SUM(\"c``d\") AS u FROM \
    (SELECT n AS \"a\"\"\"\"b\", score AS \"a\"\"b\", n AS \"c``d\", score AS \"c`d\" FROM x) AS t";

/// dpkit's own names are sent as they are, so an analyst may not write one.
const OWN_NAME: &str = "SELECT COUNT(*) AS c FROM (SELECT n AS \"__DPKIT_n\" FROM x) AS t";

/// Extreme values give the embedded engine's exact aggregates at `place`.
fn extremes_run_at(place: &Place<'_>) {
    let csv = extremes(!matches!(place, Place::Sqlite | Place::SqliteStrict));
    let engine = place.open("extremes", &csv, EXTREME_TYPES, EXTREME_DESCRIPTION);
    let embedded = Place::Embedded.open("extremes", &csv, EXTREME_TYPES, EXTREME_DESCRIPTION);
    if matches!(place, Place::Postgres(_) | Place::Spark(_)) {
        assert_same_exact(&engine, &embedded, EXTREME_QUERIES, QUANTILE_PAIRS);
    } else {
        let all = [EXTREME_QUERIES, QUANTILE_PAIRS].concat();
        assert_same_exact(&engine, &embedded, &all, &[]);
    }
    // Spellings that used an argument twice would double the SQL, and
    // the database's work, at each level of nesting (2^40 here); and
    // PostgreSQL's SQL, read back as sqlparser read it, took twice as long
    // to read at each level of nested calls. Answered, as the embedded
    // engine answers it.
    let nested = format!(
        "SELECT COUNT(*) AS c FROM x WHERE ((n{}) * 3 - 2) / 2 % 1000 > 0",
        " + 1".repeat(40)
    );
    assert_eq!(exact(&engine, &nested), exact(&embedded, &nested));
    for sql in [QUOTED_NAMES, NAMES_BY_CASE, QUOTED_SUMS] {
        assert_eq!(exact(&engine, sql), exact(&embedded, sql), "{sql}");
    }
    let own = engine.plan(OWN_NAME);
    assert!(
        matches!(&own, Err(QueryError::NotPrivate(m)) if m.contains("dpkit's own")),
        "{own:?}"
    );
    exact(&embedded, NAN_LITERAL);
    if !matches!(place, Place::Embedded) {
        // PostgreSQL and Spark refuse the cast from text first.
        let refused = engine.plan(NAN_LITERAL);
        assert!(
            matches!(&refused, Err(QueryError::NotPrivate(m)) if m.contains("is not available on")),
            "{NAN_LITERAL}: {refused:?}"
        );
    }
}

fn settings(epsilon: f64) -> ReleaseSettings {
    ReleaseSettings {
        epsilon,
        delta: 0.0,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    }
}

/// Four people; "dan" is the one the attacker targets (as in side_channels.rs).
const PEOPLE: &str = "id,age,name,salary,score\n\
    1,30,ann,1000,0.5\n\
    2,45,bob,2000,1.5\n\
    3,0,cat,-5,0.25\n\
    4,90,dan,9223372036854775807,-2.5\n";
const PEOPLE_TYPES: databases::Types<'static> = &[
    ("id", "INTEGER"),
    ("age", "INTEGER"),
    ("salary", "INTEGER"),
    ("score", "REAL"),
];
const PEOPLE_DESCRIPTION: &str = "[table]\nname = \"t\"\nfile = \"t.csv\"\n\
    [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1000.0\n\
    [columns.id]\ntype = \"integer\"\n\
    [columns.age]\ntype = \"integer\"\nbounds = [0, 120]\n\
    [columns.name]\ntype = \"text\"\n\
    [columns.salary]\ntype = \"integer\"\nbounds = [0, 10000]\n\
    [columns.score]\ntype = \"real\"\nbounds = [-10, 10]\n";

fn without_dan() -> String {
    PEOPLE
        .lines()
        .filter(|l| !l.contains("dan"))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Predicates that make a database raise an error on dan's row alone when
/// sent as written (SQLite: `abs` of the smallest integer; PostgreSQL:
/// bigint overflow, division by zero, a cast of text, a negative substring
/// length, a logarithm of zero, float overflow).
const ORACLES: &[&str] = &[
    "CASE WHEN name = 'dan' AND age <= 90 THEN 1/(age-age) ELSE 1 END = 1",
    "CASE WHEN name = 'dan' THEN age % (age-age) ELSE 1 END = 1",
    "CASE WHEN name = 'dan' THEN 1.0/(age-age) ELSE 1 END = 1",
    "CAST(CASE WHEN name = 'dan' THEN 'x' ELSE '1' END AS INT) = 1",
    "CAST(name AS BIGINT) IS NULL",
    "salary * 2 > 0",
    "salary + 1 > 0",
    "-(salary - 9223372036854775807 - 2) > 0",
    "abs(salary - 9223372036854775807 - 9223372036854775807) > 0",
    "abs(CASE WHEN name = 'dan' THEN -9223372036854775807 - 1 ELSE 0 END) >= 0",
    "substr(name, 1, age - 91) = 'x'",
    "ln(CAST(age AS DOUBLE) - 90) > 1",
    "power(CAST(age AS DOUBLE), 200) > 1",
    "CASE WHEN name = 'dan' THEN CAST('1e400' AS DOUBLE) ELSE 0 END > 1",
    "score * 1e308 * 10 > 0",
    "-(score * 1e300) * 1e10 < 0",
    "CASE WHEN name = 'dan' THEN score % (score - score) ELSE 1 END = 1",
    "name ~ 'd.n'",
    "name LIKE 'd%\\'",
];

/// What an outcome shows an analyst, without the noise; panics on a
/// failure that can depend on the data.
fn outcome(sql: &str, result: &dpkit_query::Result<dpkit_query::ReleasedTable>) -> String {
    match result {
        Ok(answer) => format!("answered {} row(s)", answer.rows.len()),
        Err(QueryError::NotPrivate(reason)) => format!("refused: {reason}"),
        Err(QueryError::Sql(reason)) => format!("SQL: {reason}"),
        Err(other) => panic!("{sql}: a data-dependent failure: {other}"),
    }
}

fn answer(
    engine: &QueryEngine,
    ledger: &Ledger,
    sql: &str,
) -> dpkit_query::Result<dpkit_query::ReleasedTable> {
    let mut rng = InsecureSeededRng::from_seed_for_testing(7);
    engine.answer(sql, &settings(1.0), ledger, &mut rng)
}

/// Every oracle gives the same kind of outcome with and without dan.
fn assert_no_oracle(with: &QueryEngine, without: &QueryEngine, dir: &std::path::Path) {
    let ledger = Ledger::open(&dir.join("ledger.sqlite"), 1000.0, 0.0).unwrap();
    for predicate in ORACLES {
        for sql in [
            format!("SELECT COUNT(*) FROM t WHERE {predicate}"),
            format!("SELECT COUNT(CASE WHEN {predicate} THEN 1 END) FROM t"),
        ] {
            let a = outcome(&sql, &answer(with, &ledger, &sql));
            // A refusal may quote the SQL sent, which names the table.
            let b =
                outcome(&sql, &answer(without, &ledger, &sql)).replace("without_dan", "with_dan");
            assert_eq!(a, b, "{sql}");
        }
    }
}

/// The oracles, on the four people and on them without dan, at `place`.
fn no_oracle_at(place: &Place<'_>) {
    let with = place.open("with_dan", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    let without = place.open(
        "without_dan",
        &without_dan(),
        PEOPLE_TYPES,
        PEOPLE_DESCRIPTION,
    );
    assert_no_oracle(
        &with,
        &without,
        &folder(&format!("oracle-{}", place.name())),
    );
}

/// A table whose columns differ from the description (a type, a missing
/// column) is one line naming both, before anything is run.
fn differences_are_one_line_at(place: &Place<'_>) {
    let types = &[("id", "INTEGER"), ("age", "TEXT"), ("salary", "INTEGER")];
    let csv = "id,age,name,salary\n1,30,ann,1000\n";
    let opened = place.try_open("differs", csv, types, PEOPLE_DESCRIPTION);
    let Err(QueryError::Description(message)) = opened else {
        panic!("{}: expected a description error", place.name());
    };
    assert!(!message.contains('\n'), "{message}");
    assert!(
        message.contains("column 'age' is text where the description declares integer"),
        "{message}"
    );
    assert!(message.contains("no column 'score'"), "{message}");
}

/// Every check at one place: Adult, extreme values, the oracles and the
/// auditor.
/// Sums past every old limit: 16,384 values of 2^62 (2^76 in all, past
/// 64 bits) and of 2^40 on a grid of 1 (2^54 steps, past a double's 2^53),
/// exact wherever they are computed.
fn totals_past_64_bits_at(place: &Place<'_>) {
    let rows: String = (0..16_384)
        .map(|i| format!("{i},4611686018427387904,1099511627776\n"))
        .collect();
    let csv = format!("id,big,wide\n{rows}");
    let description = "[table]\nname = \"s\"\nfile = \"s.csv\"\n\
        [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 10.0\n\
        [columns.id]\ntype = \"integer\"\n\
        [columns.big]\ntype = \"integer\"\nbounds = [0, 4611686018427387904]\n\
        [columns.wide]\ntype = \"real\"\nbounds = [0, 1099511627776]\n";
    let types = &[("id", "INTEGER"), ("big", "INTEGER"), ("wide", "REAL")];
    let engine = place.open("sums", &csv, types, description);
    let sql = "SELECT SUM(big) AS b, SUM(wide) AS w, COUNT(*) AS n FROM s";
    let groups = exact(&engine, sql);
    let values = &groups[0].1;
    // In whole units, whatever grid each was summed on.
    let whole = |value: GridValue| value.steps_on(0);
    assert_eq!(whole(values[0]), Some(1 << 76), "the sum of 2^62s");
    assert_eq!(whole(values[1]), Some(1 << 54), "the sum of 2^40s");
    assert_eq!(whole(values[2]), Some(16_384));
}

/// Ten million rows of 90 in one group (past the 2^53 grid steps where
/// sums once saturated), made where they live as the table `at_the_bound`
/// and opened by `description` through `source`: exact sums, and SUM and
/// AVG released with intervals that hold the truth.
fn ten_million_at_the_bound(description: &str, source: &str, base: &std::path::Path, place: &str) {
    let source = format!("{source}\nsource_table = \"at_the_bound\"");
    let engine = QueryEngine::open(in_database(description, &source, base)).unwrap();
    at_the_bound::assert_exact_and_honest(&engine, 10_000_000, place);
}

fn every_check_at(place: &Place<'_>, queries: &[&str], refused: &[&str]) {
    if !matches!(place, Place::Embedded) {
        differences_are_one_line_at(place);
    }
    totals_past_64_bits_at(place);
    adult_runs_at(place, queries, refused);
    extremes_run_at(place);
    no_oracle_at(place);
    audits::shapes_keep_their_epsilon(place);
    audits::the_cap_holds_where_the_rows_live(place);
    audits::bounds_per_group_hold_where_the_rows_live(place);
    audits::joins_keep_their_epsilon_where_the_rows_live(place);
    clinic_joins_land_at(place);
    public_rows_are_sent_as_read_at(place);
    if !matches!(place, Place::Embedded) {
        tables_that_would_read_rows_twice_are_refused_at(place);
    }
    random_caps_keep_each_row_equally_often_at(place);
}

/// By default (no `keep`, which is `"random"`) the cap keeps a uniformly
/// random 5 of one person's 20 rows, anew each run, where the rows live
/// (in the order of their values it would keep 0 to 4 every time, and
/// this fails with the draw taken out). Over the runs each value
/// is kept a quarter of the time; the χ² statistic over the 20 values is
/// below the χ²(19) quantile at 1 − 10⁻⁶ (64.4 by the Wilson–Hilferty
/// approximation) for a correct implementation, less often than that: rows
/// drawn without repeats within a run make the counts vary less than
/// multinomial ones.
fn random_caps_keep_each_row_equally_often_at(place: &Place<'_>) {
    let rows: String = (0..20).map(|v| format!("1,{v}\n")).collect();
    let csv = format!("id,v\n{rows}");
    let description = "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"id\"\n\
                       column = \"id\"\nmax_rows_per_person = 5\n\
                       [budget]\nepsilon = 1.0\n[columns.id]\ntype = \"integer\"\n\
                       [columns.v]\ntype = \"integer\"\nbounds = [0, 19]\n";
    let types: databases::Types<'_> = &[("id", "INTEGER"), ("v", "INTEGER")];
    let engine = place.open_tables("random_cap", (&[("t", &csv, types)], &[]), description);
    let query = engine
        .plan("SELECT v, COUNT(*) AS n FROM t GROUP BY v")
        .unwrap();
    let runs = match place {
        Place::Spark(_) => 100,
        _ => 400,
    };
    let mut kept = std::collections::BTreeMap::<String, f64>::new();
    for _ in 0..runs {
        let groups = dpkit_query::internals::exact(&engine, &query).unwrap();
        assert_eq!(groups.keys.len(), 5, "{}: five rows kept", place.name());
        for key in groups.keys {
            *kept.entry(key[0].clone()).or_default() += 1.0;
        }
    }
    let expected = runs as f64 / 4.0;
    let chi2: f64 = (0..20)
        .map(|v| kept.get(&v.to_string()).copied().unwrap_or(0.0))
        .map(|observed| (observed - expected).powi(2) / expected)
        .sum();
    // Wilson–Hilferty: k·(1 − 2/(9k) + z·√(2/(9k)))³, k = 19, z = 4.7534.
    let k = 19.0_f64;
    let threshold = k * (1.0 - 2.0 / (9.0 * k) + 4.7534 * (2.0 / (9.0 * k)).sqrt()).powi(3);
    assert!(
        chi2 < threshold,
        "{}: χ² = {chi2} ≥ {threshold}: {kept:?}",
        place.name()
    );
}

/// Refused when the dataset opens, in one line: a private table that reads
/// the table's rows again under a schema-qualified name, a public table
/// named like a database table a private table reads (its definition in
/// the statement would hide it), and a public column name with a quote.
fn tables_that_would_read_rows_twice_are_refused_at(place: &Place<'_>) {
    let schema = match place {
        Place::Postgres(_) => "public",
        Place::Spark(_) => "default",
        _ => "main",
    };
    let people = "id,age\n1,30\n2,40\n";
    let tables = [("t", people, &[("id", "INTEGER"), ("age", "INTEGER")][..])];
    let base = "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"id\"\n\
                column = \"id\"\nmax_rows_per_person = 1\n[budget]\nepsilon = 1.0\n\
                [columns.id]\ntype = \"integer\"\n";
    let again = |prefix: &str| {
        format!(
            "{base}[private.again]\nsource_table = \"{schema}.{prefix}_t\"\nperson = \"id\"\n\
             max_rows_per_person = 1\n[private.again.columns.id]\ntype = \"integer\"\n"
        )
    };
    let public = |name: &str| format!("{base}[public.{name}]\nfile = \"p.csv\"\n");
    let cases = [
        ("twice", again("twice"), "p,q\n1,2\n", "read the same"),
        (
            "named",
            public("named_t"),
            "p,q\n1,2\n",
            "the name of a database table",
        ),
        (
            "quoted",
            public("labels"),
            "\"p\"\"q\",r\n1,2\n",
            "a name with a quote",
        ),
    ];
    for (prefix, description, csv, says) in cases {
        let opened = place.try_open_tables(prefix, (&tables, &[("p.csv", csv)]), &description);
        match opened {
            Err(refusal) => assert!(refusal.to_string().contains(says), "{refusal}"),
            Ok(_) => panic!("{}: {prefix} was opened", place.name()),
        }
    }
}

/// A public table whose text has a quote, a backslash, a dollar sign and
/// accents, with an integer, a real and NULLs.
const LABELS: &str = "name,label,weight,rank\n\
    ann,it's,0.5,1\n\
    bob,back\\slash,1e-300,2\n\
    cat,$1 é,,3\n\
    dan,,-0.25,\n";

/// A private table joined with [`LABELS`] at `place`: the database is sent
/// the public rows as dpkit read them, and gives the embedded engine's
/// exact aggregates for keys, filters and sums through the join.
fn public_rows_are_sent_as_read_at(place: &Place<'_>) {
    let description = format!(
        "{PEOPLE_DESCRIPTION}[public.labels]\nfile = \"labels.csv\"\n\
         [public.labels.columns.weight]\ntype = \"real\"\n\
         [public.labels.columns.rank]\ntype = \"integer\"\n"
    );
    let tables = [("t", PEOPLE, PEOPLE_TYPES)];
    let public = [("labels.csv", LABELS)];
    let engine = place.open_tables("labels", (&tables, &public), &description);
    let embedded = Place::Embedded.open_tables(
        &format!("labels-{}", place.name()),
        (&tables, &public),
        &description,
    );
    let queries = [
        "SELECT l.label, COUNT(*) AS n, SUM(t.age) AS s FROM t JOIN labels l \
         ON t.name = l.name GROUP BY l.label",
        "SELECT l.rank, COUNT(*) AS n FROM t LEFT JOIN labels l ON t.name = l.name \
         GROUP BY l.rank",
        "SELECT COUNT(*) AS n FROM t JOIN labels l ON t.name = l.name \
         WHERE l.weight > 0 AND l.label <> 'it''s'",
    ];
    assert_same_exact(&engine, &embedded, &queries, &[]);
}

/// The clinic's people and visits as two tables of one database, joined
/// on the person and with the public departments where the rows live: the
/// answers at ε = 1000 land on the exact truncated aggregates computed
/// independently in SQLite.
fn clinic_joins_land_at(place: &Place<'_>) {
    let csv = |table: &str| {
        std::fs::read_to_string(clinic::clinic_folder().join(format!("{table}.csv"))).unwrap()
    };
    let rows: Vec<String> = clinic::PRIVATE_TABLES.iter().map(|(t, _)| csv(t)).collect();
    let tables: Vec<places::Loaded<'_>> = clinic::PRIVATE_TABLES
        .iter()
        .zip(&rows)
        .map(|((table, types), rows)| (*table, rows.as_str(), *types))
        .collect();
    let departments = csv("departments");
    let public = [("departments.csv", departments.as_str())];
    let engine = place.open_tables("clinic", (&tables, &public), &clinic::clinic_text());
    clinic::private_joins_land(&engine);
    clinic::public_joins_land(&engine);
    // The marginals of a synthetic table, counted where the rows live, are
    // the embedded engine's, at the caps' sensitivity.
    let embedded =
        Place::Embedded.open_tables("clinic", (&tables, &public), &clinic::clinic_text());
    for (table, cap) in [("people", 1.0), ("visits", 12.0)] {
        let (counted, sensitivity) = clinic::synth_marginals(&engine, table);
        assert_eq!(sensitivity, cap, "{}", place.name());
        assert_eq!(
            counted,
            clinic::synth_marginals(&embedded, table).0,
            "{}",
            place.name()
        );
        assert!(counted.iter().all(|m| m.iter().sum::<u64>() > 0));
    }
    if !matches!(place, Place::Embedded) {
        // One statement reads both tables where they live, and is sent the
        // public table's rows.
        let sql = "SELECT d.kind, COUNT(*) AS n FROM people p JOIN visits v ON v.person = p.id \
                   JOIN departments d ON v.department = d.department GROUP BY d.kind";
        let sent = engine.explain(sql, &settings(1.0)).unwrap();
        for table in ["clinic_people", "clinic_visits", "'paediatrics'"] {
            assert!(sent.contains(table), "{}: {sent}", place.name());
        }
    }
}

/// The per-person cap planted after FROM, and joins of private tables on
/// any key, are caught by the auditor on every engine, each database a
/// server of its own that this test starts.
#[cfg(feature = "planted-holes")]
#[test]
fn a_cap_after_from_is_caught_where_the_rows_live() {
    let caught = |place: &Place<'_>| {
        audits::a_cap_after_from_is_caught(place);
        audits::a_join_on_any_key_is_caught(place);
    };
    caught(&Place::Embedded);
    caught(&Place::Sqlite);
    caught(&Place::SqliteStrict);
    let server = Postgres::start("planted");
    caught(&Place::Postgres(&server));
    let spark = spark::Spark::start("planted");
    caught(&Place::Spark(&spark));
}

const CASES: &str = "id,grp\n1,A\n2,a\n3,a\n4,b\n";
const CASES_DESCRIPTION: &str = "[table]\nname = \"c\"\nfile = \"c.csv\"\n\
    [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 10.0\ndelta = 0.5\n\
    [columns.id]\ntype = \"integer\"\n[columns.grp]\ntype = \"text\"\n";

/// Text compares byte by byte wherever it lives: under a case-insensitive
/// collation a database would put `a` and `A` in one group, keyed as
/// whichever row it met first. `source` names the table `cases`, whose
/// `grp` column has such a collation.
fn collations_are_bytewise(source: &str, base: &std::path::Path) {
    let source = format!("{source}\nsource_table = \"cases\"");
    let engine = QueryEngine::open(in_database(CASES_DESCRIPTION, &source, base)).unwrap();
    let embedded = Place::Embedded.open("cases", CASES, &[("id", "INTEGER")], CASES_DESCRIPTION);
    let queries = [
        "SELECT grp, COUNT(*) AS n FROM c GROUP BY grp",
        "SELECT COUNT(*) AS n FROM c WHERE grp = 'a' OR grp < 'B'",
    ];
    assert_same_exact(&engine, &embedded, &queries, &[]);
}

#[test]
fn the_embedded_engine_passes_the_checks_every_database_passes() {
    let all: Vec<&str> = [SHARED, REAL_ARITHMETIC, SQLITE_ONLY].concat();
    every_check_at(&Place::Embedded, &all, &[]);
}

#[test]
fn sqlite_runs_the_private_plans_of_the_embedded_engine() {
    let all: Vec<&str> = [SHARED, REAL_ARITHMETIC, SQLITE_ONLY].concat();
    every_check_at(&Place::Sqlite, &all, &[]);
    let dir = folder("collations");
    let connection = rusqlite::Connection::open(dir.join("cases.sqlite")).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE cases (id INTEGER, grp TEXT COLLATE NOCASE); \
             INSERT INTO cases VALUES (1, 'A'), (2, 'a'), (3, 'a'), (4, 'b')",
        )
        .unwrap();
    collations_are_bytewise("sqlite = \"cases.sqlite\"", &dir);
}

/// A STRICT table's columns are read as stored (SQLite refused every
/// other type on writing): the same answers, with no look at each value's
/// type in the SQL sent.
#[test]
fn a_strict_sqlite_table_is_read_as_stored() {
    let all: Vec<&str> = [SHARED, REAL_ARITHMETIC, SQLITE_ONLY].concat();
    every_check_at(&Place::SqliteStrict, &all, &[]);
    let strict = Place::SqliteStrict.open("people", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    let loose = Place::Sqlite.open("people", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    let sql = "SELECT SUM(age) AS s, AVG(score) AS a FROM t WHERE name <> 'eve'";
    let sent = |engine: &QueryEngine| engine.explain(sql, &settings(1.0)).unwrap();
    assert!(!sent(&strict).contains("typeof"), "{}", sent(&strict));
    assert!(sent(&loose).contains("typeof"), "{}", sent(&loose));
}

/// Texts longer than their `max_length`, which SQLite reads cut in the
/// typed read of the table (`__dpkit_cut_…`, not a `SUBSTR` per use), give
/// the embedded engine's groups, conditions and lengths on both kinds of
/// table; an id longer than its `max_length` is still no one's, its check
/// cutting one character further than the read does.
#[test]
fn sqlite_cuts_long_texts_as_the_embedded_engine_does() {
    let csv = "id,word,n\nbob,abcdX,1\nbob,abcdY,2\nann,abc,3\nalice,abcdZ,4\n\
               cy,é€ab€,5\ncy,12345,6\ndd,abc,7\n";
    let types: databases::Types<'static> = &[("n", "INTEGER")];
    let description = "[table]\nname = \"t\"\nfile = \"t.csv\"\n\
        [privacy_unit]\nkind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 2\n\
        [budget]\nepsilon = 1000.0\n\
        [columns.id]\ntype = \"text\"\nmax_length = 3\n\
        [columns.word]\ntype = \"text\"\nmax_length = 4\n\
        domain = [\"abcd\", \"abc\", \"é€ab\", \"1234\"]\n\
        [columns.n]\ntype = \"integer\"\nbounds = [0, 10]\n";
    let queries = [
        "SELECT word, COUNT(*) AS c, SUM(n) AS s FROM t GROUP BY word",
        "SELECT COUNT(*) AS c, SUM(n) AS s FROM t",
        "SELECT COUNT(*) AS c FROM t WHERE word = 'abcd'",
        "SELECT COUNT(*) AS c, SUM(n) AS s FROM t WHERE length(word) = 4",
    ];
    let embedded = Place::Embedded.open("longtexts", csv, types, description);
    // bob's, ann's, cy's and dd's rows; alice is no one.
    let all = exact(&embedded, queries[1]);
    assert_eq!(all[0].1[0].steps_on(0), Some(6));
    for place in [Place::Sqlite, Place::SqliteStrict] {
        let engine = place.open("longtexts", csv, types, description);
        assert_same_exact(&engine, &embedded, &queries, &[]);
        let sent = engine.explain(queries[0], &settings(1.0)).unwrap();
        assert!(sent.contains("__dpkit_cut_word"), "{sent}");
    }
}

/// A person id that holds a NUL (where SQLite's `SUBSTR` stops) is no one's
/// on SQLite, never read as the id before its NUL, someone else's; and a
/// table with a column named as dpkit names its own (`__dpkit_cut_id`, the
/// cut of `id` that dpkit reads) is refused when opened, in one line.
#[test]
fn sqlite_ids_with_a_nul_are_no_ones_and_own_column_names_are_refused() {
    let dir = folder("nul-ids");
    let connection = rusqlite::Connection::open(dir.join("people.sqlite")).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE people (id TEXT, n INTEGER); \
             INSERT INTO people VALUES ('ab', 1), ('ab' || char(0) || 'zzzzz', 2), \
             ('a' || char(0) || 'b', 3), ('cd', 4); \
             CREATE TABLE shadowed (id TEXT, __DPKIT_cut_id TEXT); \
             INSERT INTO shadowed VALUES ('ab', 'p1'), ('ab', 'p2')",
        )
        .unwrap();
    let open = |table: &str| {
        let text = format!(
            "[table]\nname = \"t\"\nsqlite = \"people.sqlite\"\nsource_table = \"{table}\"\n\
             [privacy_unit]\nkind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 2\n\
             [budget]\nepsilon = 1000.0\n[columns.id]\ntype = \"text\"\nmax_length = 3\n"
        );
        QueryEngine::open(Description::from_toml(&text, &dir).unwrap())
    };
    let engine = open("people").unwrap();
    // ab's row and cd's.
    let count = exact(&engine, "SELECT COUNT(*) AS c FROM t");
    assert_eq!(count[0].1[0].steps_on(0), Some(2));
    let refused = open("shadowed");
    assert!(
        matches!(&refused, Err(QueryError::Description(m))
            if m.contains("dpkit's own prefix") && !m.contains('\n')),
        "{:?}",
        refused.err()
    );
}

/// On SQLite an average's sum and count are one call of dpkit's sum per
/// row: the sum counts the values it is handed (`counted_sums`), and SQLite
/// computes identical aggregate calls of a statement once. Its answers are
/// the embedded engine's (the extremes and Adult above, both kinds of
/// table); here, what SQLite makes of the SQL sent.
#[test]
fn a_sqlite_average_makes_one_call_per_row_for_its_sum_and_count() {
    let dir = folder("one-call");
    // A real column, and an integer one (summed as a cast to a double).
    let sql = "SELECT grp, COUNT(*) AS c, AVG(score) AS a, AVG(n) AS m FROM x GROUP BY grp";
    for (file, strict) in [("loose.sqlite", false), ("strict.sqlite", true)] {
        databases::sqlite_file(
            &dir.join(file),
            "x",
            &extremes(false),
            EXTREME_TYPES,
            strict,
        );
        let text = EXTREME_DESCRIPTION.replace("file = \"x.csv\"", &format!("sqlite = \"{file}\""));
        let engine = QueryEngine::open(Description::from_toml(&text, &dir).unwrap()).unwrap();
        let explained = engine.explain(sql, &settings(1.0)).unwrap();
        let sent = explained
            .split("only its aggregates come back):\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap();
        let connection = rusqlite::Connection::open(dir.join(file)).unwrap();
        let sums: Vec<&str> = sent
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("dpkit_clamped_sum_"))
            .collect();
        assert!(!sums.is_empty(), "{sent}");
        for name in &sums {
            connection
                .create_aggregate_function(*name, 1, Default::default(), NoSum)
                .unwrap();
        }
        let mut explain = connection.prepare(&format!("EXPLAIN {sent}")).unwrap();
        let steps: Vec<String> = explain
            .query_map([], |row| row.get::<_, String>(1))
            .unwrap()
            .map(Result::unwrap)
            .filter(|op| op == "AggStep")
            .collect();
        // COUNT(*), and each sum with its count.
        assert_eq!(steps.len(), 3, "{file}: {sent}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An aggregate that sums nothing: SQLite needs a function of each name to
/// prepare a statement.
struct NoSum;

impl rusqlite::functions::Aggregate<i64, i64> for NoSum {
    fn init(&self, _: &mut rusqlite::functions::Context<'_>) -> rusqlite::Result<i64> {
        Ok(0)
    }

    fn step(&self, _: &mut rusqlite::functions::Context<'_>, _: &mut i64) -> rusqlite::Result<()> {
        Ok(())
    }

    fn finalize(
        &self,
        _: &mut rusqlite::functions::Context<'_>,
        _: Option<i64>,
    ) -> rusqlite::Result<i64> {
        Ok(0)
    }
}

/// Ten million values at the bound in a SQLite file, in a plain table and
/// in a STRICT one.
#[test]
fn sqlite_sums_ten_million_values_at_the_bound_exactly() {
    let dir = folder("ten-million");
    for (file, strict) in [("plain.sqlite", ""), ("strict.sqlite", " STRICT")] {
        let connection = rusqlite::Connection::open(dir.join(file)).unwrap();
        connection
            .execute_batch(&format!(
                "CREATE TABLE at_the_bound (v INTEGER, w REAL){strict}; \
                 WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c \
                 WHERE i < 10000000) INSERT INTO at_the_bound SELECT 90, 90.0 FROM c"
            ))
            .unwrap();
        drop(connection);
        let source = format!("sqlite = \"{file}\"");
        ten_million_at_the_bound(at_the_bound::DESCRIPTION, &source, &dir, file);
    }
    // Two databases of ten million rows: 227 MB that every run left behind.
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A STRICT table that is replaced by a loose one after it was opened (its
/// columns could now hold any type) is refused before it runs: one line,
/// nothing spent.
#[test]
fn a_sqlite_table_that_stops_being_strict_is_refused() {
    let dir = folder("no-longer-strict");
    let file = dir.join("t.sqlite");
    sqlite_file(&file, "t", PEOPLE, PEOPLE_TYPES, true);
    let description = in_database(PEOPLE_DESCRIPTION, "sqlite = \"t.sqlite\"", &dir);
    let engine = QueryEngine::open(description).unwrap();
    let ledger = Ledger::open(&dir.join("ledger.sqlite"), 10.0, 0.0).unwrap();
    let sql = "SELECT COUNT(*) AS n, SUM(age) AS s FROM t";
    answer(&engine, &ledger, sql).unwrap();
    let before = ledger.state().unwrap().spent_epsilon;
    // Replaced in place (the engine keeps its file open), by a loose copy
    // with a text where the description declares an integer.
    let writer = rusqlite::Connection::open(&file).unwrap();
    writer
        .execute_batch(
            "ALTER TABLE t RENAME TO old; CREATE TABLE t AS SELECT * FROM old; DROP TABLE old; \
             INSERT INTO t VALUES (5, 'old', 'eve', 1, 0.0)",
        )
        .unwrap();
    let refused = answer(&engine, &ledger, sql);
    assert!(
        matches!(&refused, Err(QueryError::Description(m)) if m.contains("no longer STRICT") && !m.contains('\n')),
        "{refused:?}"
    );
    assert_eq!(
        ledger.state().unwrap().spent_epsilon,
        before,
        "a refusal spends nothing"
    );
}

/// A STRICT table's column added later with a default of another type
/// (`ALTER TABLE … ADD COLUMN v INTEGER DEFAULT 1.5`, which Debian's SQLite
/// 3.40.1 accepts and which leaves the schema below, each older row reading
/// the default) is read through its type, as in a loose table: 1.5 and
/// `'n/a'` are NULL there as in the embedded engine. (The bundled SQLite
/// refuses such an ALTER, so the test writes the schema it leaves.)
/// A column read as stored that gains a default after opening (as a
/// column dropped and added again would) is refused for free.
#[test]
fn a_strict_column_added_with_a_default_is_read_through_its_type() {
    let dir = folder("strict-defaults");
    let file = dir.join("t.sqlite");
    let writer = rusqlite::Connection::open(&file).unwrap();
    writer
        .execute_batch(
            "CREATE TABLE t (id INTEGER, k INTEGER) STRICT; \
             INSERT INTO t (id) VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (10); \
             PRAGMA writable_schema = ON; \
             UPDATE sqlite_schema SET sql = 'CREATE TABLE t (id INTEGER, k INTEGER, \
             v INTEGER DEFAULT 1.5, w REAL DEFAULT ''n/a'') STRICT' WHERE name = 't'; \
             PRAGMA writable_schema = OFF;",
        )
        .unwrap();
    drop(writer);
    let writer = rusqlite::Connection::open(&file).unwrap();
    writer
        .execute_batch("INSERT INTO t VALUES (11, 1, 3, 2.0), (12, 1, 3, 2.0), (13, 1, 3, 2.0)")
        .unwrap();
    let description = "[table]\nname = \"t\"\nfile = \"t.csv\"\n\
        [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 10.0\n\
        [columns.id]\ntype = \"integer\"\n[columns.k]\ntype = \"integer\"\nbounds = [0, 9]\n\
        [columns.v]\ntype = \"integer\"\nbounds = [0, 90]\n\
        [columns.w]\ntype = \"real\"\nbounds = [0, 90]\n";
    let engine =
        QueryEngine::open(in_database(description, "sqlite = \"t.sqlite\"", &dir)).unwrap();
    let sql = "SELECT SUM(v) AS v, COUNT(v) AS nv, SUM(w) AS w, COUNT(w) AS nw FROM t";
    let whole: Vec<Option<i128>> = exact(&engine, sql)[0]
        .1
        .iter()
        .map(|v| v.steps_on(0))
        .collect();
    assert_eq!(whole, [Some(9), Some(3), Some(6), Some(3)]);
    let ledger = Ledger::open(&dir.join("ledger.sqlite"), 10.0, 0.0).unwrap();
    writer
        .execute_batch(
            "PRAGMA writable_schema = ON; \
             UPDATE sqlite_schema SET sql = 'CREATE TABLE t (id INTEGER, k INTEGER DEFAULT 2, \
             v INTEGER DEFAULT 1.5, w REAL DEFAULT ''n/a'') STRICT' WHERE name = 't'; \
             PRAGMA writable_schema = OFF; PRAGMA schema_version = 1000;",
        )
        .unwrap();
    let refused = answer(&engine, &ledger, "SELECT SUM(k) AS k FROM t");
    assert!(
        matches!(&refused, Err(QueryError::Description(m)) if m.contains("no longer STRICT")),
        "{refused:?}"
    );
    assert_eq!(
        ledger.state().unwrap().spent_epsilon,
        0.0,
        "refused for free"
    );
}

#[test]
fn postgres_runs_the_private_plans_of_the_embedded_engine() {
    let server = Postgres::start("checks");
    let refused: Vec<&str> = [REAL_ARITHMETIC, SQLITE_ONLY].concat();
    every_check_at(&Place::Postgres(&server), SHARED, &refused);
    server.psql(
        "CREATE COLLATION dpkit_ci (provider = icu, locale = 'und-u-ks-level2', \
         deterministic = false); CREATE TABLE cases (id BIGINT, grp TEXT COLLATE dpkit_ci); \
         INSERT INTO cases VALUES (1, 'A'), (2, 'a'), (3, 'a'), (4, 'b')",
    );
    let source = format!("postgres = \"{}\"", server.connection());
    collations_are_bytewise(&source, &server.folder);
    server.psql(
        "CREATE TABLE at_the_bound AS SELECT CAST(90 AS BIGINT) AS v, \
         CAST(90 AS DOUBLE PRECISION) AS w FROM generate_series(1, 10000000)",
    );
    let description = at_the_bound::DESCRIPTION;
    ten_million_at_the_bound(description, &source, &server.folder, "postgres");
    sql_ascii_is_refused_when_opened(&server);
}

/// A database in SQL_ASCII keeps whatever bytes were written: a text that
/// is not UTF-8 would fail to be read after the charge (a red-team helper
/// read one person's largest order so, a bit per query). Refused when
/// opened, for free.
fn sql_ascii_is_refused_when_opened(server: &Postgres) {
    server.psql(
        "CREATE DATABASE unchecked ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' \
         TEMPLATE template0",
    );
    let connection = server
        .connection()
        .replace("dbname=postgres", "dbname=unchecked");
    let source = format!("postgres = \"{connection}\"\nsource_table = \"t\"");
    let opened = QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &server.folder));
    match opened {
        Err(QueryError::Description(message)) => {
            assert!(message.contains("SQL_ASCII"), "{message}")
        }
        other => panic!("expected SQL_ASCII to be refused, got {:?}", other.err()),
    }
}

/// PostgreSQL over TLS as `sslmode` says: a server that refuses every
/// connection without TLS answers under `prefer` (the default), `require`
/// and `verify-full` with the authority that signed its certificate for
/// 127.0.0.1; `verify-full` with another authority, a root certificate
/// that is not there, and `disable` are one line each, no password shown.
#[test]
fn postgres_connections_use_tls_as_sslmode_says() {
    let server = Postgres::start_tls_only("tls");
    Place::Postgres(&server).open("t", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    let open = |settings: &str| {
        let source = format!(
            "postgres = \"{} password=secret-pw {settings}\"\nsource_table = \"t\"",
            server.connection()
        );
        QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &server.folder))
    };
    let ca = server.authority("ca").display().to_string();
    for settings in [
        "",
        "sslmode=require",
        &format!("sslmode=verify-full sslrootcert={ca}"),
    ] {
        let engine = open(settings).unwrap_or_else(|e| panic!("{settings}: {e}"));
        assert_eq!(
            exact(&engine, "SELECT COUNT(*) AS n FROM t")[0].1,
            [GridValue::whole(4)]
        );
    }
    let other = server.authority("other").display().to_string();
    for settings in [
        format!("sslmode=verify-full sslrootcert={other}"),
        format!("sslmode=verify-ca sslrootcert={other}"),
        "sslmode=verify-full sslrootcert=/no/such/ca.pem".to_string(),
        "sslmode=disable".to_string(),
    ] {
        let Err(error) = open(&settings) else {
            panic!("{settings}: connected");
        };
        let message = error.to_string();
        assert!(
            !message.contains("secret-pw") && !message.contains('\n'),
            "{settings}: {message}"
        );
    }
}

/// A table whose columns change after dpkit opened it (an integer column
/// now text, whose cast could fail on one row) is refused at planning,
/// free; a statement whose result types are not what the plan reads is
/// refused too, before anything runs.
#[test]
fn types_are_checked_before_anything_is_spent() {
    let server = Postgres::start("types");
    let engine = Place::Postgres(&server).open("t", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    let ledger = Ledger::open(&folder("types").join("ledger.sqlite"), 10.0, 0.0).unwrap();
    let sql = "SELECT COUNT(*) AS n, SUM(age) AS s FROM t";
    answer(&engine, &ledger, sql).unwrap();
    let spent = ledger.state().unwrap().spent_epsilon;
    server.psql("ALTER TABLE t ALTER COLUMN age TYPE text; INSERT INTO t (age) VALUES ('old')");
    let refused = answer(&engine, &ledger, sql);
    assert!(
        matches!(&refused, Err(QueryError::Description(m)) if m.contains("changed since")),
        "{refused:?}"
    );
    assert_eq!(
        ledger.state().unwrap().spent_epsilon,
        spent,
        "a refusal spends nothing"
    );
}

/// The result's types are compared with the plan's at planning, as the
/// server says it will return them: a server whose `count` is not
/// PostgreSQL's (an aggregate of that name earlier on the search path,
/// which returns text) is refused, free, before anything runs. Without the
/// comparison the query would run under its charge and fail.
#[test]
fn result_types_other_than_the_plans_are_refused_before_anything_is_spent() {
    let server = Postgres::start("result-types");
    server.psql(
        "CREATE FUNCTION public.tally(text, integer) RETURNS text LANGUAGE sql IMMUTABLE \
         AS 'SELECT $1 || ''x'''; \
         CREATE AGGREGATE public.count(integer) (SFUNC = public.tally, STYPE = text, \
         INITCOND = ''); ALTER ROLE dpkit SET search_path = public, pg_catalog",
    );
    let engine = Place::Postgres(&server).open("t", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    let ledger = Ledger::open(&folder("result-types").join("ledger.sqlite"), 10.0, 0.0).unwrap();
    let refused = answer(&engine, &ledger, "SELECT COUNT(*) AS n FROM t");
    assert!(
        matches!(&refused, Err(QueryError::Sql(m)) if m.contains("other types")),
        "{refused:?}"
    );
    assert_eq!(
        ledger.state().unwrap().spent_epsilon,
        0.0,
        "a refusal spends nothing"
    );
}

/// One cluster for every Spark check (it takes seconds to start), and
/// last, the Connect server going away mid-query.
#[test]
fn spark_runs_the_private_plans_of_the_embedded_engine() {
    // Every result stream is cut after one response: each query reads on
    // by reattaching, and its result is whole only at ResultComplete.
    let mut spark = spark::Spark::start_cutting_streams("checks");
    let place = Place::Spark(&spark);
    let queries: Vec<&str> = [SHARED, REAL_ARITHMETIC].concat();
    every_check_at(&place, &queries, SQLITE_ONLY);
    let (text, data) = adult_text();
    let source = format!(
        "spark = \"{}\"\nsource_table = \"no_such_table\"",
        spark.address()
    );
    let missing = QueryEngine::open(in_database(&text, &source, &data));
    let Err(QueryError::Description(message)) = missing else {
        panic!("expected a description error for a table Spark does not have");
    };
    assert!(message.contains("no_such_table"), "{message}");
    ten_million_at_the_bound_on(&spark);
    let slow = place.open("slow_rows", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION);
    spark.sql(&["CREATE VIEW slow AS SELECT * FROM slow_rows \
                 WHERE reflect('java.lang.Thread', 'sleep', CAST(1500 AS BIGINT)) IS NOT NULL"
        .to_string()]);
    timed_out_queries_stop_on_the_cluster(&spark, &slow);
    drop(slow);
    let source = format!("spark = \"{}\"\nsource_table = \"slow\"", spark.address());
    let engine =
        QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &spark.folder)).unwrap();
    charged_when_the_server_goes_away(&engine, || spark.stop_connect());
}

/// Ten million values at the bound on Spark, summed as two `bigint`s (a
/// public count of people keeps a group below 2^47 rows) and, with no
/// count, as `DECIMAL(38,0)`.
fn ten_million_at_the_bound_on(spark: &spark::Spark) {
    spark.sql(&[
        "CREATE VIEW at_the_bound AS SELECT CAST(90 AS BIGINT) AS v, \
                 CAST(90 AS DOUBLE) AS w FROM range(10000000)"
            .to_string(),
    ]);
    let source = format!("spark = \"{}\"", spark.address());
    let counted = at_the_bound::description_with_people(10_000_000);
    ten_million_at_the_bound(&counted, &source, &spark.folder, "spark, split");
    let uncounted = at_the_bound::DESCRIPTION;
    ten_million_at_the_bound(uncounted, &source, &spark.folder, "spark, decimal");
}

/// A query past its time limit is interrupted on the cluster, not only
/// abandoned: its four rows are spread over four tasks *before* they sleep
/// 8 s each (the sleep is not deterministic, so Spark keeps it above the
/// repartition), which holds both of the cluster's cores for 16 s, and a
/// query that follows it runs at once rather than after them. Without the
/// interrupt it waits about 15 s.
fn timed_out_queries_stop_on_the_cluster(spark: &spark::Spark, quick: &QueryEngine) {
    spark.sql(&[
        "CREATE VIEW sleepy AS SELECT * FROM (SELECT /*+ REPARTITION(4) */ * FROM slow_rows) \
                 WHERE reflect('java.lang.Thread', 'sleep', CAST(8000 AS BIGINT)) IS NOT NULL"
            .to_string(),
    ]);
    let source = format!("spark = \"{}\"\nsource_table = \"sleepy\"", spark.address());
    let mut engine =
        QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &spark.folder)).unwrap();
    engine.set_limits(RunLimits {
        timeout: Some(Duration::from_secs(1)),
        ..RunLimits::default()
    });
    let ledger = Ledger::open(&folder("interrupt").join("ledger.sqlite"), 10.0, 0.0).unwrap();
    let outcome = answer(&engine, &ledger, "SELECT COUNT(*) AS n FROM t");
    assert!(
        matches!(&outcome, Err(QueryError::FailedWhileRunning(m)) if m.contains("time limit")),
        "{outcome:?}"
    );
    let started = std::time::Instant::now();
    exact(quick, "SELECT COUNT(*) AS n FROM t");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(6),
        "the next query waited {waited:?}: the timed-out one kept the cluster's cores"
    );
}

/// A query that is running when its server goes away keeps its cost, in
/// one line: whether a server fails mid-query can depend on a row (one
/// that makes it crash), so a refund would give that bit away for free.
/// `stop` stops the server; the query reads a view that sleeps on every
/// row, so it is still running a second after it began.
fn charged_when_the_server_goes_away(engine: &QueryEngine, stop: impl FnOnce()) {
    let path = folder("goes-away").join("ledger.sqlite");
    let sql = "SELECT COUNT(*) AS n FROM t";
    let (lost, spent) = std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            let ledger = Ledger::open(&path, 10.0, 0.0).unwrap();
            let outcome = answer(engine, &ledger, sql);
            (outcome, ledger.state().unwrap().spent_epsilon)
        });
        std::thread::sleep(Duration::from_secs(1));
        assert!(
            !running.is_finished(),
            "the query ended before its server stopped"
        );
        stop();
        running.join().unwrap()
    });
    assert!(
        matches!(&lost, Err(QueryError::FailedWhileRunning(m)) if m.contains("went away") && !m.contains('\n')),
        "{lost:?}"
    );
    assert_eq!(spent, 1.0, "the lost query keeps its cost");
    let ledger = Ledger::open(&path, 10.0, 0.0).unwrap();
    let refused = answer(engine, &ledger, sql);
    assert!(
        matches!(&refused, Err(QueryError::Unreadable(m)) if m.contains("I/O failure")),
        "{refused:?}"
    );
    let spent = ledger.state().unwrap().spent_epsilon;
    assert_eq!(
        spent, 1.0,
        "a server gone before the query is refused, free"
    );
}

#[test]
fn a_postgres_server_that_goes_away_mid_query_keeps_its_cost() {
    let mut server = Postgres::start("goes-away");
    let place = Place::Postgres(&server);
    drop(place.open("slow_rows", PEOPLE, PEOPLE_TYPES, PEOPLE_DESCRIPTION));
    server.psql("CREATE VIEW slow AS SELECT * FROM slow_rows WHERE CAST(pg_sleep(1) AS TEXT) = ''");
    let source = format!(
        "postgres = \"{}\"\nsource_table = \"slow\"",
        server.connection()
    );
    let engine =
        QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &server.folder)).unwrap();
    charged_when_the_server_goes_away(&engine, || server.stop());
}

#[test]
fn a_sqlite_file_that_is_not_there_is_one_clear_line() {
    let missing = QueryEngine::open(in_database(
        PEOPLE_DESCRIPTION,
        "sqlite = \"none.sqlite\"",
        &folder("missing"),
    ));
    assert!(matches!(missing, Err(QueryError::Unreadable(m)) if m.contains("no such file")));
}

#[test]
fn bad_connections_are_one_line_that_never_shows_the_password() {
    let unparsable = QueryEngine::open(in_database(
        PEOPLE_DESCRIPTION,
        "postgres = \"host=127.0.0.1 port=notaport password=hunter2\"",
        &folder("bad-connection"),
    ));
    let Err(QueryError::Description(message)) = unparsable else {
        panic!("expected a description error");
    };
    assert!(!message.contains("hunter2"), "{message}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = QueryEngine::open(in_database(
        PEOPLE_DESCRIPTION,
        &format!("postgres = \"host=127.0.0.1 port={port} user=u password=hunter2 dbname=d\""),
        &folder("bad-connection"),
    ));
    let Err(QueryError::Unreadable(message)) = refused else {
        panic!("expected an I/O error");
    };
    assert!(
        !message.contains("hunter2") && !message.contains('\n'),
        "{message}"
    );
    let spark = |address: String| {
        QueryEngine::open(in_database(
            PEOPLE_DESCRIPTION,
            &format!("spark = \"{address}\""),
            &folder("bad-connection"),
        ))
    };
    let Err(QueryError::Description(message)) = spark("http://127.0.0.1:15002".into()) else {
        panic!("expected a description error for a Spark address without sc://");
    };
    assert!(message.contains("sc://host:port"), "{message}");
    let Err(QueryError::Unreadable(message)) = spark(format!("sc://127.0.0.1:{port}")) else {
        panic!("expected an I/O error for a Spark server that is not there");
    };
    assert!(!message.contains('\n'), "{message}");
}

#[test]
fn a_database_table_opened_in_memory_is_queried_where_it_lives() {
    let dir = folder("in-memory");
    sqlite_file(&dir.join("t.sqlite"), "t", PEOPLE, PEOPLE_TYPES, false);
    let description = in_database(PEOPLE_DESCRIPTION, "sqlite = \"t.sqlite\"", &dir);
    let engine = QueryEngine::open_in_memory(description).unwrap();
    let groups = exact(&engine, "SELECT COUNT(*) AS n FROM t");
    assert_eq!(
        groups[0].1,
        [GridValue::whole(4)],
        "every row is counted, none copied away"
    );
}

/// SQLite text that is not UTF-8 has no key: its row never joins the
/// group of another key (such as ""), where a person could be counted twice.
#[test]
fn sqlite_text_that_is_not_utf8_is_no_key() {
    let dir = folder("not-utf8");
    let connection = rusqlite::Connection::open(dir.join("c.sqlite")).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE c (id INTEGER, grp TEXT); \
             INSERT INTO c VALUES (1, ''), (1, CAST(X'FF' AS TEXT)), (2, 'a')",
        )
        .unwrap();
    let description = CASES_DESCRIPTION.replace(
        "[columns.grp]\ntype = \"text\"\n",
        "[columns.grp]\ntype = \"text\"\ndomain = [\"\", \"a\"]\n",
    );
    let engine =
        QueryEngine::open(in_database(&description, "sqlite = \"c.sqlite\"", &dir)).unwrap();
    let groups = exact(&engine, "SELECT grp, COUNT(*) AS n FROM c GROUP BY grp");
    let counts: Vec<(String, f64)> = groups
        .iter()
        .map(|g| (g.0[0].clone(), g.1[0].to_f64()))
        .collect();
    assert_eq!(counts, [(String::new(), 1.0), ("a".to_string(), 1.0)]);
}
