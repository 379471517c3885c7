//! The datasets served: each one's engine, opened once at start, and its
//! public description (what the curator wrote, nothing computed from data).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dpkit_query::description::PrivacyUnit;
use dpkit_query::reuse::PlanCache;
use dpkit_query::timing::Deadlines;
use dpkit_query::{Description, QueryEngine, RunLimits};
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::config::{Config, DatasetConfig};
use crate::error::{Result, ServeError};

/// What is public about a dataset.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PublicDescription {
    /// The dataset's name, which is also its table's name in SQL.
    pub name: String,
    /// The number of people, when the curator made it public.
    pub people: Option<u64>,
    /// Who is protected: "row" (each row is a person) or "id" (rows with
    /// the same identifier are one person's).
    pub privacy_unit: String,
    /// The identifier column, for `privacy_unit = "id"`.
    pub id_column: Option<String>,
    /// How many rows one person may add to an aggregate.
    pub rows_per_person: u64,
    /// The columns that can be grouped by, summed or filtered on.
    pub columns: Vec<PublicColumn>,
    /// Public lookup tables queries may join with the table (their rows
    /// are public; a join's cost is in its privacy map, see `--explain`).
    pub public_tables: Vec<String>,
    /// Further private tables about the same people, which queries join
    /// with the table (and each other) on the person.
    pub private_tables: Vec<PrivateTableDescription>,
}

/// What is public about a further private table.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PrivateTableDescription {
    /// Its name in SQL.
    pub name: String,
    /// The column naming each row's person.
    pub person_column: String,
    /// How many of one person's rows it keeps.
    pub rows_per_person: u64,
    /// The columns that can be grouped by, summed or filtered on.
    pub columns: Vec<PublicColumn>,
}

/// What is public about a column.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PublicColumn {
    /// Its name.
    pub name: String,
    /// "integer", "real" or "text".
    #[serde(rename = "type")]
    pub kind: String,
    /// Public bounds: values are clamped to them.
    pub bounds: Option<[f64; 2]>,
    /// Public set of values: GROUP BY releases exactly these keys.
    pub domain: Option<Vec<String>>,
}

impl PublicDescription {
    /// The public part of `description`.
    pub fn of(description: &Description) -> Self {
        let (privacy_unit, id_column) = match &description.privacy_unit {
            PrivacyUnit::Row => ("row", None),
            PrivacyUnit::Id { column, .. } => ("id", Some(column.clone())),
        };
        Self {
            name: description.table.clone(),
            people: description.public_rows,
            privacy_unit: privacy_unit.into(),
            id_column,
            rows_per_person: description.privacy_unit.rows_per_person(),
            columns: public_columns(&description.columns),
            public_tables: description.public.keys().cloned().collect(),
            private_tables: description
                .private
                .iter()
                .map(|(name, table)| PrivateTableDescription {
                    name: name.clone(),
                    person_column: table.person.clone(),
                    rows_per_person: table.max_rows_per_person,
                    columns: public_columns(&table.columns),
                })
                .collect(),
        }
    }
}

/// What is public about each described column.
fn public_columns(
    columns: &std::collections::BTreeMap<String, dpkit_query::description::ColumnFacts>,
) -> Vec<PublicColumn> {
    columns
        .iter()
        .map(|(name, facts)| PublicColumn {
            name: name.clone(),
            kind: facts.kind.name().into(),
            bounds: facts.bounds.map(|(low, high)| [low, high]),
            domain: facts.domain.clone(),
        })
        .collect()
}

/// A dataset ready for queries.
pub struct Dataset {
    /// Its engine (shared by every request).
    pub engine: Arc<QueryEngine>,
    /// Its public description.
    pub public: PublicDescription,
    /// A digest of its description and data file's size and time: kept
    /// answers are replayed only while both stay the same.
    pub fingerprint: String,
    /// Private plans of queries asked again, kept per account (see
    /// [`dpkit_query::reuse`]).
    pub plans: PlanCache,
}

/// The most private plans kept per account on a dataset.
const PLANS_KEPT: usize = 256;

impl Dataset {
    /// The dataset's name.
    pub fn name(&self) -> &str {
        &self.public.name
    }

    /// When a run of a query whose work bound is `work` units per person
    /// (`dpkit_query::plan::PrivateQuery::work`), started at `started` and
    /// ended now, may leave: at its deadline over the public number of
    /// people, or past it at a noisy time (see [`dpkit_query::timing`]).
    /// Should the time not be drawn, at `fallback` after the start, a
    /// public time: never at once.
    pub fn release_at(
        &self,
        deadlines: &Deadlines,
        work: u64,
        started: Instant,
        fallback: Duration,
    ) -> Instant {
        let people = self.engine.description().public_rows;
        let release = deadlines
            .release_time(work, people, self.engine.speed())
            .and_then(|time| Ok(time.release_after(started.elapsed())?));
        started + release.unwrap_or(fallback)
    }
}

/// Opens every dataset of `config`; two with one name are refused.
pub fn open_all(config: &Config) -> Result<Vec<Dataset>> {
    let mut datasets: Vec<Dataset> = Vec::new();
    for entry in &config.datasets {
        let dataset = open(entry, config)?;
        if datasets.iter().any(|d| d.name() == dataset.name()) {
            return Err(ServeError::Config(format!(
                "two datasets are named {}",
                dataset.name()
            )));
        }
        datasets.push(dataset);
    }
    Ok(datasets)
}

fn open(entry: &DatasetConfig, config: &Config) -> Result<Dataset> {
    let failed = |source| ServeError::Dataset {
        dataset: entry.description.display().to_string(),
        source,
    };
    let description = Description::load(&entry.description).map_err(|e| failed(e.into()))?;
    let fingerprint = fingerprint(&entry.description, &description.data_files())?;
    let mut public = PublicDescription::of(&description);
    public.name = entry.served_name(&description);
    let size: u64 = (description.data_files().iter())
        .map(|file| std::fs::metadata(file).map_or(0, |m| m.len()))
        .sum();
    let in_memory = entry.in_memory && size <= config.limits.max_in_memory_megabytes << 20;
    let mut engine = if in_memory {
        QueryEngine::open_in_memory(description)
    } else {
        QueryEngine::open(description)
    }
    .map_err(failed)?;
    engine.set_limits(RunLimits {
        timeout: Some(Duration::from_secs_f64(config.limits.query_timeout_seconds)),
        memory_bytes: Some(config.limits.query_memory_megabytes << 20),
    });
    Ok(Dataset {
        engine: Arc::new(engine),
        plans: PlanCache::new(PLANS_KEPT),
        public,
        fingerprint,
    })
}

/// A digest of the description's text and each data file's size and time:
/// what a kept answer is kept for (the command line's replays use it too).
pub fn fingerprint(description: &Path, data: &[&Path]) -> Result<String> {
    let text = std::fs::read(description)
        .map_err(|e| ServeError::Config(format!("cannot read {}: {e}", description.display())))?;
    let mut digest = Sha256::new();
    digest.update(&text);
    for file in data {
        let meta = std::fs::metadata(file).ok();
        let modified = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        digest.update(meta.map_or(0, |m| m.len()).to_le_bytes());
        digest.update(modified.to_le_bytes());
    }
    Ok(crate::analysts::hex(&digest.finalize()[..16]))
}
