//! Exact marginal counts from the private plan, where the rows live: each
//! marginal is a `GROUP BY` count planned like an analyst's query (the
//! same contribution bounds and clamping), run on the embedded engine or in
//! the database, and never released: the synthesizer adds the noise.

use std::collections::HashMap;

use dpkit_core::sensitivity::{GroupedSensitivity, RowValues, Spread};
use dpkit_synth::{Domain, Marginals};

use super::coding::CodedTable;
use crate::QueryEngine;
use crate::error::{QueryError, Result};
use crate::plan::PrivateQuery;

/// The plans of the marginals a synthesizer will ask for, made before
/// anything is charged (a marginal the planner refuses is refused for
/// free), and the L1 sensitivity that bounds every one of them.
pub struct Plans {
    queries: HashMap<Vec<usize>, PrivateQuery>,
    sensitivity: f64,
}

impl Plans {
    /// Plans the count of each set of columns in `sets` (planning reads no
    /// rows). The sensitivity is the largest any of them has.
    pub fn new(engine: &QueryEngine, table: &CodedTable, sets: &[Vec<usize>]) -> Result<Self> {
        let mut queries = HashMap::new();
        let mut sensitivity: f64 = 0.0;
        for columns in sets {
            let query = engine.plan(&count_sql(table, columns))?;
            sensitivity = sensitivity.max(l1_of(&query)?);
            queries.insert(columns.clone(), query);
        }
        Ok(Self {
            queries,
            sensitivity,
        })
    }

    /// How far one person moves any planned marginal, in L1 norm: the
    /// rows they may hold after the plan's caps (times 2 when a person may
    /// be replaced), each moving one cell by 1.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }
}

/// Marginals of a [`CodedTable`] counted by a [`QueryEngine`], each once.
pub struct EngineMarginals<'a> {
    engine: &'a QueryEngine,
    table: &'a CodedTable,
    plans: &'a Plans,
    domain: Domain,
    counted: HashMap<Vec<usize>, Vec<u64>>,
    failure: Option<QueryError>,
}

impl<'a> EngineMarginals<'a> {
    /// The marginals of `table` on `engine`, with the plans made for them.
    pub fn new(engine: &'a QueryEngine, table: &'a CodedTable, plans: &'a Plans) -> Result<Self> {
        Ok(Self {
            engine,
            table,
            plans,
            domain: table.domain()?,
            counted: HashMap::new(),
            failure: None,
        })
    }

    /// Whether no marginal was counted yet.
    pub fn counted_nothing(&self) -> bool {
        self.counted.is_empty()
    }

    /// Why counting failed, if it did: the synthesizer sees only its text.
    pub fn take_failure(&mut self) -> Option<QueryError> {
        self.failure.take()
    }

    fn count(&self, columns: &[usize]) -> Result<Vec<u64>> {
        let planned_now;
        let query = match self.plans.queries.get(columns) {
            Some(query) => query,
            None => {
                planned_now = self.engine.plan(&count_sql(self.table, columns))?;
                // One that a person could move further than the charge
                // assumed is never counted.
                if l1_of(&planned_now)? > self.plans.sensitivity {
                    return Err(QueryError::NotPrivate(
                        "a marginal's plan bounds one person less tightly than the charge assumed"
                            .into(),
                    ));
                }
                &planned_now
            }
        };
        let exact = self.engine.exact(query)?;
        let cells = self
            .domain
            .cells(columns)
            .map_err(|e| QueryError::NotPrivate(e.to_string()))?;
        let mut counts = vec![0u64; cells];
        for (key, values) in exact.keys.iter().zip(&exact.values) {
            let mut cell = 0usize;
            for (&column, text) in columns.iter().zip(key) {
                let coding = &self.table.columns[column].1;
                cell = cell * coding.codes() + coding.code_of(text) as usize;
            }
            let count = values.first().map_or(0, |v| v.steps());
            counts[cell] += u64::try_from(count.max(0)).unwrap_or(u64::MAX);
        }
        Ok(counts)
    }
}

impl Marginals for EngineMarginals<'_> {
    fn domain(&self) -> &Domain {
        &self.domain
    }

    fn counts(&mut self, columns: &[usize]) -> dpkit_synth::Result<Vec<u64>> {
        if let Some(counts) = self.counted.get(columns) {
            return Ok(counts.clone());
        }
        let counts = match self.count(columns) {
            Ok(counts) => counts,
            Err(error) => {
                let text = error.to_string();
                self.failure = Some(error);
                return Err(dpkit_synth::Error::Source(text));
            }
        };
        self.counted.insert(columns.to_vec(), counts.clone());
        Ok(counts)
    }
}

/// `SELECT k0, k1, …, COUNT(*) FROM table GROUP BY 1, 2, …`.
fn count_sql(table: &CodedTable, columns: &[usize]) -> String {
    let keys: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let (name, coding) = &table.columns[c];
            format!("{} AS marginal_key_{i}", coding.key_sql(name))
        })
        .collect();
    let positions: Vec<String> = (1..=columns.len()).map(|i| i.to_string()).collect();
    format!(
        "SELECT {}, COUNT(*) AS marginal_count FROM \"{}\" GROUP BY {}",
        keys.join(", "),
        table.table.replace('"', "\"\""),
        positions.join(", ")
    )
}

/// The L1 norm of one person's move of a planned count over all its groups.
fn l1_of(query: &PrivateQuery) -> Result<f64> {
    let measured = &query.measured;
    let moved = GroupedSensitivity::of_contribution(
        RowValues::Count,
        measured.contribution,
        Spread::Groups,
        measured.neighbouring,
    )
    .map_err(QueryError::Mechanism)?;
    Ok(moved.l1)
}
