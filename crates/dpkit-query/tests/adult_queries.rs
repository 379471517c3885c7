//! Private queries on the bundled Adult data, checked against exact answers
//! computed here independently of the engine.

#[path = "support/adult_rows.rs"]
mod adult_rows;
#[path = "support/fixture.rs"]
mod fixture;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use adult_rows::adult_rows;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, QueryEngine, QueryError};
use dpkit_release::{Cell, plan_noise, release};
use fixture::{Fixture, adult_description, adult_with_public_tables, settings, value};

fn temporary(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dpkit-query-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("sqlite-wal"));
    path
}

/// The largest ε a query may spend, with intervals at 1 − 10⁻⁶: answers
/// land on the exact ones, and every exact answer lies in its interval
/// unless something is wrong.
fn exact_settings() -> dpkit_query::ReleaseSettings {
    dpkit_query::ReleaseSettings {
        confidence: 1.0 - 1e-6,
        ..settings(1000.0, 0.0)
    }
}

fn key(cell: &Cell) -> String {
    match cell {
        Cell::Key(key) => key.clone(),
        Cell::Value { .. } => panic!("expected a key, got a value"),
    }
}

#[test]
fn answers_at_a_very_large_epsilon_land_on_the_exact_answers() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("large-eps"), 1000.0, 1e-3).unwrap();
    let sql = "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age, SUM(\"hours-per-week\") AS hours \
               FROM adult WHERE age > 30 GROUP BY sex";
    let mut rng = InsecureSeededRng::from_seed_for_testing(1);
    let answer = engine
        .answer(sql, &exact_settings(), &ledger, &mut rng)
        .unwrap();
    assert_eq!(answer.columns, ["sex", "n", "mean_age", "hours"]);
    assert_eq!(answer.rows.len(), 2, "both sexes of the public domain");
    for row in &answer.rows {
        let Cell::Key(sex) = &row[0] else {
            panic!("key first")
        };
        let people: Vec<_> = adult_rows()
            .into_iter()
            .filter(|r| &r["sex"] == sex && r["age"].parse::<i64>().unwrap() > 30)
            .collect();
        let n = people.len() as f64;
        let mean_age = people
            .iter()
            .map(|r| r["age"].parse::<f64>().unwrap())
            .sum::<f64>()
            / n;
        let hours: f64 = people
            .iter()
            .map(|r| r["hours-per-week"].parse::<f64>().unwrap())
            .sum();
        for (cell, exact, tolerance) in [
            (&row[1], n, 0.0),
            (&row[2], mean_age, 1e-3),
            (&row[3], hours, 1.0),
        ] {
            let (released, low, high) = value(cell);
            assert!(
                low <= exact && exact <= high,
                "{sex}: {exact} outside [{low}, {high}]"
            );
            assert!(
                (released - exact).abs() <= tolerance,
                "{sex}: {released} vs {exact}"
            );
        }
    }
}

/// HAVING on an aggregate that is not shown: it is measured (and charged)
/// with the rest, and at a very large ε keeps exactly the groups whose
/// exact value satisfies it.
#[test]
fn having_keeps_the_groups_its_released_values_satisfy() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("having"), 1000.0, 1e-3).unwrap();
    let sql = "SELECT race, COUNT(*) AS n FROM adult GROUP BY race \
               HAVING COUNT(*) > 300 AND AVG(age) < 39 ORDER BY n DESC";
    let planned = engine.plan(sql).unwrap();
    // COUNT(*) once (SELECT and HAVING share it), AVG's sum and count.
    assert_eq!(planned.measured.measurements.len(), 3);
    let mut rng = InsecureSeededRng::from_seed_for_testing(4);
    let answer = engine
        .answer(sql, &exact_settings(), &ledger, &mut rng)
        .unwrap();
    assert_eq!(answer.columns, ["race", "n"]);
    let mut expected: Vec<(String, usize)> = Vec::new();
    let rows = adult_rows();
    let mut races: Vec<&String> = rows.iter().map(|r| &r["race"]).collect();
    races.sort();
    races.dedup();
    for race in races {
        let ages: Vec<f64> = rows
            .iter()
            .filter(|r| &r["race"] == race)
            .map(|r| r["age"].parse::<f64>().unwrap())
            .collect();
        let mean = ages.iter().sum::<f64>() / ages.len() as f64;
        if ages.len() > 300 && mean < 39.0 {
            expected.push((race.clone(), ages.len()));
        }
    }
    expected.sort_by_key(|e| std::cmp::Reverse(e.1));
    let shown: Vec<(String, usize)> = answer
        .rows
        .iter()
        .map(|row| (key(&row[0]), value(&row[1]).0 as usize))
        .collect();
    assert!(!expected.is_empty() && expected.len() < 5, "{expected:?}");
    assert_eq!(shown, expected);
}

