//! The embedded engine: DataFusion runs the rewritten plan, dpkit releases.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, ListArray, RecordBatch, StructArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, Schema};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DataFusionError};
use datafusion::logical_expr::Expr;
use datafusion::prelude::{SessionConfig, SessionContext};
use dpkit_core::lattice::GridValue;
use rand_core::CryptoRng;

use crate::error::{QueryError, Result};
use crate::plan::{PrivateQuery, plan_private};
use dpkit_databases::{Backend, DatabaseTables};
use dpkit_description::{Description, Source};
use dpkit_ledger::{Charge, Ledger, Once};
use dpkit_release::{
    ExactGroups, Histogram, Measurement, NoisePlan, QuantileRole, ReleaseSettings, ReleasedTable,
    TargetError, plan_noise, release,
};

/// Stack of a planning thread (reserved, touched only as deep as used).
const PLANNING_STACK_BYTES: usize = 256 * 1024 * 1024;

thread_local! {
    /// Whether this thread was started by [`spawn_planning_thread`].
    static ON_PLANNING_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Starts a thread named `name` that runs `work` with a stack deep enough
/// for planning: [`QueryEngine::plan`] called on it plans right there,
/// where on any other thread it starts one of its own for each plan. For
/// callers that plan often: `dpkit serve`'s workers answer 1 to 18% more
/// COUNT queries per second planning on their own threads (measured in
/// `docs/book/src/speed/serve.md`).
///
/// ```
/// let answer = dpkit_query::spawn_planning_thread("planner".into(), || 6 * 7)
///     .unwrap()
///     .join()
///     .unwrap();
/// assert_eq!(answer, 42);
/// ```
pub fn spawn_planning_thread<T: Send + 'static>(
    name: String,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name)
        .stack_size(PLANNING_STACK_BYTES)
        .spawn(move || {
            ON_PLANNING_STACK.set(true);
            work()
        })
}

/// Bounds on one query's run, so one heavy query cannot starve the rest.
/// Exceeding either fails the run like any data-dependent failure: the
/// cost is kept ([`QueryError::FailedWhileRunning`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// The longest a run may take.
    pub timeout: Option<std::time::Duration>,
    /// The most memory a run's operators may hold (hash tables, sorts);
    /// tables held in memory are not counted.
    pub memory_bytes: Option<usize>,
}

/// What [`QueryEngine::answer_once`] released.
#[derive(Debug, Clone, PartialEq)]
pub struct OnceAnswer {
    /// The answer.
    pub table: ReleasedTable,
    /// Whether it is the answer kept from an earlier identical request,
    /// released again at no cost.
    pub replay: bool,
    /// What the request is charged, when this call planned it (`None` for
    /// a replay, which is released without planning).
    pub cost: Option<dpkit_core::accounting::Cost>,
}

/// The text a kept answer is kept under (see [`QueryEngine::answer_once`]):
/// `tag` (which front end and format version), the dataset's name and
/// fingerprint, every release setting and the SQL byte for byte. The
/// service and the command line both build theirs here.
///
/// ```
/// use dpkit_query::engine::request_text;
/// use dpkit_query::{MechanismChoice, ReleaseSettings};
/// let settings = ReleaseSettings { epsilon: 1.0, delta: 0.0, mechanism: MechanismChoice::Auto, confidence: 0.95 };
/// assert_eq!(
///     request_text("v1", "adult", "ab12", "SELECT COUNT(*) FROM adult", &settings),
///     "v1\ndataset=adult\nfingerprint=ab12\nepsilon=1.0\ndelta=0.0\nmechanism=Auto\n\
///      confidence=0.95\nsql=SELECT COUNT(*) FROM adult"
/// );
/// ```
pub fn request_text(
    tag: &str,
    dataset: &str,
    fingerprint: &str,
    sql: &str,
    settings: &ReleaseSettings,
) -> String {
    format!(
        "{tag}\ndataset={dataset}\nfingerprint={fingerprint}\nepsilon={:?}\ndelta={:?}\n\
         mechanism={:?}\nconfidence={:?}\nsql={sql}",
        settings.epsilon, settings.delta, settings.mechanism, settings.confidence
    )
}

/// A dataset opened for private queries.
pub struct QueryEngine {
    description: Description,
    limits: RunLimits,
    /// Sessions with a memory pool of their own, each used by one run at a
    /// time and kept for the next (building one costs about 0.1 ms).
    limited: std::sync::Mutex<Vec<SessionContext>>,
    context: SessionContext,
    runtime: tokio::runtime::Runtime,
    /// The data files, checked before each run: a listing over a vanished
    /// file would silently read as an empty table.
    source_files: Vec<std::path::PathBuf>,
    /// The typed, capped view of each private table that queries read, by
    /// name, the table's first.
    views: Vec<(String, datafusion::logical_expr::LogicalPlan)>,
    /// The public tables' facts (the tables are registered in `context`).
    public: crate::public_table::PublicTables,
    /// The database that runs the plans, when the tables live in one.
    database: Option<DatabaseTables>,
}

