//! `dpkit describe`: a draft description of a CSV file, for a person to
//! complete. Only the header and the values' types come from the file;
//! bounds and domains are left as comments, never taken from the data.

use std::path::Path;

use crate::error::{QueryError, Result};
use dpkit_description::ColumnKind;

mod several;
pub use several::draft_from_csvs;

/// A draft description for a CSV file, from its header row and the types of
/// the values in its first rows. Bounds and domains are left as comments for
/// a person to fill from public knowledge: they are never taken from the data.
///
/// The file is read as the engine reads it (quoted fields whole, an empty
/// field a missing value), and a column is drafted `integer` or `real` only
/// if every value present in the first 1,000 rows converts to that type as
/// the engine converts it; otherwise `text`, which reads every value.
pub fn draft_from_csv(csv_path: &Path, table: &str) -> Result<String> {
    let names = header(csv_path)?;
    let kinds = drafted_kinds(csv_path, &names)?;
    let missing = missing_line(&names, &kinds);
    let file_name = csv_path.file_name().map_or_else(
        || csv_path.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    let mut draft = format!(
        "# Drafted by `dpkit describe` from the header of {file_name}.\n\
         # Fill in what is PUBLIC knowledge: bounds and domains must not come from the data.\n\
         # Then `dpkit check --description <this file>` reads the data against it.\n\n\
         [table]\nname = \"{table}\"\nfile = \"{file_name}\"\n{missing}\n\
         # One row per person. If a person can have several rows, use instead:\n\
         # kind = \"id\", column = \"person_id\", max_rows_per_person = 5\n\
         [privacy_unit]\nkind = \"row\"\n\n\
         # Each analyst's total privacy budget.\n[budget]\nepsilon = 1.0\ndelta = 1e-6\n"
    );
    draft.push_str(&column_blocks("columns", &names, &kinds));
    Ok(draft)
}

/// The `[PREFIX.NAME]` block of each column: its drafted type and the
/// facts left for a person to fill in.
fn column_blocks(prefix: &str, names: &[String], kinds: &[Drafted]) -> String {
    let mut draft = String::new();
    for (name, drafted) in names.iter().zip(kinds) {
        let key = toml_key(name);
        let type_name = drafted.kind.name();
        let hint = match drafted.kind {
            ColumnKind::Integer => {
                "# bounds = [low, high]   # public bounds, needed to SUM, AVG or bin it"
            }
            ColumnKind::Real => "# bounds = [low, high]   # public bounds, needed to SUM or AVG it",
            ColumnKind::Text => {
                "# domain = [\"…\", \"…\"]  # the public list of values, to GROUP BY it without thresholding\n\
                 # max_length = 1024        # characters a value keeps (longer ones are cut); by default 1024,\n\
                 #                          # or one more than the longest domain value"
            }
        };
        draft.push_str(&format!(
            "\n[{prefix}.{key}]\ntype = \"{type_name}\"\n{hint}\n"
        ));
        if drafted.kind != ColumnKind::Text && !drafted.markers.is_empty() {
            draft.push_str(&format!(
                "# {} marks a missing value here: read as NULL, as is any value that is not a number\n",
                drafted.markers.join(", ")
            ));
        }
    }
    draft
}

/// The `missing` line of the draft: the empty field and every common marker
/// seen in the first rows, with the columns it was seen in, for the
/// curator to confirm (a marker may be a real value: Adult's `?`).
fn missing_line(names: &[String], kinds: &[Drafted]) -> String {
    let mut seen: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, drafted) in names.iter().zip(kinds) {
        for marker in &drafted.markers {
            match seen.iter_mut().find(|(m, _)| m == marker) {
                Some((_, columns)) => columns.push(name),
                None => seen.push((marker, vec![name])),
            }
        }
    }
    if seen.is_empty() {
        return String::new();
    }
    let found: Vec<String> = seen
        .iter()
        .map(|(marker, columns)| format!("{marker} in {}", columns.join(", ")))
        .collect();
    let markers: Vec<String> = std::iter::once("\"\"".to_string())
        .chain(seen.iter().map(|(m, _)| format!("{m:?}")))
        .collect();
    format!(
        "# Missing values, read as NULL in every column whatever its type. Seen in the\n\
         # first rows: {}. Remove a marker that is a real value.\nmissing = [{}]\n",
        found.join("; "),
        markers.join(", ")
    )
}

/// The file's column names, each named once: a draft with a column twice
/// is not a description (TOML refuses the second key). The message names
/// none of them: a file without a header has a row of data there.
fn header(csv_path: &Path) -> Result<Vec<String>> {
    let names = crate::private_table::csv_header(csv_path)?;
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    if sorted.windows(2).any(|w| w[0] == w[1]) || names.iter().any(String::is_empty) {
        return Err(QueryError::Unreadable(format!(
            "{}: the header row has an empty or repeated column name; name each column once",
            csv_path.display()
        )));
    }
    Ok(names)
}

/// Rows of the file `dpkit describe` reads to draft each column's type.
const DRAFTED_ROWS: usize = 1000;

/// Each column's type for the draft: the narrowest of integer, real and
/// text that every value present in the first [`DRAFTED_ROWS`] rows
/// converts to through the engine's own conversion (`TRY_CAST` from text),
/// and text for a column with no value there ([`drafted_kind`]).
fn drafted_kinds(csv_path: &Path, names: &[String]) -> Result<Vec<Drafted>> {
    Ok(match first_rows(csv_path, names)? {
        Some(batch) => batch.columns().iter().map(drafted_kind).collect(),
        None => names.iter().map(|_| Drafted::text()).collect(),
    })
}

