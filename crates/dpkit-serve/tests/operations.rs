//! What the people who run the service get: `/health` and `/metrics` on
//! their own listener (never on the analysts'), and a backup taken under
//! load that restores every account and key, and never grants spent budget
//! again unasked.

mod support;

use dpkit_ledger::{Ledger, Restore};
use dpkit_serve::backup::{backup, restore};
use support::fixture::{TestServer, adult_description};
use support::http::request;

/// Generous limits, so no request is refused for its rate.
const OPEN: &str = "requests_per_second = 100000\nburst = 100000";

fn query_body(sql: &str, epsilon: f64) -> String {
    serde_json::json!({"dataset": "adult", "sql": sql, "epsilon": epsilon}).to_string()
}

/// Every line is a `# HELP`, a `# TYPE` or a sample `name{labels} value`
/// of a family whose type was given.
fn check_text_format(text: &str) {
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("a type line names its kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (sample, value) = line.rsplit_once(' ').expect("a sample has a value");
        assert!(value.parse::<f64>().is_ok(), "{line}");
        let name = sample.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{line}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "no # TYPE for {line}");
    }
}

#[test]
fn operators_see_health_and_metrics_on_their_own_address_and_analysts_do_not() {
    let server = TestServer::start_with_operations("operations", &[adult_description()], OPEN);
    let operations = server.operations.expect("the operators' listener");
    let key = server.analyst("ann", &["adult"], 10.0, 0.0);
    let secret = "SELECT COUNT(*) FROM adult WHERE \"native-country\" = 'Holand-Netherlands'";
    let body = query_body(secret, 0.5);
    let answered = request(server.address, "POST", "/v1/query", Some(&key), Some(&body));
    assert_eq!(answered.status, 200, "{}", answered.body);
    let explained = request(
        server.address,
        "POST",
        "/v1/explain",
        Some(&key),
        Some(&body),
    );
    assert_eq!(explained.status, 200);
    let stranger = request(
        server.address,
        "POST",
        "/v1/query",
        Some("dpk_0"),
        Some(&body),
    );
    assert_eq!(stranger.status, 401);
    request(
        server.address,
        "GET",
        "/v1/private-path-Holand",
        Some(&key),
        None,
    );

    // The analysts' listener has neither, with a key or without (four
    // more requests to paths of no endpoint).
    for path in ["/health", "/metrics"] {
        for key in [None, Some(key.as_str())] {
            assert_eq!(request(server.address, "GET", path, key, None).status, 404);
        }
    }

    let health = request(operations, "GET", "/health", None, None);
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let metrics = request(operations, "GET", "/metrics", None, None);
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = &metrics.body;
    check_text_format(text);
    for line in [
        "dpkit_requests_total{endpoint=\"/v1/query\",status=\"200\"} 1",
        "dpkit_requests_total{endpoint=\"/v1/query\",status=\"401\"} 1",
        "dpkit_requests_total{endpoint=\"/v1/explain\",status=\"200\"} 1",
        "dpkit_requests_total{endpoint=\"other\",status=\"404\"} 5",
        "dpkit_request_duration_seconds_count{endpoint=\"/v1/query\"} 2",
        "dpkit_wait_seconds_count 2",
        "dpkit_runs 0",
        "dpkit_waiting 0",
        "dpkit_ledger_writes_total 2",
        "dpkit_budget_total_epsilon{analyst=\"ann\",dataset=\"adult\"} 10",
        "dpkit_budget_spent_epsilon{analyst=\"ann\",dataset=\"adult\"} 0.5",
        "dpkit_budget_queries{analyst=\"ann\",dataset=\"adult\"} 1",
    ] {
        assert!(text.contains(&format!("{line}\n")), "no {line} in\n{text}");
    }
    // Never a key, SQL text, a data value or a path an analyst typed.
    let key_hex = &key["dpk_".len()..];
    for never in [
        key_hex,
        "SELECT",
        "Holand",
        "native-country",
        "private-path",
    ] {
        assert!(!text.contains(never), "{never} in the metrics");
    }
    assert_eq!(
        request(operations, "GET", "/v1/budget", Some(&key), None).status,
        404
    );
}