/// The reason a run that ran out of time fails with.
const TIMED_OUT: &str = "dpkit: the run's time limit";

/// An error while running the plan. Its message may quote rows of the data
/// file (a value that failed to parse, say), so it is replaced by one
/// without data. I/O failures do not depend on the data's contents and are
/// refundable; every other failure may, and its cost is kept.
fn execution_error(error: DataFusionError) -> QueryError {
    match error.find_root() {
        DataFusionError::IoError(_) | DataFusionError::ObjectStore(_) => {
            QueryError::Unreadable("the data file could not be read (an I/O failure)".into())
        }
        DataFusionError::ResourcesExhausted(reason) if reason == TIMED_OUT => {
            QueryError::FailedWhileRunning("it ran longer than the time limit".into())
        }
        DataFusionError::ResourcesExhausted(_) => {
            QueryError::FailedWhileRunning("it needed more memory than the limit".into())
        }
        _ => QueryError::FailedWhileRunning(
            "details withheld: they could quote private values".into(),
        ),
    }
}

/// An error converting the result: it cannot depend on which values there are.
/// A result the plan did not ask for: its cost is kept (see
/// `dpkit-databases`' `rows::shape_error`).
fn result_error(_error: impl std::fmt::Display) -> QueryError {
    QueryError::FailedWhileRunning("the engine's result has an unexpected shape".into())
}

impl QueryEngine {
    /// Opens the description's data file, or connects to its database.
    pub fn open(description: Description) -> Result<Self> {
        if description.source != Source::File {
            return Self::open_database(description);
        }
        if !description.file.is_file() {
            return Err(QueryError::Unreadable(format!(
                "cannot read {}: no such file",
                description.file.to_string_lossy()
            )));
        }
        let private = description.private.values().map(|t| t.file.clone());
        let source_files = std::iter::once(description.file.clone())
            .chain(private)
            .collect();
        let engine = Self::with_tables_and_public(description, Vec::new(), None, false)?;
        Ok(Self {
            source_files,
            ..engine
        })
    }

    /// Connects to the description's database and checks its tables:
    /// plans are made over empty tables of their columns, and run as SQL
    /// there.
    fn open_database(description: Description) -> Result<Self> {
        let (mut tables, empty) = DatabaseTables::open(&description)?;
        let mut engine = Self::with_tables(description, empty)?;
        let public = engine.public.iter();
        tables.send_public(public.map(|(name, facts)| (name, facts.batches.as_slice())))?;
        engine.database = Some(tables);
        Ok(engine)
    }

    /// Serves `provider` (an in-memory table, say) under the description's
    /// table name; its further private tables are read from their files.
    pub fn with_table(description: Description, provider: Arc<dyn TableProvider>) -> Result<Self> {
        let name = description.table.clone();
        Self::with_tables_and_public(description, vec![(name, provider)], None, false)
    }

    /// Serves each private table from its provider, by the table's name
    /// (the description's table and its `[private]` ones; those without a
    /// provider are read from their files).
    pub fn with_tables(
        description: Description,
        providers: Vec<(String, Arc<dyn TableProvider>)>,
    ) -> Result<Self> {
        Self::with_tables_and_public(description, providers, None, false)
    }

    /// [`QueryEngine::with_tables`], with the public tables already read,
    /// if they were (otherwise they are read now); the providers' rows are
    /// already capped per person when `capped` says so.
    fn with_tables_and_public(
        description: Description,
        mut providers: Vec<(String, Arc<dyn TableProvider>)>,
        public: Option<crate::public_table::PublicTables>,
        capped: bool,
    ) -> Result<Self> {
        let runtime = runtime()?;
        let context = session();
        let mut views = Vec::new();
        for name in description.private_names() {
            let Some(alone) = description.alone(name) else {
                continue;
            };
            let provided = providers.iter().position(|(n, _)| n == name);
            let view = match provided.map(|at| providers.swap_remove(at).1) {
                Some(provider) => runtime.block_on(crate::private_table::register_provider(
                    &context,
                    &alone,
                    (provider, capped),
                ))?,
                None => runtime.block_on(crate::private_table::register_file(&context, &alone))?,
            };
            views.push((name.to_string(), view));
        }
        let public = match public {
            Some(public) => public,
            None => runtime.block_on(crate::public_table::load_public(&description))?,
        };
        crate::public_table::register_public(&context, &public)?;
        Ok(Self {
            description,
            limits: RunLimits::default(),
            limited: std::sync::Mutex::default(),
            context,
            runtime,
            source_files: Vec::new(),
            views,
            public,
            database: None,
        })
    }

    /// Opens the description's data files and reads them whole into
    /// memory, as [`QueryEngine::held_in_memory`] does.
    pub fn open_in_memory(description: Description) -> Result<Self> {
        Self::open(description)?.held_in_memory()
    }

