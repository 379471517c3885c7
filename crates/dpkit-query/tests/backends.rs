//! The same private plans on SQLite, on a real PostgreSQL server and on a
//! real Spark cluster (both started by the tests): the same exact
//! aggregates as the embedded engine, no
//! failure that depends on one person's row, and one clear line, with
//! nothing spent, for bad connections, lost servers and tables that differ
//! from their descriptions.

#[path = "support/databases.rs"]
mod databases;
#[path = "support/postgres.rs"]
mod postgres;
#[path = "support/spark.rs"]
mod spark;

use std::path::PathBuf;

use databases::{ADULT_TYPES, adult_text, create_table, in_database, sqlite_file};
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, QueryError, ReleaseSettings};
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

fn adult_on_sqlite(name: &str) -> QueryEngine {
    let dir = folder(name);
    sqlite_file(
        &dir.join("adult.sqlite"),
        "adult",
        &adult_csv(),
        ADULT_TYPES,
    );
    let (text, _) = adult_text();
    QueryEngine::open(in_database(&text, "sqlite = \"adult.sqlite\"", &dir)).unwrap()
}

fn adult_on_postgres(server: &Postgres) -> QueryEngine {
    let (text, data) = adult_text();
    let csv = adult_csv();
    let create = create_table("adult", &csv, ADULT_TYPES, true);
    let rows = server.folder.join("adult.csv");
    std::fs::write(&rows, csv.trim_end()).unwrap();
    server.load_csv(&create, "adult", &rows);
    let source = format!("postgres = \"{}\"", server.connection());
    QueryEngine::open(in_database(&text, &source, &data)).unwrap()
}

/// Queries every backend runs, covering the rewrite: counts, sums, means,
/// filters, CASE, IN, LIKE, integer arithmetic, binned and public-domain keys.
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
];

/// Queries only the embedded engine and SQLite run (quantiles, functions,
/// arithmetic on reals).
const SQLITE_ONLY: &[&str] = &[
    "SELECT MEDIAN(age) AS m, VAR_SAMP(age) AS v FROM adult",
    "SELECT sex, COUNT(*) AS n FROM adult WHERE sqrt(CAST(age AS DOUBLE)) * 1.5 > 9.0 GROUP BY sex",
    "SELECT COUNT(*) AS n FROM adult WHERE lower(occupation) LIKE '%sales%' \
     AND length(\"native-country\") > 5 AND education ~ '^[A-Z]'",
];

type Group = (Vec<String>, Vec<f64>, Vec<dpkit_query::release::Cells>);

/// The exact groups of `sql`, in key order (engines order groups their own way).
fn exact(engine: &QueryEngine, sql: &str) -> Vec<Group> {
    let query = engine.plan(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let groups = engine
        .exact(&query)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
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

fn assert_same_exact(database: &QueryEngine, queries: &[&str]) {
    let embedded = QueryEngine::open(fixture_adult()).unwrap();
    for sql in queries {
        assert_eq!(exact(database, sql), exact(&embedded, sql), "{sql}");
    }
}

fn fixture_adult() -> Description {
    let (text, folder) = adult_text();
    Description::from_toml(&text, &folder).unwrap()
}

#[test]
fn sqlite_computes_the_embedded_engines_exact_aggregates_on_adult() {
    let engine = adult_on_sqlite("adult");
    assert_same_exact(&engine, SHARED);
    assert_same_exact(&engine, SQLITE_ONLY);
    let explained = engine.explain(SHARED[0], &settings(1.0)).unwrap();
    assert!(explained.contains("SQL sent to SQLite"), "{explained}");
    assert!(
        explained.contains("WITH \"__dpkit_raw_adult\""),
        "{explained}"
    );
}

#[test]
fn postgres_computes_the_embedded_engines_exact_aggregates_on_adult() {
    let server = Postgres::start("adult");
    let engine = adult_on_postgres(&server);
    assert_same_exact(&engine, SHARED);
    for sql in SQLITE_ONLY {
        match engine.plan(sql) {
            Err(QueryError::NotPrivate(reason)) => {
                assert!(reason.contains("not available on PostgreSQL"), "{reason}")
            }
            other => panic!("{sql}: expected a refusal, got {other:?}"),
        }
    }
    let explained = engine.explain(SHARED[0], &settings(1.0)).unwrap();
    assert!(explained.contains("SQL sent to PostgreSQL"), "{explained}");
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
            let b = outcome(&sql, &answer(without, &ledger, &sql));
            assert_eq!(a, b, "{sql}");
        }
    }
}

