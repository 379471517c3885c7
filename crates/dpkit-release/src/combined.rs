//! Arithmetic over a row's released aggregates (`SUM(a) / COUNT(*)`,
//! `100 * COUNT(CASE …) / COUNT(*)`, `AVG(x) - MEDIAN(x)`): post-processing
//! of noisy values, which costs nothing more.
//!
//! The interval: each aggregate the expression uses holds its true value
//! in its interval with probability ≥ 1 − α/j when the expression uses `j`
//! aggregates (the noise plan gives them that level, see
//! [`crate::measured::MeasuredQuery::interval_divisor`]), so all of them
//! do with probability ≥ 1 − α (a union bound), and then the true value of
//! the expression lies in the interval that interval arithmetic gives over
//! their intervals. A division whose divisor's interval reaches 0 has no
//! bound: its interval is the whole line (shown as `[-inf, inf]`).
//!
//! Arithmetic is on real numbers: `SUM(x) / COUNT(*)` is a ratio, not the
//! integer division SQL would do on two integers.

use std::collections::BTreeSet;

use crate::answer::Cell;
pub use crate::answer::UNBOUNDED;

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arithmetic {
    /// `+`
    Add,
    /// `-`
    Subtract,
    /// `*`
    Multiply,
    /// `/`
    Divide,
}

/// An expression over a row's released aggregates and numbers.
///
/// ```
/// use dpkit_release::combined::{Arithmetic, Combination};
/// use dpkit_release::Cell;
/// let ratio = Combination::Binary(
///     Box::new(Combination::Aggregate(0)),
///     Arithmetic::Divide,
///     Box::new(Combination::Aggregate(1)),
/// );
/// let cell = |value: f64, h: f64| Cell::Value { value, low: value - h, high: value + h, expected_error: Some(h / 3.0) };
/// let Cell::Value { value, low, high, .. } = ratio.cell(&[cell(300.0, 30.0), cell(100.0, 10.0)]) else { panic!() };
/// // 300 ± 30 over 100 ± 10: from 270/110 to 330/90, widened by a few ulps.
/// assert_eq!(value, 3.0);
/// assert!(low <= 270.0 / 110.0 && low > 2.45);
/// assert!(high >= 330.0 / 90.0 && high < 3.67);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Combination {
    /// Aggregate number i's released value.
    Aggregate(usize),
    /// A number written in the query.
    Number(f64),
    /// `-x`
    Negate(Box<Combination>),
    /// `x op y`
    Binary(Box<Combination>, Arithmetic, Box<Combination>),
}

/// A value, its interval and its first-order expected error.
#[derive(Debug, Clone, Copy)]
struct Bounded {
    value: f64,
    low: f64,
    high: f64,
    error: Option<f64>,
}

impl Combination {
    /// The aggregates it reads.
    pub fn aggregates(&self) -> BTreeSet<usize> {
        let mut found = BTreeSet::new();
        self.collect(&mut found);
        found
    }

    fn collect(&self, found: &mut BTreeSet<usize>) {
        match self {
            Self::Aggregate(a) => {
                found.insert(*a);
            }
            Self::Number(_) => {}
            Self::Negate(inner) => inner.collect(found),
            Self::Binary(left, _, right) => {
                left.collect(found);
                right.collect(found);
            }
        }
    }

    /// Its value from the row's released aggregate values (NaN for a
    /// division by 0, which HAVING reads as unknown).
    pub fn value(&self, values: &[f64]) -> f64 {
        match self {
            Self::Aggregate(a) => values.get(*a).copied().unwrap_or(f64::NAN),
            Self::Number(n) => *n,
            Self::Negate(inner) => -inner.value(values),
            Self::Binary(left, op, right) => {
                let (x, y) = (left.value(values), right.value(values));
                match op {
                    Arithmetic::Add => x + y,
                    Arithmetic::Subtract => x - y,
                    Arithmetic::Multiply => x * y,
                    Arithmetic::Divide if y == 0.0 => f64::NAN,
                    Arithmetic::Divide => x / y,
                }
            }
        }
    }