/// Keys the WHERE lists are released as a public domain: each listed key
/// once, in the list's order, present in the data or not, with δ = 0 (no
/// threshold); the counts at a very large ε are the exact ones. A key set
/// read off the data would drop the absent key, or need δ.
#[test]
fn keys_listed_in_the_where_are_released_without_a_threshold() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("listed-keys"), 1000.0, 0.0).unwrap();
    let sql = "SELECT \"native-country\" AS c, COUNT(*) AS n FROM adult \
               WHERE age > 30 AND \"native-country\" IN ('Mexico', 'Atlantis', 'Canada', 'Mexico') \
               GROUP BY \"native-country\"";
    let mut rng = InsecureSeededRng::from_seed_for_testing(12);
    let answer = engine
        .answer(sql, &exact_settings(), &ledger, &mut rng)
        .unwrap();
    let rows = adult_rows();
    let shown: Vec<(String, f64)> = answer
        .rows
        .iter()
        .map(|row| (key(&row[0]), value(&row[1]).0))
        .collect();
    let exact = |country: &str| {
        rows.iter()
            .filter(|r| r["native-country"] == country && r["age"].parse::<i64>().unwrap() > 30)
            .count() as f64
    };
    let expected: Vec<(String, f64)> = ["Mexico", "Atlantis", "Canada"]
        .iter()
        .map(|c| (c.to_string(), exact(c)))
        .collect();
    assert_eq!(shown, expected);
    assert_eq!(expected[1].1, 0.0, "Atlantis is not in the data");
}

#[test]
fn a_plan_run_again_gives_the_exact_groups_of_its_first_run() {
    // The second and third runs reuse the optimiser's outcome kept in the
    // query (dpkit serve runs a plan kept for an analyst again), on the
    // engine's own session and on one with run limits.
    let mut limited = QueryEngine::open_in_memory(adult_description()).unwrap();
    limited.set_limits(dpkit_query::RunLimits {
        timeout: Some(std::time::Duration::from_secs(60)),
        memory_bytes: Some(256 << 20),
    });
    let sql = "SELECT race, COUNT(*) AS n, AVG(age) AS mean_age, MEDIAN(\"hours-per-week\") AS h \
               FROM adult WHERE sex = 'Female' AND age > 30 GROUP BY race";
    // Groups come in any order: each run's, sorted by key.
    let sorted = |query: &dpkit_query::plan::PrivateQuery| {
        let exact = dpkit_query::internals::exact(&limited, query).unwrap();
        let mut groups: Vec<_> = (0..exact.keys.len())
            .map(|g| {
                (
                    exact.keys[g].clone(),
                    format!("{:?} {:?}", exact.values[g], exact.histograms[g]),
                )
            })
            .collect();
        groups.sort();
        groups
    };
    let query = limited.plan(sql).unwrap();
    let first = sorted(&query);
    assert_eq!(first, sorted(&limited.plan(sql).unwrap()));
    for _ in 0..2 {
        assert_eq!(sorted(&query), first);
    }
    assert!(first.len() > 2);
}

#[test]
fn intervals_cover_the_exact_answer_about_95_percent_of_the_time() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let sql = "SELECT race, COUNT(*) AS n, SUM(\"hours-per-week\") AS hours, AVG(age) AS mean_age \
               FROM adult GROUP BY race";
    let query = engine.plan(sql).unwrap();
    let exact = dpkit_query::internals::exact(&engine, &query).unwrap();
    let settings = settings(0.2, 0.0);
    let noise = plan_noise(&query.measured, &settings).unwrap();
    let truth: HashMap<String, (f64, f64, f64)> = {
        let mut sums: HashMap<String, (f64, f64, f64)> = HashMap::new();
        for row in adult_rows() {
            let entry = sums.entry(row["race"].clone()).or_default();
            entry.0 += 1.0;
            entry.1 += row["hours-per-week"].parse::<f64>().unwrap();
            entry.2 += row["age"].parse::<f64>().unwrap();
        }
        sums.into_iter()
            .map(|(k, (n, h, a))| (k, (n, h, a / n)))
            .collect()
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(2);
    let runs = 4000;
    let mut covered = [0u64; 3];
    let mut total = 0u64;
    for _ in 0..runs {
        let answer = release(&query.measured, &noise, &exact, 0.95, &mut rng).unwrap();
        for row in &answer.rows {
            let Cell::Key(race) = &row[0] else { panic!() };
            let (n, hours, mean_age) = truth[race];
            for (slot, (cell, exact)) in [(&row[1], n), (&row[2], hours), (&row[3], mean_age)]
                .into_iter()
                .enumerate()
            {
                let (_, low, high) = value(cell);
                covered[slot] += u64::from(low <= exact && exact <= high);
            }
            total += 1;
        }
    }
    let share = |slot: usize| covered[slot] as f64 / total as f64;
    // 20,000 intervals per aggregate: a share's standard deviation is 0.15%.
    assert!((0.93..=0.97).contains(&share(0)), "counts: {}", share(0));
    assert!((0.93..=0.97).contains(&share(1)), "sums: {}", share(1));
    // AVG's interval is built from two intervals at α/2: it may only over-cover.
    assert!(share(2) >= 0.95, "averages: {}", share(2));
}

