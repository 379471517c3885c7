//! Datasets whose tables live in a SQLite file and in a real PostgreSQL
//! server (started by the test): served through the same query path as
//! files, attacked the same way, and a database that is gone answers 503
//! and charges nothing.

#[path = "../../dpkit-query/tests/support/postgres.rs"]
mod postgres;
mod support;

use std::path::{Path, PathBuf};

use support::fixture::{TestServer, folder};
use support::http::request;
use support::marker;

const OPEN: &str = "requests_per_second = 100000\nburst = 100000";

/// The marker table in a new SQLite file in `folder`.
fn sqlite_people(folder: &Path) -> PathBuf {
    let file = folder.join("people.sqlite");
    let connection = rusqlite::Connection::open(&file).unwrap();
    connection
        .execute_batch("CREATE TABLE people (name TEXT, city TEXT, age INTEGER, income REAL)")
        .unwrap();
    for line in marker::csv().lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        connection
            .execute(
                "INSERT INTO people VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    fields[0],
                    fields[1],
                    fields[2].parse::<i64>().unwrap(),
                    fields[3].parse::<f64>().unwrap()
                ],
            )
            .unwrap();
    }
    let description = folder.join("people.toml");
    std::fs::write(
        &description,
        marker::description("sqlite = \"people.sqlite\""),
    )
    .unwrap();
    description
}

/// The marker table in `server`, described in `folder`.
fn postgres_people(server: &postgres::Postgres, folder: &Path) -> PathBuf {
    let rows = server.folder.join("people.csv");
    std::fs::write(&rows, marker::csv()).unwrap();
    server.load_csv(
        "CREATE TABLE people (name TEXT, city TEXT, age BIGINT, income DOUBLE PRECISION)",
        "people",
        &rows,
    );
    let description = folder.join("people.toml");
    let source = format!("postgres = \"{}\"", server.connection());
    std::fs::write(&description, marker::description(&source)).unwrap();
    description
}

fn spent(server: &TestServer, key: &str) -> f64 {
    let budgets = request(server.address, "GET", "/v1/budget", Some(key), None).json();
    budgets["budgets"][0]["spent_epsilon"].as_f64().unwrap()
}

#[test]
fn datasets_in_databases_are_served_and_attacked_like_files() {
    let mut database = postgres::Postgres::start("serve");
    for (name, place) in [("sqlite", "sqlite"), ("postgres", "postgres")] {
        let folder = folder(&format!("databases-{name}"));
        let description = match place {
            "sqlite" => sqlite_people(&folder),
            _ => postgres_people(&database, &folder),
        };
        let server = TestServer::start(&format!("databases-{name}-server"), &[description], OPEN);
        let key = server.analyst("ann", &["people"], 1000.0, 1e-3);
        let answered = marker::attack(&server, &key);
        assert!(
            answered >= 4,
            "{name}: the legitimate queries were answered"
        );
        if place == "postgres" {
            let before = spent(&server, &key);
            database.stop();
            let body = serde_json::json!({"dataset": "people", "sql": "SELECT COUNT(*) FROM people", "epsilon": 1.0}).to_string();
            let lost = request(server.address, "POST", "/v1/query", Some(&key), Some(&body));
            assert_eq!(lost.status, 503, "{}", lost.body);
            assert!(lost.body.contains("data_unavailable"), "{}", lost.body);
            assert_eq!(spent(&server, &key), before, "the lost query is refunded");
        }
    }
}
