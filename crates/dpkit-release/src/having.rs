//! HAVING: which released rows an answer keeps, decided on the released
//! values alone. It is post-processing: it reads nothing but the noisy
//! answer, so it costs nothing more, and no exact aggregate is compared.

use std::cmp::Ordering;
use std::fmt::Write;

/// One side of a comparison in HAVING.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// GROUP BY key number i, as the answer prints it.
    Group(usize),
    /// The released value of aggregate number i.
    Aggregate(usize),
    /// A number written in the query.
    Number(f64),
    /// A text written in the query.
    Text(String),
    /// Arithmetic over released aggregates.
    Combined(crate::combined::Combination),
}

/// How two terms are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `=`
    Equal,
    /// `<>`
    NotEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
}

impl Comparison {
    fn symbol(self) -> &'static str {
        match self {
            Comparison::Equal => "=",
            Comparison::NotEqual => "<>",
            Comparison::Less => "<",
            Comparison::LessOrEqual => "<=",
            Comparison::Greater => ">",
            Comparison::GreaterOrEqual => ">=",
        }
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Comparison::Equal => ordering == Ordering::Equal,
            Comparison::NotEqual => ordering != Ordering::Equal,
            Comparison::Less => ordering == Ordering::Less,
            Comparison::LessOrEqual => ordering != Ordering::Greater,
            Comparison::Greater => ordering == Ordering::Greater,
            Comparison::GreaterOrEqual => ordering != Ordering::Less,
        }
    }
}

/// A HAVING condition over the released answer.
///
/// ```
/// use dpkit_release::having::{Comparison, Condition, Term};
/// // HAVING n > 100 AND sex <> 'Female'
/// let having = Condition::And(
///     Box::new(Condition::Compare(Term::Aggregate(0), Comparison::Greater, Term::Number(100.0))),
///     Box::new(Condition::Compare(Term::Group(0), Comparison::NotEqual, Term::Text("Female".into()))),
/// );
/// let key = ["Male".to_string()];
/// assert_eq!(having.holds(&key, &[250.0]), Some(true));
/// assert_eq!(having.holds(&key, &[80.0]), Some(false));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// A comparison of two terms.
    Compare(Term, Comparison, Term),
    /// Both hold.
    And(Box<Condition>, Box<Condition>),
    /// Either holds.
    Or(Box<Condition>, Box<Condition>),
    /// It does not hold.
    Not(Box<Condition>),
}

/// A term's value in one row.
enum Value<'a> {
    Number(f64),
    Text(&'a str),
}

impl Condition {
    /// Whether the row with GROUP BY `key` and released aggregate values
    /// `values` satisfies the condition, in SQL's three-valued logic: `None`
    /// when it is unknown (a key that is not a number compared with one, or
    /// a NaN), and the row is then left out, as SQL leaves it out.
    pub fn holds(&self, key: &[String], values: &[f64]) -> Option<bool> {
        match self {
            Condition::Compare(left, comparison, right) => {
                let ordering = compare(value(left, key, values)?, value(right, key, values)?)?;
                Some(comparison.holds(ordering))
            }
            Condition::And(a, b) => match (a.holds(key, values), b.holds(key, values)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Condition::Or(a, b) => match (a.holds(key, values), b.holds(key, values)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Condition::Not(a) => a.holds(key, values).map(|holds| !holds),
        }
    }

    /// The condition as `--explain` prints it, with the GROUP BY keys' and
    /// the aggregates' names.
    ///
    /// ```
    /// use dpkit_release::having::{Comparison, Condition, Term};
    /// let having = Condition::Compare(Term::Aggregate(0), Comparison::Greater, Term::Number(10.0));
    /// assert_eq!(having.describe(&[], &["n".to_string()]), "n > 10");
    /// ```
    pub fn describe(&self, group_names: &[String], aggregate_names: &[String]) -> String {
        let mut text = String::new();
        self.write(&(group_names, aggregate_names), &mut text);
        text
    }

    fn write(&self, query: &Names<'_>, text: &mut String) {
        let _ = match self {
            Condition::Compare(left, comparison, right) => write!(
                text,
                "{} {} {}",
                term_name(left, query),
                comparison.symbol(),
                term_name(right, query)
            ),
            Condition::And(a, b) | Condition::Or(a, b) => {
                text.push('(');
                a.write(query, text);
                text.push_str(if matches!(self, Condition::And(..)) {
                    " AND "
                } else {
                    " OR "
                });
                b.write(query, text);
                text.push(')');
                Ok(())
            }
            Condition::Not(a) => {
                text.push_str("NOT (");
                a.write(query, text);
                text.push(')');
                Ok(())
            }
        };
    }
}

fn value<'a>(term: &'a Term, key: &'a [String], values: &[f64]) -> Option<Value<'a>> {
    Some(match term {
        Term::Group(g) => Value::Text(key.get(*g)?),
        Term::Aggregate(a) => Value::Number(*values.get(*a)?),
        Term::Number(x) => Value::Number(*x),
        Term::Text(t) => Value::Text(t),
        Term::Combined(c) => Value::Number(c.value(values)),
    })
}

/// Numbers as numbers, texts as texts, and a key against a number as the
/// number it reads as (a binned key such as `age / 10`).
fn compare(a: Value<'_>, b: Value<'_>) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.partial_cmp(&y),
        (Value::Text(x), Value::Text(y)) => Some(x.cmp(y)),
        (Value::Text(x), Value::Number(y)) => x.trim().parse::<f64>().ok()?.partial_cmp(&y),
        (Value::Number(x), Value::Text(y)) => x.partial_cmp(&y.trim().parse::<f64>().ok()?),
    }
}

