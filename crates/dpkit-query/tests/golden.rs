//! Golden files for private SQL: `tests/sql/*.slt` hold cases in a
//! sqllogictest-like format, run against the bundled Adult description
//! with its public lookup tables (`data/adult/public.toml`).
//!
//! ```text
//! # a comment
//! refuse
//! SELECT …
//! ----
//! the one-line refusal (or "accepted")
//! ====
//!
//! explain epsilon=1 delta=0 mechanism=auto
//! SELECT …
//! ----
//! the --explain text
//! ====
//!
//! answer epsilon=1 seed=7
//! SELECT …
//! ----
//! the answer as a table (a seeded generator, for tests only)
//! ====
//! ```
//!
//! `DPKIT_BLESS=1 cargo nextest run -p dpkit-query --test golden` rewrites
//! the expected parts from what the engine now says.

#[path = "support/fixture.rs"]
mod fixture;

use std::path::{Path, PathBuf};

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Ledger, MechanismChoice, QueryEngine, ReleaseSettings};

struct Case {
    header: String,
    sql: String,
    expected: String,
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for block in text.split("\n====\n") {
        let lines: Vec<&str> = block
            .lines()
            .skip_while(|l| l.starts_with('#') || l.trim().is_empty())
            .collect();
        let Some(split) = lines.iter().position(|l| *l == "----") else {
            continue;
        };
        let (Some(header), sql) = (lines.first(), &lines[1..split]) else {
            continue;
        };
        cases.push(Case {
            header: header.to_string(),
            sql: sql.join("\n"),
            expected: lines[split + 1..].join("\n"),
        });
    }
    cases
}

fn option(header: &str, name: &str, default: &str) -> String {
    header
        .split_whitespace()
        .find_map(|word| word.strip_prefix(&format!("{name}=")))
        .unwrap_or(default)
        .to_string()
}

fn settings(header: &str) -> ReleaseSettings {
    let mechanism = match option(header, "mechanism", "auto").as_str() {
        "laplace" => MechanismChoice::Laplace,
        "gaussian" => MechanismChoice::Gaussian,
        "staircase" => MechanismChoice::Staircase,
        "geometric" => MechanismChoice::Geometric,
        _ => MechanismChoice::Auto,
    };
    ReleaseSettings {
        epsilon: option(header, "epsilon", "1").parse().unwrap(),
        delta: option(header, "delta", "0").parse().unwrap(),
        mechanism,
        confidence: 0.95,
    }
}

/// What the engine says for one case.
fn actual(engine: &QueryEngine, ledger: &Ledger, case: &Case) -> String {
    let settings = settings(&case.header);
    let kind = case.header.split_whitespace().next().unwrap_or_default();
    let text = match kind {
        "explain" => engine
            .explain(&case.sql, &settings)
            .map(|t| t.trim_end().to_string()),
        "answer" => {
            let seed = option(&case.header, "seed", "1").parse().unwrap();
            let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
            engine
                .answer(&case.sql, &settings, ledger, &mut rng)
                .map(|a| a.to_text().trim_end().to_string())
        }
        _ => match engine
            .plan(&case.sql)
            .and_then(|q| Ok(dpkit_release::plan_noise(&q.measured, &settings).map(|_| ())?))
        {
            Ok(()) => Ok("accepted".to_string()),
            Err(e) => Err(e),
        },
    };
    match text {
        Ok(text) => text,
        Err(error) => error.to_string(),
    }
}

fn files() -> Vec<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    files
}

#[test]
fn golden_files_match() {
    let engine = QueryEngine::open(fixture::adult_with_public_tables()).unwrap();
    let ledger_path =
        std::env::temp_dir().join(format!("dpkit-golden-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&ledger_path);
    let ledger = Ledger::open(&ledger_path, 1000.0, 1e-3).unwrap();
    let bless = std::env::var_os("DPKIT_BLESS").is_some();
    let mut failures = Vec::new();
    let mut cases_seen = 0;
    for file in files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut blessed = text.clone();
        for case in parse(&text) {
            cases_seen += 1;
            let now = actual(&engine, &ledger, &case);
            if now != case.expected {
                if bless {
                    let old = format!("{}\n----\n{}", case.sql, case.expected);
                    let new = format!("{}\n----\n{}", case.sql, now);
                    blessed = blessed.replacen(&old, &new, 1);
                } else {
                    failures.push(format!(
                        "{}: {}\n--- expected\n{}\n--- actual\n{}",
                        file.display(),
                        case.sql,
                        case.expected,
                        now
                    ));
                }
            }
        }
        if bless {
            std::fs::write(&file, blessed).unwrap();
        }
    }
    let _ = std::fs::remove_file(&ledger_path);
    assert!(cases_seen > 20, "only {cases_seen} golden cases found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
