//! `dpkit lab`, run as a user would.

use std::process::{Command, Output};

fn dpkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn adult_folder() -> String {
    format!("{}/../../data/adult", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn an_experiment_writes_its_figures_and_report() {
    let out = std::env::temp_dir().join(format!("dpkit-lab-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = dpkit(&[
        "lab",
        "composition",
        "--quick",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--data",
        &adult_folder(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("composition.png") && stdout.contains("report.md"));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## 1. Composition") && report.contains("seed 3"));
    assert!(out.join("composition.svg").exists() && out.join("composition.csv").exists());
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_missing_data_folder_is_one_error_line() {
    let out = std::env::temp_dir().join(format!("dpkit-lab-cli-missing-{}", std::process::id()));
    let output = dpkit(&[
        "lab",
        "histogram",
        "--quick",
        "--out",
        out.to_str().unwrap(),
        "--data",
        "/nonexistent/adult",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no Adult files") && stderr.contains("--data"),
        "{stderr}"
    );
    // Nothing ran before the check: not even the output folder was made.
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&out);
    // A file that cannot be written names its cause once.
    let unwritable = dpkit(&["lab", "speed", "--quick", "--out", "/proc/dpkit-lab"]);
    assert_eq!(unwritable.status.code(), Some(2));
    let stderr = String::from_utf8(unwritable.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("os error"), "{stderr}");
    let cause = stderr.rsplit(": ").next().unwrap();
    assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
    let unknown = dpkit(&["lab", "no-such-experiment"]);
    assert_eq!(unknown.status.code(), Some(2));
}
