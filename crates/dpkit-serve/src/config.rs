//! `serve.toml`: the datasets served, the address, the state directory
//! and the limits. Written by the curator; nothing an analyst sends can
//! name a file.
//!
//! ```
//! let config = dpkit_serve::Config::from_toml(
//!     r#"
//!     state_dir = "state"
//!     [[datasets]]
//!     description = "adult.toml"
//!     [limits]
//!     requests_per_second = 5
//!     "#,
//!     "/srv/dpkit".as_ref(),
//! )
//! .unwrap();
//! assert_eq!(config.address.port(), 8640);
//! assert_eq!(config.limits.burst, 20);
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use dpkit_ledger::Store;
use serde::Deserialize;

use crate::error::{Result, ServeError};

/// The server's configuration, with paths resolved against the file's folder.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (default `127.0.0.1:8640`).
    pub address: SocketAddr,
    /// The folder of the server's own files: its lock files, the demo's
    /// key, and the state database (analysts, hashed keys, ledgers, kept
    /// answers) unless that is in PostgreSQL.
    pub state_dir: PathBuf,
    /// The state in PostgreSQL (`[state_postgres]`), shared by servers on
    /// several machines, if it is there.
    pub state_postgres: Option<PostgresState>,
    /// The datasets served.
    pub datasets: Vec<DatasetConfig>,
    /// Bounds on requests and runs.
    pub limits: Limits,
    /// Where the operators' `/health` and `/metrics` listen
    /// (`[operations] address`), if anywhere: see [`crate::operations`].
    pub operations: Option<SocketAddr>,
}

/// One dataset: its data description, and whether to hold its table in memory.
#[derive(Debug, Clone)]
pub struct DatasetConfig {
    /// The description (TOML); its table name is the dataset's name.
    pub description: PathBuf,
    /// The name analysts ask for it by (default: its table's name).
    pub name: Option<String>,
    /// Read the whole table into memory at start (refused at start if it
    /// does not parse, or is larger than `max_in_memory_megabytes`).
    pub in_memory: bool,
}

impl DatasetConfig {
    /// The name analysts ask for the dataset by: `name` in the
    /// configuration, else the description's main table's.
    pub fn served_name(&self, description: &dpkit_query::Description) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| description.table.clone())
    }
}

/// The state in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresState {
    /// The database (its `Debug` never shows the connection string).
    pub store: Store,
    /// The most connections this process holds for accounts' ledgers
    /// (default `workers + 4`, at least `workers + 1`, so that a read of a
    /// budget never waits for every run to end); it holds five more (the
    /// writer, request turns, keys, grants, metrics).
    pub connections: usize,
}

/// Bounds on requests and runs.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest request body.
    pub max_body_bytes: usize,
    /// The longest SQL text.
    pub max_sql_bytes: usize,
    /// Queries run at once (explain and query); more wait their turn.
    pub workers: usize,
    /// Runs one analyst may have under way at once; their further requests
    /// wait, and the other analysts take the free workers in turn. Unset:
    /// `workers − 1` (at least 1), so that one worker is always left to
    /// the others.
    pub max_runs_per_analyst: Option<usize>,
    /// The longest a query's run may take; past it the run fails, its cost kept.
    pub query_timeout_seconds: f64,
    /// The most memory one run's operators may hold.
    pub query_memory_megabytes: usize,
    /// Requests per second one key may make, on average.
    pub requests_per_second: f64,
    /// Requests one key may make at once after a pause.
    pub burst: u32,
    /// The largest data file held in memory.
    pub max_in_memory_megabytes: u64,
    /// Hold each answer until its deadline, computed from public facts
    /// (`dpkit_query::timing`), and release one that overruns it at a
    /// noisy time: how long a run took then shows no one. On by default.
    pub deadlines: bool,
    /// Milliseconds added to every deadline (what any run takes, whatever
    /// it asks: set it above the usual run to make most answers' times
    /// the same).
    pub deadline_floor_ms: f64,
    /// The ε of an overrunning run's release time (not charged to the
    /// ledger: see the book's "What one person can cost").
    pub time_epsilon: f64,
    /// The δ of an overrunning run's release time.
    pub time_delta: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 64 * 1024,
            max_sql_bytes: 16 * 1024,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get().min(MAX_WORKERS)),
            max_runs_per_analyst: None,
            query_timeout_seconds: 30.0,
            query_memory_megabytes: 512,
            requests_per_second: 10.0,
            burst: 20,
            max_in_memory_megabytes: 2048,
            deadlines: true,
            deadline_floor_ms: 0.0,
            time_epsilon: 0.01,
            time_delta: 1e-9,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default = "default_address")]
    address: String,
    state_dir: PathBuf,
    datasets: Vec<RawDataset>,
    #[serde(default)]
    limits: Limits,
    operations: Option<RawOperations>,
    state_postgres: Option<RawPostgres>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPostgres {
    connection: Option<String>,
    connection_env: Option<String>,
    connections: Option<usize>,
}