    /// The engine with each private table's rows read once, typed and
    /// capped per person as every query reads them, and held in memory:
    /// queries then pay for neither the casts nor the cap (a sort of the
    /// whole table). Every row is read now, so a file that does not parse
    /// is refused here, once, rather than failing every query. A table in a
    /// database is not copied: it is queried where it lives.
    pub fn held_in_memory(self) -> Result<Self> {
        if self.database.is_some() {
            return Ok(self);
        }
        let mut providers: Vec<(String, Arc<dyn TableProvider>)> = Vec::new();
        for name in self.description.private_names() {
            let read = crate::private_table::capped_table(&self.context, name);
            let (schema, batches) = self.block_on(read)?;
            let partitions = partitioned(batches);
            let provider =
                datafusion::datasource::MemTable::try_new(schema, partitions).map_err(|e| {
                    QueryError::Unreadable(format!("cannot hold the table in memory: {e}"))
                })?;
            providers.push((name.to_string(), Arc::new(provider)));
        }
        Self::with_tables_and_public(
            self.description.clone(),
            providers,
            Some(self.public.clone()),
            true,
        )
    }

    /// Sets the limits every later run keeps to.
    pub fn set_limits(&mut self, limits: RunLimits) {
        self.limits = limits;
        self.limited = std::sync::Mutex::default();
    }

    /// The description.
    pub fn description(&self) -> &Description {
        &self.description
    }

    /// How fast the engine that runs this dataset's queries was measured
    /// to be at its worst: the embedded one, or its database.
    pub fn speed(&self) -> crate::timing::Speed {
        let flavour = self.database.as_ref().map(|d| d.runner().flavour());
        crate::timing::Speed::of(flavour)
    }

    /// The DataFusion session over the private table: for running
    /// non-private comparisons in benchmarks, through `internals`.
    #[cfg(feature = "internals")]
    pub(crate) fn session(&self) -> &SessionContext {
        &self.context
    }

