//! The private tables of a description whose rows live in a database: one
//! connection per table, each table's typed `SELECT` and the columns it had
//! when it was opened, and the plan written as one statement over all of
//! them, run on the description's table's connection.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::logical_expr::LogicalPlan;

use super::{Backend, DatabaseType, RemotePlan};
use crate::error::{DatabaseError, Result};
use dpkit_description::Description;

/// One private table in the database.
struct Table {
    /// The description's name for it (the name queries use).
    name: String,
    backend: Box<dyn Backend>,
    /// The `SELECT` that reads it with the declared types.
    source: String,
    /// Its columns as they were when it was opened.
    columns: Vec<(String, DatabaseType)>,
    /// The database table's name without a schema, in lower case.
    read: String,
    /// The text columns its `SELECT` also reads cut, with their
    /// `max_length` (see [`super::Flavour::cuts_in_source`]).
    cuts: Vec<(String, u32)>,
}

impl Table {
    /// Connects to the private table `name` (`alone` describes it as the
    /// table), checks its columns, and makes the empty table of its
    /// declared columns that the planner plans over.
    fn open(name: &str, alone: &Description) -> Result<(Self, Arc<dyn TableProvider>)> {
        let Some(backend) = super::connect(alone)? else {
            return Err(DatabaseError::Description(
                "the table is not in a database".into(),
            ));
        };
        let found = backend.columns()?;
        let columns = super::declared_columns(alone, &found, backend.flavour().name())?;
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, kind)| Field::new(name, crate::declared_type(*kind), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let provider = datafusion::datasource::MemTable::try_new(schema, vec![vec![]])
            .map_err(|e| DatabaseError::Unreadable(format!("cannot plan over the table: {e}")))?;
        let table = alone.source.database_table().unwrap_or_default();
        let read = table.rsplit('.').next().unwrap_or_default();
        let cuts: Vec<(String, u32)> = match backend.flavour().cuts_in_source() {
            true => columns
                .iter()
                .filter(|(_, kind)| *kind == dpkit_description::ColumnKind::Text)
                .map(|(name, _)| (name.clone(), alone.max_length(name)))
                .collect(),
            false => Vec::new(),
        };
        let table = Self {
            name: name.to_string(),
            source: backend.source(&columns, &found, &cuts),
            backend,
            columns: found,
            read: read.to_lowercase(),
            cuts,
        };
        Ok((table, Arc::new(provider)))
    }
}

/// Every private table of a description in a database; the first is the
/// description's table, whose connection runs the plans. Public tables
/// are sent with each statement (see [`super::public_rows`]).
pub struct DatabaseTables {
    tables: Vec<Table>,
    /// Each public table's name, its columns' names and the `SELECT` of
    /// its rows.
    public: Vec<(String, Vec<String>, String)>,
}

/// An empty table of each private table's declared columns, by name: what
/// the planner plans over.
pub type EmptyTables = Vec<(String, Arc<dyn TableProvider>)>;

impl DatabaseTables {
    /// Connects to each private table of `description` (which lives in a
    /// database) and checks its columns against the description.
    pub fn open(description: &Description) -> Result<(Self, EmptyTables)> {
        let mut tables: Vec<Table> = Vec::new();
        let mut empty: EmptyTables = Vec::new();
        let mut identities: Vec<String> = Vec::new();
        for name in description.private_names() {
            let Some(alone) = description.alone(name) else {
                continue;
            };
            let (table, provider) = Table::open(name, &alone)?;
            // Rows read as two tables would be one person's in one and,
            // under another person column, someone else's in the other.
            let identity = table.backend.identity()?;
            if let Some(at) = identities.iter().position(|i| *i == identity) {
                return Err(DatabaseError::Description(format!(
                    "private tables '{}' and '{name}' read the same {} table",
                    tables[at].name,
                    table.backend.flavour().name()
                )));
            }
            identities.push(identity);
            empty.push((name.to_string(), provider));
            tables.push(table);
        }
        let public = Vec::new();
        Ok((Self { tables, public }, empty))
    }

    /// Writes each public table's rows, as the engine read them, for the
    /// statements to define it by; refused, in one line, for a table too
    /// large to send or with a value that cannot be written.
    pub fn send_public<'a>(
        &mut self,
        public: impl IntoIterator<Item = (&'a String, &'a [RecordBatch])>,
    ) -> Result<()> {
        let flavour = self.runner().flavour();
        for (name, batches) in public {
            // The statement defines the public table by its name, which
            // would hide a database table of that name from a private
            // table's read of it (SQLite finds names whatever their case,
            // and a later WITH clause's too).
            if self.tables.iter().any(|t| t.read == name.to_lowercase()) {
                return Err(DatabaseError::Description(format!(
                    "public table '{name}' has the name of a database table a private table \
                     reads: rename the public table"
                )));
            }
            let source = super::public_rows::public_source(name, batches, flavour)?;
            // Names with a quote and the like are refused now, not by
            // every query.
            super::spelling::unambiguous(&source, flavour)?;
            let columns = batches[0].schema();
            let columns = columns.fields().iter().map(|f| f.name().clone()).collect();
            self.public.push((name.clone(), columns, source));
        }
        Ok(())
    }

    /// The connection that runs the plans.
    pub fn runner(&self) -> &dyn Backend {
        &*self.tables[0].backend
    }

    /// `plan` as one statement over every table, checked by each table's
    /// connection (each also checks that its table is as it was when
    /// opened): a plan a database cannot run is refused for free.
    pub fn remote_plan(&self, plan: &LogicalPlan, rows_bound: Option<f64>) -> Result<RemotePlan> {
        for table in &self.tables {
            // A table whose columns changed since it was opened could fail
            // on a row of the new type: refused now, for free.
            if table.backend.columns()? != table.columns {
                return Err(DatabaseError::Description(format!(
                    "the {} table's columns changed since dpkit opened it: open it again",
                    table.backend.flavour().name()
                )));
            }
        }
        let private = self.tables.iter().map(|t| {
            let raw = crate::raw_table_name(&t.name);
            (raw, t.source.as_str())
        });
        let public = self
            .public
            .iter()
            .map(|(name, _, source)| (name.clone(), source.as_str()));
        let raw: Vec<(String, &str)> = private.chain(public).collect();
        let cuts: Vec<(String, String, u32)> = self
            .tables
            .iter()
            .flat_map(|t| {
                let raw = crate::raw_table_name(&t.name);
                t.cuts
                    .iter()
                    .map(move |(c, n)| (raw.clone(), c.clone(), *n))
            })
            .collect();
        let cut_names: Vec<String> = cuts.iter().map(|(_, c, _)| crate::cut_column(c)).collect();
        let private_names = self.tables.iter().flat_map(|t| {
            let columns = t.columns.iter().map(|(name, _)| name.as_str());
            columns.chain([t.name.as_str()])
        });
        let private_names = private_names.chain(cut_names.iter().map(String::as_str));
        let public_names = self.public.iter().flat_map(|(name, columns, _)| {
            columns.iter().map(String::as_str).chain([name.as_str()])
        });
        let names: Vec<&str> = private_names.chain(public_names).collect();
        let flavour = self.runner().flavour();
        let remote = super::sql::remote_plan(plan, flavour, &raw, &cuts, &names, rows_bound)?;
        let schema: &SchemaRef = plan.schema().inner();
        for table in &self.tables {
            table.backend.check(&remote, schema)?;
        }
        Ok(remote)
    }
}
