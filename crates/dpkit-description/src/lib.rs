#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-description
//!
//! The data description: what the engine cannot guess and a person must
//! decide (the privacy unit, public bounds, public value domains), read
//! from TOML and checked before any data is touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dpkit_core::sensitivity::Neighbouring;
use serde::Deserialize;

use dpkit_ledger::MAX_EPSILON;

/// The most rows one person may contribute (`max_rows_per_person`): beyond
/// it, noise scaled to a person's reach would drown any answer.
pub const MAX_ROWS_PER_PERSON: u64 = 1_000_000;

/// The most rows a table's public `people` count may stand for
/// (`people × rows per person`): 2^53, so that every count is exact as a double.
pub const MAX_PUBLIC_ROWS: u64 = 1 << 53;

/// A dataset's description, read from TOML.
///
/// ```
/// use dpkit_description::Description;
/// let text = r#"
/// [table]
/// name = "people"
/// file = "people.csv"
/// people = 1000        # optional: a public number of people
///
/// [privacy_unit]
/// kind = "row"
///
/// [budget]
/// epsilon = 2.0
/// delta = 1e-6
///
/// [columns.age]
/// type = "integer"
/// bounds = [0, 120]
///
/// [columns.sex]
/// type = "text"
/// domain = ["Female", "Male"]
/// "#;
/// let description = Description::from_toml(text, std::path::Path::new(".")).unwrap();
/// assert_eq!(description.column("age").unwrap().bounds, Some((0.0, 120.0)));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    /// The table name queries use.
    pub table: String,
    /// The data file (CSV with a header row, or Parquet).
    pub file: PathBuf,
    /// Whether the file is CSV or Parquet.
    pub format: FileFormat,
    /// Where the rows live: the file, read by the embedded engine (the
    /// default), or a database that runs the private plan itself.
    pub source: Source,
    /// The number of people, when it is public (a census total, say):
    /// released counts are then kept within `[0, public_rows]`.
    pub public_rows: Option<u64>,
    /// Who is protected.
    pub privacy_unit: PrivacyUnit,
    /// The most groups of one GROUP BY a person's rows may fall in (L0),
    /// for the id unit: the rows of their other groups are left out.
    pub max_groups_per_person: Option<u64>,
    /// The most rows of one person in any one group (L∞), for the id unit.
    pub max_rows_per_group: Option<u64>,
    /// Which neighbouring tables ε holds for: one person added or removed
    /// (`neighbours = "add-remove"`, the default), or also one person's rows
    /// replaced by another's (`neighbours = "replace"`, which calibrates for
    /// both and costs more noise per group).
    pub neighbouring: Neighbouring,
    /// Which of a person's rows are kept when they hold more than a cap
    /// allows (`keep`, under the id unit).
    pub keep: KeptRows,
    /// Each analyst's total budget.
    pub budget_epsilon: f64,
    /// Each analyst's total δ.
    pub budget_delta: f64,
    /// What is public about each column (columns not listed can be filtered
    /// on, but not summed or grouped by).
    pub columns: BTreeMap<String, ColumnFacts>,
    /// Public tables (`[public.NAME]`), by name: lookup tables anyone may
    /// see, which queries join with the private table. Reading them is
    /// never charged; what a join does to one person's rows is (see
    /// `dpkit_core::sensitivity::joins`).
    pub public: BTreeMap<String, PublicTable>,
    /// Further private tables (`[private.NAME]`), by name: rows about the
    /// same people as the table's, each naming its person in a column of
    /// its own. Queries join them with each other on that column.
    pub private: BTreeMap<String, PrivateTable>,
    /// What a field of the description's CSV files holds when its value is
    /// missing (`[table] missing = ["", "NA"]`): read as NULL in every
    /// column, whatever its type. Default: the empty field alone.
    pub missing: Vec<String>,
}

/// A further private table: rows about the people the privacy unit's
/// column names, at most `max_rows_per_person` of each kept.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateTable {
    /// The data file (CSV with a header row, or Parquet), or for a table
    /// in SQLite the database file.
    pub file: PathBuf,
    /// Whether the file is CSV or Parquet.
    pub format: FileFormat,
    /// Where the rows are: a file beside a table read from a file, or a
    /// table of the same database as the description's table.
    pub source: Source,
    /// The column naming each row's person: a value of the privacy unit's
    /// column.
    pub person: String,
    /// How many rows per person enter any aggregate.
    pub max_rows_per_person: u64,
    /// What is public about each column, as for the table's.
    pub columns: BTreeMap<String, ColumnFacts>,
}

/// A public table: its file and its columns' types.
#[derive(Debug, Clone, PartialEq)]
pub struct PublicTable {
    /// The data file (CSV with a header row, or Parquet).
    pub file: PathBuf,
    /// Whether the file is CSV or Parquet.
    pub format: FileFormat,
    /// Declared columns (others are text). Bounds and domains need not be
    /// declared: they are read from the table, which is public.
    pub columns: BTreeMap<String, ColumnFacts>,
}

/// The data file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Comma-separated with a header row.
    Csv,
    /// Apache Parquet.
    Parquet,
}

/// Where a table's rows live.
#[derive(Clone, PartialEq, Eq)]
pub enum Source {
    /// The description's CSV or Parquet `file`, read by embedded DataFusion.
    File,
    /// A table of the SQLite database `file` (`sqlite = "…"`).
    Sqlite {
        /// The table in the database (`source_table`, by default the name).
        table: String,
    },
    /// A table of a PostgreSQL database (`postgres = "host=… dbname=…"`).
    Postgres {
        /// The connection string (libpq's `key=value` form or a URL). It may
        /// hold a password, so it is never shown: not by `Debug`, not in errors.
        connection: String,
        /// The table (`source_table`, by default the name; `schema.table` allowed).
        table: String,
    },
    /// A table of an Apache Spark cluster, through its Spark Connect
    /// server (`spark = "sc://host:port"`).
    Spark {
        /// The Spark Connect address.
        address: String,
        /// The table (`source_table`, by default the name; `database.table` allowed).
        table: String,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File => f.write_str("File"),
            Self::Sqlite { table } => f.debug_struct("Sqlite").field("table", table).finish(),
            Self::Postgres { table, .. } => f
                .debug_struct("Postgres")
                .field("connection", &"(withheld)")
                .field("table", table)
                .finish(),
            Self::Spark { address, table } => f
                .debug_struct("Spark")
                .field("address", address)
                .field("table", table)
                .finish(),
        }
    }
}

