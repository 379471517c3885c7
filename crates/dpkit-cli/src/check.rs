//! `dpkit check`: the curator reads the data file against its description
//! before publishing the description. It reads the data exactly and prints
//! counts and row numbers, never values; it charges nothing and is not for
//! analysts.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use dpkit_query::Description;
use dpkit_query::check::{CapCheck, ColumnCheck, DataCheck, Finding, Found, check};
use dpkit_query::description::ColumnKind;

use crate::write_stdout;

#[derive(Parser)]
pub struct CheckArgs {
    /// The data description (TOML) to check against its data file.
    #[arg(long, value_name = "FILE")]
    description: PathBuf,
}

/// Runs `dpkit check` on each private table: true (exit status 3) when the
/// data holds values the description does not expect.
pub fn run(args: &CheckArgs) -> Result<bool> {
    let description = Description::load(&args.description)?;
    let mut unexpected = false;
    // Each private table against its own file: the description's, then
    // each `[private]` one's.
    for name in description.private_names() {
        let Some(alone) = description.alone(name) else {
            continue;
        };
        let report = check(&alone)?;
        write_stdout(&report_text(&alone, &report))?;
        unexpected |= !report.is_clean();
    }
    Ok(unexpected)
}

/// The report: a header, a line per column, the cap's line, a verdict.
fn report_text(description: &Description, report: &DataCheck) -> String {
    let mut text = format!(
        "{}: {} rows, read as the description declares\n",
        description.file.display(),
        report.rows
    );
    let width = report
        .columns
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    for column in &report.columns {
        let person = matches!(&description.privacy_unit,
            dpkit_query::description::PrivacyUnit::Id { column: id, .. } if *id == column.name);
        text.push_str(&column_line(column, width, person));
    }
    if let Some(cap) = &report.cap {
        text.push_str(&cap_line(cap, description.privacy_unit.rows_per_person()));
    }
    if let (rows @ 1.., first) = report.longer_rows {
        let noun = if rows == 1 { "row" } else { "rows" };
        text.push_str(&format!(
            "  {rows} {noun} with more fields than the header (no one's: left out), first at \
             row {first}\n"
        ));
    }
    text.push_str(&verdict(report));
    text
}

/// A column's line; `person` for the id column, whose too long texts are
/// no one's rather than cut.
fn column_line(column: &ColumnCheck, width: usize, person: bool) -> String {
    let kind = column.kind.name();
    let mut line = format!(
        "  {:width$}  {kind:7}  {} present",
        column.name, column.present
    );
    for found in &column.found {
        line.push_str(&format!("; {}", found_text(found, column.kind, person)));
    }
    line.push('\n');
    line
}

/// What one fact did, in the words of what a query then reads.
fn found_text(found: &Found, kind: ColumnKind, person: bool) -> String {
    let what = match found.finding {
        Finding::NotOfType => format!("not {} (read as NULL)", kind.name()),
        Finding::Below(low) => format!("below {low} (clamped)"),
        Finding::Above(high) => format!("above {high} (clamped)"),
        Finding::OutsideDomain => "outside the domain (never a group)".into(),
        Finding::TooLong(length) if person => {
            format!("longer than {length} characters (no one's: left out)")
        }
        Finding::TooLong(length) => format!("longer than {length} characters (cut)"),
    };
    format!("{} {what}, first at row {}", found.values, found.first_row)
}

fn cap_line(cap: &CapCheck, max_rows: u64) -> String {
    format!(
        "  privacy unit: {} people with more than {max_rows} rows ({} rows left out); \
         {} rows without an id (left out)\n",
        cap.people_over, cap.rows_left_out, cap.rows_without_id
    )
}

fn verdict(report: &DataCheck) -> String {
    if report.is_clean() {
        return "every value is as the description expects\n".into();
    }
    "the data holds values the description does not expect: queries read them as shown in \
     parentheses, and say nothing; correct the description or the data before publishing it \
     (rows are counted from 1 after the header)\n"
        .into()
}
