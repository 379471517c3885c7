//! The API attacked as an analyst would: without a key, with a revoked or
//! another analyst's key, with oversized and malformed requests, and with
//! queries meant to make an error quote the data.

mod support;

use support::fixture::{TestServer, adult_description};
use support::http::request;
use support::marker;

/// Generous limits, so only the limit under test refuses.
const OPEN: &str = "requests_per_second = 100000\nburst = 100000";

fn query_body(dataset: &str, sql: &str, epsilon: f64) -> String {
    serde_json::json!({"dataset": dataset, "sql": sql, "epsilon": epsilon}).to_string()
}

const ENDPOINTS: [(&str, &str); 4] = [
    ("GET", "/v1/datasets"),
    ("GET", "/v1/budget"),
    ("POST", "/v1/explain"),
    ("POST", "/v1/query"),
];

#[test]
fn every_endpoint_refuses_without_a_live_key() {
    let server = TestServer::start("no-key", &[adult_description()], OPEN);
    let key = server.analyst("ann", &["adult"], 10.0, 0.0);
    let body = query_body("adult", "SELECT COUNT(*) FROM adult", 0.1);
    let revoke = || {
        dpkit_serve::analysts::Analysts::open(&dpkit_ledger::Store::file(&server.state))
            .unwrap()
            .revoke("ann")
            .unwrap()
    };
    for (method, path) in ENDPOINTS {
        let body = (method == "POST").then_some(body.as_str());
        for bad in [
            None,
            Some(""),
            Some("dpk_0000"),
            Some(&key[..key.len() - 1]),
        ] {
            let response = request(server.address, method, path, bad, body);
            assert_eq!(response.status, 401, "{method} {path} with {bad:?}");
            assert_eq!(response.json()["error"]["code"], "unauthorized");
        }
        let response = request(server.address, method, path, Some(&key), body);
        assert_eq!(response.status, 200, "{method} {path}: {}", response.body);
    }
    revoke();
    for (method, path) in ENDPOINTS {
        let body = (method == "POST").then_some(body.as_str());
        assert_eq!(
            request(server.address, method, path, Some(&key), body).status,
            401,
            "revoked: {path}"
        );
    }
    let state = dpkit_query::Ledger::open_account(&server.state, "ann/adult")
        .unwrap()
        .state()
        .unwrap();
    assert_eq!(
        state.queries, 1,
        "only the one query with a live key was charged"
    );
}

#[test]
fn one_analyst_can_neither_see_nor_spend_anothers_budget() {
    let marker = marker::file_dataset("apart");
    let server = TestServer::start("apart", &[adult_description(), marker.clone()], OPEN);
    let ann = server.analyst("ann", &["adult"], 1.0, 0.0);
    let bob = server.analyst("bob", &["adult", "people"], 1.0, 0.0);
    let names = |key: &str| -> Vec<String> {
        let datasets = request(server.address, "GET", "/v1/datasets", Some(key), None).json();
        datasets["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&ann), ["adult"]);
    assert_eq!(names(&bob), ["adult", "people"]);
    for path in ["/v1/explain", "/v1/query"] {
        for dataset in ["people", "nonexistent"] {
            let response = request(
                server.address,
                "POST",
                path,
                Some(&ann),
                Some(&query_body(dataset, "SELECT COUNT(*) FROM people", 0.1)),
            );
            assert_eq!(response.status, 403, "{path} {dataset}");
            assert_eq!(response.json()["error"]["code"], "forbidden");
        }
    }
    let spend = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&ann),
        Some(&query_body("adult", "SELECT COUNT(*) FROM adult", 1.0)),
    );
    assert_eq!(spend.status, 200);
    let refused = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&ann),
        Some(&query_body("adult", "SELECT COUNT(*) AS n FROM adult", 0.5)),
    );
    assert_eq!(
        (refused.status, refused.json()["error"]["code"].as_str()),
        (409, Some("budget_exhausted"))
    );
    let budgets = request(server.address, "GET", "/v1/budget", Some(&bob), None).json();
    for budget in budgets["budgets"].as_array().unwrap() {
        assert_eq!(
            budget["spent_epsilon"], 0.0,
            "ann's spend shows in bob's budget: {budget}"
        );
    }
    let ann_budgets = request(server.address, "GET", "/v1/budget", Some(&ann), None).json();
    assert_eq!(
        ann_budgets["budgets"].as_array().unwrap().len(),
        1,
        "ann sees only her own"
    );
    let answered = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&bob),
        Some(&query_body("adult", "SELECT COUNT(*) FROM adult", 1.0)),
    );
    assert_eq!(
        answered.json()["replay"],
        false,
        "bob's request is his own, not a replay of ann's"
    );
}