#[test]
fn no_query_fails_on_sqlite_only_because_of_one_persons_row() {
    let dir = folder("oracle-sqlite");
    sqlite_file(&dir.join("with.sqlite"), "t", PEOPLE, PEOPLE_TYPES);
    sqlite_file(
        &dir.join("without.sqlite"),
        "t",
        &without_dan(),
        PEOPLE_TYPES,
    );
    let open = |file: &str| {
        QueryEngine::open(in_database(
            PEOPLE_DESCRIPTION,
            &format!("sqlite = \"{file}\""),
            &dir,
        ))
        .unwrap()
    };
    assert_no_oracle(&open("with.sqlite"), &open("without.sqlite"), &dir);
}

#[test]
fn no_query_fails_on_postgres_only_because_of_one_persons_row() {
    let server = Postgres::start("oracle");
    let open = |table: &str, csv: &str| {
        let rows = server.folder.join(format!("{table}.csv"));
        std::fs::write(&rows, csv.trim_end()).unwrap();
        let create = create_table(table, csv, PEOPLE_TYPES, true);
        server.load_csv(&create, table, &rows);
        let source = format!(
            "postgres = \"{}\"\nsource_table = \"{table}\"",
            server.connection()
        );
        QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &server.folder)).unwrap()
    };
    let with = open("with_dan", PEOPLE);
    let without = open("without_dan", &without_dan());
    assert_no_oracle(&with, &without, &folder("oracle-postgres"));
}

