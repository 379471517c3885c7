//! Check-and-charge is atomic across concurrent requests: 64 queries at
//! once against a budget that fits 10 are answered exactly 10 times, and
//! the ledger records exactly those 10.

mod support;

use std::sync::{Arc, Barrier};

use dpkit_query::Ledger;
use support::fixture::{TestServer, adult_description};
use support::http::request;

const CLIENTS: usize = 64;

/// Sends 64 different queries at ε = `cost` at once; their statuses.
fn race(server: &TestServer, key: &str, cost: f64) -> Vec<u16> {
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (barrier, key, address) = (barrier.clone(), key.to_string(), server.address);
            std::thread::spawn(move || {
                let sql = format!("SELECT COUNT(*) AS q{i} FROM adult WHERE age > {}", 17 + i);
                let body = serde_json::json!({"dataset": "adult", "sql": sql, "epsilon": cost})
                    .to_string();
                barrier.wait();
                request(address, "POST", "/v1/query", Some(&key), Some(&body)).status
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn sixty_four_concurrent_queries_against_a_budget_for_ten_get_exactly_ten_answers() {
    let server = TestServer::start(
        "race",
        &[adult_description()],
        "requests_per_second = 100000\nburst = 100000\nworkers = 4",
    );
    // Budgets that fit exactly 10, and 10 with a remainder too small for an 11th.
    for (i, (cost, total)) in [
        (0.1, 1.0),
        (0.3, 3.05),
        (1.0, 10.0),
        (0.07, 0.75),
        (2.5, 25.0),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("analyst{i}");
        let key = server.analyst(&name, &["adult"], total, 0.0);
        let statuses = race(&server, &key, cost);
        let answered = statuses.iter().filter(|&&s| s == 200).count();
        let refused = statuses.iter().filter(|&&s| s == 409).count();
        assert_eq!(
            (answered, refused),
            (10, CLIENTS - 10),
            "ε = {cost} of {total}: {statuses:?}"
        );
        let state = Ledger::open_account(&server.state, &format!("{name}/adult"))
            .unwrap()
            .state()
            .unwrap();
        assert_eq!(state.queries, 10, "ε = {cost} of {total}");
        assert!(
            (state.spent_epsilon - 10.0 * cost).abs() < 1e-9,
            "spent {}",
            state.spent_epsilon
        );
    }
}

/// Adult twenty times over (650,000 rows) in a folder of its own, so that
/// a plain count runs for a while: slowness from the data's size, since
/// no expression may cost a row more than a bounded amount.
fn large_adult(name: &str) -> std::path::PathBuf {
    adult_copies(name, 20, "adult")
}

/// Adult `copies` times over as the table `table`, in a folder of its own.
fn adult_copies(name: &str, copies: usize, table: &str) -> std::path::PathBuf {
    let folder = support::fixture::folder(name);
    let original = adult_description();
    let data = std::fs::read_to_string(original.with_file_name("adult.data.csv")).unwrap();
    let (header, rows) = data.split_once('\n').unwrap();
    let mut large = String::with_capacity(data.len() * copies);
    large.push_str(header);
    large.push('\n');
    for _ in 0..copies {
        large.push_str(rows);
    }
    std::fs::write(folder.join("adult.data.csv"), large).unwrap();
    let description = folder.join("adult.toml");
    let text = std::fs::read_to_string(&original).unwrap();
    let renamed = text.replacen("name = \"adult\"", &format!("name = \"{table}\""), 1);
    std::fs::write(&description, renamed).unwrap();
    description
}

fn slow_sql() -> String {
    "SELECT COUNT(*) FROM adult WHERE age < 40".into()
}

#[test]
fn clients_that_leave_mid_run_never_get_a_second_answer_for_one_charge() {
    use std::io::Write;
    let server = TestServer::start(
        "leave",
        &[large_adult("leave-data")],
        "requests_per_second = 100000\nburst = 100000",
    );
    let key = server.analyst("eve", &["adult"], 10.0, 0.0);
    let body =
        serde_json::json!({"dataset": "adult", "sql": slow_sql(), "epsilon": 0.01}).to_string();
    let raw = format!(
        "POST /v1/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // Copies of one request, each abandoned while its run is under way.
    for _ in 0..8 {
        let mut stream = std::net::TcpStream::connect(server.address).unwrap();
        stream.write_all(raw.as_bytes()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(15));
        drop(stream);
    }
    let mut answers = Vec::new();
    for _ in 0..20 {
        let response = request(server.address, "POST", "/v1/query", Some(&key), Some(&body));
        assert_eq!(response.status, 200, "{}", response.body);
        answers.push(response.json()["rows"].clone());
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "one charge, several answers: {answers:?}"
    );
    let state = Ledger::open_account(&server.state, "eve/adult")
        .unwrap()
        .state()
        .unwrap();
    assert_eq!((state.queries, state.spent_epsilon), (1, 0.01));
}

/// A COUNT of `analyst`'s on Adult (each one different, so none is a
/// replay): its latency in seconds, and how long it waited for a worker.
fn timed_count(server: &TestServer, key: &str, i: usize) -> (f64, f64) {
    let sql = format!(
        "SELECT COUNT(*) AS c{i} FROM adult WHERE age > {}",
        17 + i % 60
    );
    let body = serde_json::json!({"dataset": "adult", "sql": sql, "epsilon": 0.01}).to_string();
    let started = std::time::Instant::now();
    let response = request(server.address, "POST", "/v1/query", Some(key), Some(&body));
    let latency = started.elapsed().as_secs_f64();
    assert_eq!(response.status, 200, "{}", response.body);
    (latency, response.json()["waited_seconds"].as_f64().unwrap())
}

/// A slow query of `analyst`'s on the large table `big`: a median per
/// group over the rows that match a regular expression. Returns how long
/// it took and how long it waited.
fn slow_median(address: std::net::SocketAddr, key: &str, i: usize) -> (f64, f64) {
    let sql = format!(
        "SELECT education, MEDIAN(\"hours-per-week\") AS m{i} FROM big \
         WHERE concat(occupation, workclass, \"marital-status\", relationship, race, sex) \
         ~ '(a|e|i)[a-z]{{3}}(r|s)-[A-Z].*(a|e)$' AND age > {} GROUP BY education",
        i % 10
    );
    let body = serde_json::json!({"dataset": "big", "sql": sql, "epsilon": 0.01}).to_string();
    let started = std::time::Instant::now();
    let response = request(address, "POST", "/v1/query", Some(key), Some(&body));
    assert_eq!(response.status, 200, "{}", response.body);
    let waited = response.json()["waited_seconds"].as_f64().unwrap();
    (started.elapsed().as_secs_f64(), waited)
}

/// The largest of `values`: the p99 of fewer than 100.
fn most(values: &[f64]) -> f64 {
    values.iter().copied().fold(0.0, f64::max)
}

#[test]
fn an_analyst_with_many_slow_queries_leaves_a_worker_to_the_others() {
    // Two workers, so one analyst may hold one (max_runs_per_analyst
    // defaults to workers − 1). The bulk analyst queries Adult forty times
    // over, read from its file by every query, so that each takes a while.
    let server = TestServer::start_on_files(
        "fair",
        &[adult_description(), adult_copies("fair-data", 40, "big")],
        // The turns share the runs' time, which is what this measures; an
        // answer's hold to its deadline frees its worker at once.
        "requests_per_second = 100000\nburst = 100000\nworkers = 2\ndeadlines = false",
    );
    let bulk = server.analyst("bulk", &["big"], 1000.0, 0.0);
    let quick = server.analyst("quick", &["adult"], 1000.0, 0.0);
    let (alone, _) = slow_median(server.address, &bulk, 99);
    let idle: Vec<f64> = (0..10).map(|i| timed_count(&server, &quick, i).0).collect();
    // Six slow queries at once: one runs, five wait their analyst's turn.
    let slow: Vec<_> = (0..6)
        .map(|i| {
            let (address, key) = (server.address, bulk.clone());
            std::thread::spawn(move || slow_median(address, &key, i))
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs_f64(alone / 4.0));
    let loaded: Vec<(f64, f64)> = (10..20).map(|i| timed_count(&server, &quick, i)).collect();
    let slow: Vec<(f64, f64)> = slow.into_iter().map(|t| t.join().unwrap()).collect();
    let latencies: Vec<f64> = loaded.iter().map(|l| l.0).collect();
    let waits: Vec<f64> = loaded.iter().map(|l| l.1).collect();
    eprintln!(
        "one slow query alone {alone:.3} s; COUNT p99 idle {:.3} s, under load {:.3} s \
         ({:.1}×), longest wait for a worker {:.4} s; the slow queries waited up to {:.3} s",
        most(&idle),
        most(&latencies),
        most(&latencies) / most(&idle),
        most(&waits),
        most(&slow.iter().map(|s| s.1).collect::<Vec<_>>()),
    );
    // The quick analyst never waited for the bulk analyst's runs: with
    // one shared pool it would wait for at least one slow run to end.
    // (Its latency under load is reported, not asserted: on two shared
    // cores it depends on what else the machine runs.)
    assert!(
        most(&waits) < alone / 4.0,
        "waits {waits:?}, latencies {latencies:?}, one slow query {alone} s"
    );
    // And the bulk analyst's queries all ran, one after the other.
    let queued = slow.iter().filter(|s| s.1 > alone / 2.0).count();
    assert!(queued >= 4, "the slow queries' waits: {slow:?}");
}