/// Which of a person's rows a cap keeps (`[privacy_unit] keep`). Either
/// way the choice depends on that person's rows alone, never on other
/// people's, so the caps' sensitivities hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeptRows {
    /// The first in the order of the rows' own values, every column in
    /// turn (`"ordered"`): the same rows every time, on every engine, but
    /// the first columns' smallest values are favoured (the clinic's
    /// visits in the year's first months), which biases every answer that
    /// the cap cuts. For comparing engines row for row.
    Ordered,
    /// A uniformly random choice among the person's rows, drawn anew by
    /// each run (`"random"`, the default): no value is favoured. The
    /// embedded engine draws from the thread's OS-seeded generator, a
    /// database from its own `random()` (`rand()` on Spark), seeded apart
    /// from the rows.
    #[default]
    Random,
}

/// Who one "person" is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivacyUnit {
    /// Each row is a different person.
    Row,
    /// Rows with the same value in `column` belong to one person, who may
    /// have many; dpkit keeps at most `max_rows` of them.
    Id {
        /// The identifier column.
        column: String,
        /// How many rows per person enter any aggregate.
        max_rows: u64,
    },
}

impl PrivacyUnit {
    /// How many rows one person can contribute.
    pub fn rows_per_person(&self) -> u64 {
        match self {
            Self::Row => 1,
            Self::Id { max_rows, .. } => *max_rows,
        }
    }
}

/// What is public about one column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColumnFacts {
    /// Public bounds `[low, high]`: values are clamped to them before summing.
    pub bounds: Option<(f64, f64)>,
    /// Public set of values: GROUP BY releases exactly these keys.
    pub domain: Option<Vec<String>>,
    /// The declared type.
    pub kind: ColumnKind,
    /// For text, the most characters a value keeps: longer values are cut
    /// when read (see [`ColumnFacts::max_length`]).
    pub max_length: Option<u32>,
    /// For a bounded integer column, where a synthetic table's bins start
    /// after the first (which starts at the lower bound): whole numbers,
    /// increasing, above the lower bound and at most the upper one.
    pub bins: Option<Vec<f64>>,
}

/// Text values keep at most this many characters unless the description
/// says otherwise (`max_length`).
pub const DEFAULT_MAX_LENGTH: u32 = 1_024;
pub use dpkit_total::LONGEST_MAX_LENGTH;

impl ColumnFacts {
    /// The most characters a value of this column keeps: the declared
    /// `max_length`; else, for a column with a public domain, one more than
    /// its longest value (a value cut to that length is in the domain
    /// exactly when the whole value is, so GROUP BY and comparisons with the
    /// domain see what they would uncut, while what a person's text can
    /// cost stays small); else [`DEFAULT_MAX_LENGTH`].
    ///
    /// ```
    /// use dpkit_description::{ColumnFacts, ColumnKind};
    /// let mut sex = ColumnFacts { kind: ColumnKind::Text, ..Default::default() };
    /// assert_eq!(sex.max_length(), 1024);
    /// sex.domain = Some(vec!["Female".into(), "Male".into()]);
    /// assert_eq!(sex.max_length(), 7);
    /// sex.max_length = Some(100);
    /// assert_eq!(sex.max_length(), 100);
    /// ```
    pub fn max_length(&self) -> u32 {
        let from_domain = |domain: &Vec<String>| {
            let longest = domain.iter().map(|v| v.chars().count()).max().unwrap_or(0);
            u32::try_from(longest + 1).map_or(LONGEST_MAX_LENGTH, |n| n.min(LONGEST_MAX_LENGTH))
        };
        self.max_length
            .or_else(|| self.domain.as_ref().map(from_domain))
            .unwrap_or(DEFAULT_MAX_LENGTH)
    }
}

/// A column's declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColumnKind {
    /// Whole numbers.
    Integer,
    /// Real numbers.
    Real,
    /// Text.
    #[default]
    Text,
}

impl ColumnKind {
    /// Every kind.
    pub const ALL: [ColumnKind; 3] = [ColumnKind::Integer, ColumnKind::Real, ColumnKind::Text];