#[test]
fn a_table_that_differs_from_its_description_is_one_clear_line() {
    let dir = folder("differs");
    let types = &[
        ("id", "INTEGER"),
        ("age", "TEXT"),
        ("salary", "INTEGER"),
        ("score", "REAL"),
    ];
    let csv = "id,age,name,salary\n1,30,ann,1000\n";
    sqlite_file(&dir.join("t.sqlite"), "t", csv, types);
    let opened = QueryEngine::open(in_database(
        PEOPLE_DESCRIPTION,
        "sqlite = \"t.sqlite\"",
        &dir,
    ));
    let Err(QueryError::Description(message)) = opened else {
        panic!("expected a description error");
    };
    assert!(!message.contains('\n'), "{message}");
    assert!(
        message.contains("column 'age' is text where the description declares integer"),
        "{message}"
    );
    assert!(message.contains("no column 'score'"), "{message}");
    let missing = QueryEngine::open(in_database(
        PEOPLE_DESCRIPTION,
        "sqlite = \"none.sqlite\"",
        &dir,
    ));
    assert!(matches!(missing, Err(QueryError::Data(m)) if m.contains("no such file")));
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
    let Err(QueryError::Data(message)) = refused else {
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
    let Err(QueryError::Data(message)) = spark(format!("sc://127.0.0.1:{port}")) else {
        panic!("expected an I/O error for a Spark server that is not there");
    };
    assert!(!message.contains('\n'), "{message}");
}

#[test]
fn a_server_that_goes_away_refunds_the_query() {
    let mut server = Postgres::start("goes-away");
    let rows = server.folder.join("t.csv");
    std::fs::write(&rows, PEOPLE.trim_end()).unwrap();
    server.load_csv(&create_table("t", PEOPLE, PEOPLE_TYPES, true), "t", &rows);
    let source = format!("postgres = \"{}\"", server.connection());
    let engine =
        QueryEngine::open(in_database(PEOPLE_DESCRIPTION, &source, &server.folder)).unwrap();
    let dir = folder("goes-away");
    let ledger = Ledger::open(&dir.join("ledger.sqlite"), 10.0, 0.0).unwrap();
    let sql = "SELECT COUNT(*) AS n FROM t";
    answer(&engine, &ledger, sql).unwrap();
    let spent = ledger.state().unwrap().spent_epsilon;
    server.stop();
    let lost = answer(&engine, &ledger, sql);
    assert!(
        matches!(&lost, Err(QueryError::Data(m)) if m.contains("I/O failure")),
        "{lost:?}"
    );
    assert_eq!(
        ledger.state().unwrap().spent_epsilon,
        spent,
        "the lost query is refunded"
    );
}

#[test]
fn a_database_table_opened_in_memory_is_queried_where_it_lives() {
    let dir = folder("in-memory");
    sqlite_file(&dir.join("t.sqlite"), "t", PEOPLE, PEOPLE_TYPES);
    let description = in_database(PEOPLE_DESCRIPTION, "sqlite = \"t.sqlite\"", &dir);
    let engine = QueryEngine::open_in_memory(description).unwrap();
    let groups = exact(&engine, "SELECT COUNT(*) AS n FROM t");
    assert_eq!(groups[0].1, [4.0], "every row is counted, none copied away");
}

/// `CREATE TABLE … USING csv` over `csv`'s file, typed as `types` say.
fn spark_table(
    table: &str,
    csv: &str,
    file: &std::path::Path,
    types: databases::Types<'_>,
) -> String {
    let header = csv.lines().next().unwrap();
    let columns: Vec<String> = header
        .split(',')
        .map(|c| {
            let t = match types.iter().find(|(n, _)| *n == c).map(|(_, t)| *t) {
                Some("INTEGER") => "BIGINT",
                Some("REAL") => "DOUBLE",
                _ => "STRING",
            };
            format!("`{c}` {t}")
        })
        .collect();
    format!(
        "CREATE TABLE {table} ({}) USING csv OPTIONS (path '{}', header 'true')",
        columns.join(", "),
        file.display()
    )
}

/// One cluster for every Spark check (it takes seconds to start): Adult's
/// exact aggregates as the embedded engine's, refusals of what Spark cannot
/// run safely, and no failure that depends on one person's row.
#[test]
fn spark_runs_the_private_plans_of_the_embedded_engine() {
    let spark = spark::Spark::start("checks");
    let (text, data) = adult_text();
    let with = spark.folder.join("with.csv");
    let without = spark.folder.join("without.csv");
    std::fs::write(&with, PEOPLE).unwrap();
    std::fs::write(&without, without_dan()).unwrap();
    spark.sql(&[
        spark_table(
            "adult",
            &adult_csv(),
            &data.join("adult.data.csv"),
            ADULT_TYPES,
        ),
        spark_table("with_dan", PEOPLE, &with, PEOPLE_TYPES),
        spark_table("without_dan", PEOPLE, &without, PEOPLE_TYPES),
    ]);
    let source = |table: &str| {
        format!(
            "spark = \"{}\"\nsource_table = \"{table}\"",
            spark.address()
        )
    };
    let adult = QueryEngine::open(in_database(&text, &source("adult"), &data)).unwrap();
    assert_same_exact(&adult, SHARED);
    for sql in SQLITE_ONLY {
        match adult.plan(sql) {
            Err(QueryError::NotPrivate(reason)) => {
                assert!(reason.contains("not available on Spark"), "{reason}")
            }
            other => panic!("{sql}: expected a refusal, got {other:?}"),
        }
    }
    let missing = QueryEngine::open(in_database(&text, &source("no_such_table"), &data));
    let Err(QueryError::Description(message)) = missing else {
        panic!("expected a description error for a table Spark does not have");
    };
    assert!(message.contains("no_such_table"), "{message}");
    let explained = adult.explain(SHARED[0], &settings(1.0)).unwrap();
    assert!(explained.contains("SQL sent to Spark"), "{explained}");
    let open = |table: &str| {
        QueryEngine::open(in_database(
            PEOPLE_DESCRIPTION,
            &source(table),
            &spark.folder,
        ))
        .unwrap()
    };
    assert_no_oracle(
        &open("with_dan"),
        &open("without_dan"),
        &folder("oracle-spark"),
    );
}