/// The file's first [`DRAFTED_ROWS`] rows, every column as text (`None`
/// when it has none).
fn first_rows(
    csv_path: &Path,
    names: &[String],
) -> Result<Option<datafusion::arrow::record_batch::RecordBatch>> {
    use datafusion::arrow::csv::ReaderBuilder;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let unreadable = || {
        QueryError::Unreadable(format!(
            "{}: its first {DRAFTED_ROWS} rows are not CSV with the header's number of fields",
            csv_path.display()
        ))
    };
    let fields: Vec<Field> = names
        .iter()
        .map(|n| Field::new(n, DataType::Utf8, true))
        .collect();
    let file = std::fs::File::open(csv_path)
        .map_err(|e| QueryError::Unreadable(format!("cannot read {}: {e}", csv_path.display())))?;
    let mut reader = ReaderBuilder::new(std::sync::Arc::new(Schema::new(fields)))
        .with_header(true)
        .with_batch_size(DRAFTED_ROWS)
        .build(file)
        .map_err(|_| unreadable())?;
    reader.next().transpose().map_err(|_| unreadable())
}

/// How data files commonly write a missing value (R's `NA`, Adult's `?`,
/// and others): public conventions, which a column of numbers may hold
/// and still be drafted as numbers (the engine reads them as NULL).
pub(crate) const MISSING_MARKERS: [&str; 8] =
    ["NA", "N/A", "n/a", "null", "NULL", "None", "?", "-"];

/// A column's drafted type, and the missing-value markers found in it.
#[derive(Clone)]
struct Drafted {
    kind: ColumnKind,
    markers: Vec<&'static str>,
}

impl Drafted {
    /// A text column without a marker (a file without rows).
    fn text() -> Self {
        Self {
            kind: ColumnKind::Text,
            markers: Vec::new(),
        }
    }
}

/// A table's name for a file: its stem, with every character but ASCII
/// letters and digits as `_`.
pub fn table_name(path: &Path) -> String {
    path.file_stem().map_or("data".into(), |s| {
        s.to_string_lossy()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    })
}

/// A column name as a TOML key: bare when it can be, else quoted.
fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\\\""))
    }
}

/// The narrowest type every value present in `column` (text) converts to,
/// an empty field or a [`MISSING_MARKERS`] value counting as missing.
fn drafted_kind(column: &datafusion::arrow::array::ArrayRef) -> Drafted {
    use datafusion::arrow::array::{Array, AsArray, StringArray};
    use datafusion::arrow::compute::{CastOptions, cast_with_options};
    use datafusion::arrow::datatypes::DataType;
    let mut markers = Vec::new();
    let present: StringArray = column
        .as_string::<i32>()
        .iter()
        .flatten()
        .filter(|v| match MISSING_MARKERS.iter().find(|m| **m == *v) {
            Some(marker) => {
                if !markers.contains(marker) {
                    markers.push(*marker);
                }
                false
            }
            None => !v.is_empty(),
        })
        .map(Some)
        .collect();
    // A value that does not convert becomes NULL, as under TRY_CAST.
    let converts = |to: &DataType| {
        cast_with_options(&present, to, &CastOptions::default()).is_ok_and(|c| c.null_count() == 0)
    };
    let kind = if present.is_empty() {
        ColumnKind::Text
    } else if converts(&DataType::Int64) {
        ColumnKind::Integer
    } else if converts(&DataType::Float64) {
        ColumnKind::Real
    } else {
        ColumnKind::Text
    };
    Drafted { kind, markers }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpkit_description::Description;

    /// A quoted field keeps its comma, and an empty field or `NA` is a
    /// missing value: `mass` (with an `NA` and a `3750.0`) is real, `year`
    /// (with a blank) an integer; a column with no value is text.
    /// A header naming a column twice gave a draft with one key twice,
    /// which TOML refuses, and `describe` said nothing (issue 67's walk).
    #[test]
    fn a_header_with_a_repeated_name_is_refused_without_naming_it() {
        let dir = std::env::temp_dir().join(format!("dpkit-draft-dup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dup.csv");
        std::fs::write(&path, "a,a,SECRET_COL\n1,2,3\n").unwrap();
        let refused = draft_from_csv(&path, "dup").unwrap_err().to_string();
        assert!(refused.contains("repeated column name"), "{refused}");
        assert!(
            !refused.contains("SECRET") && !refused.contains("'a'"),
            "{refused}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn drafts_read_quoted_fields_whole_and_blanks_as_missing_values() {
        let folder = std::env::temp_dir().join(format!("dpkit-draft-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let csv = folder.join("penguins.csv");
        std::fs::write(
            &csv,
            "species,\"note\",mass,year,empty\n\
             Adelie,\"a, b\",3750,2007,\n\
             Gentoo,c,NA,2008,\n\
             Chinstrap,\"d\",3750.0,,\n",
        )
        .unwrap();
        let draft = draft_from_csv(&csv, "penguins").unwrap();
        for (column, kind) in [
            ("species", "text"),
            ("note", "text"),
            ("mass", "real"),
            ("year", "integer"),
            ("empty", "text"),
        ] {
            let line = format!("[columns.{column}]\ntype = \"{kind}\"");
            assert!(draft.contains(&line), "{line} in {draft}");
        }
        assert!(draft.contains("# NA marks a missing value here"), "{draft}");
        assert!(
            draft.contains("missing = [\"\", \"NA\"]") && draft.contains("NA in mass"),
            "{draft}"
        );
        let description = Description::from_toml(&draft, &folder).unwrap();
        assert_eq!(description.columns.len(), 5);
        assert_eq!(description.missing, ["", "NA"]);
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
