//! The cost of privacy on a join of two private tables: a DP GROUP BY over
//! people joined with their visits on the person, against the same plain
//! DataFusion join of the tables, in one run, on an engine that holds them
//! in memory (as `dpkit serve` does: typed and capped once, when opened). 10⁶ people with 10
//! visits each (10⁷ visit rows) by default:
//! `cargo bench -p dpkit-query --bench join_overhead` (`-- --people N`).
//! It also times the plain join under DataFusion's own settings against
//! dpkit's session, alternating, for what `probe_always.rs` costs.

#[path = "support/generated.rs"]
mod generated;

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use dpkit_query::{Description, QueryEngine};

const VISITS_PER_PERSON: usize = 10;

/// A table of `columns` in `partitions` partitions, filled by `row`.
fn table(
    fields: Vec<Field>,
    count: usize,
    partitions: usize,
    columns: impl Fn(std::ops::Range<usize>) -> Vec<ArrayRef>,
) -> Arc<MemTable> {
    let schema = Arc::new(Schema::new(fields));
    let per_partition = count.div_ceil(partitions);
    let batches = (0..partitions)
        .map(|p| {
            let (start, end) = (p * per_partition, ((p + 1) * per_partition).min(count));
            (start..end)
                .step_by(65_536)
                .map(|from| {
                    let range = from..(from + 65_536).min(end);
                    RecordBatch::try_new(schema.clone(), columns(range)).unwrap()
                })
                .collect()
        })
        .collect();
    Arc::new(MemTable::try_new(schema, batches).unwrap())
}

fn main() {
    let people = std::env::args()
        .skip_while(|a| a != "--people")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000usize);
    let partitions = std::thread::available_parallelism().map_or(2, |n| n.get());
    let regions = generated::GROUPS;
    let people_table = table(
        vec![
            Field::new("id", DataType::Int64, false),
            Field::new("region", DataType::Utf8, false),
        ],
        people,
        partitions,
        |rows| {
            let ids: Int64Array = rows.clone().map(|i| i as i64).collect();
            let names: StringArray = rows.map(|i| Some(regions[i % regions.len()])).collect();
            vec![Arc::new(ids), Arc::new(names)]
        },
    );
    let values: Vec<f64> = generated::rows(people * VISITS_PER_PERSON)
        .map(|(_, v)| v)
        .collect();
    let visits_table = table(
        vec![
            Field::new("person", DataType::Int64, false),
            Field::new("cost", DataType::Float64, false),
        ],
        people * VISITS_PER_PERSON,
        partitions,
        |rows| {
            let persons: Int64Array = rows.clone().map(|i| (i % people) as i64).collect();
            let costs: Float64Array = rows.map(|i| values[i]).collect();
            vec![Arc::new(persons), Arc::new(costs)]
        },
    );
    let domain = regions.map(|g| format!("\"{g}\"")).join(", ");
    let text = format!(
        "[table]\nname = \"people\"\nfile = \"generated\"\n[privacy_unit]\nkind = \"id\"\n\
         column = \"id\"\nmax_rows_per_person = 1\n[budget]\nepsilon = 1000\n\
         [columns.id]\ntype = \"integer\"\n\
         [columns.region]\ntype = \"text\"\ndomain = [{domain}]\n\
         [private.visits]\nfile = \"generated-visits\"\nperson = \"person\"\n\
         max_rows_per_person = {VISITS_PER_PERSON}\n\
         [private.visits.columns.person]\ntype = \"integer\"\n\
         [private.visits.columns.cost]\ntype = \"real\"\nbounds = [0, 100]\n"
    );
    let description = Description::from_toml(&text, std::path::Path::new(".")).unwrap();
    // The same tables under DataFusion's own settings, for the cost of
    // dpkit's (every join reads its probe side, no statistics-driven swaps
    // or dynamic filters: `probe_always.rs`).
    let defaults = datafusion::prelude::SessionContext::new();
    defaults
        .register_table("__dpkit_raw_people", people_table.clone())
        .unwrap();
    defaults
        .register_table("__dpkit_raw_visits", visits_table.clone())
        .unwrap();
    let providers: Vec<(String, Arc<dyn datafusion::catalog::TableProvider>)> = vec![
        ("people".into(), people_table),
        ("visits".into(), visits_table),
    ];
    // As `dpkit serve` holds a dataset: read once, typed and capped.
    let engine = QueryEngine::with_tables(description, providers)
        .and_then(QueryEngine::held_in_memory)
        .unwrap();
    let sql = "SELECT p.region, COUNT(*) AS n, AVG(v.cost) AS mean FROM people p \
               JOIN visits v ON v.person = p.id GROUP BY p.region";
    let raw = sql
        .replace("people p", "__dpkit_raw_people p")
        .replace("visits v", "__dpkit_raw_visits v");
    let repeats = 5;
    let (plain, private) = generated::measure(&engine, sql, repeats, || {
        generated::datafusion_seconds(&engine, &raw)
    });
    let (mut by_defaults, mut by_dpkit) = (Vec::new(), Vec::new());
    for round in 0..=repeats {
        let default_time = generated::timed(|| {
            let run = async { defaults.sql(&raw).await?.collect().await };
            std::hint::black_box(engine.block_on(run).unwrap());
        });
        let dpkit_time = generated::datafusion_seconds(&engine, &raw);
        if round > 0 {
            by_defaults.push(default_time);
            by_dpkit.push(dpkit_time);
        }
    }
    let (by_defaults, by_dpkit) = (generated::median(by_defaults), generated::median(by_dpkit));
    let visits = people * VISITS_PER_PERSON;
    println!(
        "{people} people, {visits} visits, {partitions} partitions, median of {repeats} alternating runs"
    );
    println!("query: {sql}");
    println!(
        "{:<52} {:>10.1} ms",
        "DataFusion's settings, the plain join",
        by_defaults * 1e3
    );
    println!(
        "{:<52} {:>10.1} ms (paired: {:.1} ms)",
        "dpkit's settings, the plain join, not private",
        plain * 1e3,
        by_dpkit * 1e3
    );
    println!(
        "{:<52} {:>10.1} ms",
        "dpkit (join on the person, clamp, exact sums, noise)",
        private * 1e3
    );
    println!("{:<52} {:>10.3}", "ratio (goal ≤ 1.5)", private / plain);
    println!(
        "{:<52} {:>10.3}",
        "dpkit's settings against DataFusion's",
        by_dpkit / by_defaults
    );
}