    /// Runs `future` on the engine's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Plans `sql` privately: checks it and rewrites its plan. Spends nothing.
    ///
    /// DataFusion's planner recurses once per expression level, so the plan
    /// is made on a thread with a generous stack, which keeps every query
    /// within the size limit far from its end: the calling thread, if
    /// [`spawn_planning_thread`] started it, else a thread started for this
    /// plan.
    pub fn plan(&self, sql: &str) -> Result<PrivateQuery> {
        dpkit_total::check_size(sql)?;
        dpkit_databases::no_own_names(sql)?;
        let plan = || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.plan_here(sql)))
                .unwrap_or_else(|_| Err(QueryError::Sql("the planner failed".into())))
        };
        if ON_PLANNING_STACK.get() {
            return plan();
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("dpkit-plan".into())
                .stack_size(PLANNING_STACK_BYTES)
                .spawn_scoped(scope, plan)
                .map_err(|e| QueryError::Unreadable(format!("cannot start the planner: {e}")))?
                .join()
                .unwrap_or_else(|_| Err(QueryError::Sql("the planner failed".into())))
        })
    }

    fn plan_here(&self, sql: &str) -> Result<PrivateQuery> {
        let state = self.context.state();
        let logical = self
            .runtime
            .block_on(state.create_logical_plan(sql))
            .map_err(|e| {
                let message = planning_message(&e.to_string());
                QueryError::Sql(crate::hints::with_hint(message, &self.description))
            })?;
        let mut domain_of = |expr: &Expr, column: &str, bounds: (i64, i64)| {
            self.enumerate_domain(expr, column, bounds)
        };
        let mut matches_of = |plan, keys| {
            let counting = crate::public_table::most_matches(&self.context, plan, keys);
            self.runtime.block_on(counting)
        };
        let sources = crate::plan::Sources {
            description: &self.description,
            views: &self.views,
            public: &self.public,
            domain_of: &mut domain_of,
            matches_of: &mut matches_of,
        };
        let mut query = plan_private(sql, &logical, sources)?;
        match &self.database {
            Some(tables) => {
                let ceiling = query.measured.count_ceiling;
                query.remote = Some(tables.remote_plan(&query.plan, ceiling)?);
            }
            None => query.plan = crate::plan::for_the_embedded_engine(query.plan)?,
        }
        Ok(query)
    }

    /// The values a GROUP BY expression over one integer column takes on
    /// every value of its public bounds: a public domain for its bins.
    fn enumerate_domain(
        &self,
        expr: &Expr,
        column: &str,
        (low, high): (i64, i64),
    ) -> Result<Vec<String>> {
        let values: ArrayRef = Arc::new(Int64Array::from_iter_values(low..=high));
        let schema = Arc::new(Schema::new(vec![Field::new(
            column,
            DataType::Int64,
            false,
        )]));
        let batch = RecordBatch::try_new(schema, vec![values])
            .map_err(|e| QueryError::Sql(e.to_string()))?;
        let unqualified = expr
            .clone()
            .transform(|e| match e {
                Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
                    c.name,
                )))),
                other => Ok(Transformed::no(other)),
            })
            .map_err(|e| QueryError::Sql(e.to_string()))?
            .data
            .alias("bin");
        let batches = self
            .runtime
            .block_on(async {
                self.context
                    .read_batch(batch)?
                    .select(vec![unqualified])?
                    .distinct()?
                    .collect()
                    .await
            })
            .map_err(|e| QueryError::Sql(e.to_string()))?;
        let mut domain = Vec::new();
        for batch in &batches {
            let array = batch.column(0);
            for row in 0..array.len() {
                if array.is_valid(row) {
                    domain.push(
                        array_value_to_string(array, row)
                            .map_err(|e| QueryError::Sql(e.to_string()))?,
                    );
                }
            }
        }
        domain.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.total_cmp(&y),
            _ => a.cmp(b),
        });
        Ok(domain)
    }

    /// [`QueryEngine::exact`] where the table lives in a database.
    fn exact_in_database(
        &self,
        backend: &dyn Backend,
        query: &PrivateQuery,
    ) -> Result<ExactGroups> {
        let remote = query
            .remote
            .as_ref()
            .ok_or_else(|| QueryError::Sql("the query was planned for another engine".into()))?;
        let schema = query.plan.schema().inner().clone();
        let batch = backend.run(remote, schema, self.limits.timeout)?;
        let mut rows = groups_of(&batch, query)?;
        // A query without GROUP BY has one group, even of no rows; a
        // database that groups by a quantile's cell returns none then.
        if query.measured.group_names.is_empty() && rows.is_empty() {
            let measured = query.measured.measurements.len();
            let zero = GridValue::default();
            rows.push((Vec::new(), vec![zero; measured], vec![Vec::new(); measured]));
        }
        Ok(ExactGroups::merged_with_histograms(rows))
    }

    /// Runs the rewritten plan: the exact, clamped, per-group measurements,
    /// uncharged (the ledger is [`QueryEngine::answer`]'s).
    pub(crate) fn exact(&self, query: &PrivateQuery) -> Result<ExactGroups> {
        if let Some(tables) = &self.database {
            // As in the engine below: a panic is a failure, kept charged.
            let run =
                std::panic::AssertUnwindSafe(|| self.exact_in_database(tables.runner(), query));
            return std::panic::catch_unwind(run).unwrap_or_else(|_| {
                Err(QueryError::FailedWhileRunning(
                    "the database's answer could not be read (details withheld)".into(),
                ))
            });
        }
        if let Some(file) = self.source_files.iter().find(|file| !file.is_file()) {
            return Err(QueryError::Unreadable(format!(
                "cannot read {}: no such file",
                file.display()
            )));
        }
        let context = self.run_context()?;
        // A panic inside the engine is a failure like any other: never
        // unwound into the caller after the ledger was charged.
        let run = std::panic::AssertUnwindSafe(|| {
            self.runtime.block_on(async {
                let collect = async {
                    let physical = crate::reuse::physical_plan(&context, query).await?;
                    datafusion::physical_plan::collect(physical, context.task_ctx()).await
                };
                let Some(limit) = self.limits.timeout else {
                    return collect.await;
                };
                let started = std::time::Instant::now();
                let outcome = tokio::time::timeout(limit, collect).await;
                // A run that finished in its first poll is not cut short by
                // the timer: it is checked here, so the limit holds either way.
                match outcome {
                    Ok(Ok(_)) if started.elapsed() > limit => {
                        Err(DataFusionError::ResourcesExhausted(TIMED_OUT.into()))
                    }
                    Ok(result) => result,
                    Err(_) => Err(DataFusionError::ResourcesExhausted(TIMED_OUT.into())),
                }
            })
        });
        let outcome = std::panic::catch_unwind(run);
        // A run's reservations are freed when its streams end, so the
        // session's pool is empty again (a panic may leave it otherwise).
        if self.limits.memory_bytes.is_some()
            && matches!(outcome, Ok(Ok(_)))
            && let Ok(mut kept) = self.limited.lock()
        {
            kept.push(context);
        }
        let batches = outcome
            .map_err(|_| {
                QueryError::FailedWhileRunning("the engine stopped (details withheld)".into())
            })?
            .map_err(execution_error)?;
        let mut rows = Vec::new();
        for batch in &batches {
            rows.extend(groups_of(batch, query)?);
        }
        Ok(ExactGroups::merged_with_histograms(rows))
    }

    /// The session a run uses: the engine's own, or with the memory limit a
    /// copy of it whose operators draw from a pool of their own.
    fn run_context(&self) -> Result<SessionContext> {
        let Some(bytes) = self.limits.memory_bytes else {
            return Ok(self.context.clone());
        };
        if let Some(kept) = self.limited.lock().ok().and_then(|mut kept| kept.pop()) {
            return Ok(kept);
        }
        let pool = Arc::new(datafusion::execution::memory_pool::GreedyMemoryPool::new(
            bytes,
        ));
        let environment = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_pool(pool)
            .build_arc()
            .map_err(|e| QueryError::Unreadable(format!("cannot limit the run's memory: {e}")))?;
        let state =
            datafusion::execution::SessionStateBuilder::new_from_existing(self.context.state())
                .with_runtime_env(environment)
                .build();
        Ok(SessionContext::new_with_state(state))
    }

    /// Plans, charges the ledger, runs and releases `sql`. Nothing is charged
    /// if the query cannot be planned or does not fit the budget. The cost is
    /// committed before anything runs; it is refunded if the data file cannot
    /// be read (an I/O failure), and kept if the run fails for a reason that
    /// may depend on the data ([`QueryError::FailedWhileRunning`]).
    pub fn answer<R: CryptoRng + ?Sized>(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
        ledger: &Ledger,
        rng: &mut R,
    ) -> Result<ReleasedTable> {
        let query = self.plan(sql)?;
        self.answer_planned(&query, sql, settings, ledger, rng)
    }

    /// The planned `query` of `sql`, charged and run.
    fn answer_planned<R: CryptoRng + ?Sized>(
        &self,
        query: &PrivateQuery,
        sql: &str,
        settings: &ReleaseSettings,
        ledger: &Ledger,
        rng: &mut R,
    ) -> Result<ReleasedTable> {
        let noise = plan_noise(&query.measured, settings)?;
        let charge = ledger.charge(noise.charge(), sql)?;
        self.run_charged(query, &noise, settings.confidence, (ledger, charge), rng)
    }

    /// [`QueryEngine::answer`], released no earlier than its deadline,
    /// and past it at a noisy time ([`crate::timing`]): the calling thread
    /// sleeps until then, whether the run answered or failed. A refusal at
    /// planning, which reads no data, leaves at once. So the time a script
    /// takes for the whole call shows no more of one person than the
    /// release time allows. Should the release time not be drawn, the
    /// answer is not released.
    pub fn answer_by_deadline<R: CryptoRng + ?Sized>(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
        ledger: &Ledger,
        deadlines: &crate::timing::Deadlines,
        rng: &mut R,
    ) -> Result<ReleasedTable> {
        let started = std::time::Instant::now();
        let query = self.plan(sql)?;
        let outcome = self.answer_planned(&query, sql, settings, ledger, rng);
        self.hold(&query, deadlines, started)?;
        outcome
    }

    /// [`QueryEngine::answer_once`] released as
    /// [`QueryEngine::answer_by_deadline`] releases: a replay of a kept
    /// answer, which reads no data, leaves at once; a run waits for its
    /// deadline.
    pub fn answer_once_by_deadline<R: CryptoRng + ?Sized>(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
        (ledger, request): (&Ledger, &str),
        deadlines: &crate::timing::Deadlines,
        rng: &mut R,
    ) -> Result<OnceAnswer> {
        let started = std::time::Instant::now();
        let query = Arc::new(self.plan(sql)?);
        let planned = || Ok(query.clone());
        let outcome = self.answer_once_planned(planned, sql, settings, ledger, request, rng);
        if !matches!(&outcome, Ok(once) if once.replay) {
            self.hold(&query, deadlines, started)?;
        }
        outcome
    }

    /// Sleeps until the release time of `query`, which began at `started`.
    fn hold(
        &self,
        query: &PrivateQuery,
        deadlines: &crate::timing::Deadlines,
        started: std::time::Instant,
    ) -> Result<()> {
        let release = deadlines
            .release_time(query.work(), self.description.public_rows, self.speed())?
            .release_after(started.elapsed())?;
        std::thread::sleep(
            (started + release).saturating_duration_since(std::time::Instant::now()),
        );
        Ok(())
    }

    /// Runs `query` under its committed `charge` and releases the answer:
    /// the one place a run's failure decides a refund. A failure that may
    /// depend on the data keeps its cost, or failing would reveal one row
    /// for free; only [`QueryError::Unreadable`] (an I/O failure, a server
    /// unreachable before the statement is sent) is refunded, since whether
    /// it happens depends on no one's data. (The ledger also gives back a
    /// charge whose run released nothing because another run of the same
    /// request took its place: [`QueryError::GivenBack`].)
    fn run_charged<R: CryptoRng + ?Sized>(
        &self,
        query: &PrivateQuery,
        noise: &NoisePlan,
        confidence: f64,
        (ledger, charge): (&Ledger, Charge),
        rng: &mut R,
    ) -> Result<ReleasedTable> {
        let outcome = self
            .exact(query)
            .and_then(|exact| Ok(release(&query.measured, noise, &exact, confidence, rng)?));
        if matches!(outcome, Err(QueryError::Unreadable(_)))
            && let Some(kept) = ledger.refund(charge)?
        {
            // Another run of the same request kept this answer under the
            // charge, which is then not given back: it paid for that answer.
            return replayed(&kept).map(|once| once.table);
        }
        outcome
    }

    /// Like [`QueryEngine::answer`], but a request answered before (the same
    /// `request` text: the caller's canonical form of the query, its
    /// settings and its dataset) gets its kept answer again, free, and a
    /// request charged but never answered runs under its charge. The answer
    /// is kept in the ledger, on disk, before it is returned.
    pub fn answer_once<R: CryptoRng + ?Sized>(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
        ledger: &Ledger,
        request: &str,
        rng: &mut R,
    ) -> Result<OnceAnswer> {
        let plan = || self.plan(sql).map(Arc::new);
        self.answer_once_planned(plan, sql, settings, ledger, request, rng)
    }

    /// [`QueryEngine::answer_once`] with the plan of `sql` from `plan`
    /// (a [`crate::reuse::PlanCache`]'s, say), asked only if the request
    /// was not answered before.
    pub fn answer_once_planned<R: CryptoRng + ?Sized>(
        &self,
        plan: impl FnOnce() -> Result<Arc<PrivateQuery>>,
        sql: &str,
        settings: &ReleaseSettings,
        ledger: &Ledger,
        request: &str,
        rng: &mut R,
    ) -> Result<OnceAnswer> {
        if let Some(kept) = ledger.replayed(request)? {
            return replayed(&kept);
        }
        let query = plan()?;
        let noise = plan_noise(&query.measured, settings)?;
        let charge = match ledger.charge_once(noise.charge(), sql, request)? {
            Once::Answered(kept) => return replayed(&kept),
            Once::Charged(charge) | Once::Unanswered(charge) => charge,
        };
        let outcome = self.run_charged(&query, &noise, settings.confidence, (ledger, charge), rng);
        let kept = match &outcome {
            // Refunded, or its refund failed (the ledger's own error):
            // nothing was released, so nothing is kept, and asked again the
            // request runs under the charge it already has.
            Err(QueryError::Unreadable(_) | QueryError::Ledger { .. }) => {
                return outcome.map(|table| OnceAnswer {
                    table,
                    replay: false,
                    cost: Some(noise.charge()),
                });
            }
            // A failure after the charge may depend on the data: it is kept
            // like an answer, so asked again it fails again for free and
            // never runs again under the same charge (a time limit could
            // pass the second time).
            Err(error) => Kept::Failed(failure_reason(error)),
            Ok(table) => Kept::Answer(table.clone()),
        };
        let text = serde_json::to_string(&kept).map_err(result_error)?;
        if let Some(first) = ledger.keep_answer(charge, &text)? {
            return replayed(&first);
        }
        outcome.map(|table| OnceAnswer {
            table,
            replay: false,
            cost: Some(noise.charge()),
        })
    }

    /// The explanation of `sql` under `settings`: the rewritten plan, each
    /// release's mechanism, ε and expected error. Spends nothing.
    pub fn explain(&self, sql: &str, settings: &ReleaseSettings) -> Result<String> {
        Ok(self.explain_with_cost(sql, settings)?.0)
    }

    /// The explanation of `sql` under `settings` and what running it would
    /// cost. Spends nothing.
    pub fn explain_with_cost(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
    ) -> Result<(String, dpkit_core::accounting::Cost)> {
        let query = self.plan(sql)?;
        let noise = plan_noise(&query.measured, settings)?;
        Ok((query.explanation(&noise, settings), noise.charge()))
    }

    /// The explanation of `sql` under `settings`, what it would cost, how
    /// many more queries like it the budget in `ledger` can pay for, and
    /// Gaussian noise that would pay for as many with less error in every
    /// measurement, if `settings` ask for `auto` and there is such noise
    /// (see [`crate::alternative`]). Plans once; spends nothing.
    ///
    /// ```no_run
    /// use dpkit_query::{Description, Ledger, QueryEngine, ReleaseSettings};
    /// let description = Description::load("data/adult/adult.toml".as_ref()).unwrap();
    /// let ledger = Ledger::open("alice.ledger.sqlite".as_ref(), 1.0, 1e-6).unwrap();
    /// let engine = QueryEngine::open(description).unwrap();
    /// let settings = ReleaseSettings { epsilon: 0.01, delta: 0.0, mechanism: Default::default(), confidence: 0.95 };
    /// let sql = "SELECT COUNT(*) FROM adult WHERE age > 40";
    /// let explained = engine.explain_against(sql, &settings, &ledger).unwrap();
    /// println!("{} more", explained.queries_left);
    /// if let Some(gaussian) = explained.gaussian {
    ///     println!("--mechanism gaussian --epsilon {} --delta {}", gaussian.epsilon, gaussian.delta);
    /// }
    /// ```
    pub fn explain_against(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
        ledger: &Ledger,
    ) -> Result<crate::alternative::Explained> {
        let query = self.plan(sql)?;
        let noise = plan_noise(&query.measured, settings)?;
        let cost = noise.charge();
        let queries_left = ledger.how_many_more(cost)?;
        let gaussian = crate::alternative::gaussian_alternative(
            &query,
            settings,
            (&noise, queries_left),
            ledger,
        )?;
        Ok(crate::alternative::Explained {
            explanation: query.explanation(&noise, settings),
            cost,
            queries_left,
            gaussian,
        })
    }

    /// The smallest ε at which every aggregate of `sql` has an interval of
    /// at most `±target.half_width` (see [`dpkit_release::smallest_epsilon`]),
    /// the explanation at that ε, and how many such queries the budget in
    /// `ledger` pays for. With `auto` and a δ, `auto` chooses Gaussian noise
    /// where the budget pays for more queries with it at the same error
    /// (see [`crate::alternative`]). Spends nothing.
    pub fn explain_target(
        &self,
        sql: &str,
        settings: &ReleaseSettings,
        target: TargetError,
        ledger: &Ledger,
    ) -> Result<crate::alternative::Targeted> {
        let query = self.plan(sql)?;
        crate::alternative::cheapest_for_target(&query, settings, target, ledger)
    }
}

