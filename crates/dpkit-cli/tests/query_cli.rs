//! `dpkit query`, `dpkit budget` and `dpkit describe`, run as a user would.

#[path = "../../dpkit-query/tests/support/adult_rows.rs"]
mod adult_rows;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use adult_rows::adult_rows;

fn dpkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn description() -> String {
    format!("{}/../../data/adult/adult.toml", env!("CARGO_MANIFEST_DIR"))
}

fn fresh_ledger(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dpkit-cli-{name}-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn query(ledger: &Path, extra: &[&str], sql: &str) -> Output {
    let description = description();
    let mut args = vec![
        "query",
        "--description",
        &description,
        "--ledger",
        ledger.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(sql);
    dpkit(&args)
}

/// What `query` printed, having checked that it succeeded.
fn answered(ledger: &Path, extra: &[&str], sql: &str) -> String {
    let output = query(ledger, extra, sql);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn spent(ledger: &Path) -> String {
    let output = dpkit(&[
        "budget",
        "--description",
        &description(),
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_main_job_prints_a_table_with_intervals_and_charges_the_ledger() {
    let ledger = fresh_ledger("main");
    let output = query(
        &ledger,
        &["--epsilon", "1"],
        "SELECT sex, COUNT(*) AS people, AVG(age) AS mean_age FROM adult GROUP BY sex",
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("sex "), "{text}");
    assert!(
        text.contains("Female") && text.contains("Male") && text.contains(" ± "),
        "{text}"
    );
    assert!(
        text.contains("95% intervals · this query cost ε = 1, δ = 0 · left: ε = 9 of 10, enough for 9 more like it\n"),
        "{text}"
    );
    assert!(spent(&ledger).contains("spent ε = 1,"));
}

#[test]
fn explain_shows_the_plan_and_spends_nothing() {
    let ledger = fresh_ledger("explain");
    let output = query(
        &ledger,
        &["--epsilon", "1", "--explain"],
        "SELECT race, SUM(\"hours-per-week\") FROM adult WHERE age >= 18 GROUP BY race",
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "Aggregate:",
        "dpkit_clamp",
        "staircase",
        "public domain, 5 combination",
        "Total cost: ε = 1",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    assert!(
        spent(&ledger).contains("spent ε = 0,"),
        "{}",
        spent(&ledger)
    );
}

/// The number after `prefix` in `text`, up to the next space or ')'.
fn number_after(text: &str, prefix: &str) -> f64 {
    let start = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no {prefix:?} in\n{text}"));
    let rest = &text[start + prefix.len()..];
    let end = rest.find([' ', ')']).unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|_| panic!("{prefix:?} in\n{text}"))
}

/// Many small counts last longer with Gaussian noise under the ledger's
/// concentrated accountant: `--explain` says so, with settings that, run
/// as it says, pay for at least as many queries with the error it quotes;
/// it stays silent where pure noise is better (a few large queries) or
/// was asked for.
#[test]
fn explain_names_gaussian_noise_when_many_queries_like_this_last_longer_with_it() {
    let ledger = fresh_ledger("gaussian-alternative");
    let sql = "SELECT COUNT(*) FROM adult WHERE age > 40";
    let run = |args: &[&str]| answered(&ledger, args, sql);
    let auto = run(&["--epsilon", "0.01", "--explain"]);
    let line = auto
        .lines()
        .find(|l| l.starts_with("Gaussian noise would pay for as many"))
        .unwrap_or_else(|| panic!("no Gaussian line in\n{auto}"));
    let with_auto = number_after(&auto, "The budget can pay for ");
    let epsilon = number_after(line, "--epsilon ");
    let delta = number_after(line, "--delta ");
    let error = number_after(line, "E|error| ");
    let without = number_after(line, "instead of ");
    assert!(error < without, "{line}");
    let (epsilon, delta) = (epsilon.to_string(), delta.to_string());
    let gaussian = run(&[
        "--epsilon",
        &epsilon,
        "--delta",
        &delta,
        "--mechanism",
        "gaussian",
        "--explain",
    ]);
    assert!(
        number_after(&gaussian, "The budget can pay for ") >= with_auto,
        "{gaussian}"
    );
    // The release's row: ... mechanism, ε, sensitivity, E|error|, half-width.
    let row = gaussian
        .lines()
        .find(|l| l.contains("count of rows") && l.contains("gaussian"))
        .unwrap_or_else(|| panic!("no Gaussian release in\n{gaussian}"));
    let fields: Vec<&str> = row.split_whitespace().collect();
    let quoted: f64 = fields[fields.len() - 2].parse().unwrap();
    assert!(
        (quoted - error).abs() <= 1e-3 * error,
        "{error} against\n{row}"
    );
    for quiet in [
        vec!["--epsilon", "5", "--explain"],
        vec!["--epsilon", "0.01", "--mechanism", "laplace", "--explain"],
    ] {
        let text = run(&quiet);
        assert!(!text.contains("Gaussian noise would"), "{quiet:?}:\n{text}");
    }
    assert!(
        spent(&ledger).contains("spent ε = 0,"),
        "{}",
        spent(&ledger)
    );
}

#[test]
fn a_target_error_shows_the_epsilon_it_costs_and_spends_only_when_asked() {
    let ledger = fresh_ledger("target");
    let sql = "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex";
    let shown = query(&ledger, &["--target-error", "20"], sql);
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    let text = String::from_utf8(shown.stdout).unwrap();
    let epsilon: f64 = text
        .strip_prefix("ε = ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no ε in\n{text}"));
    // A geometric count's 95% half-width is ≤ 20 from about ε = 0.15.
    assert!((0.1..0.2).contains(&epsilon), "{text}");
    assert!(text.contains("nothing spent"), "{text}");
    assert!(
        spent(&ledger).contains("spent ε = 0,"),
        "{}",
        spent(&ledger)
    );
    let run = query(
        &ledger,
        &["--target-error", "20", "--spend", "--format", "json"],
        sql,
    );
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let answer: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(answer["epsilon"].as_f64(), Some(epsilon));
    for row in answer["rows"].as_array().unwrap() {
        let (low, high) = (
            row[1]["low"].as_f64().unwrap(),
            row[1]["high"].as_f64().unwrap(),
        );
        assert!(high - low <= 40.0, "{row}");
    }
    // An average needs the fewest rows a group has: one clear line, nothing spent.
    let refused = query(
        &ledger,
        &["--target-error", "1"],
        "SELECT sex, AVG(age) FROM adult GROUP BY sex",
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--target-rows"));
}

/// With an error target and a δ, `auto` takes the noise that meets the
/// target and that the budget pays for more often: Gaussian noise for many
/// small counts, pure noise for a few precise ones. `--spend` runs what was
/// shown.
#[test]
fn with_a_target_error_and_a_delta_auto_chooses_the_noise_the_budget_pays_for_more_often() {
    let ledger = fresh_ledger("target-gaussian");
    let sql = "SELECT COUNT(*) FROM adult WHERE age > 40";
    let text = |args: &[&str]| answered(&ledger, args, sql);
    let wide = text(&["--target-error", "200", "--delta", "1e-6"]);
    assert!(
        wide.contains("with Gaussian noise at δ = 1e-6: auto chose it"),
        "{wide}"
    );
    let with_gaussian = number_after(&wide, "the budget can pay for ");
    let with_pure = number_after(&wide, "like this with it, and ");
    assert!(with_gaussian > with_pure, "{wide}");
    assert_eq!(
        number_after(&wide, "The budget can pay for "),
        with_gaussian
    );
    assert!(
        wide.lines()
            .any(|l| l.contains("count of rows") && l.contains("discrete-gaussian")),
        "{wide}"
    );
    let epsilon = number_after(&wide, "ε = ");
    // Gaussian noise asked for by name finds the same ε: its search starts
    // below its own cap (500), not at the ledger's (1,000).
    let named = text(&[
        "--target-error",
        "200",
        "--delta",
        "1e-6",
        "--mechanism",
        "gaussian",
    ]);
    assert_eq!(number_after(&named, "ε = "), epsilon, "{named}");
    // Without a δ, with the noise named, or for a precise count, pure
    // noise stays.
    for args in [
        vec!["--target-error", "200"],
        vec![
            "--target-error",
            "200",
            "--delta",
            "1e-6",
            "--mechanism",
            "geometric",
        ],
        vec!["--target-error", "2", "--delta", "1e-6"],
    ] {
        let shown = text(&args);
        assert!(!shown.contains("auto chose"), "{args:?}:\n{shown}");
        let release = shown.lines().find(|l| l.contains("count of rows"));
        assert!(release.is_some_and(|l| !l.contains("gaussian")), "{shown}");
    }
    // Settings no mechanism takes are refused for what they are.
    let refused = query(&ledger, &["--target-error", "200", "--delta", "2"], sql);
    assert_eq!(refused.status.code(), Some(2));
    let reason = String::from_utf8_lossy(&refused.stderr);
    assert!(
        reason.contains("delta") && !reason.contains("no ε up to"),
        "{reason}"
    );
    assert!(
        spent(&ledger).contains("spent ε = 0,"),
        "{}",
        spent(&ledger)
    );
    let run = text(&[
        "--target-error",
        "200",
        "--delta",
        "1e-6",
        "--spend",
        "--format",
        "json",
    ]);
    let answer: serde_json::Value = serde_json::from_str(&run).unwrap();
    assert_eq!(
        (answer["epsilon"].as_f64(), answer["delta"].as_f64()),
        (Some(epsilon), Some(1e-6))
    );
    let row = &answer["rows"][0][0];
    let half = (row["high"].as_f64().unwrap() - row["low"].as_f64().unwrap()) / 2.0;
    assert!(half <= 200.0, "{row}");
}

#[test]
fn json_and_csv_outputs_are_for_scripts() {
    let ledger = fresh_ledger("formats");
    let json = query(
        &ledger,
        &["--epsilon", "0.5", "--format", "json"],
        "SELECT COUNT(*) AS n FROM adult",
    );
    assert_eq!(json.status.code(), Some(0), "{json:?}");
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["columns"][0], "n");
    let n = value["rows"][0][0]["value"].as_f64().unwrap();
    assert!((n - 32_561.0).abs() < 100.0, "{n}");
    assert_eq!(value["epsilon"], 0.5);
    let csv = query(
        &ledger,
        &["--epsilon", "0.5", "--format", "csv"],
        "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex",
    );
    let text = String::from_utf8(csv.stdout).unwrap();
    assert_eq!(text.lines().next(), Some("sex,n,n_low,n_high"));
    assert_eq!(text.lines().count(), 3);
    // An answer without a row (every thresholded group withheld) has the
    // same columns, so a script reading it needs no special case.
    let empty = query(
        &ledger,
        &["--epsilon", "0.5", "--delta", "1e-6", "--format", "csv"],
        "SELECT \"native-country\", COUNT(*) AS n FROM adult WHERE age > 200 GROUP BY \"native-country\"",
    );
    assert_eq!(empty.status.code(), Some(0), "{empty:?}");
    let text = String::from_utf8(empty.stdout).unwrap();
    assert_eq!(text, "native-country,n,n_low,n_high\n");
}

/// Issue 31: `WHERE sex = 'female'` (the domain says `Female`) was answered
/// and charged without a word, and thresholded groups vanished without a
/// trace. Both are said now, from public facts alone: the same notes on
/// the table and on its neighbour without any woman, or with no one.
#[test]
fn notes_say_what_the_query_and_the_description_tell_and_nothing_of_the_data() {
    let ledger = fresh_ledger("notes");
    let output = query(
        &ledger,
        &["--epsilon", "1"],
        "SELECT COUNT(*) AS n FROM adult WHERE sex = 'female' OR race IN ('white', 'Martian')",
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(
        notes,
        [
            "note: 'female' is not in the public domain of sex: did you mean 'Female'?",
            "note: 'white' is not in the public domain of race: did you mean 'White'?",
            "note: 'Martian' is not in the public domain of race, which lists 'White', \
             'Asian-Pac-Islander', 'Amer-Indian-Eskimo', 'Other', 'Black'",
        ]
    );
    let explained = query(
        &ledger,
        &["--epsilon", "1", "--explain"],
        "SELECT COUNT(*) AS n FROM adult WHERE sex = 'female'",
    );
    let explained = String::from_utf8(explained.stdout).unwrap();
    assert!(explained.contains("\nNote: 'female' is not in the public domain of sex"));
    // Inside an aggregate's CASE, both forms, and in a computed column.
    for sql in [
        "SELECT COUNT(CASE WHEN sex = 'female' THEN 1 END) AS n FROM adult",
        "SELECT SUM(CASE sex WHEN 'female' THEN 1 ELSE 0 END) AS n FROM adult",
        "SELECT SUM(CASE 'female' WHEN sex THEN 1 ELSE 0 END) AS n FROM adult",
        "SELECT COUNT(*) AS n FROM (SELECT sex = 'female' AS f FROM adult) WHERE f",
    ] {
        let explained = query(&ledger, &["--epsilon", "1", "--explain"], sql);
        let explained = String::from_utf8(explained.stdout).unwrap();
        assert!(
            explained.contains("\nNote: 'female' is not in the public domain of sex: did you mean"),
            "{sql}: {explained}"
        );
    }

    let grouped = "SELECT \"native-country\", COUNT(*) AS n FROM adult GROUP BY \"native-country\"";
    let csv = query(
        &ledger,
        &["--epsilon", "1", "--delta", "1e-6", "--format", "csv"],
        grouped,
    );
    let err = String::from_utf8(csv.stderr).unwrap();
    assert!(
        err.starts_with("dpkit: note: groups are shown only when their noisy row count reaches "),
        "{err}"
    );
    assert!(
        err.ends_with("(a public domain for the key would list every group)\n"),
        "{err}"
    );
    let json = query(
        &ledger,
        &["--epsilon", "1", "--format", "json"],
        "SELECT COUNT(*) FROM adult",
    );
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(value.get("notes").is_none(), "{value}");
}

#[test]
fn bad_queries_get_one_error_line_spend_nothing_and_echo_no_data() {
    let ledger = fresh_ledger("bad");
    for (sql, extra, needle) in [
        ("SELECT COUNT(* FROM adult", vec!["--epsilon", "1"], "SQL"),
        (
            "SELECT COUNT(*) FROM census",
            vec!["--epsilon", "1"],
            "census",
        ),
        (
            "SELECT SUM(salary) FROM adult",
            vec!["--epsilon", "1"],
            "salary",
        ),
        (
            "SELECT COUNT(*) FROM adult a JOIN adult b ON a.age = b.age",
            vec!["--epsilon", "1"],
            "join",
        ),
        (
            "SELECT COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult)",
            vec!["--epsilon", "1"],
            "subqueries",
        ),
        (
            "SELECT SUM(sex) FROM adult",
            vec!["--epsilon", "1"],
            "numeric",
        ),
        (
            "SELECT SUM(fnlwgt) FROM adult",
            vec!["--epsilon", "1"],
            "bounds",
        ),
        (
            "SELECT MAX(education) FROM adult",
            vec!["--epsilon", "1"],
            "MAX() needs a column with public bounds",
        ),
        (
            "SELECT age FROM adult WHERE sex = 'Male'",
            vec!["--epsilon", "1"],
            "aggregate",
        ),
        (
            "SELECT \"native-country\", COUNT(*) FROM adult GROUP BY \"native-country\"",
            vec!["--epsilon", "1"],
            "δ > 0",
        ),
        (
            "SELECT COUNT(*) FROM adult",
            vec!["--epsilon", "11"],
            "budget",
        ),
        (
            "SELECT COUNT(*) FROM adult",
            vec!["--epsilon", "0"],
            "epsilon",
        ),
    ] {
        let output = query(&ledger, &extra, sql);
        assert_eq!(output.status.code(), Some(2), "{sql}");
        assert!(output.stdout.is_empty(), "{sql}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{sql}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{sql}: expected {needle:?} in {stderr}"
        );
        assert!(
            !stderr.contains("United-States") && !stderr.contains("Private"),
            "{stderr}"
        );
    }
    assert!(
        spent(&ledger).contains("spent ε = 0,"),
        "{}",
        spent(&ledger)
    );
}

#[test]
fn the_budget_runs_out_and_then_refuses() {
    let ledger = fresh_ledger("exhaust");
    // Three requests (the same one again would be replayed, free).
    let count = |run: u32| format!("SELECT COUNT(*) AS n{run} FROM adult");
    for run in 0..2 {
        assert_eq!(
            query(&ledger, &["--epsilon", "4"], &count(run))
                .status
                .code(),
            Some(0)
        );
    }
    let refused = query(&ledger, &["--epsilon", "4"], &count(2));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8(refused.stderr)
            .unwrap()
            .contains("only ε = 2 of 10 remains")
    );
    assert!(spent(&ledger).contains("remaining ε = 2 of 10"));
}

#[test]
fn an_edited_budget_is_noted_and_granted_only_when_asked() {
    let (folder, description) = description_with_budget("edited", "1");
    let ledger = folder.join("ledger.sqlite");
    let _ = std::fs::remove_file(&ledger);
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend([
            "--description",
            &description,
            "--ledger",
            ledger.to_str().unwrap(),
        ]);
        let output = dpkit(&all);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        (text(output.stdout), text(output.stderr))
    };
    let count = "SELECT COUNT(*) FROM adult";
    let (answer, quiet) = run(&["query", "--epsilon", "0.25", count]);
    assert!(
        answer.contains("left: ε = 0.75 of 1, enough for 3 more like it") && quiet.is_empty(),
        "{answer}{quiet}"
    );
    // The curator raises the budget in the file: the ledger keeps its total and says so.
    description_with_budget("edited", "5");
    let (kept, note) = run(&["budget"]);
    assert!(kept.contains("remaining ε = 0.75 of 1,"), "{kept}");
    assert!(
        note.starts_with("dpkit: note: ")
            && note.contains("declares a total of ε = 5, δ = 1e-5")
            && note.contains("(ε = 1, δ = 1e-5); `dpkit budget --grant`")
            && note.lines().count() == 1,
        "{note}"
    );
    let (granted, quiet) = run(&["budget", "--grant"]);
    assert!(
        granted.contains("spent ε = 0.25, δ = 0; remaining ε = 4.75 of 5,") && quiet.is_empty()
    );
    // Lowered below what was spent: nothing is left, and the spend stays.
    description_with_budget("edited", "0.1");
    let (lowered, _) = run(&["budget", "--grant"]);
    assert!(
        lowered.contains("spent ε = 0.25, δ = 0; left: ρ = 0 of 0.0003761 by zCDP (plain sums' ε = 0.1 is used up)"),
        "{lowered}"
    );
    let ledger = ledger.to_str().unwrap();
    let refused = dpkit(&[
        "query",
        "--description",
        &description,
        "--ledger",
        ledger,
        "--epsilon",
        "0.01",
        count,
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let refusal = String::from_utf8(refused.stderr).unwrap();
    assert!(refusal.contains("only ε = 0 of 0.1 remains"), "{refusal}");
}

#[test]
fn describe_drafts_a_description_without_bounds() {
    let csv = format!(
        "{}/../../data/adult/adult.test.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let output = dpkit(&["describe", &csv, "--name", "adult_test"]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("name = \"adult_test\"")
            && text.contains("[columns.age]\ntype = \"integer\"\n# bounds")
    );
    assert!(!text.contains("\nbounds ="), "never bounds from the data");
}

#[test]
fn at_a_very_large_epsilon_the_binary_lands_on_the_exact_answers() {
    let (folder, description) = description_with_budget("large", "1000");
    let output = dpkit(&[
        "query",
        "--description",
        &description,
        "--epsilon",
        "1000",
        "--confidence",
        "0.999999",
        "--format",
        "json",
        "SELECT education, COUNT(*) AS n, SUM(\"capital-gain\") AS gain, AVG(\"hours-per-week\") AS hours \
         FROM adult WHERE sex = 'Female' GROUP BY education",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = adult_rows();
    let released = answer["rows"].as_array().unwrap();
    assert_eq!(
        released.len(),
        16,
        "every education level of the public domain"
    );
    for row in released {
        let education = row[0].as_str().unwrap();
        let women: Vec<_> = rows
            .iter()
            .filter(|r| r["sex"] == "Female" && r["education"] == education)
            .collect();
        let n = women.len() as f64;
        let gain: f64 = women
            .iter()
            .map(|r| r["capital-gain"].parse::<f64>().unwrap())
            .sum();
        let hours = if women.is_empty() {
            None
        } else {
            Some(
                women
                    .iter()
                    .map(|r| r["hours-per-week"].parse::<f64>().unwrap())
                    .sum::<f64>()
                    / n,
            )
        };
        for (cell, exact) in [(&row[1], Some(n)), (&row[2], Some(gain)), (&row[3], hours)] {
            let Some(exact) = exact else { continue };
            let (low, high) = (
                cell["low"].as_f64().unwrap(),
                cell["high"].as_f64().unwrap(),
            );
            assert!(
                low <= exact && exact <= high,
                "{education}: {exact} outside [{low}, {high}]"
            );
            assert!(
                (cell["value"].as_f64().unwrap() - exact).abs()
                    <= 1e-3 * exact.abs().max(1.0) + 1.0
            );
        }
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// A copy of the Adult description with a budget large enough for many runs.
fn description_with_budget(name: &str, epsilon: &str) -> (PathBuf, String) {
    let folder = std::env::temp_dir().join(format!("dpkit-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let adult = std::fs::read_to_string(description()).unwrap();
    let csv = format!(
        "{}/../../data/adult/adult.data.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let copy = adult
        .replace("file = \"adult.data.csv\"", &format!("file = \"{csv}\""))
        .replace("epsilon = 10.0", &format!("epsilon = {epsilon}"));
    let path = folder.join("adult.toml");
    std::fs::write(&path, copy).unwrap();
    (folder, path.to_str().unwrap().to_string())
}

#[test]
fn over_many_runs_the_binarys_95_percent_intervals_cover_about_95_percent() {
    let (folder, description) = description_with_budget("coverage", "1000");
    // Exact counts and hours per age, computed here from the CSV.
    let mut exact: std::collections::HashMap<String, (f64, f64)> = std::collections::HashMap::new();
    for row in adult_rows() {
        let entry = exact.entry(row["age"].clone()).or_default();
        entry.0 += 1.0;
        entry.1 += row["hours-per-week"].parse::<f64>().unwrap();
    }
    // 50 runs × 74 ages (the public bounds 17..90) = 3,700 intervals per
    // aggregate. A count's interval (geometric noise at ε = 0.1, half-width
    // 30) covers with probability 1 − 2α³¹/(1 + α) = 0.9527, α = e^-0.1, and
    // more where it is cut at 0 (ages of few people): 0.9569 on average, a
    // share's standard deviation 0.33%, so 93.5–98% is more than ±6.5σ. A
    // sum's (discrete staircase) covers 0.9500: 93–97% is ±5.6σ. Both fail
    // a correct build less than once in 10⁷ runs; 90% or 99% intervals fail.
    let (mut covered, mut total) = ([0u64; 2], 0u64);
    for run in 0..50 {
        // Each run its own request: the same one again would be replayed.
        let sql = format!(
            "SELECT age, COUNT(*) AS n, SUM(\"hours-per-week\") AS hours FROM adult GROUP BY age \
             -- run {run}"
        );
        let output = dpkit(&[
            "query",
            "--description",
            &description,
            "--epsilon",
            "0.2",
            "--format",
            "json",
            &sql,
        ]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let rows = answer["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 74);
        for row in rows {
            let (n, hours) = exact
                .get(row[0].as_str().unwrap())
                .copied()
                .unwrap_or_default();
            for (slot, truth) in [(1usize, n), (2, hours)] {
                let (low, high) = (
                    row[slot]["low"].as_f64().unwrap(),
                    row[slot]["high"].as_f64().unwrap(),
                );
                covered[slot - 1] += u64::from(low <= truth && truth <= high);
            }
            total += 1;
        }
    }
    let windows = [("counts", 0.935..=0.98), ("sums", 0.93..=0.97)];
    for ((name, window), hits) in windows.into_iter().zip(covered) {
        let share = hits as f64 / total as f64;
        assert!(window.contains(&share), "{name}: {share}");
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// `--format json` is indented for a person on a terminal and stays on one
/// line for a script reading a pipe. `script` (util-linux) runs the command
/// on a real pseudo-terminal.
#[test]
fn json_is_indented_on_a_terminal_and_one_line_in_a_pipe() {
    let ledger = fresh_ledger("json-terminal");
    let sql = "SELECT COUNT(*) AS n FROM adult";
    let args = ["--epsilon", "1", "--format", "json", sql];
    let piped = query(&ledger, &args[..4], sql);
    assert_eq!(piped.stdout.iter().filter(|&&b| b == b'\n').count(), 1);
    let shell_words: Vec<String> = [env!("CARGO_BIN_EXE_dpkit"), "query", "--description"]
        .into_iter()
        .map(String::from)
        .chain([
            description(),
            "--ledger".into(),
            ledger.display().to_string(),
        ])
        .chain(args.iter().map(|a| a.to_string()))
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect();
    let on_terminal = Command::new("script")
        .args(["-qec", &shell_words.join(" "), "/dev/null"])
        .output()
        .expect("script (util-linux) gives the command a terminal");
    assert_eq!(on_terminal.status.code(), Some(0), "{on_terminal:?}");
    let text = String::from_utf8(on_terminal.stdout)
        .unwrap()
        .replace("\r\n", "\n");
    assert!(text.starts_with("{\n  \""), "{text}");
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["columns"][0], "n");
    let _ = std::fs::remove_file(&ledger);
}

#[test]
fn the_same_query_again_in_another_format_is_replayed_free() {
    let ledger = fresh_ledger("replay");
    let sql = "SELECT sex, COUNT(*) AS people FROM adult GROUP BY sex";
    let first = answered(&ledger, &["--epsilon", "2", "--format", "json"], sql);
    let again = answered(&ledger, &["--epsilon", "2", "--format", "json"], sql);
    let value = |text: &str| -> serde_json::Value { serde_json::from_str(text).unwrap() };
    let (first, again) = (value(&first), value(&again));
    assert_eq!(
        first["rows"], again["rows"],
        "the kept answer, the same noise"
    );
    assert!(
        again["notes"]
            .to_string()
            .contains("replayed from the ledger")
    );
    let csv = query(&ledger, &["--epsilon", "2", "--format", "csv"], sql);
    assert_eq!(csv.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&csv.stderr).contains("replayed from the ledger"));
    assert!(spent(&ledger).contains("spent ε = 2,"), "charged once");
    // Another ε is another request: charged.
    answered(&ledger, &["--epsilon", "1", "--format", "json"], sql);
    assert!(spent(&ledger).contains("spent ε = 3,"));
}

#[test]
fn groups_of_a_public_domain_that_may_be_empty_are_named() {
    // issue 67, point 3: every key of a public domain is released, with
    // rows or not; a group whose count interval reaches 0 is marked.
    let (folder, description) = description_with_budget("empty-groups", "10");
    let text = std::fs::read_to_string(&description).unwrap();
    let widened = text.replace(
        "domain = [\"Female\", \"Male\"]",
        "domain = [\"Female\", \"Male\", \"Other\"]",
    );
    assert_ne!(widened, text);
    std::fs::write(&description, widened).unwrap();
    // At a 1 − 10⁻⁶ confidence the interval of Other's true 0 reaches 0
    // but with probability below 10⁻⁶, and those of 10,000 people never.
    let output = dpkit(&[
        "query",
        "--description",
        &description,
        "--epsilon",
        "1",
        "--confidence",
        "0.999999",
        "--format",
        "json",
        "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let notes = answer["notes"].to_string();
    assert!(
        notes.contains(
            "these 1 of the 3 shown may hold no rows (their `n` interval reaches 0): Other"
        ),
        "{notes}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn describe_drafts_several_files_about_the_same_people_in_one_description() {
    // issue 67, point 7: four drafts were merged by hand.
    let folder = std::env::temp_dir().join(format!("dpkit-cli-several-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let write = |name: &str, text: &str| {
        let path = folder.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let planes = write("planes.csv", "tailnum,seats\nN1,180\nN2,150\n");
    // Carriers repeat among flights, as in any flights file: with two
    // flights of two carriers, airlines could be about the flights, and
    // the draft would leave it out.
    let flights = write("flights.csv", "tailnum,carrier\nN1,AA\nN1,UA\nN2,AA\n");
    let airlines = write("airlines.csv", "carrier,name\nAA,American\n");
    let output = dpkit(&["describe", &flights, &planes, &airlines]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let draft = String::from_utf8(output.stdout).unwrap();
    for part in [
        "name = \"planes\"",
        "[private.flights]",
        "[public.airlines]",
        "GUESSED",
    ] {
        assert!(draft.contains(part), "{part} in {draft}");
    }
    std::fs::write(folder.join("all.toml"), &draft).unwrap();
    let checked = dpkit(&[
        "check",
        "--description",
        folder.join("all.toml").to_str().unwrap(),
    ]);
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Issue 67, point 4: under each answer, what is left reads in the unit of
/// the accountant that pays for more like it (never "ε = 0 left" while
/// queries go on being answered), and its count of how many more is kept:
/// exactly that many more are answered, and the next is refused.
#[test]
fn the_line_under_an_answer_says_what_is_left_as_the_accountant_that_pays_sees_it() {
    let (folder, description) = description_with_budget("left", "1");
    let ledger = folder.join("ledger.sqlite");
    let _ = std::fs::remove_file(&ledger);
    let ask = |i: u64| {
        let sql = format!("SELECT COUNT(*) FROM adult WHERE age > {i}");
        let ledger = ledger.to_str().unwrap();
        let gaussian = [
            "--mechanism",
            "gaussian",
            "--epsilon",
            "0.4",
            "--delta",
            "1e-7",
        ];
        let first = ["query", "--description", &description, "--ledger", ledger];
        dpkit(&[&first[..], &gaussian[..], &[sql.as_str()]].concat())
    };
    let more = |line: &str| -> u64 {
        if line.contains("left: ") && line.contains("not enough for another like it") {
            return 0;
        }
        let after = line
            .split("enough for ")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}"));
        after.split(' ').next().unwrap().parse().unwrap()
    };
    let first = String::from_utf8(ask(0).stdout).unwrap();
    let promised = more(&first);
    // Plain sums pay for two at ε = 0.4 of 1; zCDP for more.
    assert!(promised > 3 && first.contains(" by zCDP, "), "{first}");
    for i in 1..=promised {
        let output = ask(i);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let line = String::from_utf8(output.stdout).unwrap();
        assert!(!line.contains("left: ε = 0 "), "{line}");
        assert_eq!(more(&line), promised - i, "{line}");
        if i >= 2 {
            assert!(line.contains("(plain sums' ε = 1 is used up)"), "{line}");
        }
    }
    let refused = ask(promised + 1);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let _ = std::fs::remove_dir_all(folder);
}

/// A tiny ε is refused in one short line, not with a number written out
/// to three hundred digits (issue 67's walk).
#[test]
fn a_tiny_epsilon_is_refused_in_one_short_line() {
    let ledger = fresh_ledger("tiny-epsilon");
    let output = query(
        &ledger,
        &["--epsilon", "1e-300"],
        "SELECT COUNT(*) FROM adult",
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let said = String::from_utf8(output.stderr).unwrap();
    assert!(said.lines().count() == 1 && said.len() < 300, "{said}");
    assert!(spent(&ledger).contains("spent ε = 0,"));
}