#[test]
fn binned_groups_release_every_bin_of_the_public_bounds() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("bins"), 1000.0, 1e-3).unwrap();
    let sql = "SELECT floor(age / 10) * 10 AS decade, COUNT(*) AS n FROM adult GROUP BY floor(age / 10) * 10 ORDER BY decade";
    let mut rng = InsecureSeededRng::from_seed_for_testing(3);
    let answer = engine
        .answer(sql, &exact_settings(), &ledger, &mut rng)
        .unwrap();
    let decades: Vec<String> = answer.rows.iter().map(|r| key(&r[0])).collect();
    // floor() returns a real number, so the bins print as 10.0, 20.0, …
    assert_eq!(
        decades,
        [
            "10.0", "20.0", "30.0", "40.0", "50.0", "60.0", "70.0", "80.0", "90.0"
        ]
    );
    let rows = adult_rows();
    for row in &answer.rows {
        let Cell::Key(decade) = &row[0] else { panic!() };
        let decade = decade.parse::<f64>().unwrap() as i64;
        let exact = rows
            .iter()
            .filter(|r| r["age"].parse::<i64>().unwrap() / 10 * 10 == decade)
            .count();
        assert_eq!(value(&row[1]).0, exact as f64, "decade {decade}");
    }
}

#[test]
fn keys_without_a_public_domain_pass_a_noisy_threshold() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("threshold"), 100.0, 1e-3).unwrap();
    let sql = "SELECT \"native-country\" AS country, COUNT(*) AS n FROM adult GROUP BY \"native-country\"";
    let mut rng = InsecureSeededRng::from_seed_for_testing(4);
    assert!(matches!(
        engine.answer(sql, &settings(1.0, 0.0), &ledger, &mut rng),
        Err(QueryError::NotPrivate(_))
    ));
    assert_eq!(
        ledger.state().unwrap().spent_epsilon,
        0.0,
        "a refused query spends nothing"
    );
    let answer = engine
        .answer(sql, &settings(1.0, 1e-6), &ledger, &mut rng)
        .unwrap();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for row in adult_rows() {
        *counts.entry(row["native-country"].clone()).or_default() += 1;
    }
    let released: Vec<String> = answer.rows.iter().map(|r| key(&r[0])).collect();
    // τ ≈ 14 at ε = 0.5 per count and δ = 1e-6: a country of 3 people is
    // released with probability below 10⁻⁶; one of 200 almost surely.
    for country in &released {
        assert!(
            counts[country] > 3,
            "{country} has {} people",
            counts[country]
        );
    }
    for (country, &n) in &counts {
        if n >= 200 {
            assert!(
                released.contains(country),
                "{country} ({n} people) was not released"
            );
        }
    }
    let state = ledger.state().unwrap();
    assert_eq!((state.spent_epsilon, state.spent_delta), (1.0, 1e-6));
    // The query's COUNT(*) doubles as the threshold's count; without one, the
    // threshold needs a count of its own.
    assert_eq!(engine.plan(sql).unwrap().measured.measurements.len(), 1);
    let averages = "SELECT \"native-country\", AVG(age) FROM adult GROUP BY \"native-country\"";
    assert_eq!(
        engine.plan(averages).unwrap().measured.measurements.len(),
        3
    );
}

#[test]
fn the_budget_refuses_an_overspend_and_a_failed_query_spends_nothing() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("budget"), 1.0, 0.0).unwrap();
    let mut rng = InsecureSeededRng::from_seed_for_testing(5);
    let count = "SELECT COUNT(*) FROM adult";
    engine
        .answer(count, &settings(0.4, 0.0), &ledger, &mut rng)
        .unwrap();
    engine
        .answer(count, &settings(0.4, 0.0), &ledger, &mut rng)
        .unwrap();
    let refused = engine.answer(count, &settings(0.4, 0.0), &ledger, &mut rng);
    assert!(matches!(refused, Err(QueryError::Budget(_))), "{refused:?}");
    let state = ledger.state().unwrap();
    assert!((state.spent_epsilon - 0.8).abs() < 1e-12 && state.queries == 2);
    engine
        .answer(count, &settings(0.2, 0.0), &ledger, &mut rng)
        .unwrap();
    assert!(
        (ledger.state().unwrap().remaining_epsilon()).abs() < 1e-12,
        "exactly all of it can be spent"
    );
    for bad in [
        "SELEC COUNT(*) FROM adult",
        "SELECT COUNT(*) FROM census",
        "SELECT COUNT(salary) FROM adult",
        "SELECT * FROM adult",
        "SELECT age FROM adult",
        "SELECT SUM(sex) FROM adult",
        "SELECT SUM(fnlwgt) FROM adult",
        "SELECT MAX(education) FROM adult",
        "SELECT SUM(DISTINCT age) FROM adult",
        "SELECT COUNT(*) FROM adult a JOIN adult b ON a.age = b.age",
        "SELECT COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult)",
        "SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING COUNT(*) % 2 = 0",
        "SELECT COUNT(*) % 2 FROM adult",
        "SELECT age, COUNT(*) * age FROM adult GROUP BY age",
    ] {
        let error = engine
            .answer(bad, &settings(0.1, 0.0), &ledger, &mut rng)
            .unwrap_err();
        assert!(
            matches!(error, QueryError::Sql(_) | QueryError::NotPrivate(_)),
            "{bad}: planning errors come before any charge, got {error:?}"
        );
        let message = error.to_string();
        assert_eq!(message.lines().count(), 1, "{bad}: {message}");
        for value in ["Male", "Female", "United-States", "Private"] {
            assert!(!message.contains(value), "{bad}: echoes data: {message}");
        }
    }
    assert_eq!(
        ledger.state().unwrap().queries,
        3,
        "refused and invalid queries cost nothing"
    );
}

