//! The released answer, and how it prints: an aligned table or CSV (JSON
//! comes from serde).

use serde::{Deserialize, Serialize};

/// One cell of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    /// A group key (public: from a domain, or a thresholded key).
    Key(String),
    /// A released number, its confidence interval and its expected error.
    Value {
        /// The released value.
        value: f64,
        /// The interval's lower end.
        low: f64,
        /// The interval's upper end.
        high: f64,
        /// Its expected absolute error: the noise's closed form, or for an
        /// average or a spread the first-order estimate from the released
        /// values; none for a quantile, whose error is in ranks.
        #[serde(skip_serializing_if = "Option::is_none")]
        expected_error: Option<f64>,
    },
}

/// The private answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedTable {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<Cell>>,
    /// For each column, whether it holds released values (each with its
    /// interval) rather than group keys: an answer without rows still has
    /// its interval columns. Empty in answers kept before it was added.
    #[serde(default)]
    pub released: Vec<bool>,
    /// The confidence level of the intervals.
    pub confidence: f64,
    /// ε charged.
    pub epsilon: f64,
    /// δ charged.
    pub delta: f64,
    /// What the analyst should know to read the answer, from public facts
    /// only: the query's notes and, when keys are thresholded, that groups
    /// of few people may be missing. Absent from JSON when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The names of a released value's interval beside it, in CSV and in
/// Python's DataFrames (`python/dpkit/answer.py` writes the same):
/// `name_low` and `name_high`.
///
/// ```
/// assert_eq!(dpkit_release::interval_columns("n"), ["n_low", "n_high"]);
/// ```
pub fn interval_columns(name: &str) -> [String; 2] {
    [format!("{name}_low"), format!("{name}_high")]
}

/// The stand-in for an unbounded end of an interval (a ratio whose
/// divisor may be 0): the largest finite double, so that every answer
/// still serialises as numbers; shown as `inf`.
pub const UNBOUNDED: f64 = f64::MAX;

/// A number in CSV: as Rust writes it (exact), an unbounded end as `inf`
/// or `-inf`, which CSV readers read as infinities.
fn csv_number(value: f64) -> String {
    match value.abs() >= UNBOUNDED {
        true if value > 0.0 => "inf".to_string(),
        true => "-inf".to_string(),
        false => value.to_string(),
    }
}

/// Six significant digits, enough for a noisy statistic.
fn number(value: f64) -> String {
    if value.abs() >= UNBOUNDED {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if value == value.trunc() && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (5 - magnitude).clamp(0, 12) as usize;
    format!("{value:.decimals$}")
}

/// One released cell as text: a key, `value ± half-width`, or
/// `value [low, high]` when the interval is not symmetric.
fn shown_cell(cell: &Cell) -> String {
    match cell {
        Cell::Key(key) => key.clone(),
        Cell::Value {
            value, low, high, ..
        } => {
            let half = ((high - value).max(value - low)).max(0.0);
            if (high - value - (value - low)).abs() <= 1e-9 * half.max(1.0) {
                format!("{} ± {}", number(*value), number(half))
            } else {
                format!("{} [{}, {}]", number(*value), number(*low), number(*high))
            }
        }
    }
}

/// `cells` left-aligned to `widths`, two spaces apart, with a newline. The
/// padding is built by hand: a `{:<width$}` width above 65,535 panics.
fn aligned_line(cells: &[String], widths: &[usize]) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(widths)
        .map(|(cell, width)| {
            let padding = width.saturating_sub(cell.chars().count());
            format!("{cell}{}", " ".repeat(padding))
        })
        .collect();
    let mut line = padded.join("  ").trim_end().to_string();
    line.push('\n');
    line
}

