//! The bundled clinic (`data/clinic`: people, their visits and a public
//! list of departments), and its answers through joins at a very large ε
//! checked against the exact truncated aggregates, computed independently
//! in SQLite. Shared by the query crate's tests (`#[path]`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Ledger, QueryEngine};
use dpkit_release::{Cell, ReleasedTable};

use super::fixture::{settings, value};

/// The bundled clinic's folder.
pub fn clinic_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/clinic")
}

/// The bundled clinic's description, keeping each person's first rows in
/// the order of their values (`keep = "ordered"`), as [`sqlite`]'s `kept`
/// does, so that answers compare row for row; the bundled description
/// keeps them at random.
pub fn clinic_text() -> String {
    let text = std::fs::read_to_string(clinic_folder().join("clinic.toml")).unwrap();
    let ordered = text.replacen(
        "[privacy_unit]\n",
        "[privacy_unit]\nkeep = \"ordered\"\n",
        1,
    );
    assert_ne!(ordered, text, "clinic.toml has a [privacy_unit]");
    ordered
}

/// The clinic's private tables with their columns' SQL types.
pub const PRIVATE_TABLES: &[(&str, &[(&str, &str)])] = &[
    (
        "people",
        &[
            ("id", "INTEGER"),
            ("age", "INTEGER"),
            ("sex", "TEXT"),
            ("region", "TEXT"),
        ],
    ),
    (
        "visits",
        &[
            ("person", "INTEGER"),
            ("month", "INTEGER"),
            ("department", "TEXT"),
            ("cost", "INTEGER"),
        ],
    ),
];

/// `sql` answered at ε = 1000 with intervals at 1 − 10⁻⁶, by its keys.
pub fn answered(
    engine: &QueryEngine,
    sql: &str,
    name: &str,
) -> BTreeMap<String, Vec<(f64, f64, f64)>> {
    let path = std::env::temp_dir().join(format!("dpkit-several-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let ledger = Ledger::open(&path, 1000.0, 1e-3).unwrap();
    let exact = dpkit_query::ReleaseSettings {
        confidence: 1.0 - 1e-6,
        ..settings(1000.0, 0.0)
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(7);
    let answer: ReleasedTable = engine.answer(sql, &exact, &ledger, &mut rng).unwrap();
    let _ = std::fs::remove_file(&path);
    let mut rows = BTreeMap::new();
    for row in &answer.rows {
        let (key, values) = match &row[0] {
            Cell::Key(key) => (key.clone(), &row[1..]),
            Cell::Value { .. } => (String::new(), &row[..]),
        };
        rows.insert(key, values.iter().map(value).collect());
    }
    rows
}

/// The clinic's three files in an SQLite database, with `kept` the visits
/// as the engine keeps them: each person's first 12 in the order of every
/// column.
pub fn sqlite() -> rusqlite::Connection {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE TABLE people(id INTEGER, age INTEGER, sex TEXT, region TEXT);
         CREATE TABLE visits(person INTEGER, month INTEGER, department TEXT, cost INTEGER);
         CREATE TABLE departments(department TEXT, kind TEXT);
         CREATE VIEW kept AS SELECT person, month, department, MIN(MAX(cost, 0), 1500) AS cost
           FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY person
                 ORDER BY person, month, department, cost) AS n FROM visits)
           WHERE n <= 12;",
    )
    .unwrap();
    for (table, columns) in [("people", 4), ("visits", 4), ("departments", 2)] {
        let text = std::fs::read_to_string(clinic_folder().join(format!("{table}.csv"))).unwrap();
        let marks = vec!["?"; columns].join(", ");
        let mut insert = db
            .prepare(&format!("INSERT INTO {table} VALUES ({marks})"))
            .unwrap();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split(',').collect();
            insert
                .execute(rusqlite::params_from_iter(fields.iter()))
                .unwrap();
        }
    }
    db
}

