//! Load on loopback: 1, 8 and 64 concurrent clients, each with its own
//! keep-alive connection, sending Adult COUNT and GROUP BY queries that are
//! all different (so each one is planned, charged, run, kept and released:
//! no replays), and one COUNT asked again and again at a new ε each time
//! (charged and run every time, its plan kept). Prints queries per second, p50 and p99 latency, and where
//! one query's time goes, measured stage by stage in the same process.
//!
//! `cargo bench -p dpkit-serve --bench load --profile dev [-- SECONDS] [COUNT|GROUP] [workers=N] [analysts=N] [postgres] [no-deadlines]`
//! (default 5 s per row; `postgres` keeps the state in a PostgreSQL server
//! started for the run on loopback, with `fsync = on`, instead of a file). `benches/against.sh [--release] COMMIT` runs it
//! on this build and on COMMIT's (and this tree's release build), one after
//! the other in each round, and prints their medians side by side and
//! every run's row.

#[allow(dead_code)]
#[path = "../tests/support/fixture.rs"]
mod fixture;
#[allow(dead_code)]
#[path = "../tests/support/http.rs"]
mod http;
#[path = "../../dpkit-query/tests/support/postgres.rs"]
mod postgres;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dpkit_core::rng::SecureRng;
use dpkit_ledger::Once;
use dpkit_query::{Description, Ledger, QueryEngine, ReleaseSettings};
use dpkit_release::{plan_noise, release};
use fixture::{TestServer, adult_description};

const EPSILON: f64 = 0.001;

fn sql(kind: &str, i: usize) -> String {
    match kind {
        "COUNT" => format!("SELECT COUNT(*) AS q{i} FROM adult"),
        "COUNT again" => "SELECT COUNT(*) AS q FROM adult".into(),
        _ => format!(
            "SELECT education, COUNT(*) AS q{i}, AVG(age) AS a{i} FROM adult GROUP BY education"
        ),
    }
}

/// The `i`-th request of `kind`: every one different, so none is a
/// replay. "COUNT again" asks the same SQL each time at a new ε, so its
/// plan is reused.
fn request(kind: &str, i: usize) -> String {
    let epsilon = match kind {
        "COUNT again" => EPSILON * (1.0 + i as f64 * 1e-9),
        _ => EPSILON,
    };
    serde_json::json!({"dataset": "adult", "sql": sql(kind, i), "epsilon": epsilon}).to_string()
}

