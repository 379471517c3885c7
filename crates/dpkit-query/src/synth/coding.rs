//! Each column of a table coded over a public domain, from the description
//! alone: a text column's declared values, an integer column's declared
//! bounds cut into bins. Nothing here reads the data.

use dpkit_description::{ColumnFacts, ColumnKind, Description, PrivacyUnit};
use dpkit_synth::Domain;

use crate::error::{QueryError, Result};

/// How one column's values become codes `0..codes()`; the last code is
/// *missing*: a text value outside the declared domain, or an empty
/// integer.
#[derive(Debug, Clone, PartialEq)]
pub enum Coding {
    /// The declared values, in the description's order.
    Text(Vec<String>),
    /// Bins of `width` whole numbers from `low`, the last one ending at `high`.
    Integer {
        /// The lower bound.
        low: i64,
        /// The upper bound.
        high: i64,
        /// Whole numbers per bin.
        width: i64,
    },
    /// Bins declared in the description (`bins`): each starts where
    /// `starts` says (the first at the lower bound), the last ends at `high`.
    Declared {
        /// The first whole number of each bin, increasing from the lower bound.
        starts: Vec<i64>,
        /// The upper bound.
        high: i64,
    },
}

impl Coding {
    /// The number of codes, the missing one included.
    pub fn codes(&self) -> usize {
        match self {
            Coding::Text(values) => values.len() + 1,
            Coding::Integer { low, high, width } => ((high - low) / width) as usize + 2,
            Coding::Declared { starts, .. } => starts.len() + 1,
        }
    }

    /// The code for missing values.
    pub fn missing(&self) -> u32 {
        (self.codes() - 1) as u32
    }

    /// The GROUP BY expression whose keys [`Coding::code_of`] reads.
    pub(crate) fn key_sql(&self, column: &str) -> String {
        let quoted = format!("\"{}\"", column.replace('"', "\"\""));
        match self {
            Coding::Text(_) => quoted,
            Coding::Integer { low, width, .. } => {
                // Whole-number division: the clamped difference is ≥ 0, so
                // it rounds down, on every engine.
                format!("COALESCE(({quoted} - {low}) / {width}, -1)")
            }
            Coding::Declared { starts, .. } => {
                let mut sql = format!("CASE WHEN {quoted} IS NULL THEN -1");
                for (bin, start) in starts.iter().enumerate().skip(1) {
                    sql.push_str(&format!(" WHEN {quoted} < {start} THEN {}", bin - 1));
                }
                format!("{sql} ELSE {} END", starts.len() - 1)
            }
        }
    }

    /// The code of a key the engine returned (missing when unknown).
    pub(crate) fn code_of(&self, key: &str) -> u32 {
        match self {
            Coding::Text(values) => values
                .iter()
                .position(|v| v == key)
                .map_or(self.missing(), |i| i as u32),
            Coding::Integer { .. } | Coding::Declared { .. } => match key.parse::<f64>() {
                // Values are clamped to the bounds before they are binned.
                Ok(bin) if bin >= 0.0 => (bin as u32).min(self.missing() - 1),
                _ => self.missing(),
            },
        }
    }

    /// The whole numbers of integer bin `code`, as `(first, last)`.
    pub(crate) fn bin(&self, code: u32) -> Option<(i64, i64)> {
        match self {
            Coding::Integer { low, high, width } if code < self.missing() => {
                let first = low + i64::from(code) * width;
                Some((first, (first + width - 1).min(*high)))
            }
            Coding::Declared { starts, high } if code < self.missing() => {
                let code = code as usize;
                let last = starts.get(code + 1).map_or(*high, |next| next - 1);
                Some((starts[code], last))
            }
            _ => None,
        }
    }
}

/// The columns of one table of a description, each coded.
#[derive(Debug, Clone, PartialEq)]
pub struct CodedTable {
    /// The table's name, as queries use it.
    pub table: String,
    /// The columns, in the order of the output, with their codings.
    pub columns: Vec<(String, Coding)>,
}

/// Which columns to code and how finely.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// The table (default: the description's own).
    pub table: Option<String>,
    /// Only these columns (default: every described one but the person's).
    pub only: Vec<String>,
    /// Leave these out.
    pub without: Vec<String>,
    /// The most bins of an integer column (default [`DEFAULT_BINS`]).
    pub bins: Option<u32>,
}

/// Integer columns are cut into at most this many bins unless asked.
pub const DEFAULT_BINS: u32 = 32;