#[test]
fn the_same_request_again_is_a_free_replay_of_the_same_answer() {
    let server = TestServer::start("replay", &[adult_description()], OPEN);
    let key = server.analyst("ann", &["adult"], 10.0, 0.0);
    let body = query_body("adult", "SELECT sex, AVG(age) FROM adult GROUP BY sex", 0.5);
    let first = request(server.address, "POST", "/v1/query", Some(&key), Some(&body)).json();
    assert_eq!(
        (first["replay"].as_bool(), first["charged_epsilon"].as_f64()),
        (Some(false), Some(0.5))
    );
    for _ in 0..5 {
        let again = request(server.address, "POST", "/v1/query", Some(&key), Some(&body)).json();
        assert_eq!(again["rows"], first["rows"]);
        assert_eq!(
            (again["replay"].as_bool(), again["charged_epsilon"].as_f64()),
            (Some(true), Some(0.0))
        );
        assert_eq!(again["budget"]["spent_epsilon"], 0.5);
    }
    // Any change of a parameter is a new query, charged and answered afresh.
    let other = query_body(
        "adult",
        "SELECT sex, AVG(age) FROM adult GROUP BY sex",
        0.25,
    );
    let changed = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&key),
        Some(&other),
    )
    .json();
    assert_eq!(
        (
            changed["replay"].as_bool(),
            changed["budget"]["spent_epsilon"].as_f64()
        ),
        (Some(false), Some(0.75))
    );
}

#[test]
fn bodies_sql_and_request_rates_over_their_limits_are_refused() {
    let server = TestServer::start(
        "limits",
        &[adult_description()],
        "max_body_bytes = 4096\nmax_sql_bytes = 1000\nrequests_per_second = 0.01\nburst = 12",
    );
    let key = server.analyst("ann", &["adult"], 10.0, 0.0);
    // A fresh connection each time: the server closes one whose body it refused unread.
    let send = |body: &str| {
        request(
            server.address,
            "POST",
            "/v1/explain",
            Some(&key),
            Some(body),
        )
    };
    let long_sql = format!(
        "SELECT COUNT(*) FROM adult WHERE age > 1{}",
        " ".repeat(1000)
    );
    let cases = [
        (query_body("adult", &long_sql, 0.1), 413, "too_large"),
        (
            format!("{{\"pad\": \"{}\"}}", "x".repeat(5000)),
            413,
            "too_large",
        ),
        ("{not json".to_string(), 400, "bad_request"),
        ("{\"dataset\": \"adult\"}".to_string(), 400, "bad_request"),
        (
            "{\"dataset\": \"adult\", \"sql\": \"SELECT 1\", \"epsilon\": 1, \"extra\": 2}"
                .to_string(),
            400,
            "bad_request",
        ),
        (
            query_body("adult", "SELECT COUNT(*) FROM adult", -1.0),
            400,
            "bad_query",
        ),
        (query_body("adult", "SELEC nothing", 1.0), 400, "bad_query"),
    ];
    for (body, status, code) in &cases {
        let response = send(body);
        assert_eq!(
            (response.status, response.json()["error"]["code"].as_str()),
            (*status, Some(*code)),
            "{body:.80}: {}",
            response.body
        );
    }
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(send(&query_body("adult", "SELECT COUNT(*) FROM adult", 0.1)).status);
    }
    // 12 in the burst: 7 above, then 5 more pass, then the rate refuses.
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    let limited = send(&query_body("adult", "SELECT COUNT(*) FROM adult", 0.1));
    assert_eq!(limited.header("retry-after"), Some("1"));
    assert_eq!(limited.json()["error"]["code"], "rate_limited");
}

