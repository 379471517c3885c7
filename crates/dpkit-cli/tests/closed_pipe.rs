//! Output to a reader that has gone (`dpkit query … | head -c 1`): the
//! binary exits quietly with status 0, never with a panic, and a query's
//! charge stays recorded.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Which of the child's output streams is a pipe whose reader is closed.
#[derive(Clone, Copy)]
enum Closed {
    Stdout,
    Stderr,
}

/// Runs the binary with `closed` connected to a pipe whose reading end is
/// closed before the binary starts; the other stream is captured.
fn dpkit_into_closed_pipe(args: &[&str], stdin: &str, closed: Closed) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut command = Command::new(env!("CARGO_BIN_EXE_dpkit"));
    command.args(args).stdin(Stdio::piped());
    match closed {
        Closed::Stdout => command.stdout(writer).stderr(Stdio::piped()),
        Closed::Stderr => command.stdout(Stdio::piped()).stderr(writer),
    };
    let mut child = command.spawn().expect("the binary starts");
    drop(command);
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    child.wait_with_output().unwrap()
}

fn description() -> String {
    format!("{}/../../data/adult/adult.toml", env!("CARGO_MANIFEST_DIR"))
}

fn fresh_ledger(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "dpkit-cli-pipe-{name}-{}.sqlite",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// Exit status 0 and nothing on standard error: no panic, no error line.
fn assert_quiet_success(output: &Output, case: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    assert_eq!(output.status.code(), Some(0), "{case}: {stderr}");
    assert!(stderr.is_empty(), "{case}: {stderr}");
}

#[test]
fn queries_into_a_closed_pipe_exit_quietly_and_keep_their_charge() {
    let ledger = fresh_ledger("query");
    let ledger_arg = ledger.to_str().unwrap();
    let description = description();
    let sql = "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY sex";
    for format in ["table", "csv", "json"] {
        // Each format its own request: the same one again is replayed.
        let sql = format!("{sql} -- {format}");
        let args = [
            "query",
            "--description",
            &description,
            "--ledger",
            ledger_arg,
            "--epsilon",
            "0.5",
            "--format",
            format,
            &sql,
        ];
        let output = dpkit_into_closed_pipe(&args, "", Closed::Stdout);
        assert_quiet_success(&output, format);
    }
    let explain = [
        "query",
        "--description",
        &description,
        "--ledger",
        ledger_arg,
        "--epsilon",
        "0.5",
        "--explain",
        sql,
    ];
    assert_quiet_success(
        &dpkit_into_closed_pipe(&explain, "", Closed::Stdout),
        "explain",
    );
    let budget = [
        "budget",
        "--description",
        &description,
        "--ledger",
        ledger_arg,
    ];
    assert_quiet_success(
        &dpkit_into_closed_pipe(&budget, "", Closed::Stdout),
        "budget",
    );
    // The three answers were computed, so their cost is kept.
    let shown = Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(budget)
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("spent ε = 1.5,"), "{shown}");
    std::fs::remove_file(&ledger).unwrap();
}

#[test]
fn describe_noise_and_audit_into_a_closed_pipe_exit_quietly() {
    let csv = format!(
        "{}/../../data/adult/adult.test.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let describe = dpkit_into_closed_pipe(&["describe", &csv], "", Closed::Stdout);
    assert_quiet_success(&describe, "describe");
    let values: String = (0..20_000).map(|i| format!("{i}\n")).collect();
    let args = [
        "noise",
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--sensitivity",
        "1",
    ];
    let noise = dpkit_into_closed_pipe(&args, &values, Closed::Stdout);
    assert_quiet_success(&noise, "noise");
    let audit = [
        "audit",
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--samples",
        "2000",
        "--seed",
        "1",
    ];
    for format in ["text", "json"] {
        let output = dpkit_into_closed_pipe(
            &[&audit[..], &["--format", format]].concat(),
            "",
            Closed::Stdout,
        );
        assert_quiet_success(&output, "audit");
    }
}

#[test]
fn an_error_with_standard_error_closed_still_exits_with_status_2() {
    let missing = std::env::temp_dir().join("dpkit-no-such-description.toml");
    let args = ["budget", "--description", missing.to_str().unwrap()];
    let output = dpkit_into_closed_pipe(&args, "", Closed::Stderr);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}