    /// Its released cell from the row's aggregate cells.
    pub fn cell(&self, cells: &[Cell]) -> Cell {
        let b = self.bounded(cells);
        let finite = |x: f64| match x.is_nan() {
            true => 0.0,
            false => x.clamp(-UNBOUNDED, UNBOUNDED),
        };
        let (low, high) = match b.low.is_nan() || b.high.is_nan() {
            true => (-UNBOUNDED, UNBOUNDED),
            false => (finite(b.low), finite(b.high)),
        };
        Cell::Value {
            value: finite(b.value).clamp(low, high),
            low,
            high,
            expected_error: b.error.filter(|e| e.is_finite()),
        }
    }

    fn bounded(&self, cells: &[Cell]) -> Bounded {
        match self {
            Self::Aggregate(a) => match cells.get(*a) {
                Some(Cell::Value {
                    value,
                    low,
                    high,
                    expected_error,
                }) => Bounded {
                    value: *value,
                    low: *low,
                    high: *high,
                    error: *expected_error,
                },
                _ => unbounded(f64::NAN),
            },
            Self::Number(n) => Bounded {
                value: *n,
                low: *n,
                high: *n,
                error: Some(0.0),
            },
            Self::Negate(inner) => {
                let b = inner.bounded(cells);
                Bounded {
                    value: -b.value,
                    low: -b.high,
                    high: -b.low,
                    error: b.error,
                }
            }
            Self::Binary(left, op, right) => {
                combine(left.bounded(cells), *op, right.bounded(cells))
            }
        }
    }

    /// As SQL, with each aggregate by its name.
    pub fn describe(&self, names: &[String]) -> String {
        match self {
            Self::Aggregate(a) => names.get(*a).cloned().unwrap_or_default(),
            Self::Number(n) => format!("{n}"),
            Self::Negate(inner) => format!("-({})", inner.describe(names)),
            Self::Binary(left, op, right) => {
                let op = match op {
                    Arithmetic::Add => "+",
                    Arithmetic::Subtract => "-",
                    Arithmetic::Multiply => "*",
                    Arithmetic::Divide => "/",
                };
                format!("({} {op} {})", left.describe(names), right.describe(names))
            }
        }
    }
}

fn unbounded(value: f64) -> Bounded {
    Bounded {
        value,
        low: f64::NEG_INFINITY,
        high: f64::INFINITY,
        error: None,
    }
}

/// `x op y` on values, intervals (interval arithmetic, widened by a few
/// ulps for the roundings) and first-order errors.
fn combine(x: Bounded, op: Arithmetic, y: Bounded) -> Bounded {
    let errors = x.error.zip(y.error);
    let (value, corners, error) = match op {
        Arithmetic::Add => (
            x.value + y.value,
            vec![x.low + y.low, x.high + y.high],
            errors.map(|(a, b)| a + b),
        ),
        Arithmetic::Subtract => (
            x.value - y.value,
            vec![x.low - y.high, x.high - y.low],
            errors.map(|(a, b)| a + b),
        ),
        Arithmetic::Multiply => (
            x.value * y.value,
            products(x, y, |a, b| a * b),
            errors.map(|(a, b)| y.value.abs() * a + x.value.abs() * b),
        ),
        Arithmetic::Divide => {
            if y.low <= 0.0 && y.high >= 0.0 {
                let value = if y.value == 0.0 {
                    0.0
                } else {
                    x.value / y.value
                };
                return unbounded(value);
            }
            (
                x.value / y.value,
                products(x, y, |a, b| a / b),
                errors.map(|(a, b)| a / y.value.abs() + x.value.abs() * b / (y.value * y.value)),
            )
        }
    };
    let low = corners.iter().copied().fold(f64::INFINITY, f64::min);
    let high = corners.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // Sums, differences and products of whole numbers below 2^53 are
    // exact in floating point; anything else is widened by a few ulps.
    let whole = |x: f64| x.fract() == 0.0 && x.abs() < 2f64.powi(53);
    let exact = op != Arithmetic::Divide
        && [x.low, x.high, y.low, y.high, low, high]
            .into_iter()
            .all(whole);
    let slack = match exact {
        true => 0.0,
        false => 4.0 * f64::EPSILON * low.abs().max(high.abs()),
    };
    Bounded {
        value,
        low: low - slack,
        high: high + slack,
        error,
    }
}

