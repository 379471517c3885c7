//! The answer as an aligned table or CSV (JSON comes from serde).

use crate::release::{Cell, ReleasedTable};

/// Six significant digits, enough for a noisy statistic.
fn number(value: f64) -> String {
    if value == value.trunc() && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (5 - magnitude).clamp(0, 12) as usize;
    format!("{value:.decimals$}")
}

impl ReleasedTable {
    /// An aligned text table; each released value is followed by `± half-width`.
    ///
    /// ```
    /// use dpkit_query::release::{Cell, ReleasedTable};
    /// let table = ReleasedTable {
    ///     columns: vec!["sex".into(), "n".into()],
    ///     rows: vec![vec![Cell::Key("Female".into()), Cell::Value { value: 10771.0, low: 10767.0, high: 10775.0 }]],
    ///     confidence: 0.95, epsilon: 0.5, delta: 0.0,
    /// };
    /// assert!(table.to_text().contains("10771 ± 4"));
    /// ```
    pub fn to_text(&self) -> String {
        let shown: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|cell| match cell {
                        Cell::Key(key) => key.clone(),
                        Cell::Value { value, low, high } => {
                            let half = ((high - value).max(value - low)).max(0.0);
                            if (high - value - (value - low)).abs() <= 1e-9 * half.max(1.0) {
                                format!("{} ± {}", number(*value), number(half))
                            } else {
                                format!("{} [{}, {}]", number(*value), number(*low), number(*high))
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, name)| {
                shown
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([name.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| {
            cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let mut text = line(self.columns.iter().map(String::as_str).collect());
        text.push('\n');
        text.push_str(&line(
            widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect(),
        ));
        text.push('\n');
        for row in &shown {
            text.push_str(&line(row.iter().map(String::as_str).collect()));
            text.push('\n');
        }
        text
    }

    /// CSV: each released value as three columns, `name`, `name_low`, `name_high`.
    pub fn to_csv(&self) -> String {
        let quote = |text: &str| {
            if text.contains([',', '"', '\n']) {
                format!("\"{}\"", text.replace('"', "\"\""))
            } else {
                text.to_string()
            }
        };
        let mut header = Vec::new();
        for (i, name) in self.columns.iter().enumerate() {
            match self.rows.first().map(|r| &r[i]) {
                Some(Cell::Value { .. }) => {
                    header.push(quote(name));
                    header.push(quote(&format!("{name}_low")));
                    header.push(quote(&format!("{name}_high")));
                }
                _ => header.push(quote(name)),
            }
        }
        let mut text = header.join(",");
        text.push('\n');
        for row in &self.rows {
            let fields: Vec<String> = row
                .iter()
                .flat_map(|cell| match cell {
                    Cell::Key(key) => vec![quote(key)],
                    Cell::Value { value, low, high } => {
                        vec![value.to_string(), low.to_string(), high.to_string()]
                    }
                })
                .collect();
            text.push_str(&fields.join(","));
            text.push('\n');
        }
        text
    }
}
