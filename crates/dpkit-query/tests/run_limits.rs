//! The per-run limits a service sets, and the engine's answer path with
//! kept answers: a run over its time or memory limit fails with its cost
//! kept, and asked again fails again for free, never running a second
//! time under the same charge; a table held in memory answers exactly as
//! the file does, and a file that does not parse is refused when opened.

#[path = "support/fixture.rs"]
mod fixture;

use std::time::Duration;

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, QueryEngine, QueryError, RunLimits};
use fixture::{adult_description, settings};

const GROUPS: &str = "SELECT education, occupation, COUNT(*), SUM(\"hours-per-week\") FROM adult GROUP BY education, occupation";

/// Groups by key, whatever order the engine gave them in.
fn sorted(
    exact: dpkit_release::ExactGroups,
) -> Vec<(Vec<String>, Vec<dpkit_core::lattice::GridValue>)> {
    let mut groups: Vec<_> = exact.keys.into_iter().zip(exact.values).collect();
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    groups
}

fn ledger(name: &str) -> (std::path::PathBuf, Ledger) {
    let path =
        std::env::temp_dir().join(format!("dpkit-limits-{name}-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&path);
    Ledger::grant(&path, "ann/adult", 100.0, 0.0).unwrap();
    let ledger = Ledger::open_account(&path, "ann/adult").unwrap();
    (path, ledger)
}

fn failure(name: &str, outcome: Result<dpkit_query::OnceAnswer, QueryError>) -> String {
    match outcome {
        Err(QueryError::FailedWhileRunning(reason)) => reason,
        Err(other) => panic!("{name}: expected a failure while running, got {other}"),
        Ok(_) => panic!("{name}: expected a failure while running, got an answer"),
    }
}

#[test]
fn runs_over_their_limits_fail_once_charged_and_fail_again_free() {
    let mut rng = InsecureSeededRng::from_seed_for_testing(1);
    for (name, limits, reason) in [
        (
            "memory",
            RunLimits {
                timeout: None,
                memory_bytes: Some(1024),
            },
            "memory",
        ),
        (
            "time",
            RunLimits {
                timeout: Some(Duration::from_nanos(1)),
                memory_bytes: None,
            },
            "time limit",
        ),
    ] {
        let mut engine = QueryEngine::open_in_memory(adult_description()).unwrap();
        engine.set_limits(limits);
        let (path, ledger) = ledger(name);
        let first = failure(
            name,
            engine.answer_once(GROUPS, &settings(1.0, 0.0), &ledger, "r", &mut rng),
        );
        assert!(first.contains(reason), "{name}: {first}");
        for _ in 0..3 {
            let again = failure(
                name,
                engine.answer_once(GROUPS, &settings(1.0, 0.0), &ledger, "r", &mut rng),
            );
            assert_eq!(again, first);
        }
        let state = ledger.state().unwrap();
        assert_eq!(
            (state.spent_epsilon, state.queries),
            (1.0, 1),
            "{name}: charged once"
        );
        engine.set_limits(RunLimits::default());
        let answered = engine
            .answer_once(GROUPS, &settings(1.0, 0.0), &ledger, "other", &mut rng)
            .unwrap();
        assert!(!answered.replay && !answered.table.rows.is_empty());
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn a_table_in_memory_gives_the_exact_aggregates_of_the_file() {
    let on_disk = QueryEngine::open(adult_description()).unwrap();
    let mut in_memory = QueryEngine::open_in_memory(adult_description()).unwrap();
    in_memory.set_limits(RunLimits {
        timeout: Some(Duration::from_secs(60)),
        memory_bytes: Some(256 << 20),
    });
    for sql in [
        GROUPS,
        "SELECT sex, AVG(age), COUNT(*) FROM adult WHERE age > 40 GROUP BY sex",
        "SELECT COUNT(*) FROM adult",
    ] {
        let expected =
            sorted(dpkit_query::internals::exact(&on_disk, &on_disk.plan(sql).unwrap()).unwrap());
        assert!(!expected.is_empty());
        // Twice: the session kept from the first run serves the second.
        for _ in 0..2 {
            let held =
                dpkit_query::internals::exact(&in_memory, &in_memory.plan(sql).unwrap()).unwrap();
            assert_eq!(sorted(held), expected, "{sql}");
        }
    }
}

#[test]
fn a_file_that_does_not_parse_is_refused_when_held_in_memory() {
    let folder =
        std::env::temp_dir().join(format!("dpkit-limits-malformed-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let description = || {
        Description::from_toml(
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1.0\ndelta = 0.0\n[columns.age]\ntype = \"integer\"\nbounds = [0, 100]\n",
        &folder,
    )
    .unwrap()
    };
    // A row with a few fields more than the header is no one's, and left
    // out (issue 67's walk); with more than 2 more, the file does not parse.
    std::fs::write(
        folder.join("t.csv"),
        "age,name\n30,a\n41,SECRETVALUE,extra\n",
    )
    .unwrap();
    assert!(QueryEngine::open_in_memory(description()).is_ok());
    let many = ",extra".repeat(3);
    std::fs::write(
        folder.join("t.csv"),
        format!("age,name\n30,a\n41,SECRETVALUE{many}\n"),
    )
    .unwrap();
    let error = QueryEngine::open_in_memory(description())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        error.contains("does not parse") && !error.contains("SECRETVALUE"),
        "{error}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}
