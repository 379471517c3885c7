//! Output events: the sets of outputs whose probabilities the auditor compares.

use std::fmt;

/// A set of mechanism outputs (outputs are `f64`; integers and category
/// indices are exact in `f64`).
///
/// ```
/// use dpkit_audit::event::OutputEvent;
/// let tail = OutputEvent::Interval { above: Some(1.0), at_most: None };
/// assert!(tail.contains(1.5) && !tail.contains(1.0));
/// let off_grid = OutputEvent::GridResidue { max_magnitude: 0.5, grid_exponent: -53, on_grid: false };
/// assert!(off_grid.contains(0.25 + 2f64.powi(-54)));
/// assert!(!off_grid.contains(0.25));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum OutputEvent {
    /// `above < y ≤ at_most` (a missing end is unbounded): thresholds and intervals.
    Interval {
        /// Exclusive lower end.
        above: Option<f64>,
        /// Inclusive upper end.
        at_most: Option<f64>,
    },
    /// `y` is one of these values (sorted): single outputs and the union of
    /// outputs whose likelihood ratio is largest.
    Values(Vec<f64>),
    /// `|y| ≤ max_magnitude` and `y` is (or is not) a multiple of
    /// `2^grid_exponent`: catches floating-point artefacts, where the last bits
    /// of an output depend on the input.
    GridResidue {
        /// Only outputs this small in magnitude.
        max_magnitude: f64,
        /// The grid `2^grid_exponent·ℤ`.
        grid_exponent: i32,
        /// Whether the event is "on the grid" or "off it".
        on_grid: bool,
    },
}

impl OutputEvent {
    /// Whether output `y` is in the event.
    pub fn contains(&self, y: f64) -> bool {
        match self {
            Self::Interval { above, at_most } => {
                above.is_none_or(|a| y > a) && at_most.is_none_or(|b| y <= b)
            }
            Self::Values(values) => values.binary_search_by(|v| v.total_cmp(&y)).is_ok(),
            Self::GridResidue {
                max_magnitude,
                grid_exponent,
                on_grid,
            } => {
                y.abs() <= *max_magnitude && (finest_grid_exponent(y) >= *grid_exponent) == *on_grid
            }
        }
    }

    /// The intervals of the real line this event covers, for drawing it
    /// (`None` for a grid-residue event, which is not a union of intervals).
    pub fn spans(&self) -> Option<Vec<(f64, f64)>> {
        match self {
            Self::Interval { above, at_most } => Some(vec![(
                above.unwrap_or(f64::NEG_INFINITY),
                at_most.unwrap_or(f64::INFINITY),
            )]),
            Self::Values(values) => Some(values.iter().map(|&v| (v, v)).collect()),
            Self::GridResidue { .. } => None,
        }
    }
}

/// The largest `e` with `y ∈ 2^e·ℤ` (`i32::MAX` for zero, which is on every grid).
///
/// ```
/// use dpkit_audit::event::finest_grid_exponent;
/// assert_eq!(finest_grid_exponent(6.0), 1);
/// assert_eq!(finest_grid_exponent(0.375), -3);
/// assert_eq!(finest_grid_exponent(0.0), i32::MAX);
/// ```
pub fn finest_grid_exponent(y: f64) -> i32 {
    if y == 0.0 || !y.is_finite() {
        return i32::MAX;
    }
    let bits = y.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, exponent) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    exponent + mantissa.trailing_zeros() as i32
}

impl fmt::Display for OutputEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Interval { above, at_most } => match (above, at_most) {
                (Some(a), Some(b)) => write!(f, "{a} < y ≤ {b}"),
                (Some(a), None) => write!(f, "y > {a}"),
                (None, Some(b)) => write!(f, "y ≤ {b}"),
                (None, None) => write!(f, "any y"),
            },
            Self::Values(values) => {
                let shown: Vec<String> = values.iter().take(6).map(|v| v.to_string()).collect();
                let more = values.len().saturating_sub(6);
                if more == 0 {
                    write!(f, "y ∈ {{{}}}", shown.join(", "))
                } else {
                    write!(f, "y ∈ {{{}, … {more} more}}", shown.join(", "))
                }
            }
            Self::GridResidue {
                max_magnitude,
                grid_exponent,
                on_grid,
            } => {
                let relation = if *on_grid { "a" } else { "not a" };
                write!(
                    f,
                    "|y| ≤ {max_magnitude} and y is {relation} multiple of 2^{grid_exponent}"
                )
            }
        }
    }
}
