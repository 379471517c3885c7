//! Closed-form accuracy of a mechanism's noise, for error bars on released values.

use crate::error::{Error, Result};

/// The accuracy of a mechanism's released value, from its noise's closed form.
///
/// For the real-valued mechanisms that release on a grid (see
/// [`crate::lattice`]), `expected_absolute_error` and `variance` describe the
/// noise added to the grid-rounded true value, and
/// `confidence_half_width` also adds the rounding bound `g/2`, so that the
/// interval keeps its coverage.
pub trait NoiseAccuracy {
    /// `E|X|` of the noise.
    fn expected_absolute_error(&self) -> f64;
    /// `Var X` of the noise.
    fn variance(&self) -> f64;
    /// The smallest `h` with `P(|released − true| ≤ h) ≥ 1 − alpha`, `alpha ∈ (0, 1)`.
    fn confidence_half_width(&self, alpha: f64) -> Result<f64>;

    /// The three numbers together, for a report.
    ///
    /// ```
    /// use dpkit_core::{accuracy::NoiseAccuracy, mechanism::Laplace};
    /// let bars = Laplace::new(1.0, 1.0).unwrap().error_bars(0.05).unwrap();
    /// // Laplace: E|X| = λ = 1; 95% half-width λ·ln(20) ≈ 3.0
    /// assert!((bars.expected_absolute_error - 1.0).abs() < 1e-3);
    /// assert!((bars.half_width - 20f64.ln()).abs() < 2e-3);
    /// ```
    fn error_bars(&self, alpha: f64) -> Result<ErrorBars> {
        Ok(ErrorBars {
            expected_absolute_error: self.expected_absolute_error(),
            standard_deviation: self.variance().sqrt(),
            confidence_level: 1.0 - alpha,
            half_width: self.confidence_half_width(alpha)?,
        })
    }
}

/// Error bars of one released value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorBars {
    /// `E|X|`.
    pub expected_absolute_error: f64,
    /// `√Var X`.
    pub standard_deviation: f64,
    /// `1 − α`.
    pub confidence_level: f64,
    /// The released value ± this covers the true value with that confidence.
    pub half_width: f64,
}

/// Validates a significance level `α ∈ (0, 1)`.
pub(crate) fn require_alpha(alpha: f64) -> Result<f64> {
    if alpha > 0.0 && alpha < 1.0 {
        Ok(alpha)
    } else {
        Err(Error::InvalidParameter {
            name: "alpha",
            reason: format!("must lie strictly between 0 and 1, got {alpha}"),
        })
    }
}

/// The smallest integer `t ≥ 0` with `tail(t) ≤ alpha`, for a non-increasing tail.
pub(crate) fn smallest_integer_with_tail_below(alpha: f64, tail: impl Fn(u64) -> f64) -> u64 {
    if tail(0) <= alpha {
        return 0;
    }
    let mut high = 1u64;
    while tail(high) > alpha {
        high = high.saturating_mul(2);
        if high == u64::MAX {
            return high;
        }
    }
    let mut low = high / 2; // tail(low) > alpha
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if tail(middle) > alpha {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}