/// What a charged request released: kept for replay.
#[derive(serde::Serialize, serde::Deserialize)]
enum Kept {
    /// The answer.
    Answer(ReleasedTable),
    /// A failure that may depend on the data, with its data-free reason.
    Failed(String),
}

/// The data-free reason of a failure after a charge.
fn failure_reason(error: &QueryError) -> String {
    match error {
        QueryError::FailedWhileRunning(reason) => reason.clone(),
        other => other.to_string(),
    }
}

/// A kept answer, released again.
fn replayed(kept: &str) -> Result<OnceAnswer> {
    match serde_json::from_str(kept).map_err(result_error)? {
        Kept::Answer(mut table) => {
            table.complete_released();
            Ok(OnceAnswer {
                table,
                replay: true,
                cost: None,
            })
        }
        Kept::Failed(reason) => Err(QueryError::FailedWhileRunning(reason)),
    }
}

/// One exact group: its key, its measurements and its per-cell counts.
type ExactRow = (Vec<String>, Vec<GridValue>, Vec<Histogram>);

/// The groups of one result batch; NULL keys are never released.
fn groups_of(batch: &RecordBatch, query: &PrivateQuery) -> Result<Vec<ExactRow>> {
    let keys_count = query.measured.group_names.len();
    let mut columns = Vec::with_capacity(query.measured.measurements.len());
    for (m, measurement) in query.measured.measurements.iter().enumerate() {
        let array = batch.column(keys_count + m);
        columns.push(match measurement {
            Measurement::Quantile { role, .. } => match role {
                QuantileRole::Point => MeasuredColumn::Cells(array),
                // The interval's ends follow their point (see plan::quantiles).
                QuantileRole::Lower => MeasuredColumn::CellsOf(m - 1),
                QuantileRole::Upper => MeasuredColumn::CellsOf(m - 2),
            },
            Measurement::Sum { exponent, .. } => {
                MeasuredColumn::Number(steps(array, *exponent)?, *exponent)
            }
            Measurement::Count | Measurement::People => MeasuredColumn::Number(steps(array, 0)?, 0),
        });
    }
    let mut rows = Vec::with_capacity(batch.num_rows());
    'rows: for row in 0..batch.num_rows() {
        let mut key = Vec::with_capacity(keys_count);
        for column in 0..keys_count {
            let array = batch.column(column);
            if array.is_null(row) {
                continue 'rows;
            }
            key.push(array_value_to_string(array, row).map_err(result_error)?);
        }
        let mut values: Vec<GridValue> = Vec::with_capacity(columns.len());
        let mut histograms: Vec<Histogram> = Vec::with_capacity(columns.len());
        for column in &columns {
            let (value, counts) = match column {
                MeasuredColumn::CellsOf(point) => (values[*point], histograms[*point].clone()),
                _ => column.at(row)?,
            };
            values.push(value);
            histograms.push(counts);
        }
        rows.push((key, values, histograms));
    }
    Ok(rows)
}

