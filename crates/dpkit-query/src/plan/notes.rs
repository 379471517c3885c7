//! Notes for the analyst, drawn from the query and the description alone:
//! a literal compared with a column that has a public domain (in a filter,
//! a `CASE` or a computed column), where the
//! domain does not list it (`WHERE sex = 'female'` when the domain says
//! `Female`). The query is still answered as written, and charged, so
//! the note says what was likely meant. It reads no data: the literal is
//! the analyst's and the domain is public.

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Aggregate, BinaryExpr, Expr, LogicalPlan, Operator};

use super::lineage::Lineage;
use super::unalias;
use crate::hints::{closest_value, quoted};

/// The longest literal a note repeats, in characters.
const SHOWN_CHARACTERS: usize = 60;
/// The most domain values a note lists.
const LISTED_VALUES: usize = 8;

/// The notes on every comparison the aggregate and the plan below it make
/// (filters, `CASE` inside an aggregate or a computed column), each once.
pub(super) fn notes<'a>(aggregate: &'a Aggregate, lineage: &Lineage<'a>) -> Vec<String> {
    let mut notes = Vec::new();
    for expr in aggregate.group_expr.iter().chain(&aggregate.aggr_expr) {
        notes_on(expr, lineage, &mut notes);
    }
    collect(&aggregate.input, lineage, &mut notes);
    let mut seen = std::collections::HashSet::new();
    notes.retain(|note| seen.insert(note.clone()));
    notes
}

/// The notes on the expressions of `plan` and of every plan below it; an
/// expression's columns are those of its node's one input.
fn collect<'a>(plan: &'a LogicalPlan, lineage: &Lineage<'a>, notes: &mut Vec<String>) {
    if let [input] = plan.inputs()[..] {
        let below = lineage.below(input);
        let _ = plan.apply_expressions(|expr| {
            notes_on(expr, &below, notes);
            Ok(TreeNodeRecursion::Continue)
        });
    }
    for input in plan.inputs() {
        collect(input, lineage, notes);
    }
}

fn notes_on(expr: &Expr, lineage: &Lineage<'_>, notes: &mut Vec<String>) {
    let _ = expr.apply(|expr| {
        for (column, literal) in comparisons(expr) {
            notes.extend(note(column, &literal, lineage));
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

/// The (column, literal) pairs `expr` compares for equality: `c = 'x'`,
/// `'x' <> c`, `c IN ('x', 'y')`, `CASE c WHEN 'x' THEN …`.
fn comparisons(expr: &Expr) -> Vec<(&datafusion::common::Column, String)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq | Operator::NotEq,
            right,
        }) => [(left, right), (right, left)]
            .into_iter()
            .filter_map(|(a, b)| Some((column_of(a)?, literal_text(b)?)))
            .collect(),
        Expr::Case(case) => match case.expr.as_deref().and_then(column_of) {
            Some(column) => case
                .when_then_expr
                .iter()
                .filter_map(|(when, _)| Some((column, literal_text(when)?)))
                .collect(),
            None => Vec::new(),
        },
        Expr::InList(list) => match column_of(&list.expr) {
            Some(column) => list
                .list
                .iter()
                .filter_map(|item| Some((column, literal_text(item)?)))
                .collect(),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn column_of(expr: &Expr) -> Option<&datafusion::common::Column> {
    match unalias(expr) {
        Expr::Column(column) => Some(column),
        Expr::Cast(cast) => column_of(&cast.expr),
        Expr::TryCast(cast) => column_of(&cast.expr),
        _ => None,
    }
}

fn literal_text(expr: &Expr) -> Option<String> {
    match unalias(expr) {
        Expr::Literal(value, _) => match value {
            ScalarValue::Utf8(Some(text))
            | ScalarValue::LargeUtf8(Some(text))
            | ScalarValue::Utf8View(Some(text)) => Some(text.clone()),
            ScalarValue::Int64(Some(n)) => Some(n.to_string()),
            _ => None,
        },
        Expr::Cast(cast) => literal_text(&cast.expr),
        _ => None,
    }
}

/// The note on `literal` compared with `column`, if the column is the
/// table's own, has a domain, and the domain does not list the literal.
fn note(
    column: &datafusion::common::Column,
    literal: &str,
    lineage: &Lineage<'_>,
) -> Option<String> {
    let domain = lineage.facts(column)?.domain.as_ref()?;
    if domain.iter().any(|value| value == literal) {
        return None;
    }
    let shown = shown(literal);
    let name = quoted(&column.name);
    Some(match closest_value(literal, domain) {
        Some(meant) => {
            format!("'{shown}' is not in the public domain of {name}: did you mean '{meant}'?")
        }
        None if domain.len() <= LISTED_VALUES => format!(
            "'{shown}' is not in the public domain of {name}, which lists {}",
            domain
                .iter()
                .map(|v| format!("'{}'", self::shown(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => format!(
            "'{shown}' is not in the public domain of {name} ({} values)",
            domain.len()
        ),
    })
}

/// A literal as a note repeats it: on one line, and cut when long.
fn shown(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(SHOWN_CHARACTERS) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}