    /// The word a description's `type = "…"` uses for this kind.
    ///
    /// ```
    /// use dpkit_description::ColumnKind;
    /// assert_eq!(ColumnKind::Integer.name(), "integer");
    /// assert_eq!(ColumnKind::from_name("real"), Some(ColumnKind::Real));
    /// assert_eq!(ColumnKind::from_name("float"), None);
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ColumnKind::Integer => "integer",
            ColumnKind::Real => "real",
            ColumnKind::Text => "text",
        }
    }

    /// The kind a description's `type = "…"` names, if any.
    pub fn from_name(name: &str) -> Option<ColumnKind> {
        ColumnKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDescription {
    table: RawTable,
    privacy_unit: RawPrivacyUnit,
    budget: RawBudget,
    #[serde(default)]
    columns: BTreeMap<String, RawColumn>,
    #[serde(default)]
    public: BTreeMap<String, RawPublic>,
    #[serde(default)]
    private: BTreeMap<String, RawPrivate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrivate {
    file: Option<String>,
    format: Option<String>,
    source_table: Option<String>,
    person: String,
    max_rows_per_person: u64,
    #[serde(default)]
    columns: BTreeMap<String, RawColumn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPublic {
    file: String,
    format: Option<String>,
    #[serde(default)]
    columns: BTreeMap<String, RawColumn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: String,
    file: Option<String>,
    format: Option<String>,
    sqlite: Option<String>,
    postgres: Option<String>,
    spark: Option<String>,
    source_table: Option<String>,
    people: Option<u64>,
    missing: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrivacyUnit {
    kind: String,
    column: Option<String>,
    max_rows_per_person: Option<u64>,
    max_groups_per_person: Option<u64>,
    max_rows_per_group: Option<u64>,
    neighbours: Option<String>,
    keep: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    epsilon: f64,
    #[serde(default)]
    delta: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawColumn {
    #[serde(rename = "type")]
    kind: String,
    bounds: Option<Vec<f64>>,
    domain: Option<Vec<String>>,
    max_length: Option<i64>,
    bins: Option<Vec<f64>>,
}

/// A description that is missing, malformed or inconsistent. Its message
/// names only what the description says, never a value of the data.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DescriptionError(pub String);

/// `Result` with [`DescriptionError`].
pub type Result<T> = std::result::Result<T, DescriptionError>;

fn invalid(reason: String) -> DescriptionError {
    DescriptionError(reason)
}

impl Description {
    /// Reads and checks a description file; its `file` is relative to it.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_toml(&text, base)
            .map_err(|e| invalid(format!("{}: {}", path.display(), strip(e))))
    }

    /// Parses and checks a description; `base` is the folder `file` is relative to.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self> {
        let raw: RawDescription =
            toml::from_str(text).map_err(|e| invalid(toml_error(text, &e)))?;
        if !is_identifier(&raw.table.name) {
            return Err(invalid(format!(
                "table name '{}' must be letters, digits and underscores",
                raw.table.name
            )));
        }
        let format = file_format(raw.table.file.as_deref(), raw.table.format.as_deref())?;
        let (file, source) = source(&raw.table, base)?;
        let neighbouring = neighbouring(raw.privacy_unit.neighbours.as_deref())?;
        let keep = kept_rows(raw.privacy_unit.keep.as_deref())?;
        let bounds = (
            raw.privacy_unit.max_groups_per_person,
            raw.privacy_unit.max_rows_per_group,
        );
        let privacy_unit = privacy_unit(raw.privacy_unit)?;
        let beside = (raw.table.name.as_str(), file.as_path(), &source);
        let private = private_tables(raw.private, beside, &privacy_unit, base)?;
        let most_rows = private
            .values()
            .map(|t| t.max_rows_per_person)
            .fold(privacy_unit.rows_per_person(), u64::max);
        check_group_bounds(bounds, &privacy_unit, most_rows)?;
        check_people(raw.table.people, most_rows)?;
        check_budget(&raw.budget)?;
        let missing = raw.table.missing.unwrap_or_else(|| vec![String::new()]);
        check_missing(&missing)?;
        let columns = columns_facts(raw.columns)?;
        if let PrivacyUnit::Id { column, .. } = &privacy_unit {
            check_person(columns.get(column), &format!("the id column '{column}'"))?;
        }
        let mut private_files: Vec<&Path> = private
            .values()
            .filter(|t| t.source == Source::File)
            .map(|t| t.file.as_path())
            .collect();
        private_files.push(&file);
        let names: Vec<&str> = private.keys().map(String::as_str).collect();
        let public = public_tables(raw.public, (&raw.table.name, &names), &private_files, base)?;
        Ok(Self {
            table: raw.table.name,
            file,
            format,
            source,
            public_rows: raw.table.people,
            privacy_unit,
            max_groups_per_person: bounds.0,
            max_rows_per_group: bounds.1,
            neighbouring,
            keep,
            budget_epsilon: raw.budget.epsilon,
            budget_delta: raw.budget.delta,
            columns,
            public,
            private,
            missing,
        })
    }

    /// What is public about `name`, if the description lists it.
    pub fn column(&self, name: &str) -> Option<&ColumnFacts> {
        self.columns.get(name)
    }

    /// The most characters a text value of column `name` keeps (listed or
    /// not: a column the description does not list is text).
    pub fn max_length(&self, name: &str) -> u32 {
        self.column(name)
            .map_or(DEFAULT_MAX_LENGTH, ColumnFacts::max_length)
    }

    /// Every data file the description reads: the table's (for a file
    /// source), each `[private]` table's, then each public table's.
    pub fn data_files(&self) -> Vec<&Path> {
        let own = (self.source == Source::File).then_some(self.file.as_path());
        let private = self.private.values();
        let private = private
            .filter(|t| t.source == Source::File)
            .map(|t| t.file.as_path());
        let public = self.public.values().map(|t| t.file.as_path());
        own.into_iter().chain(private).chain(public).collect()
    }

    /// The names of the private tables: the table's, then each `[private]`
    /// one's.
    pub fn private_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.table.as_str()).chain(self.private.keys().map(String::as_str))
    }

    /// What is public about the private table `name`: its person column,
    /// its cap and its columns' facts.
    pub fn private_table(&self, name: &str) -> Option<TableFacts<'_>> {
        if name == self.table {
            let person = match &self.privacy_unit {
                PrivacyUnit::Id { column, .. } => Some(column.as_str()),
                PrivacyUnit::Row => None,
            };
            return Some(TableFacts {
                person,
                rows_per_person: self.privacy_unit.rows_per_person(),
                columns: &self.columns,
            });
        }
        self.private.get(name).map(|table| TableFacts {
            person: Some(&table.person),
            rows_per_person: table.max_rows_per_person,
            columns: &table.columns,
        })
    }

    /// The description of the private table `name` read on its own, as the
    /// engine registers it (capped by its person column), for checking it
    /// against its file (`dpkit check`).
    ///
    /// ```
    /// use dpkit_description::{Description, PrivacyUnit};
    /// let text = r#"
    /// [table]
    /// name = "people"
    /// file = "people.csv"
    /// [privacy_unit]
    /// kind = "id"
    /// column = "id"
    /// max_rows_per_person = 1
    /// [budget]
    /// epsilon = 1.0
    /// [columns.id]
    /// type = "integer"
    /// [private.visits]
    /// file = "visits.csv"
    /// person = "person"
    /// max_rows_per_person = 12
    /// [private.visits.columns.person]
    /// type = "integer"
    /// "#;
    /// let description = Description::from_toml(text, std::path::Path::new(".")).unwrap();
    /// assert_eq!(description.private_names().collect::<Vec<_>>(), ["people", "visits"]);
    /// let visits = description.alone("visits").unwrap();
    /// assert_eq!(visits.file, std::path::Path::new("./visits.csv"));
    /// assert_eq!(
    ///     visits.privacy_unit,
    ///     PrivacyUnit::Id { column: "person".into(), max_rows: 12 }
    /// );
    /// ```
    pub fn alone(&self, name: &str) -> Option<Description> {
        if name == self.table {
            return Some(self.clone());
        }
        let table = self.private.get(name)?;
        Some(Description {
            table: name.to_string(),
            file: table.file.clone(),
            format: table.format,
            source: table.source.clone(),
            privacy_unit: PrivacyUnit::Id {
                column: table.person.clone(),
                max_rows: table.max_rows_per_person,
            },
            columns: table.columns.clone(),
            public: BTreeMap::new(),
            private: BTreeMap::new(),
            ..self.clone()
        })
    }
}

