//! What to write instead, when the planner does not know a name: hints
//! drawn only from the description's column and table names, which are
//! public (the file's own header may be a row of data when it has none,
//! so its names are never offered).

use std::collections::BTreeMap;

use dpkit_description::{ColumnFacts, Description, is_identifier};

/// `message` (a shortened planning error) with a hint added when it names
/// an unknown column or table and the description suggests what was meant:
/// `No field named hours.` becomes `No field named hours: a name with "-"
/// or capitals needs double quotes, as in "hours-per-week"`.
pub(crate) fn with_hint(message: String, description: &Description) -> String {
    if let Some(rest) = message.strip_prefix("No field named ") {
        let name = unqualified(rest.trim_end_matches('.'));
        if let Some(hint) = column_hint(&name, &description.columns) {
            return format!("No field named {name}: {hint}");
        }
    } else if message.starts_with("table '") && message.ends_with("' not found") {
        return format!("{message}: {}", tables_named(description));
    }
    message
}

/// The description's tables, as a hint names them.
fn tables_named(description: &Description) -> String {
    let list = |names: Vec<&str>| names.into_iter().map(quoted).collect::<Vec<_>>().join(", ");
    let private: Vec<&str> = description.private_names().collect();
    let mut said = match private.len() {
        1 => format!("this description's table is {}", quoted(private[0])),
        _ => format!("this description's private tables are {}", list(private)),
    };
    if !description.public.is_empty() {
        let public = description.public.keys().map(String::as_str).collect();
        said.push_str(&format!(", and its public tables are {}", list(public)));
    }
    said
}

/// The last part of a possibly qualified name, without DataFusion's quotes.
fn unqualified(name: &str) -> String {
    name.rsplit('.').next().unwrap_or(name).replace('"', "")
}

/// A hint for the unknown column `name`: the described column it is the
/// start of (an unquoted `hours-per-week` is read as `hours - per - week`),
/// the one it matches but for capitals (unquoted names are lowercased), or
/// the one within a typo of it.
fn column_hint(name: &str, columns: &BTreeMap<String, ColumnFacts>) -> Option<String> {
    let needs_quotes = |column: &String| {
        format!(
            "a name with \"-\" or capitals needs double quotes, as in {}",
            quoted(column)
        )
    };
    if let Some(column) = columns.keys().find(|c| {
        c.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(|ch: char| !ch.is_alphanumeric() && ch != '_'))
    }) {
        return Some(needs_quotes(column));
    }
    if let Some(column) = columns
        .keys()
        .find(|c| c.to_lowercase() == name.to_lowercase())
    {
        return Some(needs_quotes(column));
    }
    within_a_typo(name, columns.keys()).map(|column| format!("did you mean {}?", quoted(column)))
}

/// The candidate nearest to `text` but for capitals, if it is within a
/// typo of it: one edit per three characters, at most two.
fn within_a_typo<'c>(
    text: &str,
    candidates: impl Iterator<Item = &'c String>,
) -> Option<&'c String> {
    let lower = text.to_lowercase();
    let allowed = (text.chars().count() / 3).clamp(1, 2);
    candidates
        .map(|c| (edits(&c.to_lowercase(), &lower), c))
        .filter(|(distance, _)| *distance <= allowed)
        .min()
        .map(|(_, c)| c)
}

/// The value of a public `domain` that `value` was likely meant to be: the
/// same but for capitals, or the nearest within a typo (one edit per three
/// characters, at most two).
pub(crate) fn closest_value<'d>(value: &str, domain: &'d [String]) -> Option<&'d str> {
    let lower = value.to_lowercase();
    match domain.iter().find(|v| v.to_lowercase() == lower) {
        Some(same) => Some(same),
        None => within_a_typo(value, domain.iter()).map(String::as_str),
    }
}

/// `name` as SQL must write it: bare if lowercase letters, digits and
/// underscores, else in double quotes.
pub(crate) fn quoted(name: &str) -> String {
    // SQL folds a bare name to lower case, so capitals need quotes too.
    let bare = is_identifier(name) && !name.chars().any(|c| c.is_ascii_uppercase());
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The Levenshtein distance between `a` and `b`, by characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(x != *y);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_insertions_deletions_and_substitutions() {
        assert_eq!(edits("age", "agee"), 1);
        assert_eq!(edits("sex", "sx"), 1);
        assert_eq!(edits("race", "rice"), 1);
        assert_eq!(edits("education", "eduaction"), 2);
        assert_eq!(edits("", "abc"), 3);
    }

    #[test]
    fn a_value_is_matched_to_its_domain_but_for_capitals_or_a_typo() {
        let domain = ["Female".to_string(), "Male".to_string()];
        assert_eq!(closest_value("female", &domain), Some("Female"));
        assert_eq!(closest_value("Mal", &domain), Some("Male"));
        assert_eq!(closest_value("F", &domain), None);
        assert_eq!(closest_value("unknown", &domain), None);
    }

    #[test]
    fn names_are_quoted_only_when_sql_needs_it() {
        assert_eq!(quoted("age"), "age");
        assert_eq!(quoted("hours-per-week"), "\"hours-per-week\"");
        assert_eq!(quoted("Age"), "\"Age\"");
        assert_eq!(quoted("1st"), "\"1st\"");
    }
}
