//! The output grid of the real-valued mechanisms (the floating-point defence).
//!
//! Mironov (2012) showed that `q + X` computed in doubles leaks `q`: the set
//! of doubles it can produce depends on `q`. dpkit's real-valued mechanisms
//! never add floating-point noise. They round the true value to a grid of
//! spacing `g = 2^k` (dividing by a power of two is exact), add *integer*
//! noise drawn by an exact sampler, and multiply back. Every output is
//! `fl(n)·g` for an integer `n`, whatever the input, and every grid point is
//! reachable from every input. Rounding moves the value by at most `g/2`;
//! neighbouring inputs `|q − q'| ≤ Δ` land at most `⌈Δ/g⌉` grid steps apart,
//! and the noise is calibrated to exactly that index sensitivity.

use crate::error::{Error, Result};

/// Grid positions are kept below 2^62 in magnitude, so that index arithmetic
/// stays in `i64` (fast, exact) with room for the noise.
const MAX_INDEX_MAGNITUDE: f64 = 4_611_686_018_427_387_904.0; // 2^62

/// A grid of spacing `2^k`.
///
/// ```
/// use dpkit_core::lattice::Lattice;
/// let grid = Lattice::finer_than(1.0, 12).unwrap();
/// assert_eq!(grid.spacing(), 1.0 / 4096.0);
/// let index = grid.index_of(0.30).unwrap();
/// assert_eq!(grid.value_at(index), 1229.0 / 4096.0);
/// assert_eq!(grid.index_sensitivity(1.0), 4096);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lattice {
    spacing: f64,
    inverse_spacing: f64,
}

impl Lattice {
    /// The grid `2^(⌊log₂ scale⌋ − resolution_bits)`: at least `2^resolution_bits`
    /// points per `scale`, and at most twice that.
    pub fn finer_than(scale: f64, resolution_bits: i32) -> Result<Self> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(Error::InvalidParameter {
                name: "lattice scale",
                reason: format!("must be finite and > 0, got {scale}"),
            });
        }
        let exponent = floor_log2(scale) - resolution_bits;
        if !(-1000..=1000).contains(&exponent) {
            return Err(Error::InvalidParameter {
                name: "lattice scale",
                reason: format!("{scale} is outside the supported range 2^-990 .. 2^990"),
            });
        }
        Ok(Self {
            spacing: 2f64.powi(exponent),
            inverse_spacing: 2f64.powi(-exponent),
        })
    }

    /// The grid spacing `g`.
    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// The grid index nearest to `value` (ties upwards), without any rounding
    /// error: `value · 2^(−k)` is exact and so are `floor` and the tie test.
    /// Values beyond `2^62·g` in magnitude are refused.
    #[inline]
    pub fn index_of(&self, value: f64) -> Result<i64> {
        if !value.is_finite() {
            return Err(Error::NonFiniteValue);
        }
        let scaled = value * self.inverse_spacing;
        if scaled.abs() >= MAX_INDEX_MAGNITUDE {
            return Err(Error::ValueOutOfRange);
        }
        Ok(nearest_integer(scaled))
    }

    /// Checks that every value has a grid index, in one branch-free pass,
    /// and reports the first failure as [`Lattice::index_of`] would.
    pub(crate) fn check_all(&self, values: &[f64]) -> Result<()> {
        // NaN fails the comparison too, so one test covers both errors.
        let all_fit = values.iter().fold(true, |fit, &v| {
            fit & ((v * self.inverse_spacing).abs() < MAX_INDEX_MAGNITUDE)
        });
        if all_fit {
            return Ok(());
        }
        values.iter().try_for_each(|&v| self.index_of(v).map(drop))
    }

    /// [`Lattice::index_of`] for a value that [`Lattice::check_all`] accepted.
    #[inline]
    pub(crate) fn index_of_checked(&self, value: f64) -> i64 {
        nearest_integer(value * self.inverse_spacing)
    }

    /// The value of grid point `index` (rounded to the nearest double when the
    /// index needs more than 53 bits: a fixed function of the index).
    #[inline]
    pub fn value_at(&self, index: i64) -> f64 {
        index as f64 * self.spacing
    }

    /// How many grid steps apart two values at distance `sensitivity` can round to.
    pub fn index_sensitivity(&self, sensitivity: f64) -> u64 {
        (sensitivity / self.spacing).ceil() as u64
    }
}

/// The integer nearest to `scaled` (ties upwards), exactly, for
/// `|scaled| < 2^62`: floor without a libm call (truncate, then step down
/// for negatives), then the tie test, which is exact in doubles.
#[inline]
fn nearest_integer(scaled: f64) -> i64 {
    let truncated = scaled as i64;
    let floor = truncated - i64::from((truncated as f64) > scaled);
    let round_up = scaled - floor as f64 >= 0.5;
    floor + i64::from(round_up)
}

/// `⌊log₂ x⌋` for a positive finite double, read off its bits (exact).
fn floor_log2(x: f64) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // Subnormal: the leading set bit of the fraction decides.
        let fraction = bits & ((1u64 << 52) - 1);
        -1074 + 63 - fraction.leading_zeros() as i32
    } else {
        biased - 1023
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_log2_is_exact_at_powers_of_two_and_between() {
        assert_eq!(floor_log2(1.0), 0);
        assert_eq!(floor_log2(0.999_999), -1);
        assert_eq!(floor_log2(1024.0), 10);
        assert_eq!(floor_log2(1023.9), 9);
        assert_eq!(floor_log2(f64::MIN_POSITIVE / 4.0), -1024);
    }

    #[test]
    fn rounding_is_translation_invariant_so_index_sensitivity_holds() {
        let grid = Lattice::finer_than(1.0, 4).unwrap();
        for k in 0..1000 {
            let q = -3.0 + k as f64 * 0.00731;
            let a = grid.index_of(q).unwrap();
            let b = grid.index_of(q + 1.0).unwrap();
            assert!((b - a).unsigned_abs() <= grid.index_sensitivity(1.0));
        }
    }

    #[test]
    fn bad_values_are_rejected_without_echo() {
        let grid = Lattice::finer_than(1.0, 12).unwrap();
        assert_eq!(grid.index_of(f64::NAN), Err(Error::NonFiniteValue));
        assert_eq!(grid.index_of(1e300), Err(Error::ValueOutOfRange));
        assert!(!Error::ValueOutOfRange.to_string().contains("1e300"));
    }
}
