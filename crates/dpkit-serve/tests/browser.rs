//! The analysts' page in a real headless Chromium, driven over WebDriver
//! by Debian's chromedriver: connect with a key, read the schema, explain,
//! run, and see the table, the chart and the budget change.

mod support;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use support::fixture::{TestServer, adult_description, folder};
use support::http::Connection;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

struct Driver {
    process: Child,
    address: SocketAddr,
    session: String,
}

impl Driver {
    fn start(profile: &std::path::Path) -> Self {
        for program in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(program).exists(),
                "{program} is missing: install Debian's chromium and chromium-driver (bash .ci/run does)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let process = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut driver = Self {
            process,
            address,
            session: String::new(),
        };
        driver.wait_until_ready();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1250",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}});
        let session = driver.call("POST", "/session", Some(capabilities));
        driver.session = session["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        driver
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(status) = Connection::new(self.address).send("GET", "/status", None, None)
                && status.json()["value"]["ready"] == true
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("chromedriver did not become ready within 30 s");
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string());
        let response = Connection::new(self.address)
            .send(method, path, None, body.as_deref())
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e}"));
        assert_eq!(response.status, 200, "WebDriver {path}: {}", response.body);
        response.json()["value"].clone()
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn element(&self, css: &str) -> String {
        let found = self.session_call(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        // An element reference is an object of one member (WebDriver's UUID key).
        let reference = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str);
        reference
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    fn click(&self, css: &str) {
        let element = self.element(css);
        self.session_call(
            "POST",
            &format!("/element/{element}/click"),
            Some(json!({})),
        );
    }

    fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css);
        self.session_call(
            "POST",
            &format!("/element/{element}/clear"),
            Some(json!({})),
        );
        self.session_call(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        );
    }

    fn script(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Waits until `script` returns true, or fails with what the page shows.
    fn wait_for(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.script(script) == Value::Bool(true) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = self.script("return document.getElementById('status').textContent");
        panic!("timed out waiting for {what}; the page says {status}");
    }

    fn text(&self, id: &str) -> String {
        self.script(&format!(
            "return document.getElementById('{id}').textContent"
        ))
        .as_str()
        .unwrap()
        .to_string()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = Connection::new(self.address).send(
                "DELETE",
                &format!("/session/{}", self.session),
                None,
                None,
            );
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[test]
fn an_analyst_explains_runs_and_reads_an_answer_in_a_real_browser() {
    let server = TestServer::start(
        "browser",
        &[adult_description()],
        "requests_per_second = 1000\nburst = 1000",
    );
    let key = server.analyst("ann", &["adult"], 10.0, 1e-5);
    let profile = folder("browser-profile");
    let driver = Driver::start(&profile);
    driver.session_call(
        "POST",
        "/url",
        Some(json!({"url": format!("http://{}/", server.address)})),
    );
    driver.type_into("#key", &key);
    driver.click("#connect-button");
    driver.wait_for(
        "the datasets",
        "return document.getElementById('status').textContent === 'connected'",
    );
    let schema = driver.script("return [...document.querySelectorAll('#schema tbody td:first-child')].map(td => td.textContent)");
    assert!(
        schema.as_array().unwrap().iter().any(|c| c == "age"),
        "{schema}"
    );
    assert!(
        driver.text("budget").contains("ε left 10 of 10"),
        "{}",
        driver.text("budget")
    );
    assert!(driver.text("people").contains("32561 people"));

    driver.type_into(
        "#sql",
        "SELECT race, COUNT(*) AS people, AVG(age) AS mean_age FROM adult GROUP BY race",
    );
    driver.type_into("#epsilon", "0.5");
    driver.click("#explain-button");
    driver.wait_for(
        "the explanation",
        "return !document.getElementById('explanation').hidden",
    );
    let explanation = driver.text("explanation");
    assert!(
        explanation.contains("Costs ε = 0.5") && explanation.contains("E|error|"),
        "{explanation}"
    );
    // A budget of (10, 1e-5) pays for 20 such queries by plain sums, and
    // for more by the concentrated accountant, which the page shows.
    assert!(explanation.contains("more like it"), "{explanation}");
    assert!(
        driver.text("budget").contains("zCDP: ρ 0 of"),
        "{}",
        driver.text("budget")
    );
    assert!(
        driver.text("budget").contains("ε left 10 of 10"),
        "explaining spent nothing"
    );

    driver.click("#run-button");
    driver.wait_for(
        "the answer",
        "return document.querySelectorAll('#answer tbody tr').length > 0",
    );
    let rows = driver.script(
        "return [...document.querySelectorAll('#answer tbody tr')].map(tr => tr.textContent)",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 5, "one row per race: {rows:?}");
    assert!(
        rows.iter().all(|r| r.as_str().unwrap().contains('[')),
        "every value has its interval: {rows:?}"
    );
    let bars = driver.script("return document.querySelectorAll('#chart svg rect.bar').length");
    let whiskers =
        driver.script("return document.querySelectorAll('#chart svg line.whisker').length");
    assert_eq!(
        (bars, whiskers),
        (json!(5), json!(15)),
        "a bar and an interval per group"
    );
    assert!(
        driver.text("budget").contains("ε left 9.5 of 10"),
        "{}",
        driver.text("budget")
    );

    driver.click("#run-button");
    driver.wait_for(
        "the replay",
        "return !document.getElementById('replay').hidden",
    );
    assert!(
        driver.text("budget").contains("ε left 9.5 of 10"),
        "a replay is free"
    );

    let shot = driver.session_call("GET", "/screenshot", None);
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot.as_str().unwrap())
        .unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a real screenshot"
    );
    if std::env::var_os("DPKIT_UPDATE_SCREENSHOT").is_some() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/serve-page.png");
        std::fs::write(path, &png).unwrap();
    }
    drop(driver);
    let _ = std::fs::remove_dir_all(&profile);
}