/// The most connections `[state_postgres] connections` may ask for.
const MAX_CONNECTIONS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperations {
    address: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataset {
    description: PathBuf,
    name: Option<String>,
    #[serde(default = "yes")]
    in_memory: bool,
}

/// A dataset's `name`: 1 to 64 letters, digits, `_` or `-` (it names
/// accounts and appears in requests).
fn checked_name(name: String) -> Result<String> {
    let fits = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if fits {
        Ok(name)
    } else {
        Err(ServeError::Config(
            "a dataset's name is 1 to 64 letters, digits, _ or -".into(),
        ))
    }
}

fn default_address() -> String {
    "127.0.0.1:8640".into()
}

fn yes() -> bool {
    true
}

impl Config {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServeError::Config(format!("cannot read {}: {e}", path.display())))?;
        Self::from_toml(&text, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses `text`, resolving relative paths against `base`.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ServeError::Config(first_line(&e.to_string())))?;
        let address = raw.address.parse().map_err(|_| {
            ServeError::Config(format!("address {:?} is not host:port", raw.address))
        })?;
        check_limits(&raw.limits)?;
        let operations = match &raw.operations {
            Some(operations) => Some(operations_address(&operations.address, address)?),
            None => None,
        };
        if raw.datasets.is_empty() {
            return Err(ServeError::Config("no [[datasets]] to serve".into()));
        }
        let workers = raw.limits.workers;
        let state_postgres = raw
            .state_postgres
            .map(|raw| postgres_state(raw, workers))
            .transpose()?;
        Ok(Self {
            address,
            state_dir: base.join(raw.state_dir),
            state_postgres,
            datasets: raw
                .datasets
                .into_iter()
                .map(|d| {
                    Ok(DatasetConfig {
                        description: base.join(d.description),
                        name: d.name.map(checked_name).transpose()?,
                        in_memory: d.in_memory,
                    })
                })
                .collect::<Result<_>>()?,
            limits: raw.limits,
            operations,
        })
    }

    /// This configuration with the analysts' address and the operators'
    /// replaced where given (the command line's `--address` and
    /// `--operations-address`), checked as the file's are.
    ///
    /// ```
    /// # use dpkit_serve::config::Config;
    /// let config = Config::from_toml(
    ///     "address = '127.0.0.1:8640'\nstate_dir = 's'\n[[datasets]]\ndescription = 'a.toml'",
    ///     ".".as_ref(),
    /// )
    /// .unwrap();
    /// let at = "127.0.0.1:8641".parse().ok();
    /// assert_eq!(config.clone().with_addresses(None, at).unwrap().operations, at);
    /// assert!(config.with_addresses(at, at).is_err());
    /// ```
    pub fn with_addresses(
        mut self,
        address: Option<SocketAddr>,
        operations: Option<SocketAddr>,
    ) -> Result<Self> {
        self.address = address.unwrap_or(self.address);
        self.operations = operations.or(self.operations);
        check_apart(self.address, self.operations)?;
        Ok(self)
    }

    /// The state database's file, where it is when not in PostgreSQL.
    pub fn state_path(&self) -> PathBuf {
        self.state_dir.join("state.sqlite")
    }

    /// Where the state is: in PostgreSQL if `[state_postgres]` says so,
    /// else in [`Config::state_path`].
    ///
    /// ```
    /// # use dpkit_serve::config::Config;
    /// let config = Config::from_toml(
    ///     "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n\
    ///      [state_postgres]\nconnection = 'host=db user=dpkit password=secret'",
    ///     "/srv".as_ref(),
    /// )
    /// .unwrap();
    /// assert_eq!(config.store().to_string(), "PostgreSQL");
    /// assert!(!format!("{config:?}").contains("secret"));
    /// ```
    pub fn store(&self) -> Store {
        match &self.state_postgres {
            Some(postgres) => postgres.store.clone(),
            None => Store::file(&self.state_path()),
        }
    }
}