/// What is public about one private table (see [`Description::private_table`]).
#[derive(Debug, Clone, Copy)]
pub struct TableFacts<'a> {
    /// The column naming each row's person (`None` for the row unit).
    pub person: Option<&'a str>,
    /// How many rows per person enter any aggregate.
    pub rows_per_person: u64,
    /// What is public about each column.
    pub columns: &'a BTreeMap<String, ColumnFacts>,
}

impl TableFacts<'_> {
    /// The most characters a text value of column `name` keeps.
    pub fn max_length(&self, name: &str) -> u32 {
        self.columns
            .get(name)
            .map_or(DEFAULT_MAX_LENGTH, ColumnFacts::max_length)
    }
}

/// The table's source: exactly one of `file`, `sqlite`, `postgres` and `spark`.
fn source(table: &RawTable, base: &Path) -> Result<(PathBuf, Source)> {
    let given = [&table.file, &table.sqlite, &table.postgres, &table.spark];
    if given.iter().filter(|s| s.is_some()).count() != 1 {
        return Err(invalid(
            "[table] needs exactly one of file, sqlite, postgres and spark".into(),
        ));
    }
    if table.file.is_none() && table.format.is_some() {
        return Err(invalid(
            "format applies to a file: a database table has its own types".into(),
        ));
    }
    if table.file.is_some() && table.source_table.is_some() {
        return Err(invalid(
            "source_table names a database table: use it with sqlite, postgres or spark".into(),
        ));
    }
    let source_table = table.source_table.clone().unwrap_or(table.name.clone());
    check_source_table(&source_table)?;
    Ok(
        match (&table.file, &table.sqlite, &table.postgres, &table.spark) {
            (Some(file), ..) => (base.join(file), Source::File),
            (_, Some(file), ..) => (
                base.join(file),
                Source::Sqlite {
                    table: source_table,
                },
            ),
            (_, _, Some(connection), _) => (
                PathBuf::new(),
                Source::Postgres {
                    connection: connection.clone(),
                    table: source_table,
                },
            ),
            (.., address) => (
                PathBuf::new(),
                Source::Spark {
                    address: address.clone().unwrap_or_default(),
                    table: source_table,
                },
            ),
        },
    )
}

fn file_format(file: Option<&str>, format: Option<&str>) -> Result<FileFormat> {
    let file = file.unwrap_or_default();
    match format {
        Some("parquet") => Ok(FileFormat::Parquet),
        Some("csv") => Ok(FileFormat::Csv),
        None if file.ends_with(".parquet") => Ok(FileFormat::Parquet),
        None => Ok(FileFormat::Csv),
        Some(other) => Err(invalid(format!("format '{other}': use csv or parquet"))),
    }
}

/// A database table's name: letters, digits and underscores, with at most
/// one dot (`schema.table`).
fn check_source_table(name: &str) -> Result<()> {
    if !name.split('.').all(is_identifier) || name.split('.').count() > 2 {
        return Err(invalid(format!(
            "source_table '{name}' must be letters, digits and underscores (schema.table allowed)"
        )));
    }
    // dpkit's statements define tables of this prefix, which would hide
    // a database table of that name.
    if name
        .split('.')
        .any(|part| part.to_lowercase().starts_with("__dpkit"))
    {
        return Err(invalid(format!(
            "source_table '{name}' starts with dpkit's own prefix __dpkit"
        )));
    }
    Ok(())
}

impl Source {
    /// The database table this source reads (`None` for a file).
    pub fn database_table(&self) -> Option<&str> {
        match self {
            Source::File => None,
            Source::Sqlite { table }
            | Source::Postgres { table, .. }
            | Source::Spark { table, .. } => Some(table),
        }
    }

    /// The same database with `table` in place of this source's table (a
    /// file stays a file).
    fn with_table(&self, table: String) -> Source {
        match self {
            Source::File => Source::File,
            Source::Sqlite { .. } => Source::Sqlite { table },
            Source::Postgres { connection, .. } => Source::Postgres {
                connection: connection.clone(),
                table,
            },
            Source::Spark { address, .. } => Source::Spark {
                address: address.clone(),
                table,
            },
        }
    }
}

/// The public tables: each a file with a plain name of its own (beside a
/// table in a database too: dpkit reads it, and sends its rows with each
/// statement).
fn public_tables(
    raw: BTreeMap<String, RawPublic>,
    (table, private): (&str, &[&str]),
    private_files: &[&Path],
    base: &Path,
) -> Result<BTreeMap<String, PublicTable>> {
    let mut tables = BTreeMap::new();
    for (name, raw) in raw {
        let taken = name == table || private.contains(&name.as_str());
        check_table_name("public", &name, taken)?;
        let file = base.join(&raw.file);
        if private_files
            .iter()
            .any(|private| same_file(&file, private))
        {
            return Err(invalid(format!(
                "public table '{name}' reads a private table's file: a public table's rows \
                 are released without noise"
            )));
        }
        let format = file_format(Some(&raw.file), raw.format.as_deref())?;
        let columns = columns_facts(raw.columns)?;
        tables.insert(
            name,
            PublicTable {
                file,
                format,
                columns,
            },
        );
    }
    Ok(tables)
}

/// The further private tables, naming their person in a listed column,
/// under the id privacy unit: each a file of its own beside a table read
/// from a file, or a table of the same database (`source_table`, by default
/// its name) beside a table in a database.
fn private_tables(
    raw: BTreeMap<String, RawPrivate>,
    (table, table_file, table_source): (&str, &Path, &Source),
    unit: &PrivacyUnit,
    base: &Path,
) -> Result<BTreeMap<String, PrivateTable>> {
    if !raw.is_empty() && *unit == PrivacyUnit::Row {
        return Err(invalid(
            "[private] tables need kind = \"id\": the person each of their rows names must be \
             a value of the table's id column"
                .into(),
        ));
    }
    let mut tables: BTreeMap<String, PrivateTable> = BTreeMap::new();
    for (name, raw) in raw {
        check_table_name("private", &name, name == table)?;
        let (file, format, source) = private_source(&name, &raw, (table_file, table_source), base)?;
        if !(1..=MAX_ROWS_PER_PERSON).contains(&raw.max_rows_per_person) {
            return Err(invalid(format!(
                "private table '{name}': max_rows_per_person must lie in 1..={MAX_ROWS_PER_PERSON}"
            )));
        }
        let columns = columns_facts(raw.columns)?;
        let what = format!("private table '{name}': its person column '{}'", raw.person);
        check_person(columns.get(&raw.person), &what)?;
        let reads_same = |(other_file, other): (&Path, &Source)| match &source {
            Source::File => same_file(&file, other_file),
            database => database.database_table() == other.database_table(),
        };
        let others = tables.values().map(|t| (t.file.as_path(), &t.source));
        if others.chain([(table_file, table_source)]).any(reads_same) {
            return Err(invalid(format!(
                "private table '{name}' reads another table's rows"
            )));
        }
        let person = raw.person;
        let max_rows_per_person = raw.max_rows_per_person;
        let table = PrivateTable {
            file,
            format,
            source,
            person,
            max_rows_per_person,
            columns,
        };
        tables.insert(name, table);
    }
    Ok(tables)
}