#[test]
fn a_value_that_does_not_parse_is_null_and_the_query_still_runs() {
    let mut csv = String::from("salary\n");
    for i in 0..1500 {
        csv.push_str(&format!("{}\n", 1000 + i));
    }
    csv.push_str("secret-93000\n"); // past the rows DataFusion would infer types from
    let fixture = Fixture::new(
        "broken",
        "salaries.csv",
        &csv,
        "[table]\nname = \"salaries\"\nfile = \"salaries.csv\"\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1000.0\n[columns.salary]\ntype = \"integer\"\nbounds = [0, 5000]\n",
        1000.0,
    );
    // Whether one row parses must not decide whether a query fails: the
    // column has the declared type, and the odd value is NULL.
    let answer = fixture
        .answer(
            "SELECT SUM(salary) AS s, COUNT(salary) AS n FROM salaries",
            500.0,
            6,
        )
        .unwrap();
    let exact_sum: f64 = (1000..2500).map(f64::from).sum();
    assert!(
        (value(&answer.rows[0][0]).0 - exact_sum).abs() < 50.0,
        "{answer:?}"
    );
    assert!(
        (value(&answer.rows[0][1]).0 - 1500.0).abs() < 2.0,
        "{answer:?}"
    );
    let state = fixture.ledger.state().unwrap();
    assert_eq!((state.spent_epsilon, state.queries), (500.0, 1));
}

#[test]
fn a_query_whose_file_cannot_be_read_is_refunded() {
    let fixture = Fixture::new(
        "vanished",
        "t.csv",
        "x\n1\n2\n",
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1.0\n",
        1.0,
    );
    std::fs::remove_file(fixture.folder.join("t.csv")).unwrap(); // vanishes after opening
    let error = fixture
        .answer("SELECT COUNT(*) FROM t", 0.5, 10)
        .unwrap_err();
    assert!(matches!(error, QueryError::Unreadable(_)), "{error:?}");
    let state = fixture.ledger.state().unwrap();
    assert_eq!(
        (state.spent_epsilon, state.queries),
        (0.0, 0),
        "an I/O failure is refunded"
    );
}

#[test]
fn an_id_privacy_unit_bounds_each_persons_rows() {
    // Alice has 5 visits, Bob 1, Carol 3; at most 2 per person are kept.
    let mut csv = String::from("person,spend\n");
    for (person, visits, spend) in [("alice", 5, 10), ("bob", 1, 20), ("carol", 3, 30)] {
        for _ in 0..visits {
            csv.push_str(&format!("{person},{spend}\n"));
        }
    }
    let fixture = Fixture::new(
        "id",
        "visits.csv",
        &csv,
        "[table]\nname = \"visits\"\nfile = \"visits.csv\"\n\
         [privacy_unit]\nkind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 2\n\
         [budget]\nepsilon = 1000\n[columns.person]\ntype = \"text\"\n\
         [columns.spend]\ntype = \"integer\"\nbounds = [0, 100]\n",
        1000.0,
    );
    let answer = fixture
        .answer(
            "SELECT COUNT(*) AS n, SUM(spend) AS total FROM visits",
            1000.0,
            7,
        )
        .unwrap();
    assert_eq!(value(&answer.rows[0][0]).0, 5.0, "2 + 1 + 2 rows");
    assert!(
        (value(&answer.rows[0][1]).0 - 100.0).abs() < 0.1,
        "2·10 + 20 + 2·30"
    );
    let explanation = fixture
        .engine
        .explain("SELECT COUNT(*) FROM visits", &settings(1.0, 0.0))
        .unwrap();
    assert!(
        explanation.contains("at most 2 row(s), capped on the table scan"),
        "{explanation}"
    );
}

#[test]
fn a_drafted_description_parses_and_names_every_column() {
    let csv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult/adult.data.csv");
    let draft = dpkit_query::draft::draft_from_csv(&csv, "adult").unwrap();
    let description = Description::from_toml(&draft, csv.parent().unwrap()).unwrap();
    assert_eq!(description.columns.len(), 15);
    assert!(
        description
            .columns
            .values()
            .all(|c| c.bounds.is_none() && c.domain.is_none()),
        "no bounds from data"
    );
    assert!(draft.contains("[columns.hours-per-week]\ntype = \"integer\""));
}