/// `[state_postgres]`: its connection string, given or read from the
/// environment variable it names (so that no password need be in the
/// file); the variable's value is never shown.
fn postgres_state(raw: RawPostgres, workers: usize) -> Result<PostgresState> {
    let connection = match (raw.connection, raw.connection_env) {
        (Some(connection), None) => connection,
        (None, Some(variable)) => std::env::var(&variable)
            .ok()
            .filter(|value| !value.trim().is_empty())
            .ok_or_else(|| {
                ServeError::Config(format!(
                    "[state_postgres] connection_env names {variable:?}, which is not set"
                ))
            })?,
        _ => {
            return Err(ServeError::Config(
                "[state_postgres] takes one of connection and connection_env".into(),
            ));
        }
    };
    // Each run holds one ledger for as long as it runs.
    let least = workers + 1;
    let connections = raw.connections.unwrap_or(workers + 4);
    if !(least..=MAX_CONNECTIONS).contains(&connections) {
        return Err(ServeError::Config(format!(
            "[state_postgres] connections must be from workers + 1 ({least}) to {MAX_CONNECTIONS}"
        )));
    }
    Ok(PostgresState {
        store: Store::Postgres(connection),
        connections,
    })
}

impl Limits {
    /// How answers are held back (`deadlines`), or none.
    ///
    /// ```
    /// use dpkit_serve::config::Limits;
    /// assert!(Limits::default().deadlines().is_some());
    /// assert!(Limits { deadlines: false, ..Limits::default() }.deadlines().is_none());
    /// ```
    pub fn deadlines(&self) -> Option<dpkit_query::timing::Deadlines> {
        self.deadlines.then(|| dpkit_query::timing::Deadlines {
            floor: std::time::Duration::from_secs_f64(self.deadline_floor_ms / 1000.0),
            epsilon: self.time_epsilon,
            delta: self.time_delta,
        })
    }

    /// The runs one analyst may have under way at once.
    ///
    /// ```
    /// use dpkit_serve::config::Limits;
    /// let limits = Limits { workers: 4, ..Limits::default() };
    /// assert_eq!(limits.runs_per_analyst(), 3);
    /// let one = Limits { workers: 1, ..Limits::default() };
    /// assert_eq!(one.runs_per_analyst(), 1);
    /// ```
    pub fn runs_per_analyst(&self) -> usize {
        self.max_runs_per_analyst
            .unwrap_or(self.workers.saturating_sub(1))
            .clamp(1, self.workers.max(1))
    }
}

/// The most workers a server starts. Each is a thread that reserves a
/// planning stack of 256 MiB of address space at start-up (see
/// `dpkit_query::spawn_planning_thread`): 256 of them reserve 64 GiB, which
/// Linux maps without using it under its default overcommit; a host with
/// strict overcommit or an address-space limit needs `workers` set lower.
/// More would only wait on the cores.
const MAX_WORKERS: usize = 256;

