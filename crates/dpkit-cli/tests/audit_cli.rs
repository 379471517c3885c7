//! `dpkit audit`, run as a user would.

use std::process::{Command, Output};

fn dpkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn a_core_mechanism_passes_with_a_readable_table() {
    let output = dpkit(&[
        "audit",
        "--mechanism",
        "staircase",
        "--epsilon",
        "1",
        "--seed",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    for row in [
        "neighbouring inputs",
        "samples per input        200000",
        "separating event",
        "realised ε, lower bound",
        "at 99% confidence",
        "declared                 ε = 1",
        "pass: no violation found",
    ] {
        assert!(text.contains(row), "missing {row:?} in:\n{text}");
    }
}

#[test]
fn json_output_carries_the_bound_and_the_verdict() {
    let output = dpkit(&[
        "audit",
        "--mechanism",
        "discrete-gaussian",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--sensitivity",
        "2",
        "--samples",
        "50000",
        "--confidence",
        "0.999",
        "--seed",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["mechanism"], "discrete-gaussian");
    assert_eq!(report["samples_per_input"], 50000);
    assert_eq!(report["confidence"], 0.999);
    assert_eq!(report["declared_delta"], 1e-6);
    assert_eq!(report["violation_found"], false);
    let bound = report["epsilon_lower_bound"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&bound));
}

#[test]
fn plot_writes_a_png_and_an_svg() {
    let directory = std::env::temp_dir().join(format!("dpkit-audit-cli-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let stem = directory.join("rr");
    let output = dpkit(&[
        "audit",
        "--mechanism",
        "kary-randomized-response",
        "--epsilon",
        "1",
        "--samples",
        "20000",
        // A fixed seed: at the default 99% confidence an unseeded audit of a
        // correct mechanism would report a violation 1% of the time.
        "--seed",
        "4",
        "--plot",
        stem.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let png = std::fs::read(stem.with_extension("png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(stem.with_extension("svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("kary-randomized-response"));
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn bad_settings_get_one_error_line_and_exit_two() {
    for (args, needle) in [
        (
            vec!["audit", "--mechanism", "gaussian", "--epsilon", "1"],
            "needs --delta",
        ),
        (
            vec!["audit", "--mechanism", "laplace", "--epsilon", "-1"],
            "epsilon",
        ),
        (
            vec![
                "audit",
                "--mechanism",
                "laplace",
                "--epsilon",
                "1",
                "--confidence",
                "1.5",
            ],
            "confidence",
        ),
        (
            vec![
                "audit",
                "--mechanism",
                "laplace",
                "--epsilon",
                "1",
                "--samples",
                "10",
            ],
            "at least 1000",
        ),
        (
            vec![
                "audit",
                "--mechanism",
                "geometric",
                "--epsilon",
                "1",
                "--sensitivity",
                "0.5",
            ],
            "whole number",
        ),
    ] {
        let output = dpkit(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let unknown = dpkit(&["audit", "--mechanism", "naive-laplace", "--epsilon", "1"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn a_query_is_audited_end_to_end_on_two_neighbouring_tables() {
    let folder = std::env::temp_dir().join(format!("dpkit-audit-query-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let description = |file: &str| {
        format!(
            "[table]\nname = \"t\"\nfile = \"{file}\"\n[privacy_unit]\nkind = \"row\"\n\
             [budget]\nepsilon = 10.0\n[columns.sex]\ntype = \"text\"\ndomain = [\"F\", \"M\"]\n"
        )
    };
    std::fs::write(folder.join("a.csv"), "sex\nF\nM\nM\nF\n").unwrap();
    std::fs::write(folder.join("b.csv"), "sex\nF\nM\nM\n").unwrap();
    std::fs::write(folder.join("a.toml"), description("a.csv")).unwrap();
    std::fs::write(folder.join("b.toml"), description("b.csv")).unwrap();
    let path = |name: &str| folder.join(name).to_string_lossy().into_owned();
    let output = dpkit(&[
        "audit",
        "--query",
        "SELECT sex, COUNT(*) FROM t GROUP BY sex",
        "--description",
        &path("a.toml"),
        "--neighbour",
        &path("b.toml"),
        "--key",
        "F",
        "--column",
        "1",
        "--epsilon",
        "1",
        "--samples",
        "50000",
        "--seed",
        "3",
    ]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    std::fs::remove_dir_all(&folder).unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("query: SELECT sex, COUNT(*)"), "{text}");
    assert!(text.contains("pass: no violation found"), "{text}");
}

/// A long audit says what it is doing on a terminal (`script`, from
/// util-linux, gives it one), and writes nothing extra into a pipe.
#[test]
fn an_audit_says_what_it_is_doing_only_on_a_terminal() {
    let args = ["audit", "--mechanism", "laplace", "--epsilon", "1"];
    let args = [&args[..], &["--seed", "1", "--samples", "20000"]].concat();
    let piped = dpkit(&args);
    assert_eq!(piped.status.code(), Some(0));
    assert!(piped.stderr.is_empty(), "{piped:?}");
    let command = std::iter::once(env!("CARGO_BIN_EXE_dpkit"))
        .chain(args.iter().copied())
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let on_terminal = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("script (util-linux) gives the command a terminal");
    let text = String::from_utf8(on_terminal.stdout).unwrap();
    assert!(
        text.contains("dpkit: drawing 20000 outputs from each"),
        "{text}"
    );
    assert!(text.contains("pass: no violation found"), "{text}");
}