/// `clients` threads for `seconds`, client `c` with key `c % keys.len()`:
/// (answered, latencies in ms).
fn run(
    server: &TestServer,
    keys: &[String],
    kind: &'static str,
    clients: usize,
    seconds: f64,
    next: &Arc<AtomicUsize>,
) -> (usize, Vec<f64>) {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let threads: Vec<_> = (0..clients)
        .map(|client| {
            let key = keys[client % keys.len()].clone();
            let (next, address) = (next.clone(), server.address);
            std::thread::spawn(move || {
                let mut connection = http::Connection::new(address);
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let body = request(kind, i);
                    let started = Instant::now();
                    let response = connection
                        .send("POST", "/v1/query", Some(&key), Some(&body))
                        .unwrap();
                    assert_eq!(response.status, 200, "{}", response.body);
                    latencies.push(started.elapsed().as_secs_f64() * 1e3);
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<f64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    latencies.sort_by(f64::total_cmp);
    (latencies.len(), latencies)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Median of `repeats` timings of `work`, in ms.
fn median_ms(repeats: usize, mut work: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[repeats / 2]
}

/// One query's stages, each timed alone on the same engine and a ledger in
/// the same folder as the server's.
fn stages(folder: &std::path::Path, kind: &str) {
    let engine =
        QueryEngine::open_in_memory(Description::load(&adult_description()).unwrap()).unwrap();
    let path = folder.join("stages.sqlite");
    Ledger::grant(&path, "bench/adult", 1000.0, 0.0).unwrap();
    let ledger = Ledger::open_account(&path, "bench/adult").unwrap();
    let settings = ReleaseSettings {
        epsilon: EPSILON,
        delta: 0.0,
        mechanism: Default::default(),
        confidence: 0.95,
    };
    let mut rng = SecureRng::from_os().unwrap();
    let mut i = 0;
    let query = engine.plan(&sql(kind, 0)).unwrap();
    let noise = plan_noise(&query.measured, &settings).unwrap();
    let exact = dpkit_query::internals::exact(&engine, &query).unwrap();
    let plan = median_ms(200, || {
        i += 1;
        let query = engine.plan(&sql(kind, i)).unwrap();
        plan_noise(&query.measured, &settings).unwrap();
    });
    let scan = median_ms(200, || {
        dpkit_query::internals::exact(&engine, &query).unwrap();
    });
    let mut limited =
        QueryEngine::open_in_memory(Description::load(&adult_description()).unwrap()).unwrap();
    limited.set_limits(dpkit_query::RunLimits {
        timeout: Some(Duration::from_secs(30)),
        memory_bytes: Some(512 << 20),
    });
    let scan_limited = median_ms(200, || {
        dpkit_query::internals::exact(&limited, &query).unwrap();
    });
    let noise_time = median_ms(200, || {
        release(&query.measured, &noise, &exact, 0.95, &mut rng).unwrap();
    });
    let mut charges = Vec::new();
    let charge = median_ms(200, || {
        i += 1;
        if let Once::Charged(charge) = ledger
            .charge_once(noise.charge(), "q", &format!("{kind} {i}"))
            .unwrap()
        {
            charges.push(charge);
        }
    });
    let mut kept = charges.into_iter();
    let keep = median_ms(200, || {
        ledger
            .keep_answer(kept.next().unwrap(), "{\"answer\": 1}")
            .unwrap();
    });
    let open = median_ms(200, || {
        Ledger::open_account(&path, "bench/adult").unwrap();
    });
    println!(
        "{kind:<8} stages (ms, median of 200): plan {plan:.2} · scan {scan:.2} (with time and memory limits {scan_limited:.2}) · noise {noise_time:.3} · \
         ledger open {open:.2} · charge (fsync) {charge:.2} · keep answer (fsync) {keep:.2}"
    );
}

/// The number given as `-- NAME=N` on the command line, if any.
fn setting(name: &str) -> Option<usize> {
    std::env::args()
        .skip(1)
        .find_map(|a| a.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

fn main() {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5.0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    println!(
        "dpkit serve under load on loopback · {cpu} · {} cores · {seconds} s per row",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // `-- workers=N`: N workers, all of them open to the one analyst
    // (by default a server has one per core, and one analyst may take all
    // but one of them).
    let workers = setting("workers");
    let mut limits = "requests_per_second = 1000000\nburst = 1000000".to_string();
    // `-- no-deadlines`: answers leave when their runs end, not at their
    // deadlines (`deadlines = false`), to measure what the deadlines cost.
    let deadlines = !std::env::args().any(|a| a == "no-deadlines");
    limits.push_str(&format!("\ndeadlines = {deadlines}"));
    println!(
        "deadlines: {}",
        match deadlines {
            true => "on (answers held to them)",
            false => "off",
        }
    );
    if let Some(n) = workers {
        limits.push_str(&format!("\nworkers = {n}\nmax_runs_per_analyst = {n}"));
    }
    println!(
        "workers: {}",
        workers.map_or("the default".into(), |n| format!(
            "{n}, all open to one analyst"
        ))
    );
    // `-- analysts=N`: the clients take turns over N analysts' keys (one
    // by default), as an organisation's analysts share one server.
    let analysts = setting("analysts").unwrap_or(1).max(1);
    println!("analysts: {analysts}, the clients spread over them in turn");
    let database = std::env::args()
        .any(|a| a == "postgres")
        .then(|| postgres::Postgres::start_durable("load"));
    if let Some(database) = &database {
        limits.push_str(&format!(
            "\n[state_postgres]\nconnection = {:?}",
            database.connection()
        ));
    }
    println!(
        "state: {}",
        match database {
            Some(_) => "in PostgreSQL (a server on loopback, fsync on)",
            None => "a SQLite file",
        }
    );
    let server = TestServer::start("load", &[adult_description()], &limits);
    let keys: Vec<String> = (0..analysts)
        .map(|i| server.analyst(&format!("bench{i}"), &["adult"], 1000.0, 0.0))
        .collect();
    let next = Arc::new(AtomicUsize::new(0));
    println!(
        "{:<8} {:>8} {:>10} {:>9} {:>9}",
        "query", "clients", "answers/s", "p50 ms", "p99 ms"
    );
    // `-- SECONDS COUNT` or `-- SECONDS GROUP` runs one kind only.
    let only = std::env::args()
        .skip(1)
        .find(|a| a == "COUNT" || a == "GROUP");
    let kinds = ["COUNT", "COUNT again", "GROUP BY"]
        .into_iter()
        .filter(|k| only.as_deref().is_none_or(|o| k.starts_with(o)));
    for kind in kinds {
        for clients in [1, 8, 64] {
            let (answered, latencies) = run(&server, &keys, kind, clients, seconds, &next);
            println!(
                "{kind:<8} {clients:>8} {:>10.0} {:>9.2} {:>9.2}",
                answered as f64 / seconds,
                percentile(&latencies, 0.5),
                percentile(&latencies, 0.99)
            );
        }
    }
    // The stages are measured on a ledger file, whatever the server's state.
    for kind in ["COUNT", "GROUP BY"] {
        stages(&server.folder, kind);
    }
}