#[test]
fn a_parquet_file_gives_the_same_answers_as_its_csv() {
    use datafusion::prelude::{CsvReadOptions, SessionContext};
    let folder = std::env::temp_dir().join(format!("dpkit-query-parquet-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let csv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult/adult.data.csv");
    let parquet = folder.join("adult.parquet");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let context = SessionContext::new();
        let frame = context
            .read_csv(csv.to_str().unwrap(), CsvReadOptions::new())
            .await
            .unwrap();
        frame
            .write_parquet(parquet.to_str().unwrap(), Default::default(), None)
            .await
            .unwrap();
    });
    let description = Description::from_toml(
        "[table]\nname = \"adult\"\nfile = \"adult.parquet\"\npeople = 32561\n\
         [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1000\n\
         [columns.age]\ntype = \"integer\"\nbounds = [17, 90]\n\
         [columns.sex]\ntype = \"text\"\ndomain = [\"Female\", \"Male\"]\n",
        &folder,
    )
    .unwrap();
    let engine = QueryEngine::open(description).unwrap();
    let ledger = Ledger::open(&folder.join("ledger.sqlite"), 1000.0, 0.0).unwrap();
    let mut rng = InsecureSeededRng::from_seed_for_testing(8);
    let answer = engine
        .answer(
            "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex",
            &exact_settings(),
            &ledger,
            &mut rng,
        )
        .unwrap();
    let rows = adult_rows();
    for row in &answer.rows {
        let Cell::Key(sex) = &row[0] else { panic!() };
        let exact = rows.iter().filter(|r| &r["sex"] == sex).count() as f64;
        assert_eq!(value(&row[1]).0, exact);
        assert!(
            value(&row[1]).2 <= 32_561.0,
            "counts stay within the public number of people"
        );
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn values_beyond_the_bounds_are_clamped_and_nulls_skipped() {
    // Bounds [0, 100]: -50 counts as 0, 250 as 100, NaN as 0, and the empty
    // field (NULL) not at all.
    let fixture = Fixture::new(
        "clamp",
        "scores.csv",
        "id,score\n1,-50\n2,250\n3,40\n4,\n5,60.5\n6,NaN\n",
        "[table]\nname = \"scores\"\nfile = \"scores.csv\"\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1000\n[columns.score]\ntype = \"real\"\nbounds = [0, 100]\n",
        1000.0,
    );
    let answer = fixture
        .answer(
            "SELECT SUM(score) AS total, AVG(score) AS mean, COUNT(score) AS scored, COUNT(*) AS n FROM scores",
            1000.0,
            9,
        )
        .unwrap();
    let row = &answer.rows[0];
    assert!(
        (value(&row[0]).0 - 200.5).abs() < 0.01,
        "0 + 100 + 40 + 60.5 + 0: {:?}",
        row[0]
    );
    assert!(
        (value(&row[1]).0 - 200.5 / 5.0).abs() < 0.01,
        "{:?}",
        row[1]
    );
    assert_eq!(value(&row[2]).0, 5.0);
    assert_eq!(value(&row[3]).0, 6.0);
}

#[test]
fn count_distinct_id_counts_people_once_per_group() {
    // Alice visits shops A and B, Bob A twice, Carol B: at most 2 rows each.
    let csv = "person,shop\nalice,A\nalice,B\nbob,A\nbob,A\ncarol,B\n";
    let fixture = Fixture::new(
        "people",
        "visits.csv",
        csv,
        "[table]\nname = \"visits\"\nfile = \"visits.csv\"\n\
         [privacy_unit]\nkind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 2\n\
         [budget]\nepsilon = 1000\n[columns.person]\ntype = \"text\"\n\
         [columns.shop]\ntype = \"text\"\ndomain = [\"A\", \"B\"]\n",
        1000.0,
    );
    let total = fixture
        .answer(
            "SELECT COUNT(DISTINCT person) AS people FROM visits",
            400.0,
            3,
        )
        .unwrap();
    assert_eq!(value(&total.rows[0][0]).0, 3.0);
    let by_shop = fixture
        .answer(
            "SELECT shop, COUNT(DISTINCT person) AS people FROM visits GROUP BY shop",
            400.0,
            4,
        )
        .unwrap();
    let people: Vec<f64> = by_shop.rows.iter().map(|r| value(&r[1]).0).collect();
    assert_eq!(people, [2.0, 2.0], "{by_shop:?}");
    // One person moves one person-count: Δ = 1 alone, k = 2 over groups.
    let explain = |sql: &str| fixture.engine.explain(sql, &settings(1.0, 0.0)).unwrap();
    assert!(explain("SELECT COUNT(DISTINCT person) FROM visits").contains("Δ = 1:"));
    assert!(
        explain("SELECT shop, COUNT(DISTINCT person) FROM visits GROUP BY shop").contains("Δ = 2:")
    );
    // Another column's distinct count moves as a count of rows: Δ = k = 2.
    assert!(explain("SELECT COUNT(DISTINCT shop) FROM visits").contains("Δ = 2:"));
    let shops = fixture
        .answer("SELECT COUNT(DISTINCT shop) AS shops FROM visits", 200.0, 5)
        .unwrap();
    assert_eq!(value(&shops.rows[0][0]).0, 2.0);
}

/// The rows of one of Adult's public lookup tables, read here.
fn lookup(file: &str) -> Vec<HashMap<String, String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/adult")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|line| {
            let fields = line.split(',').map(str::to_string);
            header.iter().map(|h| h.to_string()).zip(fields).collect()
        })
        .collect()
}

