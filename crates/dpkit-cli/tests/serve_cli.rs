//! `dpkit serve` as a real process: its analyst commands, its log, and
//! `kill -9` under load.

#[allow(dead_code)]
#[path = "../../dpkit-serve/tests/support/http.rs"]
mod http;
#[path = "../../dpkit-query/tests/support/postgres.rs"]
mod postgres;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::request;

fn dpkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dpkit"))
}

/// A folder with a serve.toml over the bundled Adult data.
fn setup(name: &str) -> PathBuf {
    let folder =
        std::env::temp_dir().join(format!("dpkit-serve-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let adult = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult/adult.toml");
    let config = format!(
        "address = \"127.0.0.1:0\"\nstate_dir = \"state\"\n[[datasets]]\ndescription = {:?}\n\
         [limits]\nrequests_per_second = 100000\nburst = 100000\n",
        adult.display().to_string()
    );
    std::fs::write(folder.join("serve.toml"), config).unwrap();
    folder
}

/// Where a test's servers keep their state: the file in the folder's
/// `state`, or a PostgreSQL server the test started.
enum State {
    File(PathBuf),
    Postgres(postgres::Postgres),
}

impl State {
    /// The rows of the query `sql` on the state, each value as text
    /// (`None` for NULL); a file is checked whole first.
    fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        match self {
            State::File(path) => sqlite_rows(path, sql),
            State::Postgres(server) => server.rows(sql),
        }
    }
}

/// A folder set up as [`setup`] does, with its state in a PostgreSQL
/// server started for it, which keeps its commits through a crash.
fn setup_postgres(name: &str) -> (PathBuf, State) {
    let folder = setup(name);
    let server = postgres::Postgres::start_durable(&format!("serve-{name}"));
    let mut config = std::fs::read_to_string(folder.join("serve.toml")).unwrap();
    config.push_str(&format!(
        "[state_postgres]\nconnection = {:?}\n",
        server.connection()
    ));
    std::fs::write(folder.join("serve.toml"), config).unwrap();
    (folder, State::Postgres(server))
}

/// A folder set up as [`setup`] does, with its state in a file.
fn setup_file(name: &str) -> (PathBuf, State) {
    let folder = setup(name);
    let state = State::File(folder.join("state/state.sqlite"));
    (folder, state)
}

