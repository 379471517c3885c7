//! The real `dpkit` binary, run as a user would.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn dpkit(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    // The binary may exit (on a bad argument) before reading its input.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    child.wait_with_output().unwrap()
}

fn adult_data() -> String {
    format!(
        "{}/../../data/adult/adult.data.csv",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn staircase_noise_prints_one_value_with_error_bars_per_line() {
    let output = dpkit(
        &[
            "noise",
            "--mechanism",
            "staircase",
            "--epsilon",
            "1",
            "--sensitivity",
            "1",
        ],
        "1\n2.5\n\n100\n",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    for (line, truth) in lines.iter().zip([1.0, 2.5, 100.0]) {
        let (value, half_width) = line.split_once(" ± ").unwrap();
        let value: f64 = value.parse().unwrap();
        let half_width: f64 = half_width.parse().unwrap();
        // 95% half-width of the L1-optimal staircase at ε = 1 is about 2.9
        assert!((2.5..3.5).contains(&half_width), "{half_width}");
        assert!((value - truth).abs() < 40.0);
    }
}

#[test]
fn a_csv_column_of_the_adult_data_is_released_as_integers() {
    let data = adult_data();
    let output = dpkit(
        &[
            "noise",
            "--mechanism",
            "geometric",
            "--epsilon",
            "2",
            "--sensitivity",
            "1",
            "--input",
            &data,
            "--column",
            "age",
            "--format",
            "csv",
        ],
        "",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("released,half_width"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(
        rows.len(),
        32_561,
        "one release per person, the trailing empty line skipped"
    );
    assert!(
        rows.iter()
            .all(|row| row.split(',').next().unwrap().parse::<i64>().is_ok())
    );
}

#[test]
fn bad_input_gets_one_error_line_and_never_echoes_the_value() {
    let output = dpkit(
        &[
            "noise",
            "--mechanism",
            "laplace",
            "--epsilon",
            "1",
            "--sensitivity",
            "1",
        ],
        "1\nsecret-salary-93000\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty(),
        "nothing is released when any line is bad"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1);
    assert!(
        stderr.contains("line 2") && !stderr.contains("93000"),
        "{stderr}"
    );

    for (args, needle) in [
        (
            vec![
                "--mechanism",
                "laplace",
                "--epsilon",
                "0",
                "--sensitivity",
                "1",
            ],
            "epsilon",
        ),
        (
            vec![
                "--mechanism",
                "laplace",
                "--epsilon",
                "-1",
                "--sensitivity",
                "1",
            ],
            "epsilon",
        ),
        (
            vec![
                "--mechanism",
                "staircase",
                "--epsilon",
                "1",
                "--sensitivity",
                "NaN",
            ],
            "sensitivity",
        ),
        (
            vec![
                "--mechanism",
                "staircase",
                "--epsilon",
                "1",
                "--sensitivity",
                "1",
                "--gamma",
                "2",
            ],
            "gamma",
        ),
        (
            vec![
                "--mechanism",
                "gaussian",
                "--epsilon",
                "1",
                "--sensitivity",
                "1",
            ],
            "delta",
        ),
        (
            vec![
                "--mechanism",
                "geometric",
                "--epsilon",
                "1",
                "--sensitivity",
                "0.5",
            ],
            "sensitivity",
        ),
    ] {
        let mut full = vec!["noise"];
        full.extend(args);
        let output = dpkit(&full, "1\n");
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.contains(needle), "{stderr}");
    }

    let data = adult_data();
    let output = dpkit(
        &[
            "noise",
            "--mechanism",
            "laplace",
            "--epsilon",
            "1",
            "--sensitivity",
            "1",
            "--input",
            &data,
            "--column",
            "salary",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("no column named 'salary'")
    );
    let output = dpkit(
        &[
            "noise",
            "--mechanism",
            "laplace",
            "--epsilon",
            "1",
            "--sensitivity",
            "1",
            "--input",
            &data,
            "--column",
            "workclass",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("line 2: not a number") && !stderr.contains("State-gov"),
        "{stderr}"
    );
}

#[test]
fn help_explains_every_mechanism() {
    let output = dpkit(&["noise", "--help"], "");
    let help = String::from_utf8(output.stdout).unwrap();
    for name in [
        "laplace",
        "staircase",
        "staircase-l2",
        "geometric",
        "discrete-staircase",
        "gaussian",
        "discrete-gaussian",
    ] {
        assert!(help.contains(name), "--help lacks {name}");
    }
    assert!(help.contains("optimal for counts"));
}