/// A chain of joins with public tables answers, at a very large ε, the
/// counts and sums computed here from the three files; its groups are the
/// public table's values, released without a threshold.
#[test]
fn joins_with_public_tables_answer_what_the_files_say() {
    let engine = QueryEngine::open(adult_with_public_tables()).unwrap();
    let ledger = Ledger::open(&temporary("joins"), 1000.0, 0.0).unwrap();
    let sql = "SELECT c.region, COUNT(*) AS n, SUM(e.typical_years) AS years FROM adult a \
               JOIN countries c ON a.\"native-country\" = c.country \
               LEFT JOIN education_levels e ON a.education = e.education \
               WHERE a.age >= 40 GROUP BY c.region ORDER BY c.region";
    let mut rng = InsecureSeededRng::from_seed_for_testing(4);
    let answer = engine
        .answer(sql, &exact_settings(), &ledger, &mut rng)
        .unwrap();
    let region: HashMap<String, String> = lookup("countries.csv")
        .into_iter()
        .map(|r| (r["country"].clone(), r["region"].clone()))
        .collect();
    let years: HashMap<String, f64> = lookup("education_levels.csv")
        .into_iter()
        .map(|r| (r["education"].clone(), r["typical_years"].parse().unwrap()))
        .collect();
    let mut expected: std::collections::BTreeMap<String, (f64, f64)> =
        region.values().map(|r| (r.clone(), (0.0, 0.0))).collect();
    for row in adult_rows() {
        let Some(region) = region.get(&row["native-country"]) else {
            continue;
        };
        if row["age"].parse::<i64>().unwrap() >= 40 {
            let entry = expected.get_mut(region).unwrap();
            entry.0 += 1.0;
            entry.1 += years.get(&row["education"]).copied().unwrap_or(0.0);
        }
    }
    let shown: Vec<(String, f64, f64)> = answer
        .rows
        .iter()
        .map(|row| (key(&row[0]), value(&row[1]).0, value(&row[2]).0))
        .collect();
    let expected: Vec<(String, f64, f64)> = expected
        .into_iter()
        .map(|(region, (n, years))| (region, n, years))
        .collect();
    assert_eq!(expected.len(), 4, "four regions in countries.csv");
    assert_eq!(shown, expected);
}

/// A ratio and a percentage of released aggregates cover their exact
/// values at least 95% of the time (interval arithmetic over intervals at
/// α/2 each may only over-cover), and for a large group the intervals are
/// bounded and narrow: the coverage is not bought with the whole line.
#[test]
fn combined_columns_cover_their_exact_values() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let sql = "SELECT race, SUM(\"hours-per-week\") / COUNT(*) AS hours, \
               100.0 * COUNT(CASE WHEN sex = 'Female' THEN 1 END) / COUNT(*) AS pct_female \
               FROM adult GROUP BY race";
    let query = engine.plan(sql).unwrap();
    let exact = dpkit_query::internals::exact(&engine, &query).unwrap();
    let noise = plan_noise(&query.measured, &settings(0.5, 0.0)).unwrap();
    let mut sums: HashMap<String, (f64, f64, f64)> = HashMap::new();
    for row in adult_rows() {
        let entry = sums.entry(row["race"].clone()).or_default();
        entry.0 += 1.0;
        entry.1 += row["hours-per-week"].parse::<f64>().unwrap();
        entry.2 += f64::from(u8::from(row["sex"] == "Female"));
    }
    let mut rng = InsecureSeededRng::from_seed_for_testing(21);
    let (mut covered, mut total, mut widest_white) = ([0u64; 2], 0u64, [0f64; 2]);
    for _ in 0..4000 {
        let answer = release(&query.measured, &noise, &exact, 0.95, &mut rng).unwrap();
        for row in &answer.rows {
            let (n, hours, women) = sums[&key(&row[0])];
            for (slot, truth) in [(0, hours / n), (1, 100.0 * women / n)] {
                let (_, low, high) = value(&row[slot + 1]);
                covered[slot] += u64::from(low <= truth && truth <= high);
                if key(&row[0]) == "White" {
                    widest_white[slot] = widest_white[slot].max(high - low);
                }
            }
            total += 1;
        }
    }
    for (slot, name) in ["hours per person", "percent female"].iter().enumerate() {
        let share = covered[slot] as f64 / total as f64;
        println!(
            "{name}: covered {share}, widest for White {}",
            widest_white[slot]
        );
        assert!(share >= 0.95, "{name}: covered {share}");
    }
    // 27,816 White people: n is known to about ±20, so each ratio to well
    // within a few percent of itself.
    assert!(widest_white[0] < 0.5, "hours: {}", widest_white[0]);
    assert!(widest_white[1] < 0.5, "percent: {}", widest_white[1]);
}

