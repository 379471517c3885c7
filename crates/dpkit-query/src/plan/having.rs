//! HAVING, read into a condition on the released answer
//! ([`dpkit_release::having`]): comparisons of aggregates, GROUP BY keys
//! and literals, combined by AND, OR and NOT. The aggregates it names are
//! measured and charged like the SELECT list's, shown or not; the rows are
//! kept or left out on their noisy values, never on exact ones.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Aggregate, Between, BinaryExpr, Expr, Operator};
use dpkit_release::having::{Comparison, Condition, Term};

use super::{OutputColumn, arithmetic, not_private, number_of, output_of, text_of, unalias};
use crate::error::Result;

const WHAT_HAVING_TAKES: &str = "HAVING compares aggregates (and arithmetic over them), GROUP BY \
     keys and literals (=, <>, <, <=, >, >=, BETWEEN) combined by AND, OR and NOT, on the \
     released values; compute anything else from the answer, which costs nothing more";

/// The condition `predicate` (over `aggregate`'s output) sets.
pub(super) fn plan(predicate: &Expr, aggregate: &Aggregate) -> Result<Condition> {
    let both = |a: &Expr, b: &Expr| -> Result<(Box<Condition>, Box<Condition>)> {
        Ok((Box::new(plan(a, aggregate)?), Box::new(plan(b, aggregate)?)))
    };
    match unalias(predicate) {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => both(left, right).map(|(a, b)| Condition::And(a, b)),
            Operator::Or => both(left, right).map(|(a, b)| Condition::Or(a, b)),
            op => compared(
                term(left, aggregate)?,
                comparison(*op)?,
                term(right, aggregate)?,
                aggregate,
            ),
        },
        Expr::Not(inner) => Ok(Condition::Not(Box::new(plan(inner, aggregate)?))),
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) => {
            let (value, low, high) = (
                term(expr, aggregate)?,
                term(low, aggregate)?,
                term(high, aggregate)?,
            );
            let at_least = compared(value.clone(), Comparison::GreaterOrEqual, low, aggregate)?;
            let at_most = compared(value, Comparison::LessOrEqual, high, aggregate)?;
            let between = Condition::And(Box::new(at_least), Box::new(at_most));
            Ok(if *negated {
                Condition::Not(Box::new(between))
            } else {
                between
            })
        }
        _ => Err(not_private(WHAT_HAVING_TAKES)),
    }
}

fn comparison(op: Operator) -> Result<Comparison> {
    Ok(match op {
        Operator::Eq => Comparison::Equal,
        Operator::NotEq => Comparison::NotEqual,
        Operator::Lt => Comparison::Less,
        Operator::LtEq => Comparison::LessOrEqual,
        Operator::Gt => Comparison::Greater,
        Operator::GtEq => Comparison::GreaterOrEqual,
        _ => return Err(not_private(WHAT_HAVING_TAKES)),
    })
}

/// Whether a term is a number (an aggregate, a number, a numeric key).
fn numeric(term: &Term, aggregate: &Aggregate) -> bool {
    match term {
        Term::Aggregate(_) | Term::Number(_) | Term::Combined(_) => true,
        Term::Text(_) => false,
        Term::Group(g) => aggregate.schema.field(*g).data_type().is_numeric(),
    }
}

/// A comparison of two numbers, or of a text key with a text: the answer
/// holds keys as text, so two keys, or a key and a literal of the other
/// kind, would not compare as SQL compares them (refused, for free).
fn compared(left: Term, op: Comparison, right: Term, aggregate: &Aggregate) -> Result<Condition> {
    let two_keys = matches!((&left, &right), (Term::Group(_), Term::Group(_)));
    if two_keys || numeric(&left, aggregate) != numeric(&right, aggregate) {
        return Err(not_private(
            "HAVING compares a number (an aggregate, a numeric key) with a number, or a text \
             key with a text; compare two keys in the released answer",
        ));
    }
    Ok(Condition::Compare(left, op, right))
}

/// A column of the aggregate's output (a key or an aggregate), a literal,
/// or arithmetic over aggregates. A CAST of a key, or to an integer, is
/// refused: the comparison reads released values as they are, and would
/// not round or truncate as the cast does.
fn term(expr: &Expr, aggregate: &Aggregate) -> Result<Term> {
    match unalias(expr) {
        Expr::Column(column) => match output_of(aggregate, column)? {
            OutputColumn::Group(g) => Ok(Term::Group(g)),
            OutputColumn::Aggregate(a) => Ok(Term::Aggregate(a)),
            OutputColumn::Combined(_) => Err(not_private(WHAT_HAVING_TAKES)),
        },
        Expr::Literal(value, _) => literal(value),
        Expr::BinaryExpr(_) | Expr::Negative(_) | Expr::Cast(_) | Expr::TryCast(_) => {
            arithmetic::combined(expr, aggregate)
                .map(Term::Combined)
                .map_err(|_| not_private(WHAT_HAVING_TAKES))
        }
        _ => Err(not_private(WHAT_HAVING_TAKES)),
    }
}

fn literal(value: &ScalarValue) -> Result<Term> {
    if let Some(text) = text_of(value) {
        return Ok(Term::Text(text.clone()));
    }
    number_of(value).map(Term::Number).ok_or_else(|| {
        not_private("HAVING compares with numbers and texts written in the query (not NULL)")
    })
}