#[test]
fn unknown_paths_and_methods_answer_in_json() {
    let server = TestServer::start("paths", &[adult_description()], OPEN);
    let not_found = request(server.address, "GET", "/v1/nothing", None, None);
    assert_eq!(
        (not_found.status, not_found.json()["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let wrong = request(server.address, "DELETE", "/v1/query", None, None);
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.json()["error"]["code"], "bad_request");
    let document = request(server.address, "GET", "/v1/openapi.json", None, None).json();
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    for (_, path) in ENDPOINTS {
        assert!(
            document["paths"].get(path).is_some(),
            "{path} is documented"
        );
    }
    let page = request(server.address, "GET", "/", None, None);
    assert!(page.body.contains("<script src=\"/app.js\""));
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );
}

#[test]
fn no_response_ever_quotes_a_data_value_or_returns_rows() {
    let server = TestServer::start("marker", &[marker::file_dataset("marker")], OPEN);
    let key = server.analyst("ann", &["people"], 1000.0, 1e-3);
    let answered = marker::attack(&server, &key);
    assert!(answered >= 4, "the legitimate queries were answered");
}

/// Adult with its public lookup tables, written beside the test's server
/// with absolute paths to the bundled files.
fn adult_with_public_tables(name: &str) -> std::path::PathBuf {
    let data = adult_description().parent().unwrap().to_path_buf();
    let mut text = std::fs::read_to_string(data.join("adult.toml")).unwrap()
        + &std::fs::read_to_string(data.join("public.toml")).unwrap();
    for file in ["adult.data.csv", "countries.csv", "education_levels.csv"] {
        let path = data.join(file).display().to_string();
        text = text.replace(&format!("file = \"{file}\""), &format!("file = {path:?}"));
    }
    let folder = support::fixture::folder(name);
    let description = folder.join("adult.toml");
    std::fs::write(&description, text).unwrap();
    description
}

#[test]
fn the_service_lists_public_tables_and_answers_joins_with_them() {
    let description = adult_with_public_tables("public-tables-data");
    let server = TestServer::start("public-tables", &[description], OPEN);
    let ann = server.analyst("ann", &["adult"], 5.0, 0.0);
    let datasets = request(server.address, "GET", "/v1/datasets", Some(&ann), None).json();
    assert_eq!(
        datasets["datasets"][0]["public_tables"],
        serde_json::json!(["countries", "education_levels"])
    );
    let sql = "SELECT e.level, COUNT(*) AS n, SUM(a.age) / COUNT(*) AS mean_age FROM adult a \
               JOIN education_levels e ON a.education = e.education GROUP BY e.level";
    let answer = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&ann),
        Some(&query_body("adult", sql, 1.0)),
    );
    assert_eq!(answer.status, 200, "{:?}", answer.json());
    let answer = answer.json();
    let levels: Vec<&str> = answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap())
        .collect();
    assert_eq!(
        levels,
        [
            "bachelors",
            "graduate",
            "post-secondary",
            "primary",
            "secondary"
        ]
    );
    assert_eq!(answer["released"], serde_json::json!([false, true, true]));
}

#[test]
fn the_service_lists_private_tables_and_answers_joins_on_the_person() {
    // The bundled clinic, its ledger kept in a folder of the test's own.
    let clinic = adult_description().parent().unwrap().join("../clinic");
    let folder = support::fixture::folder("clinic-data");
    for file in ["clinic.toml", "people.csv", "visits.csv", "departments.csv"] {
        std::fs::copy(clinic.join(file), folder.join(file)).unwrap();
    }
    let server = TestServer::start("clinic", &[folder.join("clinic.toml")], OPEN);
    let ann = server.analyst("ann", &["people"], 5.0, 0.0);
    let datasets = request(server.address, "GET", "/v1/datasets", Some(&ann), None).json();
    let visits = &datasets["datasets"][0]["private_tables"][0];
    assert_eq!(visits["name"], "visits");
    assert_eq!(visits["person_column"], "person");
    assert_eq!(visits["rows_per_person"], 12);
    let sql = "SELECT p.sex, COUNT(*) AS visits FROM people p JOIN visits v ON v.person = p.id \
               GROUP BY p.sex";
    let answer = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&ann),
        Some(&query_body("people", sql, 1.0)),
    );
    assert_eq!(answer.status, 200, "{:?}", answer.json());
    assert_eq!(answer.json()["rows"].as_array().unwrap().len(), 2);
    let any_key = "SELECT COUNT(*) FROM people p JOIN visits v ON p.age = v.month";
    let refused = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&ann),
        Some(&query_body("people", any_key, 1.0)),
    );
    assert_eq!(
        (refused.status, refused.json()["error"]["code"].as_str()),
        (400, Some("bad_query"))
    );
}