/// COUNT(DISTINCT expression) over any column is answered as a count (each
/// row adds at most one value): at a very large ε it is the exact number
/// of values computed here.
#[test]
fn count_distinct_of_any_column_is_the_number_of_values() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let ledger = Ledger::open(&temporary("distinct"), 1000.0, 0.0).unwrap();
    let sql = "SELECT sex, COUNT(DISTINCT \"native-country\") AS countries, \
               COUNT(DISTINCT age / 10) AS decades FROM adult WHERE age < 60 \
               GROUP BY sex ORDER BY sex";
    let mut rng = InsecureSeededRng::from_seed_for_testing(6);
    let answer = engine
        .answer(sql, &exact_settings(), &ledger, &mut rng)
        .unwrap();
    let rows = adult_rows();
    for row in &answer.rows {
        let sex = key(&row[0]);
        let of =
            |r: &&HashMap<String, String>| r["sex"] == sex && r["age"].parse::<i64>().unwrap() < 60;
        let countries: std::collections::BTreeSet<&String> = rows
            .iter()
            .filter(of)
            .map(|r| &r["native-country"])
            .collect();
        let decades: std::collections::BTreeSet<i64> = rows
            .iter()
            .filter(of)
            .map(|r| r["age"].parse::<i64>().unwrap() / 10)
            .collect();
        assert_eq!(value(&row[1]).0, countries.len() as f64, "{sex}");
        assert_eq!(value(&row[2]).0, decades.len() as f64, "{sex}");
    }
    assert_eq!(answer.rows.len(), 2);
}

/// Bounds per group: with one row per person per shop counted, a count by
/// shop is the number of people who visited it (exact at a very large ε);
/// the noise is scaled to 2 groups of 1 row, not 4 rows; and a subquery
/// that drops the id is refused (dpkit cannot tell whose rows they are).
#[test]
fn bounds_per_group_count_each_person_once_per_group() {
    let csv = "person,shop,spend\nann,A,1\nann,A,2\nann,B,3\nbob,A,4\ncat,B,5\ncat,B,6\n\
               cat,B,7\ncat,A,8\n";
    let fixture = Fixture::new(
        "group-bounds",
        "visits.csv",
        csv,
        "[table]\nname = \"visits\"\nfile = \"visits.csv\"\n\
         [privacy_unit]\nkind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 4\n\
         max_groups_per_person = 2\nmax_rows_per_group = 1\n\
         [budget]\nepsilon = 1000\n[columns.person]\ntype = \"text\"\n\
         [columns.shop]\ntype = \"text\"\ndomain = [\"A\", \"B\"]\n\
         [columns.spend]\ntype = \"integer\"\nbounds = [0, 10]\n",
        1000.0,
    );
    let by_shop = fixture
        .answer(
            "SELECT shop, COUNT(*) AS people FROM visits GROUP BY shop",
            400.0,
            4,
        )
        .unwrap();
    let people: Vec<f64> = by_shop.rows.iter().map(|r| value(&r[1]).0).collect();
    assert_eq!(people, [3.0, 2.0], "{by_shop:?}");
    let explain = fixture
        .engine
        .explain(
            "SELECT shop, COUNT(*) FROM visits GROUP BY shop",
            &settings(1.0, 0.0),
        )
        .unwrap();
    assert!(explain.contains("Δ = 2:"), "{explain}");
    assert!(
        explain.contains("kept in at most 2 group(s) and to at most 1 row(s)"),
        "{explain}"
    );
    // Real keys that differ can print alike (NaN, -NaN), and the answer
    // would join their groups, each with its own r rows: refused.
    let real = fixture.engine.plan(
        "SELECT CASE WHEN spend < 5 THEN acos(CAST(spend AS DOUBLE)) \
         ELSE -acos(CAST(spend AS DOUBLE)) END AS k, COUNT(*) FROM visits \
         GROUP BY CASE WHEN spend < 5 THEN acos(CAST(spend AS DOUBLE)) \
         ELSE -acos(CAST(spend AS DOUBLE)) END",
    );
    assert!(
        matches!(&real, Err(QueryError::NotPrivate(m)) if m.contains("integer, text or boolean")),
        "{real:?}"
    );
    let dropped = fixture
        .engine
        .plan("SELECT s, COUNT(*) FROM (SELECT shop AS s FROM visits) t GROUP BY s");
    assert!(
        matches!(&dropped, Err(QueryError::NotPrivate(m)) if m.contains("keep the person column")),
        "{dropped:?}"
    );
}

