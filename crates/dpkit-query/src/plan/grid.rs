//! The public grid a sum's values are rounded to before they are added
//! (`dpkit_functions::exact_sum`): chosen from the bounds alone, at
//! planning, so that the sum is exact and one person moves it by no more
//! than the bounds allow.

/// Grid steps per bound: 2^30 (the bound itself is rounded out to the grid).
const RESOLUTION_BITS: i32 = 30;

/// The exponent `k` of the summation grid `2^k` for values within
/// `[-magnitude, magnitude]`: for whole numbers 1, so that each value is
/// rounded to a whole number before it is added (translation invariant:
/// a value that is not whole, however it got there, moves the sum by no
/// more than the bounds allow), or past 2^62 the power of two that keeps
/// a row's steps within 64 bits; otherwise at least 2^30 steps per
/// magnitude, never coarser than 1 below 2^62 and past it, again, as
/// coarse as 64 bits of steps per row ask: a grid capped at 1 once
/// saturated every row past 2^63 steps, so 1,000 values of 10^20 summed
/// to 9.2·10^21 with an interval of ±3.5·10^13.
pub(crate) fn summation_grid(magnitude: f64, integer: bool) -> i32 {
    #[cfg(feature = "planted-holes")]
    let integer = integer && !dpkit_planted::is_planted(dpkit_planted::Hole::RoundedTotals);
    let binade = if magnitude > 0.0 && magnitude.is_finite() {
        magnitude.log2().floor() as i32
    } else {
        0
    };
    let coarsest = (binade - 61).max(0);
    if integer {
        return coarsest;
    }
    (binade - RESOLUTION_BITS).clamp(-1000, coarsest)
}

/// `value` rounded outwards to the grid `2^exponent` (away from zero).
pub(crate) fn round_out_to_grid(value: f64, exponent: i32) -> f64 {
    let scale = 2f64.powi(exponent);
    let steps = value / scale;
    let rounded = if steps >= 0.0 {
        steps.ceil()
    } else {
        steps.floor()
    };
    rounded * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_round_out_and_grids_are_fine_enough() {
        assert_eq!(summation_grid(99999.0, false), 16 - 30);
        assert_eq!(summation_grid(99999.0, true), 0);
        assert_eq!(summation_grid(0.5, false), -31);
        assert_eq!(summation_grid(1e300, false), 996 - 61);
        assert_eq!(summation_grid(1e20, false), 66 - 61);
        assert_eq!(summation_grid(1e20, true), 66 - 61);
        // The grids dpkit-functions' tests sum on.
        assert_eq!(summation_grid(100.0, false), -24);
        assert_eq!(summation_grid(90.0, false), -24);
        assert_eq!(summation_grid(2f64.powi(40), false), 0);
        assert_eq!(summation_grid(10.0, true), 0);
        assert_eq!(round_out_to_grid(90.0, summation_grid(90.0, false)), 90.0);
        let exponent = summation_grid(0.3, false);
        let out = round_out_to_grid(0.3, exponent);
        assert!(out >= 0.3 && out - 0.3 <= 2f64.powi(exponent));
        assert_eq!(round_out_to_grid(-0.3, exponent), -out);
    }
}