impl CodedTable {
    /// Codes the chosen table's columns from `description` alone. A
    /// column with no public domain (text without `domain`, a number
    /// without `bounds`, a real number) is refused with the fix named.
    pub fn from_description(description: &Description, choice: &Columns) -> Result<Self> {
        let (table, facts, person) = table_facts(description, choice.table.as_deref())?;
        for name in choice.only.iter().chain(&choice.without) {
            if !facts.iter().any(|(c, _)| c == name) {
                return Err(QueryError::Description(format!(
                    "table {table} has no described column \"{name}\""
                )));
            }
        }
        let bins = i64::from(choice.bins.unwrap_or(DEFAULT_BINS).max(1));
        let mut columns = Vec::new();
        let mut refused = Vec::new();
        for (name, facts) in facts {
            let asked = choice.only.is_empty() || choice.only.contains(&name);
            if !asked || choice.without.contains(&name) || Some(&name) == person.as_ref() {
                continue;
            }
            match coding(&facts, bins) {
                Some(coding) => columns.push((name, coding)),
                None => refused.push(name),
            }
        }
        if !refused.is_empty() {
            return Err(QueryError::NotPrivate(format!(
                "a synthetic table needs a public domain for every column, and {} {} none: \
                 declare `domain = [...]` for text or `bounds = [low, high]` for integers \
                 (real numbers are not binned yet), or leave {} out with --without {}",
                refused.join(", "),
                if refused.len() == 1 { "has" } else { "have" },
                if refused.len() == 1 { "it" } else { "them" },
                refused.join(",")
            )));
        }
        if columns.is_empty() {
            let why = match &person {
                Some(person) if choice.only.contains(person) => format!(
                    "no column is left to synthesize ({person} names the person, and is never \
                     a column of a synthetic table)"
                ),
                _ => "no column is left to synthesize".to_string(),
            };
            return Err(QueryError::NotPrivate(why));
        }
        // In the order --columns lists them, when it does.
        if !choice.only.is_empty() {
            columns.sort_by_key(|(name, _)| choice.only.iter().position(|n| n == name));
        }
        Ok(Self { table, columns })
    }

    /// The public domain of the codes.
    pub fn domain(&self) -> Result<Domain> {
        Domain::new(self.columns.iter().map(|(_, c)| c.codes()).collect())
            .map_err(|e| QueryError::NotPrivate(e.to_string()))
    }
}

/// The table's name, its described columns and its person column.
type TableFacts = (String, Vec<(String, ColumnFacts)>, Option<String>);

fn table_facts(description: &Description, table: Option<&str>) -> Result<TableFacts> {
    let main = description.table.as_str();
    match table {
        None => Ok(main_facts(description)),
        Some(name) if name == main => Ok(main_facts(description)),
        Some(name) => {
            let private = description.private.get(name).ok_or_else(|| {
                let mut names = vec![main.to_string()];
                names.extend(description.private.keys().cloned());
                QueryError::Description(format!(
                    "no private table named \"{name}\": the description has {}",
                    names.join(", ")
                ))
            })?;
            let facts = private.columns.clone().into_iter().collect();
            Ok((name.to_string(), facts, Some(private.person.clone())))
        }
    }
}

fn main_facts(description: &Description) -> TableFacts {
    let person = match &description.privacy_unit {
        PrivacyUnit::Row => None,
        PrivacyUnit::Id { column, .. } => Some(column.clone()),
    };
    let facts = description.columns.clone().into_iter().collect();
    (description.table.clone(), facts, person)
}

/// A column's coding, if its domain is public.
fn coding(facts: &ColumnFacts, bins: i64) -> Option<Coding> {
    match (facts.kind, &facts.domain, facts.bounds) {
        (ColumnKind::Text, Some(values), _) => Some(Coding::Text(values.clone())),
        (ColumnKind::Integer, _, Some((low, high))) if facts.bins.is_some() => {
            // The description checked them: whole, increasing, within the bounds.
            let declared = facts.bins.iter().flatten().map(|&b| b as i64);
            let starts = std::iter::once(low.ceil() as i64).chain(declared).collect();
            let high = high.floor() as i64;
            Some(Coding::Declared { starts, high })
        }
        (ColumnKind::Integer, _, Some((low, high))) => {
            let (low, high) = (low.ceil() as i64, high.floor() as i64);
            let span = high.checked_sub(low)?.checked_add(1)?;
            if span < 1 {
                return None;
            }
            let width = (span + bins - 1) / bins;
            Some(Coding::Integer { low, high, width })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_bins_cover_the_bounds_and_keys_map_back() {
        let age = Coding::Integer {
            low: 17,
            high: 90,
            width: 3,
        };
        // 74 ages in bins of 3: 25 bins, and the missing code.
        assert_eq!(age.codes(), 26);
        assert_eq!(age.bin(0), Some((17, 19)));
        assert_eq!(age.bin(24), Some((89, 90)));
        assert_eq!(age.bin(25), None);
        assert_eq!(age.code_of("24.0"), 24);
        assert_eq!(age.code_of("-1"), 25);
        let gain = Coding::Declared {
            starts: vec![0, 1, 5000],
            high: 99999,
        };
        assert_eq!(gain.codes(), 4);
        assert_eq!(
            (gain.bin(0), gain.bin(1), gain.bin(2)),
            (Some((0, 0)), Some((1, 4999)), Some((5000, 99999)))
        );
        assert_eq!(
            gain.key_sql("g"),
            "CASE WHEN \"g\" IS NULL THEN -1 WHEN \"g\" < 1 THEN 0 WHEN \"g\" < 5000 THEN 1 ELSE 2 END"
        );
        let sex = Coding::Text(vec!["F".into(), "M".into()]);
        assert_eq!((sex.code_of("M"), sex.code_of("X"), sex.codes()), (1, 2, 3));
    }
}