/// Explaining a small count with `auto` on a budget with δ names Gaussian
/// settings that the budget pays for at least as often, with less error;
/// asking for Laplace noise names none.
#[test]
fn explain_names_gaussian_settings_when_many_small_queries_last_longer_with_them() {
    let server = TestServer::start("gaussian-advice", &[adult_description()], "");
    let key = server.analyst("gus", &["adult"], 1.0, 1e-6);
    let sql = "SELECT COUNT(*) FROM adult WHERE age > 40";
    let explain = |body: &str| {
        let response = request(
            server.address,
            "POST",
            "/v1/explain",
            Some(&key),
            Some(body),
        );
        assert_eq!(response.status, 200, "{}", response.body);
        response.json()
    };
    let auto = explain(&query_body("adult", sql, 0.01));
    let advice = &auto["gaussian"];
    assert!(advice["epsilon"].as_f64().unwrap() > 0.01, "{auto}");
    assert_eq!(advice["delta"].as_f64(), Some(1e-6), "{auto}");
    assert!(
        advice["queries_left"].as_u64() >= auto["queries_left"].as_u64(),
        "{auto}"
    );
    let error = &advice["errors"][0];
    assert_eq!(error["measurement"], "count of rows");
    assert!(
        error["gaussian"].as_f64() < error["auto"].as_f64(),
        "{auto}"
    );
    let laplace = format!(
        "{{\"dataset\": \"adult\", \"sql\": \"{sql}\", \"epsilon\": 0.01, \"mechanism\": \"laplace\"}}"
    );
    assert!(explain(&laplace)["gaussian"].is_null());
}

/// Answers leave at their deadline, never earlier, and a copy of the
/// request sent while the first waits gets the answer no earlier than the
/// first (the request's lock is held until then); a refusal, which reads
/// no data, and a replay leave at once. Fails with the hold taken out.
#[test]
fn answers_wait_for_their_deadline_and_copies_wait_with_them() {
    let limits = format!("{OPEN}\ndeadline_floor_ms = 400");
    let server = TestServer::start("deadline", &[adult_description()], &limits);
    let key = server.analyst("ann", &["adult"], 10.0, 0.0);
    let body = query_body("adult", "SELECT COUNT(*) AS n FROM adult", 0.1);
    let address = server.address;
    let timed = |body: String, key: String| {
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let response = request(address, "POST", "/v1/query", Some(&key), Some(&body));
            (started.elapsed(), response)
        })
    };
    let first = timed(body.clone(), key.clone());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let copy = timed(body.clone(), key.clone());
    let (first, copy) = (first.join().unwrap(), copy.join().unwrap());
    for (took, response) in [&first, &copy] {
        assert_eq!(response.status, 200, "{}", response.body);
        assert!(took.as_millis() >= 350, "left after {took:?}");
    }
    assert_eq!(first.1.json()["rows"], copy.1.json()["rows"]);
    // The first left at its deadline; the copy, which came 50 ms later,
    // no earlier than that.
    assert!(copy.0.as_millis() + 50 >= 400, "copy after {:?}", copy.0);
    let (replayed, response) = timed(body, key.clone()).join().unwrap();
    assert_eq!(response.json()["replay"], true, "{}", response.body);
    assert!(replayed.as_millis() < 350, "a replay waited {replayed:?}");
    let refused = query_body("adult", "SELECT * FROM adult", 0.1);
    let (took, response) = timed(refused, key).join().unwrap();
    assert_eq!(response.status, 400, "{}", response.body);
    assert!(took.as_millis() < 350, "a refusal waited {took:?}");
}
