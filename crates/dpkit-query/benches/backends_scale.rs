//! The cost of privacy where the data lives: a DP GROUP BY with COUNT and
//! AVG through dpkit against the same plain query sent straight to the same
//! engine, on generated tables of growing size, in one run.
//!
//! `cargo bench -p dpkit-query --bench backends_scale -- --rows
//! 1000000,10000000,100000000 --backend embedded,sqlite,sqlite-strict,postgres,spark
//! --repeats 5`. Each size is a new table of eight regions and one real
//! value in [0, 100). PostgreSQL and Spark (a standalone master, two
//! one-core workers and a Connect server) are servers this benchmark
//! starts, as the tests do; they generate their tables themselves. The
//! plain query goes to PostgreSQL through tokio-postgres, to SQLite through
//! rusqlite, to DataFusion through its session, and to Spark through
//! pyspark's Connect client in one long-lived process (its time is taken
//! around `collect()` there). Each pair is timed alternately after a
//! warm-up; the medians are printed.

#[path = "support/generated.rs"]
mod generated;
#[path = "../tests/support/postgres.rs"]
mod postgres;
#[path = "../tests/support/spark.rs"]
mod spark;

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use dpkit_query::{Description, QueryEngine};
use generated::GROUPS;

const PLAIN: &str = "SELECT region, COUNT(*) AS n, AVG(value) AS mean FROM t GROUP BY region";

fn description(source: &str, base: &Path) -> Description {
    Description::from_toml(&generated::description_text(source), base).unwrap()
}

fn embedded(count: usize, repeats: usize) -> (f64, f64) {
    let partitions = std::thread::available_parallelism().map_or(2, |n| n.get());
    let table = generated::table(count, partitions);
    let engine =
        QueryEngine::with_table(description("file = \"generated\"", Path::new(".")), table)
            .unwrap();
    generated::measure(&engine, PLAIN, repeats, || {
        generated::datafusion_seconds(&engine, PLAIN)
    })
}

/// `strict`: a STRICT table, whose columns dpkit reads as stored.
fn sqlite(count: usize, repeats: usize, strict: bool) -> (f64, f64) {
    let folder = std::env::temp_dir().join(format!("dpkit-bench-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("t.sqlite");
    let _ = std::fs::remove_file(&file);
    let mut connection = rusqlite::Connection::open(&file).unwrap();
    connection
        .execute_batch(if strict {
            "CREATE TABLE t (region TEXT, value REAL) STRICT"
        } else {
            "CREATE TABLE t (region TEXT, value REAL)"
        })
        .unwrap();
    let transaction = connection.transaction().unwrap();
    {
        let mut insert = transaction
            .prepare("INSERT INTO t VALUES (?1, ?2)")
            .unwrap();
        for (region, value) in generated::rows(count) {
            insert.execute(rusqlite::params![region, value]).unwrap();
        }
    }
    transaction.commit().unwrap();
    let engine = QueryEngine::open(description("sqlite = \"t.sqlite\"", &folder)).unwrap();
    let times = generated::measure(&engine, PLAIN, repeats, || {
        generated::timed(|| {
            let mut statement = connection.prepare_cached(PLAIN).unwrap();
            let groups: Vec<(String, i64, f64)> = statement
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            black_box(groups);
        })
    });
    let _ = std::fs::remove_dir_all(&folder);
    times
}

fn postgres(server: &postgres::Postgres, count: usize, repeats: usize) -> (f64, f64) {
    let regions = GROUPS.map(|g| format!("'{g}'")).join(", ");
    server.psql(&format!(
        "DROP TABLE IF EXISTS t; CREATE TABLE t (region TEXT, value DOUBLE PRECISION); \
         SELECT setseed(0.25); INSERT INTO t SELECT (ARRAY[{regions}])[1 + i % 8], \
         random() * 100 FROM generate_series(0, {count} - 1) AS i"
    ));
    // VACUUM runs outside the transaction of the statements above.
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
    generated::measure(&engine, PLAIN, repeats, || {
        generated::timed(|| {
            black_box(runtime.block_on(client.query(PLAIN, &[])).unwrap());
        })
    })
}

/// pyspark's Connect client in one process: it runs each SQL line it reads
/// and answers with the seconds `collect()` took.
struct PySpark {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl PySpark {
    fn start(cluster: &spark::Spark) -> Self {
        let script = format!(
            "import sys, time\nfrom pyspark.sql import SparkSession\n\
             s = SparkSession.builder.remote('{}').getOrCreate()\n\
             for line in sys.stdin:\n    start = time.perf_counter()\n    s.sql(line).collect()\n\
             \x20   print(time.perf_counter() - start, flush=True)\n",
            cluster.address()
        );
        let mut child = Command::new(cluster.python())
            .args(["-W", "ignore", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot start pyspark");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            input,
            output,
        }
    }

    fn seconds(&mut self, sql: &str) -> f64 {
        writeln!(self.input, "{sql}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("pyspark failed on: {sql}"))
    }
}

impl Drop for PySpark {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spark(cluster: &spark::Spark, client: &mut PySpark, count: usize, repeats: usize) -> (f64, f64) {
    let regions = GROUPS.map(|g| format!("'{g}'")).join(", ");
    client.seconds("DROP TABLE IF EXISTS t");
    client.seconds(&format!(
        "CREATE TABLE t USING parquet AS SELECT element_at(array({regions}), \
         CAST(id % 8 AS INT) + 1) AS region, rand(7) * 100 AS value FROM range({count})"
    ));
    let source = format!("spark = \"{}\"", cluster.address());
    let engine = QueryEngine::open(description(&source, &cluster.folder)).unwrap();
    generated::measure(&engine, PLAIN, repeats, || client.seconds(PLAIN))
}

fn main() {
    let argument = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let sizes: Vec<usize> = argument("--rows")
        .unwrap_or_else(|| "1000000,10000000".into())
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    let backends = argument("--backend")
        .unwrap_or_else(|| "embedded,sqlite,sqlite-strict,postgres,spark".into());
    let repeats: usize = argument("--repeats").map_or(5, |n| n.parse().unwrap());
    let wanted = |name: &str| backends.split(',').any(|b| b == name);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(String::from)
        })
        .unwrap_or_default();
    println!("query: {PLAIN}; median of {repeats} alternating runs after a warm-up; {cpu}");
    println!(
        "{:<13} {:>12} {:>14} {:>14} {:>8}",
        "engine", "rows", "plain (ms)", "dpkit (ms)", "ratio"
    );
    let server = wanted("postgres").then(|| postgres::Postgres::start("bench"));
    let cluster = wanted("spark").then(|| spark::Spark::start("bench"));
    let mut client = cluster.as_ref().map(PySpark::start);
    for &count in &sizes {
        if wanted("embedded") {
            report("embedded", count, embedded(count, repeats));
        }
        if wanted("sqlite") {
            report("sqlite", count, sqlite(count, repeats, false));
        }
        if wanted("sqlite-strict") {
            report("sqlite-strict", count, sqlite(count, repeats, true));
        }
        if let Some(server) = &server {
            report("postgres", count, postgres(server, count, repeats));
        }
        if let (Some(cluster), Some(client)) = (&cluster, client.as_mut()) {
            report("spark", count, spark(cluster, client, count, repeats));
        }
    }
}

fn report(engine: &str, count: usize, (plain, private): (f64, f64)) {
    println!(
        "{engine:<13} {count:>12} {:>14.1} {:>14.1} {:>8.3}",
        plain * 1e3,
        private * 1e3,
        private / plain
    );
}
