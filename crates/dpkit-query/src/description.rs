//! The data description: what the engine cannot guess and a person must
//! decide (the privacy unit, public bounds, public value domains).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{QueryError, Result};

/// A dataset's description, read from TOML.
///
/// ```
/// use dpkit_query::description::Description;
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
    /// The number of people, when it is public (a census total, say):
    /// released counts are then kept within `[0, public_rows]`.
    pub public_rows: Option<u64>,
    /// Who is protected.
    pub privacy_unit: PrivacyUnit,
    /// Each analyst's total budget.
    pub budget_epsilon: f64,
    /// Each analyst's total δ.
    pub budget_delta: f64,
    /// What is public about each column (columns not listed can be filtered
    /// on, but not summed or grouped by).
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDescription {
    table: RawTable,
    privacy_unit: RawPrivacyUnit,
    budget: RawBudget,
    #[serde(default)]
    columns: BTreeMap<String, RawColumn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: String,
    file: String,
    format: Option<String>,
    people: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrivacyUnit {
    kind: String,
    column: Option<String>,
    max_rows_per_person: Option<u64>,
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
    bounds: Option<[f64; 2]>,
    domain: Option<Vec<String>>,
}

fn invalid(reason: String) -> QueryError {
    QueryError::Description(reason)
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
            toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
        if !is_identifier(&raw.table.name) {
            return Err(invalid(format!(
                "table name '{}' must be letters, digits and underscores",
                raw.table.name
            )));
        }
        let file = base.join(&raw.table.file);
        let format = match raw.table.format.as_deref() {
            Some("parquet") => FileFormat::Parquet,
            Some("csv") => FileFormat::Csv,
            None if raw.table.file.ends_with(".parquet") => FileFormat::Parquet,
            None => FileFormat::Csv,
            Some(other) => return Err(invalid(format!("format '{other}': use csv or parquet"))),
        };
        let privacy_unit = match (
            raw.privacy_unit.kind.as_str(),
            raw.privacy_unit.column,
            raw.privacy_unit.max_rows_per_person,
        ) {
            ("row", None, None) => PrivacyUnit::Row,
            ("id", Some(column), Some(max_rows)) if max_rows >= 1 => {
                PrivacyUnit::Id { column, max_rows }
            }
            ("id", _, _) => {
                return Err(invalid(
                    "privacy_unit kind = \"id\" needs column and max_rows_per_person ≥ 1".into(),
                ));
            }
            ("row", _, _) => {
                return Err(invalid(
                    "privacy_unit kind = \"row\" takes no other keys".into(),
                ));
            }
            (other, _, _) => {
                return Err(invalid(format!(
                    "privacy_unit kind '{other}': use row or id"
                )));
            }
        };
        let budget = &raw.budget;
        if !(budget.epsilon.is_finite() && budget.epsilon > 0.0) {
            return Err(invalid("budget epsilon must be finite and > 0".into()));
        }
        if !(0.0..1.0).contains(&budget.delta) {
            return Err(invalid("budget delta must lie in [0, 1)".into()));
        }
        let mut columns = BTreeMap::new();
        for (name, column) in raw.columns {
            let kind = match column.kind.as_str() {
                "integer" => ColumnKind::Integer,
                "real" => ColumnKind::Real,
                "text" => ColumnKind::Text,
                other => {
                    return Err(invalid(format!(
                        "column '{name}': type '{other}': use integer, real or text"
                    )));
                }
            };
            let bounds = match column.bounds {
                None => None,
                Some([low, high]) if low.is_finite() && high.is_finite() && low <= high => {
                    if kind == ColumnKind::Text {
                        return Err(invalid(format!(
                            "column '{name}': a text column has no bounds"
                        )));
                    }
                    Some((low, high))
                }
                Some(_) => {
                    return Err(invalid(format!(
                        "column '{name}': bounds must be finite with low ≤ high"
                    )));
                }
            };
            if let Some(domain) = &column.domain
                && domain.is_empty()
            {
                return Err(invalid(format!("column '{name}': an empty domain")));
            }
            columns.insert(
                name,
                ColumnFacts {
                    bounds,
                    domain: column.domain,
                    kind,
                },
            );
        }
        if let PrivacyUnit::Id { column, .. } = &privacy_unit
            && !columns.contains_key(column)
        {
            return Err(invalid(format!(
                "the id column '{column}' must be listed under [columns]"
            )));
        }
        Ok(Self {
            table: raw.table.name,
            file,
            format,
            public_rows: raw.table.people,
            privacy_unit,
            budget_epsilon: budget.epsilon,
            budget_delta: budget.delta,
            columns,
        })
    }

    /// What is public about `name`, if the description lists it.
    pub fn column(&self, name: &str) -> Option<&ColumnFacts> {
        self.columns.get(name)
    }
}

fn strip(error: QueryError) -> String {
    match error {
        QueryError::Description(reason) => reason,
        other => other.to_string(),
    }
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// A draft description for a CSV file, from its header row and the types of
/// the values in its first rows. Bounds and domains are left as comments for
/// a person to fill from public knowledge: they are never taken from the data.
pub fn draft_from_csv(csv_path: &Path, table: &str) -> Result<String> {
    let text = std::fs::read_to_string(csv_path)
        .map_err(|e| QueryError::Data(format!("cannot read {}: {e}", csv_path.display())))?;
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| QueryError::Data(format!("{} is empty", csv_path.display())))?;
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let mut kinds = vec![ColumnKind::Integer; names.len()];
    for line in lines.take(1000).filter(|l| !l.trim().is_empty()) {
        for (kind, field) in kinds.iter_mut().zip(line.split(',').map(str::trim)) {
            *kind = match *kind {
                ColumnKind::Integer if field.parse::<i64>().is_ok() => ColumnKind::Integer,
                ColumnKind::Integer | ColumnKind::Real if field.parse::<f64>().is_ok() => {
                    ColumnKind::Real
                }
                _ => ColumnKind::Text,
            };
        }
    }
    let file_name = csv_path.file_name().map_or_else(
        || csv_path.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    let mut draft = format!(
        "# Drafted by `dpkit describe` from the header of {file_name}.\n\
         # Fill in what is PUBLIC knowledge: bounds and domains must not come from the data.\n\n\
         [table]\nname = \"{table}\"\nfile = \"{file_name}\"\n\n\
         # One row per person. If a person can have several rows, use instead:\n\
         # kind = \"id\", column = \"person_id\", max_rows_per_person = 5\n\
         [privacy_unit]\nkind = \"row\"\n\n\
         # Each analyst's total privacy budget.\n[budget]\nepsilon = 1.0\ndelta = 1e-6\n"
    );
    for (name, kind) in names.iter().zip(&kinds) {
        let bare = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let key = if bare {
            name.to_string()
        } else {
            format!("\"{}\"", name.replace('"', "\\\""))
        };
        let (type_name, hint) = match kind {
            ColumnKind::Integer => (
                "integer",
                "# bounds = [low, high]   # public bounds, needed to SUM, AVG or bin it",
            ),
            ColumnKind::Real => (
                "real",
                "# bounds = [low, high]   # public bounds, needed to SUM or AVG it",
            ),
            ColumnKind::Text => (
                "text",
                "# domain = [\"…\", \"…\"]  # the public list of values, to GROUP BY it without thresholding",
            ),
        };
        draft.push_str(&format!(
            "\n[columns.{key}]\ntype = \"{type_name}\"\n{hint}\n"
        ));
    }
    Ok(draft)
}
