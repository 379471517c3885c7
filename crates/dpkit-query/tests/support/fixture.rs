//! A temporary folder with one data file and its description, an engine
//! over it and a ledger. Shared by the query crate's tests (`#[path]`).
#![allow(dead_code)]

use std::path::PathBuf;

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::Cell;

/// The bundled Adult description.
pub fn adult_description() -> Description {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult/adult.toml");
    Description::load(&path).unwrap()
}

/// The bundled Adult description with its public lookup tables
/// (`data/adult/public.toml` appended).
pub fn adult_with_public_tables() -> Description {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult");
    let text = std::fs::read_to_string(folder.join("adult.toml")).unwrap()
        + &std::fs::read_to_string(folder.join("public.toml")).unwrap();
    Description::from_toml(&text, &folder).unwrap()
}

/// A released value's (value, low, high); panics on a key.
pub fn value(cell: &Cell) -> (f64, f64, f64) {
    match cell {
        Cell::Value {
            value, low, high, ..
        } => (*value, *low, *high),
        Cell::Key(key) => panic!("expected a value, got key {key}"),
    }
}

/// Settings with the automatic mechanism and 95% intervals.
pub fn settings(epsilon: f64, delta: f64) -> ReleaseSettings {
    ReleaseSettings {
        epsilon,
        delta,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    }
}

/// A temporary folder with one data file, its description, an engine over
/// it and a ledger granting `budget`; removed when dropped.
pub struct Fixture {
    pub folder: PathBuf,
    pub engine: QueryEngine,
    pub ledger: Ledger,
}

impl Fixture {
    /// Writes `data` to `file` and opens `description` (TOML naming `file`).
    pub fn new(name: &str, file: &str, data: &str, description: &str, budget: f64) -> Self {
        Self::with_files(name, &[(file, data)], description, budget)
    }

    /// Writes each (file, data) and opens `description` (TOML naming them:
    /// the private table's file and public tables' files).
    pub fn with_files(name: &str, files: &[(&str, &str)], description: &str, budget: f64) -> Self {
        let folder =
            std::env::temp_dir().join(format!("dpkit-query-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        for (file, data) in files {
            std::fs::write(folder.join(file), data).unwrap();
        }
        let description = Description::from_toml(description, &folder).unwrap();
        let engine = QueryEngine::open(description).unwrap();
        let ledger = Ledger::open(&folder.join("ledger.sqlite"), budget, 0.0).unwrap();
        Self {
            folder,
            engine,
            ledger,
        }
    }

    pub fn answer(
        &self,
        sql: &str,
        epsilon: f64,
        seed: u64,
    ) -> dpkit_query::Result<dpkit_query::ReleasedTable> {
        let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
        self.engine
            .answer(sql, &settings(epsilon, 0.0), &self.ledger, &mut rng)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}