/// Where a further private table's rows are: its own `file` beside a file,
/// or `source_table` (by default `name`) in the table's database.
fn private_source(
    name: &str,
    raw: &RawPrivate,
    (table_file, table_source): (&Path, &Source),
    base: &Path,
) -> Result<(PathBuf, FileFormat, Source)> {
    match (table_source, &raw.file) {
        (Source::File, Some(file)) if raw.source_table.is_none() => Ok((
            base.join(file),
            file_format(Some(file), raw.format.as_deref())?,
            Source::File,
        )),
        (Source::File, _) => Err(invalid(format!(
            "private table '{name}' needs a file (and no source_table), as the table is read \
             from a file"
        ))),
        (database, None) if raw.format.is_none() => {
            let source_table = raw.source_table.clone().unwrap_or(name.to_string());
            check_source_table(&source_table)?;
            let file = table_file.to_path_buf();
            Ok((file, FileFormat::Csv, database.with_table(source_table)))
        }
        (_, _) => Err(invalid(format!(
            "private table '{name}' is a table of the same database as the table: name it with \
             source_table (by default its name), not file or format"
        ))),
    }
}

/// A column naming the person is listed, and is integer or text: real
/// numbers that differ can compare or group alike (`0` and `-0`, NaNs), so
/// two people could be one.
fn check_person(facts: Option<&ColumnFacts>, what: &str) -> Result<()> {
    match facts.map(|f| f.kind) {
        None => Err(invalid(format!("{what} must be listed under its columns"))),
        Some(ColumnKind::Real) => Err(invalid(format!("{what} must be integer or text"))),
        Some(_) => Ok(()),
    }
}

/// A further table's name: lowercase letters, digits and underscores (SQL
/// reads an unquoted name as lowercase), not dpkit's own, not `taken`.
fn check_table_name(kind: &str, name: &str, taken: bool) -> Result<()> {
    let lowercase = name.chars().all(|c| !c.is_ascii_uppercase());
    if !is_identifier(name) || !lowercase || name.starts_with("__dpkit") || taken {
        return Err(invalid(format!(
            "{kind} table '{name}' needs a name of lowercase letters, digits and \
             underscores, other than the other tables'"
        )));
    }
    Ok(())
}

/// Each listed column's facts.
fn columns_facts(raw: BTreeMap<String, RawColumn>) -> Result<BTreeMap<String, ColumnFacts>> {
    raw.into_iter()
        .map(|(name, column)| Ok((name.clone(), column_facts(&name, column)?)))
        .collect()
}

/// Whether two paths name one file (the same path, or one file through
/// symbolic or hard links, when both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    // One file under two names (a hard link) has one device and inode.
    #[cfg(unix)]
    if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        use std::os::unix::fs::MetadataExt;
        return (a.dev(), a.ino()) == (b.dev(), b.ino());
    }
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn kept_rows(raw: Option<&str>) -> Result<KeptRows> {
    match raw {
        Some("ordered") => Ok(KeptRows::Ordered),
        None | Some("random") => Ok(KeptRows::Random),
        Some(other) => Err(invalid(format!(
            "privacy_unit keep '{other}': use ordered or random"
        ))),
    }
}

fn neighbouring(raw: Option<&str>) -> Result<Neighbouring> {
    match raw {
        None | Some("add-remove") => Ok(Neighbouring::AddRemove),
        Some("replace") => Ok(Neighbouring::Replace),
        Some(other) => Err(invalid(format!(
            "privacy_unit neighbours '{other}': use add-remove or replace"
        ))),
    }
}

fn privacy_unit(raw: RawPrivacyUnit) -> Result<PrivacyUnit> {
    match (raw.kind.as_str(), raw.column, raw.max_rows_per_person) {
        ("row", None, None) => Ok(PrivacyUnit::Row),
        ("id", Some(column), Some(max_rows)) if (1..=MAX_ROWS_PER_PERSON).contains(&max_rows) => {
            Ok(PrivacyUnit::Id { column, max_rows })
        }
        ("id", Some(_), Some(_)) => Err(invalid(format!(
            "privacy_unit max_rows_per_person must lie in 1..={MAX_ROWS_PER_PERSON}"
        ))),
        ("id", _, _) => Err(invalid(
            "privacy_unit kind = \"id\" needs column and max_rows_per_person ≥ 1".into(),
        )),
        ("row", _, _) => Err(invalid(
            "privacy_unit kind = \"row\" takes no other keys".into(),
        )),
        (other, _, _) => Err(invalid(format!(
            "privacy_unit kind '{other}': use row or id"
        ))),
    }
}

/// Bounds per group are for the id unit, each from 1 to the rows per person.
fn check_group_bounds(
    bounds: (Option<u64>, Option<u64>),
    unit: &PrivacyUnit,
    most_rows: u64,
) -> Result<()> {
    if bounds == (None, None) {
        return Ok(());
    }
    if *unit == PrivacyUnit::Row {
        return Err(invalid(
            "max_groups_per_person and max_rows_per_group need kind = \"id\" (one row per \
             person is already one group and one row)"
                .into(),
        ));
    }
    let within = |bound: Option<u64>| bound.is_none_or(|b| (1..=most_rows).contains(&b));
    if !(within(bounds.0) && within(bounds.1)) {
        return Err(invalid(
            "max_groups_per_person and max_rows_per_group must lie in 1..=max_rows_per_person \
             (the largest of the tables')"
                .into(),
        ));
    }
    Ok(())
}