#[test]
fn a_backup_taken_under_load_restores_every_account_and_key_and_never_grants_spent_budget_unasked()
{
    let server = TestServer::start("backup", &[adult_description()], OPEN);
    let keys: Vec<String> = ["ann", "bob"]
        .iter()
        .map(|name| server.analyst(name, &["adult"], 100.0, 0.0))
        .collect();
    let first = query_body("SELECT COUNT(*) FROM adult", 0.25);
    let ask_first = |address| request(address, "POST", "/v1/query", Some(&keys[0]), Some(&first));
    let kept = ask_first(server.address).json();

    // Both analysts query while the copy is taken.
    let load: Vec<_> = keys
        .iter()
        .map(|key| {
            let (address, key) = (server.address, key.clone());
            std::thread::spawn(move || {
                for age in 20..40 {
                    let sql = format!("SELECT COUNT(*) FROM adult WHERE age > {age}");
                    let body = query_body(&sql, 0.01);
                    let answer = request(address, "POST", "/v1/query", Some(&key), Some(&body));
                    assert_eq!(answer.status, 200, "{}", answer.body);
                }
            })
        })
        .collect();
    let file = server.folder.join("state-backup.sqlite");
    let copied = backup(&server.config, &file).unwrap();
    for thread in load {
        thread.join().unwrap();
    }
    // And once more after it, so the copy is surely behind.
    let last = query_body("SELECT COUNT(*) FROM adult WHERE age > 70", 0.01);
    let answer = request(
        server.address,
        "POST",
        "/v1/query",
        Some(&keys[0]),
        Some(&last),
    );
    assert_eq!(answer.status, 200);
    assert_eq!((copied.analysts, copied.ledger.accounts), (2, 2));
    assert!(
        backup(&server.config, &file).is_err(),
        "a backup overwrote a file"
    );
    // What the copy holds, read from a copy of it (reading a ledger may write).
    let inspected = server.folder.join("inspected.sqlite");
    std::fs::copy(&file, &inspected).unwrap();
    let then: Vec<_> = ["ann/adult", "bob/adult"]
        .iter()
        .map(|account| Ledger::account_state(&inspected, account).unwrap().unwrap())
        .collect();
    assert!(then[0].spent_epsilon >= 0.25);

    // No restore while the server runs.
    let running = restore(&server.config, &file, Restore::ForgetLaterChanges).unwrap_err();
    assert!(running.to_string().contains("is using"), "{running}");

    let mut server = server;
    server.stop();
    let now = Ledger::account_state(&server.state, "ann/adult")
        .unwrap()
        .unwrap();
    assert!((now.spent_epsilon - 0.46).abs() < 1e-9, "{now:?}");
    let refused = restore(&server.config, &file, Restore::KeepLaterChanges).unwrap_err();
    assert!(refused.to_string().contains("changed since"), "{refused}");
    assert_eq!(
        Ledger::account_state(&server.state, "ann/adult")
            .unwrap()
            .unwrap(),
        now
    );
    restore(&server.config, &file, Restore::ForgetLaterChanges).unwrap();
    for (account, then) in ["ann/adult", "bob/adult"].iter().zip(&then) {
        let restored = Ledger::account_state(&server.state, account)
            .unwrap()
            .unwrap();
        assert_eq!(&restored, then);
    }

    // The restored state serves: keys work, budgets are the copy's, and the
    // answer kept before the copy replays.
    let server = server.restart();
    for (key, then) in keys.iter().zip(&then) {
        let budget = request(server.address, "GET", "/v1/budget", Some(key), None);
        assert_eq!(budget.status, 200);
        let spent = budget.json()["budgets"][0]["spent_epsilon"]
            .as_f64()
            .unwrap();
        assert!((spent - then.spent_epsilon).abs() < 1e-12, "{spent}");
    }
    let again = ask_first(server.address).json();
    assert_eq!(
        (again["replay"].as_bool(), &again["rows"]),
        (Some(true), &kept["rows"])
    );

    // No restore while an analyst command or a backup holds the state.
    let mut server = server;
    server.stop();
    let shared = dpkit_serve::server::share_state(&server.config).unwrap();
    let busy = restore(&server.config, &file, Restore::ForgetLaterChanges).unwrap_err();
    assert!(busy.to_string().contains("another command"), "{busy}");
    drop(shared);

    // A key revoked since the copy would work again: refused unless asked.
    dpkit_serve::analysts::Analysts::open(&dpkit_ledger::Store::file(&server.state))
        .unwrap()
        .revoke("bob")
        .unwrap();
    let refused = restore(&server.config, &file, Restore::KeepLaterChanges).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("1 analyst key(s) were revoked"),
        "{refused}"
    );
}