/// The GROUP BY keys' names and the aggregates'.
type Names<'a> = (&'a [String], &'a [String]);

fn term_name(term: &Term, (groups, aggregates): &Names<'_>) -> String {
    match term {
        Term::Group(g) => groups.get(*g).cloned().unwrap_or_default(),
        Term::Aggregate(a) => aggregates.get(*a).cloned().unwrap_or_default(),
        Term::Number(x) => x.to_string(),
        Term::Text(t) => format!("'{}'", t.replace('\'', "''")),
        Term::Combined(c) => c.describe(aggregates),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(left: Term, comparison: Comparison, right: Term) -> Condition {
        Condition::Compare(left, comparison, right)
    }

    #[test]
    fn each_comparison_reads_numbers_texts_and_numeric_keys() {
        let key = ["30".to_string(), "Male".to_string()];
        let values = [12.5];
        let cases = [
            (
                Term::Aggregate(0),
                Comparison::Greater,
                Term::Number(12.0),
                true,
            ),
            (
                Term::Aggregate(0),
                Comparison::LessOrEqual,
                Term::Number(12.5),
                true,
            ),
            (
                Term::Aggregate(0),
                Comparison::Less,
                Term::Number(12.5),
                false,
            ),
            (
                Term::Aggregate(0),
                Comparison::GreaterOrEqual,
                Term::Number(13.0),
                false,
            ),
            (Term::Group(0), Comparison::Equal, Term::Number(30.0), true),
            (Term::Group(0), Comparison::Less, Term::Number(4.0), false),
            (
                Term::Group(1),
                Comparison::Equal,
                Term::Text("Male".into()),
                true,
            ),
            (
                Term::Group(1),
                Comparison::NotEqual,
                Term::Text("Male".into()),
                false,
            ),
            (
                Term::Number(20.0),
                Comparison::Greater,
                Term::Aggregate(0),
                true,
            ),
        ];
        for (left, comparison, right, expected) in cases {
            let shown = format!("{left:?} {comparison:?} {right:?}");
            let condition = compare(left, comparison, right);
            assert_eq!(condition.holds(&key, &values), Some(expected), "{shown}");
        }
    }

    #[test]
    fn unknown_comparisons_follow_sql_three_valued_logic() {
        let key = ["Male".to_string()];
        let unknown = || compare(Term::Group(0), Comparison::Greater, Term::Number(1.0));
        let yes = || compare(Term::Number(1.0), Comparison::Equal, Term::Number(1.0));
        let no = || compare(Term::Number(1.0), Comparison::Equal, Term::Number(2.0));
        assert_eq!(unknown().holds(&key, &[]), None);
        assert_eq!(Condition::Not(Box::new(unknown())).holds(&key, &[]), None);
        let and = |a: Condition, b: Condition| Condition::And(Box::new(a), Box::new(b));
        let or = |a: Condition, b: Condition| Condition::Or(Box::new(a), Box::new(b));
        assert_eq!(and(unknown(), no()).holds(&key, &[]), Some(false));
        assert_eq!(and(unknown(), yes()).holds(&key, &[]), None);
        assert_eq!(or(unknown(), yes()).holds(&key, &[]), Some(true));
        assert_eq!(or(unknown(), no()).holds(&key, &[]), None);
        let nan = compare(Term::Aggregate(0), Comparison::NotEqual, Term::Number(1.0));
        assert_eq!(nan.holds(&key, &[f64::NAN]), None);
    }
}
