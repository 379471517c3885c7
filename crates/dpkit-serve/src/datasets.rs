//! The datasets served: each one's engine, opened once at start, and its
//! public description (what the curator wrote, nothing computed from data).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dpkit_query::description::PrivacyUnit;
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
            columns: description
                .columns
                .iter()
                .map(|(name, facts)| PublicColumn {
                    name: name.clone(),
                    kind: facts.kind.name().into(),
                    bounds: facts.bounds.map(|(low, high)| [low, high]),
                    domain: facts.domain.clone(),
                })
                .collect(),
            public_tables: description.public.keys().cloned().collect(),
        }
    }
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
}

impl Dataset {
    /// The dataset's name.
    pub fn name(&self) -> &str {
        &self.public.name
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
    let description = Description::load(&entry.description).map_err(failed)?;
    let fingerprint = fingerprint(&entry.description, &description.file)?;
    let public = PublicDescription::of(&description);
    let size = std::fs::metadata(&description.file).map_or(0, |m| m.len());
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
        public,
        fingerprint,
    })
}

fn fingerprint(description: &Path, data: &Path) -> Result<String> {
    let text = std::fs::read(description)
        .map_err(|e| ServeError::Config(format!("cannot read {}: {e}", description.display())))?;
    let meta = std::fs::metadata(data).ok();
    let modified = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut digest = Sha256::new();
    digest.update(&text);
    digest.update(meta.map_or(0, |m| m.len()).to_le_bytes());
    digest.update(modified.to_le_bytes());
    Ok(crate::analysts::hex(&digest.finalize()[..16]))
}