/// A count's or a sum's result column as whole steps (a count is a
/// whole number of rows; a sum, of steps of its grid), read exactly.
fn steps(array: &ArrayRef, exponent: i32) -> Result<ArrayRef> {
    match array.data_type() {
        DataType::Decimal128(_, 0) | DataType::Int64 => {
            cast(array, &dpkit_functions::exact_sum::STEPS_TYPE).map_err(result_error)
        }
        #[cfg(feature = "planted-holes")]
        DataType::Float64 if dpkit_planted::is_planted(dpkit_planted::Hole::FloatingPointSums) => {
            // The hole's floating-point sum, in steps of its grid.
            let scale = 2f64.powi(-exponent);
            let sums = array.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
            let steps: datafusion::arrow::array::Decimal128Array = sums
                .iter()
                .map(|s| s.map(|s| (s * scale) as i128))
                .collect();
            Ok(Arc::new(steps))
        }
        _ => {
            let _ = exponent;
            Err(result_error("a count or an exact sum of another type"))
        }
    }
}

/// One measurement's result column.
enum MeasuredColumn<'a> {
    /// A count or a sum, as whole steps of the grid `2^exponent`.
    Number(ArrayRef, i32),
    /// Each group's list of cell indices.
    Cells(&'a ArrayRef),
    /// The same cells as an earlier measurement's (a quantile's ends).
    CellsOf(usize),
}