/// A public number of people must be at least one, and the rows they can
/// hold (`people × rows per person`) at most [`MAX_PUBLIC_ROWS`].
fn check_people(people: Option<u64>, rows_per_person: u64) -> Result<()> {
    let Some(people) = people else {
        return Ok(());
    };
    if people == 0 {
        return Err(invalid("table people must be ≥ 1".into()));
    }
    let rows = people.checked_mul(rows_per_person);
    if rows.is_none_or(|rows| rows > MAX_PUBLIC_ROWS) {
        return Err(invalid(format!(
            "table people × max_rows_per_person must be at most 2^53 = {MAX_PUBLIC_ROWS}"
        )));
    }
    Ok(())
}

/// Missing-value markers: 1 to 16, each at most 64 characters, on one line.
fn check_missing(missing: &[String]) -> Result<()> {
    let fits = (1..=16).contains(&missing.len())
        && missing
            .iter()
            .all(|m| m.chars().count() <= 64 && !m.contains(['\n', '\r', '"', ',']));
    if fits {
        Ok(())
    } else {
        Err(invalid(
            "table missing lists 1 to 16 markers of at most 64 characters, without a quote, \
             a comma or a line break (\"\" is the empty field)"
                .into(),
        ))
    }
}

fn check_budget(budget: &RawBudget) -> Result<()> {
    if !(budget.epsilon.is_finite() && budget.epsilon > 0.0 && budget.epsilon <= MAX_EPSILON) {
        return Err(invalid(format!(
            "budget epsilon must be finite, > 0 and at most {MAX_EPSILON}"
        )));
    }
    if !(0.0..1.0).contains(&budget.delta) {
        return Err(invalid("budget delta must lie in [0, 1)".into()));
    }
    Ok(())
}

fn column_facts(name: &str, column: RawColumn) -> Result<ColumnFacts> {
    let Some(kind) = ColumnKind::from_name(&column.kind) else {
        return Err(invalid(format!(
            "column '{name}': type '{}': use integer, real or text",
            column.kind
        )));
    };
    let bounds = column
        .bounds
        .map(|bounds| column_bounds(name, kind, &bounds))
        .transpose()?;
    if let Some(domain) = &column.domain {
        check_domain(name, domain)?;
    }
    let max_length = column
        .max_length
        .map(|length| max_length(name, kind, length))
        .transpose()?;
    if let Some(bins) = &column.bins {
        check_bins(name, kind, bounds, bins)?;
    }
    Ok(ColumnFacts {
        bounds,
        domain: column.domain,
        kind,
        max_length,
        bins: column.bins,
    })
}

/// Bins start at whole numbers, increasing, within the column's bounds
/// (above the lower one, which starts the first bin).
fn check_bins(
    name: &str,
    kind: ColumnKind,
    bounds: Option<(f64, f64)>,
    bins: &[f64],
) -> Result<()> {
    let Some((low, high)) = bounds.filter(|_| kind == ColumnKind::Integer) else {
        return Err(invalid(format!(
            "column '{name}': bins are for integer columns with bounds"
        )));
    };
    let whole = bins.iter().all(|b| b.is_finite() && b.fract() == 0.0);
    let increasing = bins.windows(2).all(|w| w[0] < w[1]);
    let within = bins.iter().all(|&b| b > low && b <= high);
    if !(whole && increasing && within && bins.len() < 4_096) {
        return Err(invalid(format!(
            "column '{name}': bins must be whole numbers where bins start after the first, \
             increasing, above the lower bound and at most the upper one (fewer than 4096)"
        )));
    }
    Ok(())
}

/// Bounds are exactly two finite numbers, low ≤ high, on a numeric column.
fn column_bounds(name: &str, kind: ColumnKind, bounds: &[f64]) -> Result<(f64, f64)> {
    match *bounds {
        [low, high] if low.is_finite() && high.is_finite() && low <= high => {
            if kind == ColumnKind::Text {
                return Err(invalid(format!(
                    "column '{name}': a text column has no bounds"
                )));
            }
            Ok((low, high))
        }
        _ => Err(invalid(format!(
            "column '{name}': bounds must be two finite numbers [low, high] with low ≤ high"
        ))),
    }
}

/// A text column's `max_length`: a whole number of characters within
/// [1, LONGEST_MAX_LENGTH].
fn max_length(name: &str, kind: ColumnKind, length: i64) -> Result<u32> {
    if kind != ColumnKind::Text {
        return Err(invalid(format!(
            "column '{name}': max_length is for text columns"
        )));
    }
    u32::try_from(length)
        .ok()
        .filter(|l| (1..=LONGEST_MAX_LENGTH).contains(l))
        .ok_or_else(|| {
            invalid(format!(
                "column '{name}': max_length must be a whole number of characters \
                 from 1 to {LONGEST_MAX_LENGTH}"
            ))
        })
}

/// A domain lists at least one value, each once (a repeated value would be
/// released twice).
fn check_domain(name: &str, domain: &[String]) -> Result<()> {
    if domain.is_empty() {
        return Err(invalid(format!("column '{name}': an empty domain")));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(repeated) = domain.iter().find(|value| !seen.insert(value.as_str())) {
        return Err(invalid(format!(
            "column '{name}': the domain lists '{repeated}' more than once"
        )));
    }
    Ok(())
}

/// A TOML error in one line, with the line it is on (the description is
/// the curator's text, not data): "duplicate key (line 12)".
fn toml_error(text: &str, error: &toml::de::Error) -> String {
    match error.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("{} (line {line})", error.message().trim_end())
        }
        None => error.message().to_string(),
    }
}

fn strip(error: DescriptionError) -> String {
    error.0
}

