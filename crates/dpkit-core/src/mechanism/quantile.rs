//! A quantile chosen by the exponential mechanism over a public grid of
//! cells (Smith 2011, on a finite grid).
//!
//! The bounded range is cut into `K` public cells; the data are summarised
//! by how many values fall in each. A cell `j` covers the ranks
//! `[a_j, b_j]`, with `a_j` the number of values in the cells below it and
//! `b_j = a_j + count_j`. Its utility for the target rank `t = p·n + s` (a
//! fixed shift `s`) is `u_j = −dist(t, [a_j, b_j])`: 0 for the cells that
//! hold the target rank, and falling by one for every value between.
//!
//! # Privacy
//! Adding or removing one value moves every `a_j` and `b_j` by at most 1,
//! in the same direction, and `t` by `p ≤ 1` in that direction: `u_j`
//! moves by at most `max(p, 1 − p) ≤ 1`. Replacing a value moves each `a_j`
//! and `b_j` by at most 1 and leaves `t`: again at most 1. So a person with
//! `k` rows moves each utility by at most `k` (or `2k` for a replacement
//! spread over two groups): the rank utility moves like a count, and is
//! calibrated like one ([`crate::sensitivity::GroupedSensitivity`] of a
//! count, linear growth). The choice itself is [`ExponentialMechanism`]'s,
//! ε-DP for that sensitivity.
//!
//! # Interval ends
//! An interval's end aims some ranks beyond the quantile. In a small group
//! that aim can lie outside the ranks `[0, n]` the cells cover, and then no
//! cell holds it: the best utility is far below 0, every cell is nearly as
//! good, and the end can land on the wrong side of the quantile. So an end
//! chooses among `K + 2` candidates ([`QuantileSelection::select_end_with_rng`]):
//! a cell of the ranks `(−∞, 0]` (the public lower bound, below every
//! value), the `K` cells, and a cell of the ranks `[n, ∞)` (the upper
//! bound). Some candidate then always holds the target, the accuracy
//! argument below holds with `K + 2` candidates, and the privacy argument
//! is unchanged: the first one's utility `−max(0, t)` moves by `p ≤ 1`
//! when a value is added or removed, the last one's `−max(0, n − t)` by
//! `1 − p ≤ 1`, and neither moves when a value is replaced.
//!
//! # Accuracy
//! With weights `exp(ε'·u/(2Δ))` floored at `2⁻³⁰` of the largest, the
//! cells whose utility is more than `h` below the best (0 or near it) have
//! together probability at most `K·max(e^{−ε'h/(2Δ)}, 2⁻³⁰)`. So the chosen
//! cell's ranks lie within `h = (2Δ/ε')·ln(K/(α − K·2⁻³⁰))` of the target
//! with probability at least `1 − α`.

use rand_core::CryptoRng;

use super::ExponentialMechanism;
use super::exponential::LOG_WEIGHT_FLOOR;
use crate::error::{Error, Result};

/// Where an interval's end falls (see the module's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndChoice {
    /// Below every value: the public lower bound.
    Below,
    /// In this cell.
    Cell(usize),
    /// Above every value: the public upper bound.
    Above,
}

/// Chooses the cell of a target rank with the exponential mechanism.
///
/// ```
/// use dpkit_core::mechanism::QuantileSelection;
/// let median = QuantileSelection::new(1.0, 1.0).unwrap();
/// let counts = [0, 0, 500, 0, 0]; // every value in cell 2
/// let mut rng = dpkit_core::rng::InsecureSeededRng::from_seed_for_testing(7);
/// assert_eq!(median.select_with_rng(&counts, 0.5, 0.0, &mut rng).unwrap(), 2);
/// // With probability ≥ 0.95 the chosen cell is within this many ranks.
/// assert!(median.rank_error_bound(5, 0.05).unwrap() < 10.0);
/// ```
#[derive(Debug, Clone)]
pub struct QuantileSelection {
    mechanism: ExponentialMechanism,
    rank_sensitivity: f64,
}

impl QuantileSelection {
    /// ε-DP choice when one person moves every rank by at most `rank_sensitivity`.
    pub fn new(epsilon: f64, rank_sensitivity: f64) -> Result<Self> {
        Ok(Self {
            mechanism: ExponentialMechanism::new(epsilon, rank_sensitivity)?,
            rank_sensitivity,
        })
    }

    /// Every cell's utility for the quantile `p` shifted by `shift` ranks.
    pub fn utilities(counts: &[u64], p: f64, shift: f64) -> Result<Vec<f64>> {
        if !(0.0..=1.0).contains(&p) || !shift.is_finite() {
            return Err(Error::InvalidParameter {
                name: "quantile",
                reason: format!("must lie in [0, 1] with a finite shift, got {p}"),
            });
        }
        let total: u64 = counts.iter().sum();
        let target = p * total as f64 + shift;
        let mut below = 0u64;
        Ok(counts
            .iter()
            .map(|&count| {
                let (a, b) = (below as f64, (below + count) as f64);
                below += count;
                -((a - target).max(0.0) + (target - b).max(0.0))
            })
            .collect())
    }