impl MeasuredColumn<'_> {
    /// Row `row`'s value (NULL sums are 0) and its per-cell counts.
    fn at(&self, row: usize) -> Result<(GridValue, Histogram)> {
        match self {
            Self::Number(array, exponent) => {
                let array = array.as_primitive_opt::<Decimal128Type>();
                let steps = array.map_or(0, |a| if a.is_null(row) { 0 } else { a.value(row) });
                Ok((GridValue::new(steps, *exponent), Vec::new()))
            }
            Self::CellsOf(_) => Err(result_error("cells read through their point")),
            Self::Cells(array) => {
                let Some(lists) = array.as_any().downcast_ref::<ListArray>() else {
                    return Err(result_error("cell lists"));
                };
                if lists.is_null(row) {
                    return Ok((GridValue::default(), Vec::new()));
                }
                let list = lists.value(row);
                // A database counts each cell itself (see dpkit-databases' `rows`).
                if let Some(pairs) = list.as_any().downcast_ref::<StructArray>() {
                    return counted_cells(pairs);
                }
                let indices = list
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .ok_or_else(|| result_error("cell indices"))?;
                Ok(cells_of(indices))
            }
        }
    }
}

/// The non-empty cells among `indices` (the plan clamps each into the
/// grid; NULLs are skipped) with their counts, and how many were counted:
/// sorted and run-length coded, so the cost follows the rows.
fn cells_of(indices: &Int64Array) -> (GridValue, Histogram) {
    let mut sorted: Vec<usize> = indices
        .iter()
        .flatten()
        .filter_map(|i| usize::try_from(i).ok())
        .collect();
    sorted.sort_unstable();
    let mut cells: Histogram = Vec::new();
    for cell in &sorted {
        match cells.last_mut() {
            Some((last, count)) if last == cell => *count += 1,
            _ => cells.push((*cell, 1)),
        }
    }
    (GridValue::whole(sorted.len() as i128), cells)
}

