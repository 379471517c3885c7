//! Walker/Vose alias tables with integer thresholds: one random word picks a
//! cell of a finite distribution, and the realised probabilities are known
//! exactly (integers over 2^63).

use std::f64::consts::LN_2;

/// The low 63 bits of a word: what [`AliasTable::cell`] reads.
pub(crate) const LOW_63_BITS: u64 = (1u64 << 63) - 1;

/// A distribution over the cells `0..2^block_bits` as an alias table over
/// 63-bit words: the word's top bits pick a column, the rest are compared
/// with the column's threshold, without a branch.
///
/// Cells whose ideal probability is zero (`ideal_log = −∞`) are padding: they
/// realise probability exactly zero and are never drawn.
#[derive(Debug, Clone)]
pub(crate) struct AliasTable {
    block_bits: u32,
    /// Column `c` yields `c` when the word's low bits are below `keep[c]`,
    /// else `alias[c]`.
    keep: Box<[u64]>,
    alias: Box<[u32]>,
    /// max − min over the cells of positive mass of
    /// `ln(realised P(c)) − ln(ideal P(c))`.
    log_spread: f64,
}

impl AliasTable {
    /// The truncated geometric `P(R = r) ∝ e^(−s·r)` on `0..2^block_bits`
    /// (`None` if its smallest mass is below the table's resolution).
    pub(crate) fn truncated_geometric(unit_log_ratio: f64, block_bits: u32) -> Option<Self> {
        let s = unit_log_ratio;
        let block_mass = -(-((1u64 << block_bits) as f64) * s).exp_m1();
        let log_first = (-(-s).exp_m1()).ln() - block_mass.ln();
        Self::new(block_bits, |r| log_first - r as f64 * s)
    }

    /// The table for cells whose ideal log-probabilities are `ideal_log(cell)`
    /// (they must sum to one; `−∞` marks a cell that must never be drawn).
    ///
    /// `None` when a cell of positive mass would round to nothing (its mass
    /// is below about 2⁻⁶³): it would be unreachable, which no mechanism may
    /// allow, so the caller must sample another way.
    pub(crate) fn new(block_bits: u32, ideal_log: impl Fn(usize) -> f64) -> Option<Self> {
        assert!((1..=16).contains(&block_bits));
        let block = 1usize << block_bits;
        let threshold_bits = 63 - block_bits;
        let full = 1u64 << threshold_bits;

        // Vose's alias method on the masses scaled to mean 1. Padding cells go
        // last in `small`, so they are paired with a large column first, while
        // large columns certainly remain, and keep nothing.
        let mut scaled: Vec<f64> = (0..block)
            .map(|r| ideal_log(r).exp() * block as f64)
            .collect();
        let mut keep = vec![full; block];
        let mut alias: Vec<u32> = (0..block as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..block).partition(|&r| scaled[r] < 1.0);
        small.sort_by_key(|&r| scaled[r] == 0.0);
        while let (Some(&s_col), Some(&l_col)) = (small.last(), large.last()) {
            small.pop();
            keep[s_col] = ((scaled[s_col] * full as f64).round() as u64).min(full);
            alias[s_col] = l_col as u32;
            scaled[l_col] -= 1.0 - scaled[s_col];
            if scaled[l_col] < 1.0 {
                large.pop();
                small.push(l_col);
            }
        }

        // The realised masses, exactly, as numerators over 2^63.
        let mut numerators = vec![0u128; block];
        for column in 0..block {
            numerators[column] += u128::from(keep[column]);
            numerators[alias[column] as usize] += u128::from(full - keep[column]);
        }
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for (cell, &numerator) in numerators.iter().enumerate() {
            let ideal = ideal_log(cell);
            if ideal == f64::NEG_INFINITY {
                assert_eq!(numerator, 0, "a padding cell is never drawn");
                continue;
            }
            if numerator == 0 {
                return None;
            }
            let realised = (numerator as f64).ln() - 63.0 * LN_2;
            low = low.min(realised - ideal);
            high = high.max(realised - ideal);
        }
        Some(Self {
            block_bits,
            keep: keep.into_boxed_slice(),
            alias: alias.into_boxed_slice(),
            log_spread: high - low,
        })
    }

    /// How many bits pick the column (the table has `2^block_bits` cells).
    pub(crate) fn block_bits(&self) -> u32 {
        self.block_bits
    }

    /// max − min of `ln(realised/ideal)` over the cells of positive mass:
    /// with the spreads of the other factors, it bounds how far the realised
    /// privacy loss can exceed the ideal one.
    pub(crate) fn log_spread(&self) -> f64 {
        self.log_spread
    }

    /// The cell that `uniform63` (63 uniform bits) selects.
    #[inline]
    pub(crate) fn cell(&self, uniform63: u64) -> u64 {
        let column = (uniform63 >> (63 - self.block_bits)) as usize;
        let threshold = uniform63 & ((1u64 << (63 - self.block_bits)) - 1);
        let keep = self.keep[column];
        let alias = u64::from(self.alias[column]);
        if threshold < keep {
            column as u64
        } else {
            alias
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_cells_are_never_drawn_and_the_rest_keep_their_mass() {
        // Cells 1 and 3 are padding; 0 and 2 have masses 1/4 and 3/4.
        let table = AliasTable::new(2, |cell| match cell {
            0 => 0.25f64.ln(),
            2 => 0.75f64.ln(),
            _ => f64::NEG_INFINITY,
        })
        .unwrap();
        let mut counts = [0u64; 4];
        for column in 0..4u64 {
            for step in 0..1024u64 {
                // Evenly spaced thresholds over the column's 61 low bits.
                let word = column << 61 | step << 51;
                counts[table.cell(word) as usize] += 1;
            }
        }
        assert_eq!(counts, [1024, 0, 3072, 0]);
        assert!(table.log_spread() < 1e-12);
    }

    #[test]
    fn a_mass_below_the_resolution_is_refused_not_dropped() {
        let table = AliasTable::new(2, |cell| {
            if cell == 3 {
                -200.0
            } else {
                (1.0f64 / 3.0).ln()
            }
        });
        assert!(table.is_none());
    }
}