    /// The chosen cell for the quantile `p` shifted by `shift` ranks, using `rng`.
    pub fn select_with_rng<R: CryptoRng + ?Sized>(
        &self,
        counts: &[u64],
        p: f64,
        shift: f64,
        rng: &mut R,
    ) -> Result<usize> {
        let utilities = Self::utilities(counts, p, shift)?;
        self.mechanism.select_with_rng(&utilities, rng)
    }

    /// Every end candidate's utility for the quantile `p` shifted by
    /// `shift` ranks: the ranks below 0, each cell, the ranks above `n`.
    ///
    /// ```
    /// use dpkit_core::mechanism::QuantileSelection;
    /// // n = 10: an aim of −3 ranks is held by the ranks below 0 alone.
    /// let u = QuantileSelection::end_utilities(&[4, 6], 0.0, -3.0).unwrap();
    /// assert_eq!(u, vec![0.0, -3.0, -7.0, -13.0]);
    /// ```
    pub fn end_utilities(counts: &[u64], p: f64, shift: f64) -> Result<Vec<f64>> {
        let cells = Self::utilities(counts, p, shift)?;
        let n = counts.iter().sum::<u64>() as f64;
        let target = p * n + shift;
        let mut all = Vec::with_capacity(cells.len() + 2);
        all.push(-target.max(0.0));
        all.extend(cells);
        all.push(-(n - target).max(0.0));
        Ok(all)
    }

    /// Where an interval's end for the quantile `p` shifted by `shift`
    /// ranks falls, among the `K + 2` candidates, using `rng`.
    pub fn select_end_with_rng<R: CryptoRng + ?Sized>(
        &self,
        counts: &[u64],
        p: f64,
        shift: f64,
        rng: &mut R,
    ) -> Result<EndChoice> {
        let utilities = Self::end_utilities(counts, p, shift)?;
        let chosen = self.mechanism.select_with_rng(&utilities, rng)?;
        Ok(match chosen {
            0 => EndChoice::Below,
            c if c == counts.len() + 1 => EndChoice::Above,
            c => EndChoice::Cell(c - 1),
        })
    }

    /// A bound on the expected distance, in ranks, from the chosen cell to
    /// the target: `(2Δ/ε')·(ln K + 1)`, the integral of the tail bound
    /// `K·e^{−ε'h/(2Δ)}`, plus `K·2⁻³⁰` per value for the weights' floor
    /// (not included: it needs the number of values, which is not public).
    ///
    /// ```
    /// use dpkit_core::mechanism::QuantileSelection;
    /// let s = QuantileSelection::new(1.0, 1.0).unwrap();
    /// let bound = s.expected_rank_error(100);
    /// assert!((bound - 2.0 * (100f64.ln() + 1.0)).abs() < 1e-3);
    /// ```
    pub fn expected_rank_error(&self, cells: usize) -> f64 {
        let scale = 2.0 * self.rank_sensitivity / self.mechanism.weight_epsilon();
        scale * ((cells.max(1) as f64).ln() + 1.0)
    }