/// Cells a database counted, as (cell, count) pairs: the non-empty cells
/// with their counts, in cell order, and how many values they hold.
fn counted_cells(pairs: &StructArray) -> Result<(GridValue, Histogram)> {
    let column = |i: usize| {
        pairs
            .column(i)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| result_error("cell counts"))
    };
    let (cells, counts) = (column(0)?, column(1)?);
    let mut pairs: Histogram = Vec::with_capacity(cells.len());
    for (cell, count) in cells.iter().zip(counts.iter()) {
        let (Some(cell), Some(count)) = (cell, count) else {
            continue;
        };
        let (Ok(cell), Ok(count)) = (usize::try_from(cell), u64::try_from(count)) else {
            return Err(result_error("a negative cell or count"));
        };
        pairs.push((cell, count));
    }
    let mut counted: Histogram = Vec::new();
    dpkit_release::add_counts(&mut counted, &pairs);
    let total = counted.iter().map(|&(_, count)| i128::from(count)).sum();
    Ok((GridValue::whole(total), counted))
}

/// `batches` dealt round-robin into one partition per core, so that a
/// table held in memory is scanned in parallel.
fn partitioned(
    batches: Vec<datafusion::arrow::array::RecordBatch>,
) -> Vec<Vec<datafusion::arrow::array::RecordBatch>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut partitions = vec![Vec::new(); cores.min(batches.len()).max(1)];
    let count = partitions.len();
    for (i, batch) in batches.into_iter().enumerate() {
        partitions[i % count].push(batch);
    }
    partitions
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| QueryError::Unreadable(format!("cannot start the query runtime: {e}")))
}

/// The embedded engine's session: DataFusion's physical optimizer with
/// [`ProbeAlways`](crate::probe_always::ProbeAlways), so that no join's
/// duration says whether its build side was empty.
pub(crate) fn session() -> SessionContext {
    use datafusion::execution::SessionStateBuilder;
    let config =
        crate::probe_always::configured(SessionConfig::new().with_information_schema(false));
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rules(crate::probe_always::rules())
        .build();
    SessionContext::new_with_state(state)
}

/// DataFusion's planning error, shortened to its first reason. Planning
/// errors name only things from the query and the schema, never data.
fn planning_message(text: &str) -> String {
    let mut message = text.lines().next().unwrap_or_default().to_string();
    for prefix in [
        "Error during planning: ",
        "Internal error: ",
        "Schema error: ",
        "SQL error: ",
    ] {
        while let Some(rest) = message.strip_prefix(prefix) {
            message = rest.to_string();
        }
    }
    if let Some(start) = message.find("Function '")
        && message.contains("failed to match any signature")
    {
        let name = message[start + 10..]
            .split('\'')
            .next()
            .unwrap_or("")
            .to_uppercase();
        return format!(
            "{name}() does not accept these argument types (aggregates other than COUNT need a numeric column)"
        );
    }
    // DataFusion lists the table's columns after an unknown name; they come
    // from the file's first line, which is data when a file has no header.
    for marker in [", errors:", ". Valid fields are", ". Did you mean"] {
        if let Some(cut) = message.find(marker) {
            message.truncate(cut);
        }
    }
    message
}
