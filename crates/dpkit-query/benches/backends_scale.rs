//! The cost of privacy where the data lives: a DP GROUP BY with COUNT and
//! AVG through dpkit against the same plain query sent straight to the same
//! database, on generated tables of growing size, in one run.
//!
//! `cargo bench -p dpkit-query --bench backends_scale -- --rows 1000000,10000000`
//! (`--backend sqlite` or `--backend postgres` for one of them). PostgreSQL
//! is a server this benchmark starts (Debian's binaries, as in the tests).

#[path = "../tests/support/postgres.rs"]
mod postgres;

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use dpkit_core::rng::SecureRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings};

const GROUPS: [&str; 8] = [
    "north", "south", "east", "west", "centre", "coast", "hills", "islands",
];
const PLAIN: &str = "SELECT region, COUNT(*) AS n, AVG(value) AS mean FROM t GROUP BY region";
const REPEATS: usize = 5;

/// Row `i`: regions cycle, values are a fixed pseudo-random sequence in [0, 100).
fn rows(count: usize) -> impl Iterator<Item = (&'static str, f64)> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..count).map(move |i| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let value = (state >> 11) as f64 / (1u64 << 53) as f64 * 100.0;
        (GROUPS[i % GROUPS.len()], value)
    })
}

fn description(source: &str, base: &Path) -> Description {
    let domain = GROUPS.map(|g| format!("\"{g}\"")).join(", ");
    Description::from_toml(
        &format!(
            "[table]\nname = \"t\"\n{source}\n[privacy_unit]\nkind = \"row\"\n\
             [budget]\nepsilon = 1000\n[columns.region]\ntype = \"text\"\ndomain = [{domain}]\n\
             [columns.value]\ntype = \"real\"\nbounds = [0, 100]\n"
        ),
        base,
    )
    .unwrap()
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Median seconds of `plain` and of dpkit's private answer, alternating.
fn measure(engine: &QueryEngine, mut plain: impl FnMut()) -> (f64, f64) {
    let folder = std::env::temp_dir();
    let ledger_path = folder.join(format!("dpkit-bench-scale-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&ledger_path);
    let ledger = Ledger::open(&ledger_path, 1000.0, 0.0).unwrap();
    let settings = ReleaseSettings {
        epsilon: 1.0,
        delta: 0.0,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    };
    let mut rng = SecureRng::from_os().unwrap();
    let (mut plain_times, mut private_times) = (Vec::new(), Vec::new());
    for round in 0..=REPEATS {
        let start = Instant::now();
        plain();
        let plain_time = start.elapsed().as_secs_f64();
        let start = Instant::now();
        black_box(engine.answer(PLAIN, &settings, &ledger, &mut rng).unwrap());
        let private_time = start.elapsed().as_secs_f64();
        if round > 0 {
            plain_times.push(plain_time);
            private_times.push(private_time);
        }
    }
    let _ = std::fs::remove_file(&ledger_path);
    (median(plain_times), median(private_times))
}

fn sqlite(count: usize) -> (f64, f64) {
    let folder = std::env::temp_dir().join(format!("dpkit-bench-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("t.sqlite");
    let _ = std::fs::remove_file(&file);
    let mut connection = rusqlite::Connection::open(&file).unwrap();
    connection
        .execute_batch("CREATE TABLE t (region TEXT, value REAL)")
        .unwrap();
    let transaction = connection.transaction().unwrap();
    {
        let mut insert = transaction
            .prepare("INSERT INTO t VALUES (?1, ?2)")
            .unwrap();
        for (region, value) in rows(count) {
            insert.execute(rusqlite::params![region, value]).unwrap();
        }
    }
    transaction.commit().unwrap();
    let engine = QueryEngine::open(description("sqlite = \"t.sqlite\"", &folder)).unwrap();
    let times = measure(&engine, || {
        let mut statement = connection.prepare_cached(PLAIN).unwrap();
        let groups: Vec<(String, i64, f64)> = statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        black_box(groups);
    });
    let _ = std::fs::remove_dir_all(&folder);
    times
}

fn postgres(count: usize) -> (f64, f64) {
    let server = postgres::Postgres::start("bench");
    let csv = server.folder.join("t.csv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&csv).unwrap());
    for (region, value) in rows(count) {
        writeln!(out, "{region},{value}").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    server.psql("CREATE TABLE t (region TEXT, value DOUBLE PRECISION)");
    server.psql(&format!(
        "\\copy t FROM '{}' WITH (FORMAT csv)",
        csv.display()
    ));
    server.psql("VACUUM ANALYZE t");
    let source = format!("postgres = \"{}\"", server.connection());
    let engine = QueryEngine::open(description(&source, &server.folder)).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (client, connection) = runtime
        .block_on(tokio_postgres::connect(
            &server.connection(),
            tokio_postgres::NoTls,
        ))
        .unwrap();
    runtime.spawn(connection);
    measure(&engine, || {
        black_box(runtime.block_on(client.query(PLAIN, &[])).unwrap());
    })
}

fn main() {
    let argument = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let sizes: Vec<usize> = argument("--rows")
        .unwrap_or_else(|| "1000000,10000000".into())
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    let backend = argument("--backend").unwrap_or_else(|| "all".into());
    println!("query: {PLAIN}; median of {REPEATS} alternating runs after a warm-up");
    println!(
        "{:<11} {:>12} {:>14} {:>14} {:>8}",
        "database", "rows", "plain (ms)", "dpkit (ms)", "ratio"
    );
    for &count in &sizes {
        for (name, run) in [
            ("sqlite", sqlite as fn(usize) -> (f64, f64)),
            ("postgres", postgres),
        ] {
            if backend != "all" && backend != name {
                continue;
            }
            let (plain, private) = run(count);
            println!(
                "{name:<11} {count:>12} {:>14.1} {:>14.1} {:>8.3}",
                plain * 1e3,
                private * 1e3,
                private / plain
            );
        }
    }
}