fn check_limits(limits: &Limits) -> Result<()> {
    let positive = limits.max_body_bytes > 0
        && limits.max_sql_bytes > 0
        && limits.workers > 0
        && limits.query_memory_megabytes > 0
        && limits.burst > 0
        && limits.query_timeout_seconds.is_finite()
        && limits.query_timeout_seconds > 0.0
        && limits.requests_per_second.is_finite()
        && limits.requests_per_second > 0.0
        && limits.time_epsilon.is_finite()
        && limits.time_epsilon > 0.0
        && limits.time_delta > 0.0
        && limits.time_delta < 1.0
        && limits.deadline_floor_ms.is_finite()
        && (0.0..=3_600_000.0).contains(&limits.deadline_floor_ms);
    if !positive {
        return Err(ServeError::Config(
            "every [limits] value must be finite and > 0".into(),
        ));
    }
    if limits.workers > MAX_WORKERS {
        return Err(ServeError::Config(format!(
            "workers must be from 1 to {MAX_WORKERS}"
        )));
    }
    if limits
        .max_runs_per_analyst
        .is_some_and(|runs| runs == 0 || runs > limits.workers)
    {
        return Err(ServeError::Config(
            "max_runs_per_analyst must be from 1 to workers".into(),
        ));
    }
    if limits.max_sql_bytes > limits.max_body_bytes {
        return Err(ServeError::Config(
            "max_sql_bytes cannot exceed max_body_bytes".into(),
        ));
    }
    Ok(())
}

/// The operators' address: host:port, and not the analysts' one.
fn operations_address(text: &str, analysts: SocketAddr) -> Result<SocketAddr> {
    let address: SocketAddr = text.parse().map_err(|_| {
        ServeError::Config(format!("[operations] address {text:?} is not host:port"))
    })?;
    check_apart(analysts, Some(address))?;
    Ok(address)
}

/// The operators' address, if any, is not the analysts' one (both at port
/// 0 each get a free port of their own).
fn check_apart(analysts: SocketAddr, operations: Option<SocketAddr>) -> Result<()> {
    if operations == Some(analysts) && analysts.port() != 0 {
        return Err(ServeError::Config(
            "the operations address ([operations] or --operations-address) must differ from \
             the analysts' address"
                .into(),
        ));
    }
    Ok(())
}

fn first_line(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configurations_are_refused_with_one_line() {
        for text in [
            "",
            "state_dir = 's'\ndatasets = []",
            "state_dir = 's'\naddress = 'nowhere'\n[[datasets]]\ndescription = 'a.toml'",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[limits]\nworkers = 0",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[limits]\nworkers = 257",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[limits]\nworkers = 2\nmax_runs_per_analyst = 3",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[limits]\nmax_runs_per_analyst = 0",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[limits]\nrequests_per_second = -1.0",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\nsurprise = 1",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[operations]\naddress = 'x'",
            "address = '127.0.0.1:9000'\nstate_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[operations]\naddress = '127.0.0.1:9000'",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[state_postgres]\nconnections = 4",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[state_postgres]\nconnection = 'x'\nconnection_env = 'PATH'",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[state_postgres]\nconnection = 'x'\nconnections = 0",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[limits]\nworkers = 4\n[state_postgres]\nconnection = 'x'\nconnections = 4",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n[state_postgres]\nconnection_env = 'DPKIT_NO_SUCH_VARIABLE'",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\nname = ''",
            "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\nname = 'two words'",
        ] {
            let error = Config::from_toml(text, Path::new("/x"))
                .unwrap_err()
                .to_string();
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn a_connection_string_may_come_from_the_environment_and_is_never_shown() {
        let text = "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n\
                    [limits]\nworkers = 2\n[state_postgres]\nconnection_env = 'PATH'\nconnections = 3";
        let config = Config::from_toml(text, Path::new("/x")).unwrap();
        let postgres = config.state_postgres.as_ref().unwrap();
        assert_eq!(
            postgres.store,
            Store::Postgres(std::env::var("PATH").unwrap())
        );
        assert_eq!(postgres.connections, 3);
        assert!(!format!("{config:?}").contains(&std::env::var("PATH").unwrap()));
        let text = "state_dir = 's'\n[[datasets]]\ndescription = 'a.toml'\n\
                    [limits]\nworkers = 3\n[state_postgres]\nconnection = 'x'";
        let config = Config::from_toml(text, Path::new("/x")).unwrap();
        assert_eq!(config.state_postgres.unwrap().connections, 7, "workers + 4");
    }
}
