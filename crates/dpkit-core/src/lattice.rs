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
    exponent: i32,
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
                reason: format!("{scale:e} is outside the supported range 2^-990 .. 2^990"),
            });
        }
        Ok(Self {
            exponent,
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

    /// The grid index nearest to the exact value `value` (ties upwards),
    /// in 128 bits, with no rounding error at any size: the value is a
    /// whole number of steps of `2^e`, and this grid's steps are `2^k`, so
    /// the index is `value.steps · 2^(e − k)` rounded by [`GridValue::steps_on`].
    /// Rounding to the nearest grid point commutes with moving the value by a
    /// whole number of steps, so values `Δ` apart land at most
    /// `⌈Δ/g⌉` indices apart, as in [`Lattice::index_of`].
    ///
    /// ```
    /// use dpkit_core::lattice::{GridValue, Lattice};
    /// let grid = Lattice::finer_than(1.0, 2).unwrap(); // steps of 1/4
    /// let huge = GridValue::new(i128::from(u64::MAX) * 1000, 0);
    /// assert_eq!(grid.index_of_exact(huge).unwrap(), i128::from(u64::MAX) * 4000);
    /// assert_eq!(grid.index_of_exact(GridValue::new(3, -3)).unwrap(), 2); // 3/8 → 2/4
    /// ```
    pub fn index_of_exact(&self, value: GridValue) -> Result<i128> {
        value
            .steps_on(self.exponent)
            .filter(|index| index.unsigned_abs() < MAX_EXACT_INDEX)
            .ok_or(Error::ValueOutOfRange)
    }

    /// The value of grid point `index`, rounded once to the nearest double
    /// (a fixed function of the index: post-processing). Its relative
    /// rounding is at most 2⁻⁵³.
    pub fn value_at_exact(&self, index: i128) -> f64 {
        GridValue::new(index, self.exponent).to_f64()
    }

    /// How many grid steps apart two values at distance `sensitivity` can round to.
    pub fn index_sensitivity(&self, sensitivity: f64) -> u64 {
        (sensitivity / self.spacing).ceil() as u64
    }
}

/// Exact grid indices are kept below 2^120 in magnitude, so that adding
/// 64-bit noise can never overflow 128 bits.
const MAX_EXACT_INDEX: u128 = 1 << 120;

/// An exact number on a power-of-two grid, `steps · 2^exponent`: a sum of
/// many values rounded to a public grid, say, added up in whole steps.
/// Unlike a double it has no rounding error at any size below 2^127 steps,
/// so releasing it never depends on how large the total grew.
///
/// ```
/// use dpkit_core::lattice::GridValue;
/// let sum = GridValue::new(15_099_494_400_000_000, -24); // 10^7 values of 90
/// assert_eq!(sum.to_f64(), 900_000_000.0);
/// assert_eq!(GridValue::whole(-7).steps_on(1), Some(-3)); // −3.5 rounds up to −3
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GridValue {
    steps: i128,
    exponent: i32,
}

impl GridValue {
    /// `steps · 2^exponent`.
    pub fn new(steps: i128, exponent: i32) -> Self {
        Self { steps, exponent }
    }

    /// A whole number.
    pub fn whole(value: i128) -> Self {
        Self::new(value, 0)
    }

    /// The number of steps.
    pub fn steps(self) -> i128 {
        self.steps
    }

    /// The grid's exponent.
    pub fn exponent(self) -> i32 {
        self.exponent
    }

    /// The exact sum of two values, on the finer of their grids, saturating
    /// at the ends of 128 bits (which no sum of fewer than 2^63 values of
    /// at most 2^63 steps each can reach).
    ///
    /// ```
    /// use dpkit_core::lattice::GridValue;
    /// let sum = GridValue::new(3, -1).saturating_add(GridValue::whole(2));
    /// assert_eq!(sum, GridValue::new(7, -1));
    /// ```
    pub fn saturating_add(self, other: Self) -> Self {
        let exponent = self.exponent.min(other.exponent);
        let on_grid = |v: Self| {
            v.steps_on(exponent)
                .unwrap_or(if v.steps < 0 { i128::MIN } else { i128::MAX })
        };
        Self::new(on_grid(self).saturating_add(on_grid(other)), exponent)
    }

    /// The nearest double (its relative rounding is at most 2⁻⁵³; exact
    /// below 2^53 steps). Scaling by the power of two is done in two
    /// halves, so that it neither overflows nor underflows on the way.
    pub fn to_f64(self) -> f64 {
        let half = self.exponent / 2;
        self.steps as f64 * 2f64.powi(half) * 2f64.powi(self.exponent - half)
    }

    /// The whole number of steps of `2^target` nearest to this value, ties
    /// upwards: `⌊v/2^target + 1/2⌋`, computed exactly in integers. The
    /// rounding is translation invariant (moving the value by whole steps
    /// of the target grid moves the result by as many), unlike rounding
    /// half away from zero, which sends −0.5 to −1 and 0.5 to 1. `None`
    /// when a finer target would overflow 128 bits. (The release never
    /// meets `None`: a mechanism's grid is at most 2^20 finer than the
    /// smaller of its Δ and its noise's scale, and with ε at most 1,000
    /// that is within about 2^40 of a sum's grid, 2^-30 of its bound.)
    pub fn steps_on(self, target: i32) -> Option<i128> {
        let shift = i64::from(target) - i64::from(self.exponent);
        if shift <= 0 {
            if self.steps == 0 {
                return Some(0);
            }
            // 2^127 does not fit in i128 (`checked_shl` would give its
            // sign bit, i128::MIN).
            let left = u32::try_from(-shift).ok().filter(|&left| left < 127)?;
            return self.steps.checked_mul(1i128 << left);
        }
        if shift >= 128 {
            // |steps| ≤ 2^127 on a grid 2^128 times finer: within half a
            // target step of 0, and −1/2 rounds up to 0.
            return Some(0);
        }
        // ⌊steps / 2^shift⌋ (an arithmetic shift floors) plus the bit just
        // below the cut: exactly ⌊steps / 2^shift + 1/2⌋.
        let shift = shift as u32;
        Some((self.steps >> shift) + ((self.steps >> (shift - 1)) & 1))
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
    fn exact_rounding_is_nearest_ties_up_and_translation_invariant() {
        for steps in -40i128..40 {
            for shift in 1..5 {
                let value = GridValue::new(steps, 0);
                let expected = (steps as f64 / f64::from(1 << shift) + 0.5).floor() as i128;
                assert_eq!(value.steps_on(shift), Some(expected), "{steps} >> {shift}");
                let moved = GridValue::new(steps + (3 << shift), 0);
                assert_eq!(moved.steps_on(shift), Some(expected + 3));
            }
        }
        assert_eq!(GridValue::new(5, -2).steps_on(-4), Some(20));
        assert_eq!(GridValue::new(i128::MAX, 0).steps_on(-1), None);
        assert_eq!(GridValue::new(1, 0).steps_on(-127), None, "not i128::MIN");
        assert_eq!(GridValue::new(1, 0).steps_on(-126), Some(1 << 126));
        assert_eq!(GridValue::new(i128::MAX, 0).steps_on(200), Some(0));
        assert_eq!(GridValue::new(i128::MIN, 0).steps_on(127), Some(-1));
        assert_eq!(GridValue::new(i128::MIN, 0).steps_on(128), Some(0));
        assert_eq!(GridValue::new(-1, 0).steps_on(127), Some(0));
    }

    #[test]
    fn exact_indices_match_the_double_path_where_it_is_exact() {
        let grid = Lattice::finer_than(3.0, 10).unwrap();
        for k in -500i128..500 {
            let value = GridValue::new(k * 7919, -20);
            let double = value.to_f64();
            assert_eq!(
                grid.index_of_exact(value).unwrap(),
                i128::from(grid.index_of(double).unwrap())
            );
        }
        let beyond = GridValue::new(1 << 121, grid.exponent);
        assert_eq!(grid.index_of_exact(beyond), Err(Error::ValueOutOfRange));
        assert_eq!(
            grid.value_at_exact(1 << 100),
            2f64.powi(100 + grid.exponent)
        );
    }

    #[test]
    fn bad_values_are_rejected_without_echo() {
        let grid = Lattice::finer_than(1.0, 12).unwrap();
        assert_eq!(grid.index_of(f64::NAN), Err(Error::NonFiniteValue));
        assert_eq!(grid.index_of(1e300), Err(Error::ValueOutOfRange));
        assert!(!Error::ValueOutOfRange.to_string().contains("1e300"));
    }
}