    /// The `h` with P(the chosen cell's ranks are more than `h` from the
    /// target) ≤ `alpha`, over `cells` cells (see the module's argument).
    pub fn rank_error_bound(&self, cells: usize, alpha: f64) -> Result<f64> {
        let k = cells as f64;
        let floor_mass = k * LOG_WEIGHT_FLOOR.exp();
        let room = alpha - floor_mass;
        if !(alpha > 0.0 && alpha < 1.0) || room <= 0.0 || cells == 0 {
            return Err(Error::InvalidParameter {
                name: "alpha",
                reason: format!("must exceed {floor_mass:e} for {cells} cells, got {alpha}"),
            });
        }
        // The integer weights' relative error (≤ 2.4e-10) is covered by 1e-9.
        let scale = 2.0 * self.rank_sensitivity / self.mechanism.weight_epsilon();
        Ok(scale * (k / room).ln() * (1.0 + 1e-9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::InsecureSeededRng;

    #[test]
    fn utilities_are_minus_the_distance_to_the_cells_ranks() {
        let u = QuantileSelection::utilities(&[2, 0, 3, 5], 0.5, 0.0).unwrap();
        // n = 10, target 5: cells cover [0,2], [2,2], [2,5], [5,10].
        assert_eq!(u, vec![-3.0, -3.0, 0.0, 0.0]);
        let shifted = QuantileSelection::utilities(&[2, 0, 3, 5], 0.5, -4.0).unwrap();
        // Target 1: cells cover [0,2] (holds it), [2,2] and [2,5] (1 away), [5,10].
        assert_eq!(shifted, vec![0.0, -1.0, -1.0, -4.0]);
    }

    #[test]
    fn one_value_moves_each_utility_by_at_most_one() {
        let counts = [4u64, 0, 7, 1, 9, 3];
        for p in [0.0, 0.1, 0.5, 0.9, 1.0] {
            let base = QuantileSelection::utilities(&counts, p, 0.0).unwrap();
            for cell in 0..counts.len() {
                let mut added = counts;
                added[cell] += 1;
                let moved = QuantileSelection::utilities(&added, p, 0.0).unwrap();
                for (a, b) in base.iter().zip(&moved) {
                    assert!((a - b).abs() <= 1.0 + 1e-12, "p = {p}, cell {cell}");
                }
            }
        }
    }

    #[test]
    fn the_rank_error_bound_holds_empirically() {
        // 10,000 values spread evenly over 100 cells: the median's cells.
        let counts = vec![100u64; 100];
        let selection = QuantileSelection::new(0.5, 1.0).unwrap();
        let h = selection.rank_error_bound(100, 0.05).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(11);
        let trials = 4000;
        let mut outside = 0;
        for _ in 0..trials {
            let cell = selection
                .select_with_rng(&counts, 0.5, 0.0, &mut rng)
                .unwrap();
            let (a, b) = (cell as f64 * 100.0, (cell + 1) as f64 * 100.0);
            if (a - 5000.0).max(0.0) + (5000.0 - b).max(0.0) > h {
                outside += 1;
            }
        }
        // P(outside) ≤ 0.05; Hoeffding: more than 0.05 + 0.05 of 4,000 has
        // probability ≤ exp(−2·4000·0.05²) = e⁻²⁰ < 1e-8.
        assert!(outside <= (trials as f64 * 0.10) as usize, "{outside}");
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert!(QuantileSelection::utilities(&[1], 1.5, 0.0).is_err());
        assert!(QuantileSelection::utilities(&[1], 0.5, f64::NAN).is_err());
        assert!(QuantileSelection::new(1.0, 0.0).is_err());
        let s = QuantileSelection::new(1.0, 1.0).unwrap();
        assert!(s.rank_error_bound(0, 0.05).is_err());
        assert!(s.rank_error_bound(10, 1e-12).is_err());
        let mut rng = InsecureSeededRng::from_seed_for_testing(1);
        assert!(s.select_with_rng(&[], 0.5, 0.0, &mut rng).is_err());
    }

    #[test]
    fn an_end_candidates_utility_moves_by_at_most_one() {
        let counts = [4u64, 0, 7, 1, 9, 3];
        for p in [0.0, 0.1, 0.5, 0.9, 1.0] {
            for shift in [-40.0, -2.5, 0.0, 3.5, 40.0] {
                let base = QuantileSelection::end_utilities(&counts, p, shift).unwrap();
                for cell in 0..counts.len() {
                    let mut added = counts;
                    added[cell] += 1;
                    let moved = QuantileSelection::end_utilities(&added, p, shift).unwrap();
                    for (a, b) in base.iter().zip(&moved) {
                        assert!(
                            (a - b).abs() <= 1.0 + 1e-12,
                            "p {p} shift {shift} cell {cell}"
                        );
                    }
                }
            }
        }
    }

    /// In a group of 20 values whose rank error bound is far larger than
    /// the group, a lower end aimed h + 1 ranks below the median falls at
    /// or below the median's value with probability ≥ 1 − α. Aimed among
    /// the K cells alone (as before), it falls above it most of the time.
    #[test]
    fn a_small_groups_lower_end_stays_below_its_quantile() {
        // 20 values, one per cell in cells 40..60 of 100; the median's
        // (ranks 9.5) is in cell 49.
        let mut counts = vec![0u64; 100];
        for slot in counts.iter_mut().skip(40).take(20) {
            *slot = 1;
        }
        let selection = QuantileSelection::new(0.05, 1.0).unwrap();
        let alpha = 0.05;
        let h = selection.rank_error_bound(102, alpha).unwrap();
        assert!(h > 20.0, "the aim must lie outside the group: h = {h}");
        let shift = -(h + 1.0);
        let mut rng = InsecureSeededRng::from_seed_for_testing(5);
        let trials = 20_000;
        let (mut above, mut above_before) = (0usize, 0usize);
        for _ in 0..trials {
            let end = selection
                .select_end_with_rng(&counts, 0.5, shift, &mut rng)
                .unwrap();
            above +=
                usize::from(matches!(end, EndChoice::Cell(c) if c > 49) || end == EndChoice::Above);
            let old = selection
                .select_with_rng(&counts, 0.5, shift, &mut rng)
                .unwrap();
            above_before += usize::from(old > 49);
        }
        println!(
            "above the median: {above} of {trials} (aimed among the cells alone: {above_before})"
        );
        // P(above) ≤ α = 0.05; Hoeffding: more than 0.05 + 0.02 of 20,000
        // has probability ≤ exp(−2·20000·0.02²) = e⁻¹⁶ < 1.2e-7.
        assert!(
            above <= (trials as f64 * 0.07) as usize,
            "{above} of {trials}"
        );
        assert!(above_before > trials / 5, "{above_before} of {trials}");
    }
}