/// Which of a person's rows the truncations keep depends on their own rows
/// alone: the exact sums by shop are the same on every run, and the same
/// when a person who spends nothing is added first or last (a red-team
/// helper saw them differ run to run, and move far past Δ with such a
/// person, when the kept rows were the first ones read).
#[test]
fn kept_rows_depend_on_each_persons_own_rows_alone() {
    // 2,000 people with up to 30 visits (the cap keeps 20), 5 shops.
    let mut state = 12345u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let mut rows = String::new();
    for person in 0..2000 {
        for _ in 0..=next(30) {
            let shop = ["A", "B", "C", "D", "E"][next(5) as usize];
            rows.push_str(&format!("p{person},{shop},{}\n", next(101)));
        }
    }
    let description = "[table]\nname = \"visits\"\nfile = \"visits.csv\"\n\
         [privacy_unit]\nkind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 20\nkeep = \"ordered\"\n\
         max_groups_per_person = 5\nmax_rows_per_group = 2\n\
         [budget]\nepsilon = 1000\n[columns.person]\ntype = \"text\"\nmax_length = 8\n\
         [columns.shop]\ntype = \"text\"\nmax_length = 1\n\
         domain = [\"A\", \"B\", \"C\", \"D\", \"E\"]\n\
         [columns.spend]\ntype = \"integer\"\nbounds = [0, 100]\n";
    let sums = |name: &str, data: String| {
        let fixture = Fixture::new(name, "visits.csv", &data, description, 1000.0);
        let sql = "SELECT shop, SUM(spend) FROM visits GROUP BY shop";
        let query = fixture.engine.plan(sql).unwrap();
        (0..3)
            .map(|_| {
                let exact = dpkit_query::internals::exact(&fixture.engine, &query).unwrap();
                // Groups come in the engine's order: compare them by key.
                let mut groups: Vec<String> = exact
                    .keys
                    .iter()
                    .zip(&exact.values)
                    .map(|(key, values)| format!("{key:?} {values:?}"))
                    .collect();
                groups.sort();
                groups.join("; ")
            })
            .collect::<Vec<_>>()
    };
    let header = "person,shop,spend\n";
    let base = sums("kept-base", format!("{header}{rows}"));
    assert!(base.iter().all(|run| run == &base[0]), "runs differ");
    let first = sums("kept-first", format!("{header}zz,A,0\n{rows}"));
    let last = sums("kept-last", format!("{header}{rows}zz,A,0\n"));
    assert_eq!(first[0], base[0]);
    assert_eq!(last[0], base[0]);
}

#[test]
fn thresholded_groups_are_paid_by_the_concentrated_accountant_past_plain_sums() {
    let engine = QueryEngine::open(adult_description()).unwrap();
    let path = temporary("threshold-concentrated");
    let ledger = Ledger::open(&path, 1.0, 1e-6).unwrap();
    let sql = "SELECT \"native-country\" AS country, COUNT(*) AS n FROM adult GROUP BY \"native-country\"";
    let at = settings(0.01, 1e-10);
    let plan = plan_noise(&engine.plan(sql).unwrap().measured, &at).unwrap();
    // The threshold's δ is counted as the loss's keys, beside ρ = ε²/2.
    let form = plan.concentrated.expect("a concentrated form");
    assert_eq!(form.keys(), plan.threshold_delta);
    assert!(plan.threshold_delta > 0.0 && (form.rho() - 0.01f64.powi(2) / 2.0).abs() < 1e-12);
    // Plain sums pay for 100; ρ for about 440.
    let more = ledger.how_many_more(plan.charge()).unwrap();
    assert!((400..460).contains(&more), "{more}");
    for _ in 0..100 {
        ledger.charge(plan.charge(), "spent beforehand").unwrap();
    }
    // All of ε is spent: only the concentrated accountant can pay now.
    assert_eq!(ledger.state().unwrap().spent_epsilon, 1.0);
    let mut rng = InsecureSeededRng::from_seed_for_testing(30);
    let answer = engine.answer(sql, &at, &ledger, &mut rng).unwrap();
    assert!(!answer.rows.is_empty());
    assert_eq!(ledger.state().unwrap().queries, 101);
    // With Gaussian noise beside the threshold, the number of keys that
    // pass decides the loss: no concentrated form.
    let averages = "SELECT \"native-country\", AVG(age) FROM adult GROUP BY \"native-country\"";
    let gaussian = dpkit_query::ReleaseSettings {
        mechanism: dpkit_query::MechanismChoice::Gaussian,
        ..settings(0.5, 1e-6)
    };
    let plan = plan_noise(&engine.plan(averages).unwrap().measured, &gaussian).unwrap();
    assert!(plan.concentrated.is_none());
    std::fs::remove_file(&path).unwrap();
}