/// `f` at the four corners of the two intervals.
fn products(x: Bounded, y: Bounded, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    vec![
        f(x.low, y.low),
        f(x.low, y.high),
        f(x.high, y.low),
        f(x.high, y.high),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(value: f64, low: f64, high: f64) -> Cell {
        Cell::Value {
            value,
            low,
            high,
            expected_error: Some(1.0),
        }
    }

    fn ends(cell: Cell) -> (f64, f64, f64) {
        match cell {
            Cell::Value {
                value, low, high, ..
            } => (value, low, high),
            Cell::Key(_) => panic!("a key"),
        }
    }

    fn binary(x: Combination, op: Arithmetic, y: Combination) -> Combination {
        Combination::Binary(Box::new(x), op, Box::new(y))
    }

    /// Every value of the expression over points of the component
    /// intervals lies in the interval given: checked on a grid of points,
    /// for every operator and signs on both sides of 0.
    #[test]
    fn the_interval_holds_every_value_its_components_allow() {
        use Combination::Aggregate as A;
        let intervals = [(-3.0, -1.0), (-2.0, 5.0), (0.5, 4.0), (7.0, 7.0)];
        for op in [
            Arithmetic::Add,
            Arithmetic::Subtract,
            Arithmetic::Multiply,
            Arithmetic::Divide,
        ] {
            for &(a, b) in &intervals {
                for &(c, d) in &intervals {
                    let cells = [cell(a, a, b), cell(c, c, d)];
                    let (_, low, high) = ends(binary(A(0), op, A(1)).cell(&cells));
                    for i in 0..=20 {
                        for j in 0..=20 {
                            let x = a + (b - a) * f64::from(i) / 20.0;
                            let y = c + (d - c) * f64::from(j) / 20.0;
                            let exact = match op {
                                Arithmetic::Add => x + y,
                                Arithmetic::Subtract => x - y,
                                Arithmetic::Multiply => x * y,
                                Arithmetic::Divide if y == 0.0 => continue,
                                Arithmetic::Divide => x / y,
                            };
                            assert!(low <= exact && exact <= high, "{op:?} {x} {y}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn whole_numbers_add_and_multiply_without_slack() {
        use Combination::{Aggregate as A, Number as N};
        let cells = [cell(32561.0, 32555.0, 32567.0)];
        let (value, low, high) = ends(binary(A(0), Arithmetic::Multiply, N(2.0)).cell(&cells));
        assert_eq!((value, low, high), (65122.0, 65110.0, 65134.0));
        let (_, low, _) = ends(binary(A(0), Arithmetic::Multiply, N(0.1)).cell(&cells));
        assert!(low < 3255.5, "a real product keeps its slack: {low}");
    }

    #[test]
    fn a_divisor_that_may_be_zero_leaves_the_ratio_unbounded_but_finite() {
        use Combination::Aggregate as A;
        let cells = [cell(10.0, 8.0, 12.0), cell(0.0, 0.0, 3.0)];
        let (value, low, high) = ends(binary(A(0), Arithmetic::Divide, A(1)).cell(&cells));
        assert_eq!((value, low, high), (0.0, -UNBOUNDED, UNBOUNDED));
        let cells = [cell(10.0, 8.0, 12.0), cell(2.0, -1.0, 3.0)];
        let (value, low, high) = ends(binary(A(0), Arithmetic::Divide, A(1)).cell(&cells));
        assert_eq!((value, low, high), (5.0, -UNBOUNDED, UNBOUNDED));
        let percent = binary(
            Combination::Number(100.0),
            Arithmetic::Multiply,
            binary(A(0), Arithmetic::Divide, A(1)),
        );
        assert_eq!(percent.aggregates().into_iter().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(
            percent.describe(&["a".into(), "b".into()]),
            "(100 * (a / b))"
        );
    }
}
