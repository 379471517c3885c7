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
    let folder = support::fixture::folder(name);
    let original = adult_description();
    let data = std::fs::read_to_string(original.with_file_name("adult.data.csv")).unwrap();
    let (header, rows) = data.split_once('\n').unwrap();
    let mut large = String::with_capacity(data.len() * 20);
    large.push_str(header);
    large.push('\n');
    for _ in 0..20 {
        large.push_str(rows);
    }
    std::fs::write(folder.join("adult.data.csv"), large).unwrap();
    let description = folder.join("adult.toml");
    std::fs::copy(&original, &description).unwrap();
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