/// Runs `dpkit serve <args> --config …`: its status, standard output and error.
fn serve_command(folder: &Path, args: &[&str]) -> (bool, String, String) {
    let output = dpkit()
        .arg("serve")
        .args(args)
        .arg("--config")
        .arg(folder.join("serve.toml"))
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn add_analyst(folder: &Path, name: &str, epsilon: &str) -> String {
    add_analyst_with(folder, name, epsilon, "1e-6")
}

/// Adds `name` with a budget of `epsilon` and `delta` on Adult; its key.
fn add_analyst_with(folder: &Path, name: &str, epsilon: &str, delta: &str) -> String {
    let (ok, out, err) = serve_command(
        folder,
        &[
            "analyst",
            "add",
            name,
            "--dataset",
            "adult",
            "--epsilon",
            epsilon,
            "--delta",
            delta,
        ],
    );
    assert!(ok, "{err}");
    out.lines().next().unwrap().to_string()
}

/// A running server process and where it listens.
struct Running {
    child: Child,
    address: SocketAddr,
    /// Where it serves health and metrics, if it does.
    operations: Option<SocketAddr>,
}

/// A test that fails leaves no server running.
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// `kill -9`, and waits until it is gone.
    fn stop(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// A counter's value in its metrics.
    fn metric(&self, name: &str) -> f64 {
        let text = request(self.operations.unwrap(), "GET", "/metrics", None, None).body;
        let line = text.lines().find(|l| l.starts_with(&format!("{name} ")));
        line.and_then(|l| l.split(' ').nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the metrics"))
    }
}

fn start(folder: &Path, log: &Path) -> Running {
    start_with(folder, log, &[]).0
}

/// Starts the server with `extra` arguments; also the lines it printed
/// before the one with its address.
fn start_with(folder: &Path, log: &Path, extra: &[&str]) -> (Running, Vec<String>) {
    started(spawn(folder, log, extra))
}

/// `dpkit serve` with `extra` arguments, its output piped, its errors to `log`.
fn spawn(folder: &Path, log: &Path, extra: &[&str]) -> Child {
    dpkit()
        .args(["serve", "--config"])
        .arg(folder.join("serve.toml"))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

/// The server `child` once it says where it listens; also the lines it
/// printed before.
fn started(mut child: Child) -> (Running, Vec<String>) {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut before = Vec::new();
    let mut line = String::new();
    while stdout.read_line(&mut line).unwrap() > 0 && !line.contains("http://") {
        before.push(std::mem::take(&mut line));
    }
    let at = |n: usize| -> Option<SocketAddr> {
        line.split("http://")
            .nth(n)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
    };
    let address = at(1).unwrap_or_else(|| panic!("the server did not start: {line:?}"));
    let operations = at(2);
    (
        Running {
            child,
            address,
            operations,
        },
        before,
    )
}

/// Two servers started at once, from `homes`' configurations, each with
/// its own operations address.
fn start_two(homes: &[PathBuf; 2], log: &Path) -> [Running; 2] {
    let extra = ["--operations-address", "127.0.0.1:0"];
    let children = [spawn(&homes[0], log, &extra), spawn(&homes[1], log, &extra)];
    children.map(|child| started(child).0)
}

/// The folders two servers on `state` start from: `folder` for both on a
/// state file, as on one machine; for a state in PostgreSQL, `folder` and
/// a second with the same serve.toml and a state directory of its own, as
/// on two machines (nothing on disk is shared).
fn homes(folder: &Path, state: &State) -> [PathBuf; 2] {
    match state {
        State::File(_) => [folder.to_path_buf(), folder.to_path_buf()],
        State::Postgres(_) => {
            let second = folder.join("second-machine");
            std::fs::create_dir_all(&second).unwrap();
            std::fs::copy(folder.join("serve.toml"), second.join("serve.toml")).unwrap();
            [folder.to_path_buf(), second]
        }
    }
}

#[test]
fn analysts_are_added_listed_budgeted_and_revoked_from_the_command_line() {
    let folder = setup("analysts");
    let key = add_analyst(&folder, "ann", "5");
    assert!(key.starts_with("dpk_") && key.len() == 68, "{key}");
    let (ok, _, err) = serve_command(&folder, &["analyst", "add", "ann", "--dataset", "adult"]);
    assert!(
        !ok && err.trim().lines().count() == 1 && err.contains("exists already"),
        "{err}"
    );
    let (ok, _, err) = serve_command(&folder, &["analyst", "add", "bob", "--dataset", "nosuch"]);
    // One line, naming the datasets there are (issue 67).
    assert!(
        !ok && err.contains("no dataset named nosuch")
            && err.contains("its datasets are adult")
            && err.trim().lines().count() == 1,
        "{err}"
    );
    let (ok, out, _) = serve_command(
        &folder,
        &[
            "analyst",
            "budget",
            "ann",
            "--dataset",
            "adult",
            "--epsilon",
            "7.5",
        ],
    );
    // δ, not given, stays what ann had (1e-6), not the description's.
    assert!(
        ok && out.contains("ann (key made") && out.contains("spent ε = 0 of 7.5, δ = 0e0 of 1e-6"),
        "{out}"
    );
    let (ok, out, _) = serve_command(&folder, &["analyst", "revoke", "ann"]);
    assert!(ok, "{out}");
    let (_, out, _) = serve_command(&folder, &["analyst", "list"]);
    assert!(out.contains("revoked"), "{out}");
    let state = std::fs::read(folder.join("state/state.sqlite")).unwrap();
    assert!(
        !state.windows(64).any(|w| w == &key.as_bytes()[4..]),
        "the key is stored"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Issue 31's traps: a revoked name could never have a key again, and the
/// address was only in serve.toml.
#[test]
fn a_revoked_analyst_gets_a_new_key_and_the_address_can_be_given() {
    let folder = setup("rekey");
    let old = add_analyst(&folder, "ann", "5");
    serve_command(&folder, &["analyst", "revoke", "ann"]);
    let (ok, out, err) = serve_command(&folder, &["analyst", "rekey", "ann"]);
    assert!(ok, "{err}");
    let new = out.lines().next().unwrap().to_string();
    assert!(
        new.starts_with("dpk_") && new.len() == 68 && new != old,
        "{out}"
    );
    let (_, listed, _) = serve_command(&folder, &["analyst", "list"]);
    assert!(
        listed.contains("ann (key made") && listed.contains(", live)"),
        "{listed}"
    );
    let (ok, _, err) = serve_command(&folder, &["analyst", "rekey", "nobody"]);
    assert!(
        !ok && err.trim() == "dpkit: error: no analyst is named nobody",
        "{err}"
    );

    // An address this machine does not have, replaced by --address.
    let config = std::fs::read_to_string(folder.join("serve.toml"))
        .unwrap()
        .replace("127.0.0.1:0", "192.0.2.1:8640");
    std::fs::write(folder.join("serve.toml"), config).unwrap();
    let (mut server, _) = start_with(
        &folder,
        &folder.join("server.log"),
        &["--address", "127.0.0.1:0"],
    );
    let body = r#"{"dataset":"adult","sql":"SELECT COUNT(*) FROM adult","epsilon":0.5}"#;
    for (key, status) in [(&old, 401), (&new, 200)] {
        let answer = request(server.address, "POST", "/v1/query", Some(key), Some(body));
        assert_eq!(answer.status, status, "{}", answer.body);
    }
    server.stop();
    let (_, listed, _) = serve_command(&folder, &["analyst", "list"]);
    assert!(listed.contains("adult: spent ε = 0.5 of 5,"), "{listed}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn the_state_is_backed_up_while_serving_and_restored_only_when_stopped_and_knowingly() {
    let folder = setup("backup");
    let key = add_analyst(&folder, "ann", "5");
    let mut server = start(&folder, &folder.join("server.log"));
    let query = |sql: &str| {
        let body = format!(r#"{{"dataset":"adult","sql":"{sql}","epsilon":0.5}}"#);
        let answer = request(server.address, "POST", "/v1/query", Some(&key), Some(&body));
        assert_eq!(answer.status, 200, "{}", answer.body);
    };
    query("SELECT COUNT(*) FROM adult");
    let copy = folder.join("copy.sqlite").display().to_string();
    let (ok, out, err) = serve_command(&folder, &["backup", &copy]);
    assert!(ok, "{err}");
    let summary = format!(": 1 analyst(s), 1 account(s), 1 charge(s), to {copy}\n");
    assert!(
        out.starts_with("backed up the state as it was at ") && out.ends_with(&summary),
        "{out}"
    );
    query("SELECT COUNT(*) FROM adult WHERE age > 30");
    let (ok, _, err) = serve_command(&folder, &["restore", &copy]);
    assert!(!ok && err.contains("is using"), "{err}");
    server.stop();

    // Stopped: the copy is behind what was spent, so it goes back only when asked.
    let (ok, _, err) = serve_command(&folder, &["restore", &copy]);
    assert!(!ok && err.lines().count() == 1, "{err}");
    assert!(
        err.contains("changed since this backup") && err.contains("--forget-later-changes"),
        "{err}"
    );
    let (_, listed, _) = serve_command(&folder, &["analyst", "list"]);
    assert!(listed.contains("adult: spent ε = 1 of 5,"), "{listed}");
    let (ok, out, err) = serve_command(&folder, &["restore", &copy, "--forget-later-changes"]);
    assert!(
        ok && out.starts_with("restored the state as it was at "),
        "{err}"
    );
    let (_, listed, _) = serve_command(&folder, &["analyst", "list"]);
    assert!(listed.contains("adult: spent ε = 0.5 of 5,"), "{listed}");
    assert!(folder.join("state/state.sqlite.before-restore").exists());
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn without_a_configuration_the_error_says_how_to_give_one() {
    let folder = std::env::temp_dir().join(format!("dpkit-serve-cli-empty-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let output = dpkit()
        .args(["serve", "analyst", "list"])
        .current_dir(&folder)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        err,
        "dpkit: error: cannot read serve.toml: no such file; give the server's configuration \
         with --config FILE (dpkit's repository has data/adult/serve.toml for the demo)\n"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn the_demo_makes_its_analyst_once_and_answers_with_its_key() {
    let folder = setup("demo");
    let log = folder.join("server.log");
    // Two started at once on a new state, then one alone.
    let both = [0, 1].map(|_| spawn(&folder, &log, &["--demo"]));
    let mut started: Vec<_> = both.into_iter().map(started).collect();
    started.push(start_with(&folder, &log, &["--demo"]));
    let mut keys = Vec::new();
    for (mut server, printed) in started {
        let key = printed
            .iter()
            .find_map(|l| l.split_whitespace().find(|w| w.starts_with("dpk_")))
            .unwrap_or_else(|| panic!("no key printed: {printed:?}"))
            .to_string();
        let body = r#"{"dataset":"adult","sql":"SELECT COUNT(*) FROM adult","epsilon":0.5}"#;
        let answer = request(server.address, "POST", "/v1/query", Some(&key), Some(body));
        assert_eq!(answer.status, 200, "{}", answer.body);
        server.stop();
        keys.push(key);
    }
    assert!(
        keys.iter().all(|k| k == &keys[0]),
        "every start uses the one demo analyst"
    );
    let kept = std::fs::read_to_string(folder.join("state/demo.key")).unwrap();
    assert_eq!(kept.trim(), keys[0]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(folder.join("state/demo.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key file is the owner's alone");
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn keys_never_reach_the_servers_output() {
    let folder = setup("log");
    let key = add_analyst(&folder, "ann", "5");
    let revoked = add_analyst(&folder, "old", "5");
    serve_command(&folder, &["analyst", "revoke", "old"]);
    let log = folder.join("server.log");
    let mut server = start(&folder, &log);
    let body = r#"{"dataset":"adult","sql":"SELECT COUNT(*) FROM adult","epsilon":0.5}"#;
    let wrong = format!("{}0", &key[..key.len() - 1]);
    for credential in [key.as_str(), revoked.as_str(), wrong.as_str()] {
        for (method, path) in [
            ("GET", "/v1/datasets"),
            ("GET", "/v1/budget"),
            ("POST", "/v1/query"),
            ("POST", "/v1/explain"),
        ] {
            let body = (method == "POST").then_some(body);
            request(server.address, method, path, Some(credential), body);
        }
        request(
            server.address,
            "GET",
            &format!("/v1/datasets?key={credential}"),
            Some(credential),
            None,
        );
        request(
            server.address,
            "POST",
            "/v1/query",
            Some(credential),
            Some(&format!("{{\"sql\": \"{credential}\"}}")),
        );
    }
    let _ = Command::new("kill")
        .arg(server.child.id().to_string())
        .status();
    assert!(server.child.wait().unwrap().success() || cfg!(not(unix)));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() >= 18, "one line per request: {text}");
    for credential in [&key, &revoked, &wrong] {
        assert!(
            !text.contains(&credential[4..20]),
            "a key is in the log:\n{text}"
        );
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// One answered request: its SQL and the rows released.
type Released = (String, serde_json::Value);

/// One client's server, and the server it moves to, with the request it
/// had in flight, if its own goes away (as behind a load balancer).
type Target = (SocketAddr, Option<SocketAddr>);

/// Eight clients that send distinct queries, client `c` to `targets[c %
/// targets.len()]`, until `stop` is set or their server goes away (each
/// then moves its request to its other server, if it has one, and stops).
/// Each says whether `stop` ended it.
fn load(
    targets: &[Target],
    key: &str,
    (next, stop): (&Arc<AtomicUsize>, &Arc<AtomicBool>),
    released: &Arc<Mutex<Vec<Released>>>,
) -> Vec<std::thread::JoinHandle<bool>> {
    (0..8)
        .map(|c| {
            let (address, moved) = targets[c % targets.len()];
            let (key, next, released, stop) = (
                key.to_string(),
                next.clone(),
                released.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                let mut connection = http::Connection::new(address);
                while !stop.load(Ordering::Relaxed) {
                    let (sql, body) = distinct_query(next.fetch_add(1, Ordering::Relaxed));
                    let send = connection.send("POST", "/v1/query", Some(&key), Some(&body));
                    let (response, gone) = match (send, moved) {
                        (Ok(response), _) => (response, false),
                        (Err(_), Some(other)) => (
                            request(other, "POST", "/v1/query", Some(&key), Some(&body)),
                            true,
                        ),
                        (Err(_), None) => return false,
                    };
                    assert_eq!(response.status, 200, "{}", response.body);
                    let rows = response.json()["rows"].clone();
                    released.lock().unwrap().push((sql, rows));
                    if gone {
                        return false;
                    }
                }
                true
            })
        })
        .collect()
}

/// The `i`th of the load's distinct queries: its SQL and request body.
fn distinct_query(i: usize) -> (String, String) {
    let sql = format!(
        "SELECT sex, COUNT(*) AS q{i} FROM adult WHERE age > {} GROUP BY sex",
        17 + i % 60
    );
    let body = serde_json::json!({"dataset": "adult", "sql": sql, "epsilon": 0.01}).to_string();
    (sql, body)
}

/// The charges in the state database: (query, status, kept answer).
fn charges(state: &State) -> Vec<(String, String, Option<String>)> {
    let rows = state.rows(
        "SELECT s.query, s.status, r.answer FROM spends s LEFT JOIN replays r ON r.spend = s.id \
         WHERE s.account = 'ann/adult'",
    );
    rows.into_iter()
        .map(|row| {
            let [query, status, answer] = <[_; 3]>::try_from(row).unwrap();
            (query.unwrap(), status.unwrap(), answer)
        })
        .collect()
}

/// The rows of `sql` in the state file `path`, once it is checked whole.
fn sqlite_rows(path: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    use rusqlite::types::ValueRef;
    let connection = rusqlite::Connection::open(path).unwrap();
    let integrity: String = connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let mut statement = connection.prepare(sql).unwrap();
    let columns = statement.column_count();
    let text = |value: ValueRef| match value {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(r) => Some(r.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    };
    statement
        .query_map([], |row| {
            (0..columns)
                .map(|i| row.get_ref(i).map(text))
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What a round of kills must leave: no charge lost (`charged_before` is
/// the last round's count), and a charge and a kept answer for every
/// answer released. The count of charges now.
fn nothing_lost(state: &State, released: &Mutex<Vec<Released>>, charged_before: usize) -> usize {
    let charges = charges(state);
    let charged = charges.iter().filter(|c| c.1 == "charged").count();
    assert!(charged >= charged_before, "a charge was lost");
    for (sql, _) in released.lock().unwrap().iter() {
        let charge = charges.iter().find(|c| &c.0 == sql);
        assert!(
            matches!(charge, Some((_, status, Some(_))) if status == "charged"),
            "{sql} was answered without a charge and a kept answer"
        );
    }
    charged
}

/// After the last kill, from `servers` in turn: every answer released is
/// given again, free and the same, and a request charged but never
/// answered runs under its charge. Returns how many were unanswered.
fn all_answered_again(
    servers: &[SocketAddr],
    key: &str,
    state: &State,
    released: &[Released],
) -> usize {
    let ask = |i: usize, sql: &str| {
        let body = serde_json::json!({"dataset": "adult", "sql": sql, "epsilon": 0.01}).to_string();
        request(
            servers[i % servers.len()],
            "POST",
            "/v1/query",
            Some(key),
            Some(&body),
        )
    };
    for (i, (sql, rows)) in released.iter().enumerate() {
        let again = ask(i, sql).json();
        assert_eq!(
            (&again["rows"], again["replay"].as_bool()),
            (rows, Some(true)),
            "{sql}"
        );
    }
    let charges = charges(state);
    let unanswered: Vec<_> = charges
        .iter()
        .filter(|c| c.2.is_none() && c.1 == "charged")
        .collect();
    for (i, (sql, _, _)) in unanswered.iter().enumerate() {
        let response = ask(i, sql);
        assert_eq!(response.status, 200, "{}", response.body);
    }
    let after = self::charges(state);
    let charged =
        |c: &[(String, String, Option<String>)]| c.iter().filter(|c| c.1 == "charged").count();
    assert_eq!(
        charged(&after),
        charged(&charges),
        "resending charged requests charged again"
    );
    assert!(
        after.iter().all(|c| c.1 != "charged" || c.2.is_some()),
        "every charge now has its answer"
    );
    let budget = request(servers[0], "GET", "/v1/budget", Some(key), None).json();
    let spent = budget["budgets"][0]["spent_epsilon"].as_f64().unwrap();
    assert!(
        (spent - 0.01 * after.len() as f64).abs() < 1e-9,
        "spent {spent} for {} charges",
        after.len()
    );
    unanswered.len()
}

#[test]
fn kill_9_under_load_never_releases_an_answer_without_its_charge_nor_loses_one() {
    let (folder, state) = setup_file("kill");
    let key = add_analyst(&folder, "ann", "1000");
    let log = folder.join("server.log");
    let (next, never) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let released = Arc::new(Mutex::new(Vec::new()));
    let mut charged = 0;
    for round in 0..30u64 {
        let mut server = start(&folder, &log);
        let clients = load(&[(server.address, None)], &key, (&next, &never), &released);
        // A different moment each round: 20 to 400 ms into the load.
        std::thread::sleep(Duration::from_millis(20 + (round * 7919) % 380));
        server.stop();
        for client in clients {
            client.join().unwrap();
        }
        charged = nothing_lost(&state, &released, charged);
    }
    let released = released.lock().unwrap().clone();
    assert!(
        released.len() >= 60,
        "too little load to mean anything: {}",
        released.len()
    );
    let mut server = start(&folder, &log);
    let unanswered = all_answered_again(&[server.address], &key, &state, &released);
    server.stop();
    println!(
        "30 kills: {} answers released, {} charges, {unanswered} charged but unanswered at a kill",
        released.len(),
        charges(&state).len(),
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Distinct queries from eight clients spread over `servers` until the
/// budget refuses: how many were answered.
fn spend_all(servers: [SocketAddr; 2], key: &str) -> usize {
    let (next, answered) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for c in 0..8 {
            let (next, answered) = (&next, &answered);
            scope.spawn(move || {
                let mut connection = http::Connection::new(servers[c % 2]);
                loop {
                    let (_, body) = distinct_query(next.fetch_add(1, Ordering::Relaxed));
                    let response = connection
                        .send("POST", "/v1/query", Some(key), Some(&body))
                        .unwrap();
                    match response.status {
                        200 => answered.fetch_add(1, Ordering::Relaxed),
                        409 => return,
                        _ => panic!("{}", response.body),
                    };
                }
            });
        }
    });
    answered.into_inner()
}

/// One request sent four times to each server at once: every copy's rows.
fn same_request_on_both(servers: [SocketAddr; 2], key: &str, body: &str) -> Vec<serde_json::Value> {
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|scope| {
        let copies: Vec<_> = (0..8)
            .map(|c| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let response =
                        request(servers[c % 2], "POST", "/v1/query", Some(key), Some(body));
                    assert_eq!(response.status, 200, "{}", response.body);
                    response.json()["rows"].clone()
                })
            })
            .collect();
        copies.into_iter().map(|c| c.join().unwrap()).collect()
    })
}

/// Two servers on one state directory, as two processes behind one
/// address: racing queries spread over both charge exactly the budget,
/// and one request sent to both at once is charged and answered once.
#[test]
fn two_servers_on_one_state_charge_exactly_the_budget_and_answer_a_request_once() {
    let (folder, state) = setup_file("two");
    two_servers_charge_exactly_the_budget_and_answer_a_request_once(&folder, &state);
}

/// As [`two_servers_on_one_state_charge_exactly_the_budget_and_answer_a_request_once`],
/// with the state in PostgreSQL, as servers on two machines would share it.
#[test]
fn two_servers_on_a_postgresql_state_charge_exactly_the_budget_and_answer_a_request_once() {
    let (folder, state) = setup_postgres("two-pg");
    two_servers_charge_exactly_the_budget_and_answer_a_request_once(&folder, &state);
}

fn two_servers_charge_exactly_the_budget_and_answer_a_request_once(folder: &Path, state: &State) {
    let folder = folder.to_path_buf();
    // Both start at once on a state that does not exist yet.
    let homes = homes(&folder, state);
    let mut running = start_two(&homes, &folder.join("server.log"));
    let servers = [running[0].address, running[1].address];
    // δ = 0: plain sums only, so the budget pays for exactly 100 at ε = 0.01.
    let (ann, bob) = (
        add_analyst_with(&folder, "ann", "1", "0"),
        add_analyst_with(&folder, "bob", "1", "0"),
    );
    assert_eq!(spend_all(servers, &ann), 100);
    for server in servers {
        let budget = request(server, "GET", "/v1/budget", Some(&ann), None).json();
        assert_eq!(budget["budgets"][0]["spent_epsilon"].as_f64(), Some(1.0));
    }
    let writes = |running: &[Running; 2]| -> f64 {
        running
            .iter()
            .map(|r| r.metric("dpkit_ledger_writes_total"))
            .sum()
    };
    let before = writes(&running);
    for i in 0..10 {
        let (_, body) = distinct_query(i);
        let copies = same_request_on_both(servers, &bob, &body);
        assert!(copies.iter().all(|rows| rows == &copies[0]), "{copies:?}");
    }
    // One charge and one kept answer a request: no copy ran beside another
    // (a second run would have charged and kept too); the others found the
    // answer kept, which is a read.
    assert_eq!(writes(&running) - before, 20.0, "copies ran side by side");
    let counts = state.rows(
        "SELECT COUNT(*), COUNT(r.answer) FROM spends s LEFT JOIN replays r ON r.spend = s.id
         WHERE s.account = 'bob/adult' AND s.status = 'charged'",
    );
    let ten = Some("10".to_string());
    assert_eq!(counts, [[ten.clone(), ten]]);
    if let State::Postgres(_) = state {
        for home in &homes {
            let state = home.join("state");
            let written = ["state.sqlite", "requests"].map(|name| state.join(name).exists());
            assert_eq!(written, [false, false], "state kept in {}", state.display());
        }
    }
    for server in &mut running {
        server.stop();
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// `kill -9` of one of two servers on one state, under load: the other
/// serves on (the clients on it see no error, and the requests the killed
/// one had in flight are sent to it), and nothing is lost.
#[test]
fn kill_9_of_one_of_two_servers_loses_nothing_and_the_other_serves_on() {
    let (folder, state) = setup_file("kill-two");
    kill_9_of_one_of_two_loses_nothing(&folder, &state);
}

/// As [`kill_9_of_one_of_two_servers_loses_nothing_and_the_other_serves_on`],
/// with the state in PostgreSQL: the killed server's sessions end with it,
/// and with them its requests' turns.
#[test]
fn kill_9_of_one_of_two_servers_on_a_postgresql_state_loses_nothing() {
    let (folder, state) = setup_postgres("kill-two-pg");
    kill_9_of_one_of_two_loses_nothing(&folder, &state);
}

fn kill_9_of_one_of_two_loses_nothing(folder: &Path, state: &State) {
    let folder = folder.to_path_buf();
    let key = add_analyst(&folder, "ann", "1000");
    let log = folder.join("server.log");
    let (next, released) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let homes = homes(&folder, state);
    let mut running = [start(&homes[0], &log), start(&homes[1], &log)];
    let mut charged = 0;
    for round in 0..12u64 {
        let (victim, other) = (
            running[round as usize % 2].address,
            running[1 - round as usize % 2].address,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let targets = [(victim, Some(other)), (other, None)];
        let clients = load(&targets, &key, (&next, &stop), &released);
        std::thread::sleep(Duration::from_millis(20 + (round * 7919) % 380));
        let killed = &mut running[round as usize % 2];
        killed.stop();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        for (c, client) in clients.into_iter().enumerate() {
            let stopped = client.join().unwrap();
            assert_eq!(stopped, c % 2 == 1, "client {c} in round {round}");
        }
        charged = nothing_lost(state, &released, charged);
        *killed = start(&homes[round as usize % 2], &log);
    }
    // A request moved from the killed server ran under the charge it had
    // there, if it had one: no query was charged twice.
    let queries = charges(state);
    for (sql, _, _) in &queries {
        let times = queries
            .iter()
            .filter(|c| &c.0 == sql && c.1 == "charged")
            .count();
        assert!(times <= 1, "{sql} was charged {times} times");
    }
    let released = released.lock().unwrap().clone();
    assert!(released.len() >= 60, "too little load: {}", released.len());
    let servers = [running[0].address, running[1].address];
    let unanswered = all_answered_again(&servers, &key, state, &released);
    for server in &mut running {
        server.stop();
    }
    println!(
        "12 kills of one of two: {} answers released, {} charges, {unanswered} charged but unanswered",
        released.len(),
        charges(state).len(),
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

/// The operators' health check of `running`: its status.
fn health(running: &Running) -> u16 {
    request(running.operations.unwrap(), "GET", "/health", None, None).status
}

/// Whether `running`'s health turns `status` within `seconds`.
fn turns_to(running: &Running, status: u16, seconds: u64) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    while health(running) != status {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// A PostgreSQL state that ends every session under a running server, then
/// stops and starts again (a restart): the server answers on, on new
/// sessions, its answers kept and its budgets whole; while the database is
/// down, its health says so and nothing is answered.
#[test]
fn a_server_answers_on_after_its_postgresql_state_restarts() {
    let (folder, mut state) = setup_postgres("ended");
    let State::Postgres(database) = &mut state else {
        unreachable!("set up in PostgreSQL")
    };
    let key = add_analyst_with(&folder, "ann", "1", "0");
    let log = folder.join("server.log");
    let (running, _) = start_with(&folder, &log, &["--operations-address", "127.0.0.1:0"]);
    let ask = |i: usize| {
        let (_, body) = distinct_query(i);
        request(
            running.address,
            "POST",
            "/v1/query",
            Some(&key),
            Some(&body),
        )
    };
    let first = ask(0);
    assert_eq!(first.status, 200, "{}", first.body);
    database.psql(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
    std::thread::sleep(Duration::from_millis(100));
    for i in 1..4 {
        let response = ask(i);
        assert_eq!(response.status, 200, "{}", response.body);
    }
    database.stop();
    assert!(turns_to(&running, 503, 10), "healthy with its state down");
    assert_ne!(ask(4).status, 200, "answered with its state down");
    database.start_again();
    assert!(turns_to(&running, 200, 30), "unhealthy with its state back");
    let answered = ask(5);
    assert_eq!(answered.status, 200, "{}", answered.body);
    let again = ask(0).json();
    assert_eq!(
        (&again["rows"], again["replay"].as_bool()),
        (&first.json()["rows"], Some(true))
    );
    let budget = request(running.address, "GET", "/v1/budget", Some(&key), None).json();
    let spent = budget["budgets"][0]["spent_epsilon"].as_f64().unwrap();
    assert!((spent - 0.05).abs() < 1e-9, "spent {spent} for 5 answers");
    drop(running);
    let (ok, _, err) = serve_command(&folder, &["backup", "/tmp/never-written.sqlite"]);
    assert!(!ok && err.trim().lines().count() == 1, "{err}");
    assert!(err.contains("pg_dump"), "{err}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn a_dataset_may_be_served_under_a_name_of_its_own() {
    // issue 67: the dataset took its main table's name (planes, for
    // flights); `name` in serve.toml names it.
    let folder = setup("named");
    let config = std::fs::read_to_string(folder.join("serve.toml")).unwrap();
    let named = config.replacen("[[datasets]]\n", "[[datasets]]\nname = \"census\"\n", 1);
    assert_ne!(named, config);
    std::fs::write(folder.join("serve.toml"), named).unwrap();
    let add = |dataset: &str| {
        serve_command(
            &folder,
            &[
                "analyst",
                "add",
                "ann",
                "--dataset",
                dataset,
                "--epsilon",
                "2",
            ],
        )
    };
    let (ok, _, err) = add("adult");
    assert!(!ok && err.contains("its datasets are census"), "{err}");
    let (ok, _, err) = add("census");
    assert!(ok, "{err}");
    let (ok, out, _) = serve_command(&folder, &["analyst", "list"]);
    assert!(ok && out.contains("  census: spent ε = 0 of 2"), "{out}");
    std::fs::remove_dir_all(&folder).unwrap();
}
