//! Columns of the bundled UCI Adult census files.

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};

/// The two Adult files, training then test (48,842 people together).
pub const ADULT_FILES: [&str; 2] = ["adult.data.csv", "adult.test.csv"];

/// The text of column `name` in every row of `path` (a CSV with a header row
/// and no quoted fields, as the Adult files are).
pub fn column(path: &Path, name: &str) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|source| LabError::Io {
        action: "cannot read",
        path: path.to_path_buf(),
        source,
    })?;
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| data_error(path, "the file is empty".into()))?;
    let index = header
        .split(',')
        .position(|field| field.trim() == name)
        .ok_or_else(|| data_error(path, format!("no column named '{name}'")))?;
    lines
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(row, line)| {
            line.split(',')
                .nth(index)
                .map(|field| field.trim().to_string())
                .ok_or_else(|| data_error(path, format!("row {} has too few fields", row + 2)))
        })
        .collect()
}

/// Column `name` of the files `files` in `directory`, parsed as integers.
pub fn integer_column(directory: &Path, files: &[&str], name: &str) -> Result<Vec<i64>> {
    let mut values = Vec::new();
    for file in files {
        let path = directory.join(file);
        for (row, text) in column(&path, name)?.iter().enumerate() {
            let value = text.parse::<i64>().map_err(|_| {
                data_error(
                    &path,
                    format!("row {}: column '{name}' is not an integer", row + 2),
                )
            })?;
            values.push(value);
        }
    }
    Ok(values)
}

/// Column `name` of the files `files` in `directory`, as text.
pub fn text_column(directory: &Path, files: &[&str], name: &str) -> Result<Vec<String>> {
    let mut values = Vec::new();
    for file in files {
        values.extend(column(&directory.join(file), name)?);
    }
    Ok(values)
}

fn data_error(path: &Path, reason: String) -> LabError {
    LabError::Data {
        path: PathBuf::from(path),
        reason,
    }
}