impl ReleasedTable {
    /// An aligned text table; each released value is followed by `± half-width`.
    ///
    /// ```
    /// use dpkit_release::{Cell, ReleasedTable};
    /// let table = ReleasedTable {
    ///     columns: vec!["sex".into(), "n".into()],
    ///     rows: vec![vec![Cell::Key("Female".into()), Cell::Value { value: 10771.0, low: 10767.0, high: 10775.0, expected_error: Some(1.5) }]],
    ///     released: vec![false, true],
    ///     confidence: 0.95, epsilon: 0.5, delta: 0.0, notes: vec![],
    /// };
    /// assert!(table.to_text().contains("10771 ± 4"));
    /// ```
    pub fn to_text(&self) -> String {
        let shown: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| row.iter().map(shown_cell).collect())
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, name)| {
                shown
                    .iter()
                    .filter_map(|row| row.get(i))
                    .chain([name])
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let rules: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        let mut text = aligned_line(&self.columns, &widths);
        text.push_str(&aligned_line(&rules, &widths));
        for row in &shown {
            text.push_str(&aligned_line(row, &widths));
        }
        text
    }

    /// Gives an answer kept before `released` was added (empty, by serde's
    /// default) one entry per column, read off its first row, so that every
    /// front end can rely on it.
    ///
    /// ```
    /// use dpkit_release::ReleasedTable;
    /// let kept = r#"{"columns": ["sex", "n"], "confidence": 0.95, "epsilon": 1.0, "delta": 0.0,
    ///     "rows": [["Female", {"value": 3.0, "low": 1.0, "high": 5.0}]]}"#;
    /// let mut table: ReleasedTable = serde_json::from_str(kept).unwrap();
    /// assert!(table.released.is_empty());
    /// table.complete_released();
    /// assert_eq!(table.released, [false, true]);
    /// ```
    pub fn complete_released(&mut self) {
        if self.released.len() != self.columns.len() {
            self.released = (0..self.columns.len())
                .map(|i| self.is_released(i))
                .collect();
        }
    }

    /// Whether column `index` holds released values: as declared, or, in an
    /// answer kept before `released` was added, as its first row shows.
    fn is_released(&self, index: usize) -> bool {
        match self.released.get(index) {
            Some(&released) => released,
            None => matches!(
                self.rows.first().and_then(|r| r.get(index)),
                Some(Cell::Value { .. })
            ),
        }
    }

    /// CSV: each released value as three columns, `name`, `name_low`, `name_high`
    /// ([`interval_columns`]).
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
            header.push(quote(name));
            if self.is_released(i) {
                header.extend(interval_columns(name).iter().map(|c| quote(c)));
            }
        }
        let mut text = header.join(",");
        text.push('\n');
        for row in &self.rows {
            let fields: Vec<String> = row
                .iter()
                .flat_map(|cell| match cell {
                    Cell::Key(key) => vec![quote(key)],
                    Cell::Value {
                        value, low, high, ..
                    } => {
                        vec![csv_number(*value), csv_number(*low), csv_number(*high)]
                    }
                })
                .collect();
            text.push_str(&fields.join(","));
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept answer is JSON, and its replay must be the answer released,
    /// to the last bit: "the same request again gets the same answer".
    /// serde_json reads some doubles one unit in the last place off unless
    /// its `float_roundtrip` feature is on (93737.70353982321 came back as
    /// …232 in a replay); these are doubles of every magnitude.
    #[test]
    fn an_answer_read_back_from_its_json_is_the_same_to_the_bit() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let rows: Vec<Vec<Cell>> = (0..20_000)
            .map(|_| {
                let scale = 10f64.powi((next() % 40) as i32 - 20);
                let mut value = || (next() >> 11) as f64 / (1u64 << 53) as f64 * scale;
                vec![Cell::Value {
                    value: value(),
                    low: -value(),
                    high: value(),
                    expected_error: Some(value()),
                }]
            })
            .collect();
        let mut answer = table(vec!["x".into()], rows);
        answer.rows.push(vec![Cell::Value {
            value: 89469.57476635514,
            low: 84694.34158415822,
            high: 93737.70353982321,
            expected_error: Some(1255.9135589452753),
        }]);
        let text = serde_json::to_string(&answer).unwrap();
        let read: ReleasedTable = serde_json::from_str(&text).unwrap();
        let off = answer
            .rows
            .iter()
            .zip(&read.rows)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(off, 0, "rows read back differently");
    }

    fn table(columns: Vec<String>, rows: Vec<Vec<Cell>>) -> ReleasedTable {
        ReleasedTable {
            columns,
            rows,
            released: vec![],
            confidence: 0.95,
            epsilon: 1.0,
            delta: 0.0,
            notes: vec![],
        }
    }

    #[test]
    fn names_and_keys_wider_than_a_format_width_are_aligned_without_panicking() {
        let alias = "a".repeat(70_000);
        let key = "é".repeat(100_000);
        let value = Cell::Value {
            value: 3.0,
            low: 1.0,
            high: 5.0,
            expected_error: Some(1.0),
        };
        let answer = table(
            vec!["k".into(), alias.clone()],
            vec![vec![Cell::Key(key.clone()), value]],
        );
        let text = answer.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], format!("k{}  {alias}", " ".repeat(99_999)));
        assert_eq!(lines[2], format!("{key}  3 ± 2"));
        assert!(
            answer
                .to_csv()
                .starts_with(&format!("k,{alias},{alias}_low"))
        );
    }

    #[test]
    fn a_row_shorter_than_the_header_does_not_panic() {
        let answer = table(vec!["k".into(), "n".into()], vec![vec![]]);
        assert_eq!(answer.to_text(), "k  n\n-  -\n\n");
        assert_eq!(answer.to_csv(), "k,n\n\n");
    }

    #[test]
    fn an_answer_without_rows_still_has_its_interval_columns() {
        let mut answer = table(vec!["k".into(), "n".into()], vec![]);
        answer.released = vec![false, true];
        assert_eq!(answer.to_csv(), "k,n,n_low,n_high\n");
        // An answer kept before `released` was added: read off the first row.
        answer.released.clear();
        assert_eq!(answer.to_csv(), "k,n\n");
    }
}
