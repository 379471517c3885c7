//! The output folder: figures, CSV files and the sections of `report.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dpkit_plot::{Figure, draw};

use crate::error::{LabError, Result};

/// What one experiment contributes to the report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// PNG file names (in the output folder) with their alt text.
    pub figures: Vec<(String, String)>,
    /// Markdown tables.
    pub tables: Vec<String>,
    /// What the figures and tables show, one paragraph each.
    pub paragraphs: Vec<String>,
    /// The CSV files holding the numbers behind the figures.
    pub csv_files: Vec<String>,
}

impl Section {
    /// The section as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut text = format!("## {}\n\n", self.title);
        for paragraph in &self.paragraphs {
            let _ = writeln!(text, "{paragraph}\n");
        }
        for (file, alt) in &self.figures {
            let _ = writeln!(text, "![{alt}]({file})\n");
        }
        for table in &self.tables {
            let _ = writeln!(text, "{table}");
        }
        if !self.csv_files.is_empty() {
            let files: Vec<String> = self
                .csv_files
                .iter()
                .map(|f| format!("[`{f}`]({f})"))
                .collect();
            let _ = writeln!(text, "Numbers: {}.\n", files.join(", "));
        }
        text
    }
}

/// The folder an experiment writes into.
#[derive(Debug, Clone)]
pub struct OutputDir {
    root: PathBuf,
}

impl OutputDir {
    /// Creates `root` (and its parents) if needed.
    pub fn create(root: &Path) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(|source| LabError::Io {
            action: "cannot create the output folder",
            path: root.to_path_buf(),
            source,
        })?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Draws `figure` as `name.png` and `name.svg`; returns the PNG's file name.
    pub fn figure(&self, name: &str, figure: &impl Figure) -> Result<String> {
        draw(figure, &self.root.join(name))?;
        Ok(format!("{name}.png"))
    }

    /// Writes `name.csv` with a header row; returns its file name.
    pub fn csv(&self, name: &str, header: &[&str], rows: &[Vec<String>]) -> Result<String> {
        let mut text = header.join(",");
        text.push('\n');
        for row in rows {
            text.push_str(&row.join(","));
            text.push('\n');
        }
        let file = format!("{name}.csv");
        self.write(&file, &text)?;
        Ok(file)
    }

    /// Writes a text file.
    pub fn write(&self, file: &str, text: &str) -> Result<()> {
        let path = self.root.join(file);
        std::fs::write(&path, text).map_err(|source| LabError::Io {
            action: "cannot write",
            path,
            source,
        })
    }
}

/// A Markdown table.
pub fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut text = format!("| {} |\n", header.join(" | "));
    let _ = writeln!(text, "|{}", "---|".repeat(header.len()));
    for row in rows {
        let _ = writeln!(text, "| {} |", row.join(" | "));
    }
    text
}

/// `value` with `digits` significant digits, without exponent notation in
/// the usual range.
pub fn significant(value: f64, digits: i32) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    if !(-4..=8).contains(&magnitude) {
        return format!("{:.*e}", (digits - 1).max(0) as usize, value);
    }
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits_read_naturally() {
        assert_eq!(significant(0.959_52, 3), "0.960");
        assert_eq!(significant(1234.5, 3), "1234");
        assert_eq!(significant(2.5e-7, 2), "2.5e-7");
    }

    #[test]
    fn tables_have_a_separator_row() {
        let table = markdown_table(&["a", "b"], &[vec!["1".into(), "2".into()]]);
        assert_eq!(table, "| a | b |\n|---|---|\n| 1 | 2 |\n");
    }
}