/// Whether `name` is a plain SQL identifier: letters, digits and `_`, not
/// starting with a digit.
pub fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_error_names_its_line() {
        let text =
            "[table]\nname = \"t\"\nfile = \"t.csv\"\n[columns.a]\ntype = \"text\"\n[columns.a]\n";
        let refused = Description::from_toml(text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("(line 6)"), "{refused}");
    }

    /// A valid description with `table`, `unit`, `budget` and `column` lines
    /// swapped in.
    fn describe(table: &str, unit: &str, budget: &str, column: &str) -> Result<Description> {
        let text = format!(
            "[table]\nname = \"t\"\nfile = \"t.csv\"\n{table}\n\
             [privacy_unit]\n{unit}\n[budget]\n{budget}\n\
             [columns.person]\ntype = \"text\"\n[columns.c]\n{column}\n"
        );
        Description::from_toml(&text, Path::new("."))
    }

    const ROW: &str = "kind = \"row\"";
    const BUDGET: &str = "epsilon = 1.0";

    fn column(column: &str) -> Result<Description> {
        describe("", ROW, BUDGET, column)
    }

    /// A refusal is one `Description` line.
    fn assert_refused(result: Result<Description>, case: &str) {
        match result {
            Err(DescriptionError(reason)) => assert!(!reason.contains('\n'), "{case}"),
            other => panic!("{case}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn rows_are_kept_at_random_unless_ordered_is_declared() {
        let t = "type = \"integer\"";
        let id =
            |keep: &str| format!("kind = \"id\"\ncolumn = \"c\"\nmax_rows_per_person = 3\n{keep}");
        let default = describe("", &id(""), BUDGET, t).unwrap();
        assert_eq!(default.keep, KeptRows::Random);
        assert_eq!(default.alone("t").unwrap().keep, KeptRows::Random);
        let ordered = describe("", &id("keep = \"ordered\""), BUDGET, t).unwrap();
        assert_eq!(ordered.keep, KeptRows::Ordered);
        assert_eq!(ordered.alone("t").unwrap().keep, KeptRows::Ordered);
        assert_refused(
            describe("", &id("keep = \"first\""), BUDGET, t),
            "unknown keep",
        );
    }

    #[test]
    fn neighbours_are_add_remove_unless_replace_is_declared() {
        let t = "type = \"integer\"";
        let plain = describe("", ROW, BUDGET, t).unwrap();
        assert_eq!(plain.neighbouring, Neighbouring::AddRemove);
        let replace = describe("", "kind = \"row\"\nneighbours = \"replace\"", BUDGET, t).unwrap();
        assert_eq!(replace.neighbouring, Neighbouring::Replace);
        assert_refused(
            describe("", "kind = \"row\"\nneighbours = \"swap\"", BUDGET, t),
            "unknown neighbours",
        );
    }

    #[test]
    fn a_domain_listing_a_value_twice_is_refused() {
        let result = column("type = \"text\"\ndomain = [\"Female\", \"Female\", \"Male\"]");
        assert_refused(result, "duplicate domain value");
        let facts =
            column("type = \"text\"\ndomain = [\"Female\", \"female\", \"Male \"]").unwrap();
        assert_eq!(facts.column("c").unwrap().domain.as_ref().unwrap().len(), 3);
    }

    #[test]
    fn bounds_must_be_exactly_two_ordered_finite_numbers() {
        for bounds in [
            "[17, 90, 100]",
            "[17]",
            "[]",
            "[90, 17]",
            "[0, inf]",
            "[nan, 1]",
        ] {
            let result = column(&format!("type = \"integer\"\nbounds = {bounds}"));
            assert_refused(result, bounds);
        }
        let facts = column("type = \"integer\"\nbounds = [17, 90.5]").unwrap();
        assert_eq!(facts.column("c").unwrap().bounds, Some((17.0, 90.5)));
    }

    #[test]
    fn people_must_be_at_least_one_and_their_rows_exact_as_doubles() {
        let id = |max_rows: u64| {
            format!("kind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = {max_rows}")
        };
        let integer = "type = \"integer\"";
        assert_refused(describe("people = 0", ROW, BUDGET, integer), "0 people");
        let too_many = format!("people = {}", MAX_PUBLIC_ROWS + 1);
        assert_refused(describe(&too_many, ROW, BUDGET, integer), "2^53 + 1 rows");
        let product = format!("people = {}", 1u64 << 40);
        assert_refused(
            describe(&product, &id(10_000), BUDGET, integer),
            "2^40 × 10^4",
        );
        let overflow = format!("people = {}", u64::MAX / 2);
        assert_refused(describe(&overflow, &id(3), BUDGET, integer), "u64 overflow");
        let most = format!("people = {MAX_PUBLIC_ROWS}");
        assert!(describe(&most, ROW, BUDGET, integer).is_ok());
        let product = format!("people = {}", MAX_PUBLIC_ROWS / 1024);
        assert!(describe(&product, &id(1024), BUDGET, integer).is_ok());
    }

    #[test]
    fn budgets_and_rows_per_person_beyond_what_is_counted_are_refused() {
        let integer = "type = \"integer\"";
        for epsilon in ["1000.001", "1e6", "9300"] {
            let budget = format!("epsilon = {epsilon}");
            assert_refused(describe("", ROW, &budget, integer), epsilon);
        }
        assert!(describe("", ROW, "epsilon = 1000", integer).is_ok());
        let id = |max_rows: u64| {
            format!("kind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = {max_rows}")
        };
        let too_many = id(MAX_ROWS_PER_PERSON + 1);
        assert_refused(describe("", &too_many, BUDGET, integer), "rows per person");
        assert!(describe("", &id(MAX_ROWS_PER_PERSON), BUDGET, integer).is_ok());
    }

    #[test]
    fn public_tables_are_files_with_names_of_their_own() {
        let integer = "type = \"integer\"";
        let public = "\n[public.regions]\nfile = \"r.csv\"\n\
                      [public.regions.columns.population]\ntype = \"integer\"\n";
        let described = describe("", ROW, BUDGET, &format!("{integer}{public}")).unwrap();
        let regions = &described.public["regions"];
        assert_eq!(regions.file, Path::new("./r.csv"));
        assert_eq!(regions.format, FileFormat::Csv);
        assert_eq!(regions.columns["population"].kind, ColumnKind::Integer);
        let named = |name: &str| format!("{integer}\n[public.{name}]\nfile = \"r.csv\"\n");
        assert_refused(
            describe("", ROW, BUDGET, &named("t")),
            "the private table's name",
        );
        assert_refused(
            describe("", ROW, BUDGET, &named("__dpkit_x")),
            "dpkit's own prefix",
        );
        let sqlite = describe("", ROW, BUDGET, &named("r"))
            .map(|_| ())
            .and_then(|()| {
                Description::from_toml(
                    &format!(
                        "[table]\nname = \"t\"\nsqlite = \"t.db\"\n[privacy_unit]\n{ROW}\n\
                         [budget]\n{BUDGET}\n[public.r]\nfile = \"r.csv\"\n"
                    ),
                    Path::new("."),
                )
            });
        // Beside a database too: dpkit reads it and sends its rows.
        assert!(sqlite.is_ok(), "a public table beside a database");
        assert_refused(describe("", ROW, BUDGET, &named("Regions")), "capitals");
        let private_file = format!("{integer}\n[public.r]\nfile = \"t.csv\"\n");
        assert_refused(describe("", ROW, BUDGET, &private_file), "the private file");
        let unknown = format!("{integer}\n[public.r]\nfile = \"r.csv\"\npeople = 3\n");
        assert!(describe("", ROW, BUDGET, &unknown).is_err(), "unknown key");
    }

    #[test]
    fn bounds_per_group_need_the_id_unit_and_lie_within_its_rows() {
        let integer = "type = \"integer\"";
        let id = |extra: &str| {
            format!("kind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 5\n{extra}")
        };
        let both = id("max_groups_per_person = 2\nmax_rows_per_group = 3");
        let described = describe("", &both, BUDGET, integer).unwrap();
        assert_eq!(
            (
                described.max_groups_per_person,
                described.max_rows_per_group
            ),
            (Some(2), Some(3))
        );
        for bad in ["max_groups_per_person = 0", "max_rows_per_group = 6"] {
            assert_refused(describe("", &id(bad), BUDGET, integer), bad);
        }
        let row = "kind = \"row\"\nmax_rows_per_group = 1";
        assert_refused(describe("", row, BUDGET, integer), "the row unit");
    }

    #[test]
    fn private_tables_name_their_person_under_the_id_unit() {
        let id = "kind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 1\n\
                  max_groups_per_person = 5";
        let visits = |extra: &str| {
            format!(
                "type = \"integer\"\n[private.visits]\nfile = \"v.csv\"\n\
                 person = \"who\"\nmax_rows_per_person = 20\n{extra}"
            )
        };
        let listed = "[private.visits.columns.who]\ntype = \"text\"\n";
        let described = describe("", id, BUDGET, &visits(listed)).unwrap();
        let table = &described.private["visits"];
        assert_eq!(
            (table.person.as_str(), table.max_rows_per_person),
            ("who", 20)
        );
        assert_eq!(
            described.private_names().collect::<Vec<_>>(),
            ["t", "visits"]
        );
        let facts = described.private_table("visits").unwrap();
        assert_eq!((facts.person, facts.rows_per_person), (Some("who"), 20));
        // Bounds per group may reach the largest table's cap.
        assert_eq!(described.max_groups_per_person, Some(5));
        assert_eq!(described.data_files().len(), 2);
        for (case, result) in [
            ("row unit", describe("", ROW, BUDGET, &visits(listed))),
            ("person not listed", describe("", id, BUDGET, &visits(""))),
            (
                "a real person",
                describe("", id, BUDGET, &visits(&listed.replace("text", "real"))),
            ),
            (
                "a real id",
                describe(
                    "",
                    &id.replace("\"person\"", "\"c\""),
                    BUDGET,
                    "type = \"real\"",
                ),
            ),
            (
                "no cap",
                describe("", id, BUDGET, &visits(listed).replace("= 20", "= 0")),
            ),
            (
                "the table's file",
                describe("", id, BUDGET, &visits(listed).replace("v.csv", "t.csv")),
            ),
            (
                "the table's name",
                describe("", id, BUDGET, &visits(listed).replace("visits", "t")),
            ),
            (
                "capitals",
                describe("", id, BUDGET, &visits(listed).replace("visits", "Visits")),
            ),
            (
                "a database",
                Description::from_toml(
                    &format!(
                        "[table]\nname = \"t\"\nsqlite = \"t.db\"\n[privacy_unit]\n{id}\n\
                         [budget]\n{BUDGET}\n[columns.person]\ntype = \"text\"\n\
                         [columns.c]\n{}",
                        visits(listed)
                    ),
                    Path::new("."),
                ),
            ),
        ] {
            assert_refused(result, case);
        }
        // A public table may not read a further private table's file.
        let public = format!("{}[public.p]\nfile = \"v.csv\"\n", visits(listed));
        assert_refused(describe("", id, BUDGET, &public), "public reads private");
    }

    #[test]
    fn private_tables_beside_a_database_table_are_tables_of_that_database() {
        let in_sqlite = |private: &str| {
            Description::from_toml(
                &format!(
                    "[table]\nname = \"t\"\nsqlite = \"t.db\"\n[privacy_unit]\nkind = \"id\"\n\
                     column = \"person\"\nmax_rows_per_person = 1\n[budget]\n{BUDGET}\n\
                     [columns.person]\ntype = \"text\"\n[private.visits]\nperson = \"who\"\n\
                     max_rows_per_person = 20\n{private}\n\
                     [private.visits.columns.who]\ntype = \"text\"\n"
                ),
                Path::new("."),
            )
        };
        let described = in_sqlite("").unwrap();
        let visits = &described.private["visits"];
        let table = |name: &str| Source::Sqlite { table: name.into() };
        assert_eq!(visits.source, table("visits"));
        assert_eq!(visits.file, described.file);
        assert!(described.data_files().is_empty());
        let alone = described.alone("visits").unwrap();
        assert_eq!(alone.source, table("visits"));
        let named = in_sqlite("source_table = \"main.all_visits\"").unwrap();
        assert_eq!(named.private["visits"].source, table("main.all_visits"));
        for (case, private) in [
            ("a file", "file = \"v.csv\""),
            ("a format", "format = \"csv\""),
            ("the table's rows", "source_table = \"t\""),
            ("not a name", "source_table = \"a b\""),
            ("dpkit's prefix", "source_table = \"__DPKIT_raw_t\""),
        ] {
            assert_refused(in_sqlite(private), case);
        }
        // Beside a file, a further private table is a file.
        let id = "kind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = 1";
        let private = "type = \"integer\"\n[private.visits]\nperson = \"who\"\n\
                       max_rows_per_person = 2\n[private.visits.columns.who]\ntype = \"text\"\n";
        assert_refused(describe("", id, BUDGET, private), "no file");
        let both = private.replace(
            "person = ",
            "file = \"v.csv\"\nsource_table = \"v\"\nperson = ",
        );
        assert_refused(
            describe("", id, BUDGET, &both),
            "a source_table beside a file",
        );
    }

    #[test]
    fn a_hard_link_to_a_private_file_is_the_private_file() {
        let folder = std::env::temp_dir().join(format!("dpkit-hard-link-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("t.csv"), "person,c\n").unwrap();
        let _ = std::fs::remove_file(folder.join("link.csv"));
        std::fs::hard_link(folder.join("t.csv"), folder.join("link.csv")).unwrap();
        let text = format!(
            "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\n{ROW}\n\
             [budget]\n{BUDGET}\n[public.p]\nfile = \"link.csv\"\n"
        );
        assert_refused(Description::from_toml(&text, &folder), "a hard link");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
