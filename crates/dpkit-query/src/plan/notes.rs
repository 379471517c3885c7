//! Notes for the analyst, drawn from the query and the description alone:
//! a literal compared with a column that has a public domain which does
//! not list it (`WHERE sex = 'female'` when the domain says `Female`), in a
//! filter, a `CASE` or a computed column. The query is still answered as
//! written, and charged, so the note says what was likely meant. It reads
//! no data: the literal is the analyst's and the domain is public.

use std::collections::HashSet;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{Aggregate, BinaryExpr, Expr, LogicalPlan, Operator};

use super::lineage::Lineage;
use super::{text_of, unalias};
use crate::hints::{closest_value, quoted};

/// The longest literal a note repeats, in characters.
const SHOWN_CHARACTERS: usize = 60;
/// The most domain values a note lists.
const LISTED_VALUES: usize = 8;
/// The most notes one answer carries: past them, planning would spend its
/// time on spelling.
const MOST_NOTES: usize = 10;

/// The notes so far, and the (column, literal) pairs already read.
#[derive(Default)]
struct Notes {
    notes: Vec<String>,
    seen: HashSet<(String, String)>,
}

/// The notes on every comparison the aggregate and the plan below it make
/// (filters, `CASE` inside an aggregate or a computed column), each once.
pub(super) fn notes<'a>(aggregate: &'a Aggregate, lineage: &Lineage<'a>) -> Vec<String> {
    let mut notes = Notes::default();
    for expr in aggregate.group_expr.iter().chain(&aggregate.aggr_expr) {
        notes_on(expr, lineage, &mut notes);
    }
    collect(&aggregate.input, lineage, &mut notes);
    let mut shown = HashSet::new();
    notes.notes.retain(|note| shown.insert(note.clone()));
    notes.notes
}

/// The notes on the expressions of `plan` and of every plan below it, down
/// to dpkit's own view of the table; an expression's columns are those of
/// its node's one input.
fn collect<'a>(plan: &'a LogicalPlan, lineage: &Lineage<'a>, notes: &mut Notes) {
    if lineage.is_view(plan) {
        return;
    }
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

fn notes_on(expr: &Expr, lineage: &Lineage<'_>, notes: &mut Notes) {
    let _ = expr.apply(|expr| {
        for (column, literal) in comparisons(expr) {
            if notes.notes.len() >= MOST_NOTES {
                return Ok(TreeNodeRecursion::Stop);
            }
            if notes.seen.insert((column.flat_name(), literal.clone())) {
                notes.notes.extend(note(column, &literal, lineage));
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

/// The (column, literal) pairs `expr` compares for equality: `c = 'x'`,
/// `'x' <> c`, `c IN ('x', 'y')`, `CASE c WHEN 'x' THEN …` and
/// `CASE 'x' WHEN c THEN …`.
fn comparisons(expr: &Expr) -> Vec<(&Column, String)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq | Operator::NotEq,
            right,
        }) => [(left, right), (right, left)]
            .into_iter()
            .filter_map(|(a, b)| Some((column_of(a)?, literal_text(b)?)))
            .collect(),
        Expr::Case(case) => match case.expr.as_deref() {
            Some(subject) => case
                .when_then_expr
                .iter()
                .flat_map(|(when, _)| [(subject, when.as_ref()), (when.as_ref(), subject)])
                .filter_map(|(a, b)| Some((column_of(a)?, literal_text(b)?)))
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

fn column_of(expr: &Expr) -> Option<&Column> {
    match unalias(expr) {
        Expr::Column(column) => Some(column),
        Expr::Cast(cast) => column_of(&cast.expr),
        Expr::TryCast(cast) => column_of(&cast.expr),
        _ => None,
    }
}

fn literal_text(expr: &Expr) -> Option<String> {
    match unalias(expr) {
        Expr::Literal(ScalarValue::Int64(Some(n)), _) => Some(n.to_string()),
        Expr::Literal(value, _) => text_of(value).cloned(),
        Expr::Cast(cast) => literal_text(&cast.expr),
        _ => None,
    }
}

/// The note on `literal` compared with `column`, if the column is the
/// table's own, has a domain, and the domain does not list the literal.
fn note(column: &Column, literal: &str, lineage: &Lineage<'_>) -> Option<String> {
    let (table_column, facts) = lineage.table_column(column)?;
    let domain = facts.domain.as_ref()?;
    if domain.iter().any(|value| value == literal) {
        return None;
    }
    let shown = shown(literal);
    // The table's name for it: a subquery may call it something else.
    let name = quoted(&table_column);
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