/// The rows of an SQLite query: a text key, then numbers.
pub fn expected(db: &rusqlite::Connection, sql: &str) -> BTreeMap<String, Vec<f64>> {
    let mut statement = db.prepare(sql).unwrap();
    let columns = statement.column_count();
    statement
        .query_map([], |row| {
            let key: String = row.get(0)?;
            let values = (1..columns)
                .map(|i| row.get::<_, f64>(i))
                .collect::<rusqlite::Result<Vec<f64>>>()?;
            Ok((key, values))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Every exact value lies in its interval, and the released value within
/// `tolerance` of it.
pub fn assert_lands(
    released: &BTreeMap<String, Vec<(f64, f64, f64)>>,
    exact: &BTreeMap<String, Vec<f64>>,
    tolerance: &[f64],
) {
    assert_eq!(
        released.keys().collect::<Vec<_>>(),
        exact.keys().collect::<Vec<_>>()
    );
    for (key, values) in exact {
        for (i, &exact) in values.iter().enumerate() {
            let (value, low, high) = released[key][i];
            assert!(
                low <= exact && exact <= high && (value - exact).abs() <= tolerance[i],
                "{key} column {i}: exact {exact}, released {value} in [{low}, {high}]"
            );
        }
    }
}

/// A count and a sum by a public table's attribute, through a join of
/// the visits with the public departments.
pub fn public_joins_land(engine: &QueryEngine) {
    let db = sqlite();
    let by_kind = "SELECT d.kind, COUNT(*) AS visits, SUM(v.cost) AS cost FROM visits v \
                   JOIN departments d ON v.department = d.department GROUP BY d.kind";
    let sql_by_kind = by_kind.replace("visits v", "kept v");
    assert_lands(
        &answered(engine, by_kind, "kind"),
        &expected(&db, &sql_by_kind),
        &[0.5, 600.0],
    );
}

/// Counts and sums through joins of the people with their visits.
pub fn private_joins_land(engine: &QueryEngine) {
    let db = sqlite();
    let older = "SELECT p.region, COUNT(*) AS visits, SUM(v.cost) AS cost FROM people p \
                 JOIN visits v ON v.person = p.id WHERE p.age >= 60 GROUP BY p.region";
    assert_lands(
        &answered(engine, older, "older"),
        &expected(&db, &older.replace("visits v", "kept v")),
        &[0.5, 600.0],
    );
    // Everyone once, and once more for each visit past their first.
    let everyone = "SELECT COUNT(*) AS n FROM people p LEFT JOIN visits v ON p.id = v.person";
    let sql_everyone = "SELECT '', COUNT(*) FROM people p LEFT JOIN kept v ON p.id = v.person";
    assert_lands(
        &answered(engine, everyone, "everyone"),
        &expected(&db, sql_everyone),
        &[0.5],
    );
}

/// Every 1- and 2-way marginal `dpkit synth` counts of `table` on
/// `engine`, in order (each column, then each pair), and the L1
/// sensitivity their plans give.
pub fn synth_marginals(engine: &QueryEngine, table: &str) -> (Vec<Vec<u64>>, f64) {
    use dpkit_query::synth::{CodedTable, Columns, EngineMarginals, Plans};
    use dpkit_synth::Marginals;
    let columns = Columns {
        table: Some(table.into()),
        ..Columns::default()
    };
    let coded = CodedTable::from_description(engine.description(), &columns).unwrap();
    let width = coded.columns.len();
    let mut sets: Vec<Vec<usize>> = (0..width).map(|c| vec![c]).collect();
    for a in 0..width {
        for b in a + 1..width {
            sets.push(vec![a, b]);
        }
    }
    let plans = Plans::new(engine, &coded, &sets).unwrap();
    let mut counted = EngineMarginals::new(engine, &coded, &plans).unwrap();
    let counts = sets.iter().map(|s| counted.counts(s).unwrap()).collect();
    (counts, plans.sensitivity())
}
