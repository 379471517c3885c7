//! schemathesis (from PyPI) against the OpenAPI document the server
//! generates: no server error, no response outside the schema. One check
//! is left out: `positive_data_acceptance` expects every schema-valid body
//! to be answered, but whether a string is a private SQL query is beyond
//! what a JSON schema can say (those are 400 `bad_query`, as documented).

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::fixture::{TestServer, adult_description};

/// schemathesis: `DPKIT_SCHEMATHESIS`, the venv `.ci/run` makes, or the PATH.
fn schemathesis() -> PathBuf {
    if let Some(path) = std::env::var_os("DPKIT_SCHEMATHESIS") {
        return path.into();
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let venv = home.join(".cache/dpkit/venv/bin/schemathesis");
    if venv.exists() {
        return venv;
    }
    let on_path = Command::new("schemathesis").arg("--version").output();
    assert!(
        on_path.is_ok_and(|o| o.status.success()),
        "schemathesis is missing: pip install schemathesis (bash .ci/run installs it in ~/.cache/dpkit/venv)"
    );
    "schemathesis".into()
}

#[test]
fn schemathesis_finds_no_server_error_and_no_response_outside_the_schema() {
    let server = TestServer::start(
        "schemathesis",
        &[adult_description()],
        "requests_per_second = 100000\nburst = 100000",
    );
    let key = server.analyst("fuzz", &["adult"], 1000.0, 0.5);
    let output = Command::new(schemathesis())
        .current_dir(&server.folder)
        .args(["run", &format!("http://{}/v1/openapi.json", server.address)])
        .args(["--header", &format!("Authorization: Bearer {key}")])
        .args([
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
        ])
        .args(["--max-examples", "150", "--seed", "20261123"])
        .env("NO_COLOR", "1")
        .output()
        .expect("schemathesis runs");
    let text = String::from_utf8_lossy(&output.stdout);
    println!("{text}");
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains(" passed") && !text.contains("0 generated"),
        "nothing was tested:\n{text}"
    );
}
