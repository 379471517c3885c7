//! `dpkit synth`, run as a user would: a synthetic table written with the
//! description's columns and types, charged once; what it refuses spends
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dpkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn data(path: &str) -> String {
    format!("{}/../../data/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn temp(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dpkit-synth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// `dpkit synth` on `description` with `ledger`, and `extra`.
fn synth(description: &str, ledger: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "synth",
        "--description",
        description,
        "--ledger",
        ledger.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    dpkit(&args)
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn spent(description: &str, ledger: &Path) -> String {
    let output = dpkit(&[
        "budget",
        "--description",
        description,
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    text(&output)
}

const ADULT_COLUMNS: &str = "age,capital-gain,capital-loss,class,education,education-num,\
                             hours-per-week,marital-status,occupation,race,relationship,sex,workclass";

#[test]
fn a_synthetic_adult_has_the_described_columns_and_types_and_is_charged_once() {
    let (description, ledger, out) = (
        data("adult/adult.toml"),
        temp("adult.sqlite"),
        temp("adult.csv"),
    );
    let out_text = out.to_str().unwrap();
    let args = [
        "--epsilon",
        "1",
        "--without",
        "fnlwgt,native-country",
        "--rows",
        "2000",
    ];
    // A dot in the stem stays in the files' names.
    let figure = temp("worst-eps1.0");
    let figure_stem = figure.to_str().unwrap();
    let output = synth(
        &description,
        &ledger,
        &[&args[..], &["--out", out_text, "--figure", figure_stem]].concat(),
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = text(&output);
    assert!(
        said.starts_with("wrote 2000 synthetic rows of 13 columns"),
        "{said}"
    );
    // Every measured marginal against its noisy measurement: MST's 13
    // columns and its spanning tree's 12 pairs; and the worst drawn.
    for line in [
        "1-way marginals against their noisy measurements (13): mean total-variation distance 0.",
        "2-way marginals against their noisy measurements (12): mean total-variation distance 0.",
    ] {
        assert!(said.contains(line), "{line} in {said}");
    }
    let drawn = ["png", "svg"].map(|extension| format!("{figure_stem}.{extension}"));
    assert!(
        said.contains(&format!("drew {} and {}", drawn[0], drawn[1])),
        "{said}"
    );
    for drawn in drawn {
        assert!(std::fs::metadata(&drawn).unwrap().len() > 1000, "{drawn}");
        let _ = std::fs::remove_file(drawn);
    }
    assert!(
        said.contains("this release cost ε = 1, δ = 1e-9 · left: ρ = ")
            && said.contains(" by zCDP, enough for ")
            && said.contains(" more like it (plain sums: ε = 9 of 10)"),
        "{said}"
    );
    let budget = spent(&description, &ledger);
    assert!(budget.contains("remaining ε = 9 of 10"), "{budget}");

    let csv = std::fs::read_to_string(&out).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(ADULT_COLUMNS));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2000);
    let sexes = ["Female", "Male", ""];
    for row in &rows {
        assert_eq!(row.len(), 13);
        // Integers within their bounds (or empty: the missing code).
        for (column, (low, high)) in [(0, (17, 90)), (1, (0, 99999)), (5, (1, 16)), (6, (1, 99))] {
            if !row[column].is_empty() {
                let value: i64 = row[column].parse().unwrap();
                assert!((low..=high).contains(&value), "{row:?}");
            }
        }
        assert!(sexes.contains(&row[11]) || row[11] == "\"\"", "{row:?}");
    }
    // Every sex occurs: the noisy model keeps a column's large codes.
    assert!(rows.iter().any(|r| r[11] == "Female") && rows.iter().any(|r| r[11] == "Male"));
    let _ = std::fs::remove_file(&out);
}

#[test]
fn explain_and_refusals_spend_nothing() {
    let (description, ledger) = (data("adult/adult.toml"), temp("refusals.sqlite"));
    let explain = synth(
        &description,
        &ledger,
        &[
            "--epsilon",
            "1",
            "--without",
            "fnlwgt,native-country",
            "--explain",
        ],
    );
    assert_eq!(explain.status.code(), Some(0), "{explain:?}");
    let said = text(&explain);
    for line in [
        "capital-gain             integer, 7 declared bin(s) in [0, 99999]",
        "age                      integer, 25 bin(s) of 3 in [17, 90]",
        "13 one-way marginals, σ = ",
        "12 two-way marginals",
        "at most 1 in L1",
        "Cost, charged once before any row is read: ε = 1, δ = 1e-9",
    ] {
        assert!(said.contains(line), "{line} in {said}");
    }
    let refused = [
        // Columns without a public domain: the fix is named.
        (
            vec!["--epsilon", "1", "--out", "x.csv"],
            "--without fnlwgt,native-country",
        ),
        // Gaussian noise needs δ.
        (
            vec![
                "--epsilon",
                "1",
                "--delta",
                "0",
                "--without",
                "fnlwgt,native-country",
                "--explain",
            ],
            "needs δ > 0",
        ),
        (
            vec!["--epsilon", "1", "--columns", "nosuch", "--explain"],
            "no described column \"nosuch\"",
        ),
        (
            vec!["--epsilon", "1", "--table", "nosuch", "--explain"],
            "no private table named \"nosuch\"",
        ),
        (
            vec![
                "--epsilon",
                "1",
                "--columns",
                "age,sex",
                "--rows",
                "0",
                "--out",
                "x.csv",
            ],
            "--rows must lie in 1..=",
        ),
        // A figure that could not be written is refused before the charge.
        (
            vec![
                "--epsilon",
                "1",
                "--columns",
                "age,sex",
                "--out",
                "x.csv",
                "--figure",
                "no/such/folder/worst",
            ],
            "--figure: the folder it names does not exist",
        ),
    ];
    for (args, why) in refused {
        let output = synth(&description, &ledger, &args);
        let error = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(
            error.contains(why) && error.lines().count() == 1,
            "{args:?}: {error}"
        );
    }
    let budget = spent(&description, &ledger);
    assert!(budget.contains("remaining ε = 10 of 10"), "{budget}");
}

#[test]
fn at_a_large_epsilon_the_synthetic_marginals_come_close_to_the_true_ones() {
    // A copy of the adult description with room for ε = 500.
    let folder = temp("large");
    std::fs::create_dir_all(&folder).unwrap();
    let original = std::fs::read_to_string(data("adult/adult.toml")).unwrap();
    let copied = original
        .replace("epsilon = 10.0", "epsilon = 1000.0")
        .replace(
            "file = \"adult.data.csv\"",
            &format!("file = \"{}\"", data("adult/adult.data.csv")),
        );
    let description = folder.join("adult.toml");
    std::fs::write(&description, copied).unwrap();
    let (ledger, out) = (
        folder.join("ledger.sqlite"),
        folder.join("synthetic.parquet"),
    );
    let args = [
        "--epsilon",
        "500",
        "--columns",
        "age,sex,race,relationship,marital-status,class",
        "--report-true",
        "--out",
        out.to_str().unwrap(),
    ];
    let output = synth(description.to_str().unwrap(), &ledger, &args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = text(&output);
    // At ε = 500 the noise is a fraction of a count: the 1-way marginals are
    // the true ones to within the sampler's rounding, and the pairs of the
    // tree carry the strongest links of the other pairs.
    let figure = |prefix: &str| -> f64 {
        let at = said
            .find(prefix)
            .unwrap_or_else(|| panic!("{prefix} in {said}"))
            + prefix.len();
        said[at..]
            .split(',')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert!(
        figure("1-way marginals: mean total-variation distance") < 0.001,
        "{said}"
    );
    // Measured 0.019 on two runs: the pairs off the tree are the model's
    // guesses, so the mean stays above 0.
    assert!(
        figure("2-way marginals: mean total-variation distance") < 0.03,
        "{said}"
    );
    // Against what was measured (the model fits its measurements, and the
    // sampler's rounding moves each cell by under one row of 32,561): the
    // 2-way mean measured 0.0012 on three runs (the largest pair 0.0033).
    // A pair compared over the wrong codes would be far off.
    let measured = |way: usize, count: usize| {
        let prefix = format!("{way}-way marginals against their noisy measurements ({count}): ");
        figure(&format!("{prefix}mean total-variation distance"))
    };
    assert!(measured(1, 6) < 0.002 && measured(2, 5) < 0.01, "{said}");
    let parquet = std::fs::read(&out).unwrap();
    assert_eq!(&parquet[..4], b"PAR1");
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn a_table_with_many_rows_per_person_is_measured_at_its_cap() {
    let (description, ledger) = (data("clinic/clinic.toml"), temp("clinic.sqlite"));
    let people = synth(&description, &ledger, &["--epsilon", "1", "--explain"]);
    let visits = synth(
        &description,
        &ledger,
        &["--epsilon", "1", "--table", "visits", "--explain"],
    );
    let person = synth(
        &description,
        &ledger,
        &["--epsilon", "1", "--columns", "id", "--explain"],
    );
    let error = String::from_utf8_lossy(&person.stderr).into_owned();
    assert!(error.contains("id names the person"), "{error}");
    for (output, columns, moved) in [
        (people, ["age", "region", "sex"], 1),
        (visits, ["cost", "department", "month"], 12),
    ] {
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let said = text(&output);
        assert!(said.contains(&format!("at most {moved} in L1")), "{said}");
        // The person's column is never a column of the synthetic table.
        assert!(
            !said.contains("\n  id ") && !said.contains("\n  person "),
            "{said}"
        );
        for column in columns {
            assert!(
                said.contains(&format!("\n  {column} ")),
                "{column} in {said}"
            );
        }
    }
}

#[test]
fn aim_writes_a_table_too_and_is_charged_once_for_all_its_rounds() {
    let (description, ledger, out) = (
        data("adult/adult.toml"),
        temp("aim.sqlite"),
        temp("aim.csv"),
    );
    let columns = "age,sex,race,relationship,class";
    let aim = ["--epsilon", "1", "--method", "aim", "--columns", columns];
    let explain = synth(&description, &ledger, &[&aim[..], &["--explain"]].concat());
    let said = text(&explain);
    assert!(said.contains("by AIM") && said.contains("then rounds until the budget is spent"));
    assert!(said.contains("Cost, charged once before any row is read: ε = 1, δ = 1e-9"));
    let args = [&aim[..], &["--rows", "500"]].concat();
    let output = synth(
        &description,
        &ledger,
        &[&args[..], &["--out", out.to_str().unwrap()]].concat(),
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = text(&output);
    assert!(said.contains("AIM measured every column, then "), "{said}");
    assert!(said.contains("(plain sums: ε = 9 of 10)"), "{said}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert_eq!(csv.lines().next(), Some("age,sex,race,relationship,class"));
    assert_eq!(csv.lines().count(), 501);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn an_output_that_cannot_be_written_or_would_destroy_an_input_costs_nothing() {
    let (description, ledger) = (data("adult/adult.toml"), temp("outputs.sqlite"));
    let cheap = ["--epsilon", "1", "--columns", "age,sex", "--rows", "10"];
    // The ledger exists once a table was written.
    let first = temp("first.csv");
    let output = synth(
        &description,
        &ledger,
        &[&cheap[..], &["--out", first.to_str().unwrap()]].concat(),
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let _ = std::fs::remove_file(&first);
    let data_file = data("adult/adult.data.csv");
    for (out, why) in [
        (
            "/nonexistent-folder/x.csv",
            "cannot write /nonexistent-folder/x.csv",
        ),
        (ledger.to_str().unwrap(), "--out names the ledger"),
        (
            data_file.as_str(),
            "--out names the ledger, the description or a data file",
        ),
        (description.as_str(), "--out names the ledger"),
    ] {
        let output = synth(
            &description,
            &ledger,
            &[&cheap[..], &["--out", out]].concat(),
        );
        let error = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{out}: {output:?}");
        assert!(
            error.contains(why) && error.lines().count() == 1,
            "{out}: {error}"
        );
    }
    let zero_bins = synth(
        &description,
        &ledger,
        &["--epsilon", "1", "--bins", "0", "--explain"],
    );
    assert_eq!(zero_bins.status.code(), Some(2));
    assert!(spent(&description, &ledger).contains("remaining ε = 9 of 10"));
    assert!(std::fs::read(&data_file).unwrap().starts_with(b"age,"));
}

#[test]
fn a_true_comparison_that_cannot_be_counted_is_a_note_after_the_report() {
    let (description, ledger, out) = (
        data("adult/adult.toml"),
        temp("note.sqlite"),
        temp("note.csv"),
    );
    // 74 ages × 99 hours × 16 levels: a 3-way marginal past the planner's
    // limit on combinations, which the report skips with a note.
    let args = [
        "--epsilon",
        "1",
        "--columns",
        "age,hours-per-week,education-num",
        "--bins",
        "300",
        "--rows",
        "100",
        "--report-true",
        "--out",
        out.to_str().unwrap(),
    ];
    let output = synth(&description, &ledger, &args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = text(&output);
    assert!(said.contains("this release cost ε = 1,"), "{said}");
    assert!(said.contains("all 3 2-way marginals"), "{said}");
    assert!(
        said.contains("the 3-way marginals were not compared"),
        "{said}"
    );
    let _ = std::fs::remove_file(&out);
}
