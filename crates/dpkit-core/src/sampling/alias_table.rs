//! Walker/Vose alias tables with integer thresholds: one random word picks a
//! cell of a finite distribution, and the realised probabilities are known
//! exactly (integers over 2^63).

use std::f64::consts::LN_2;

use rand_core::Rng;

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
    /// Column `c` yields `c` when the word's low bits are below its `keep`,
    /// else its `alias`. Both share one word, so a draw reads one entry:
    /// `keep ≤ 2^(63 − block_bits)` fills the high `64 − block_bits` bits
    /// and `alias < 2^block_bits` the low ones.
    entries: Box<[u64]>,
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
        let ideal: Vec<f64> = (0..block).map(ideal_log).collect();
        let mut scaled: Vec<f64> = ideal.iter().map(|l| l.exp() * block as f64).collect();
        let mut keep = vec![full; block];
        let mut alias: Vec<u32> = (0..block as u32).collect();
        let (mut small, mut large, mut padding) = (Vec::new(), Vec::new(), Vec::new());
        for (cell, &mass) in scaled.iter().enumerate() {
            if mass == 0.0 {
                padding.push(cell);
            } else if mass < 1.0 {
                small.push(cell);
            } else {
                large.push(cell);
            }
        }
        small.append(&mut padding);
        while let (Some(&s_col), Some(&l_col)) = (small.last(), large.last()) {
            small.pop();
            keep[s_col] = rounded(scaled[s_col] * full as f64).min(full);
            alias[s_col] = l_col as u32;
            scaled[l_col] -= 1.0 - scaled[s_col];
            if scaled[l_col] < 1.0 {
                large.pop();
                small.push(l_col);
            }
        }

        // The realised masses, exactly, as numerators over 2^63: the
        // columns' `full`s add up to 2^63, so no sum of them overflows.
        let mut numerators = vec![0u64; block];
        for column in 0..block {
            numerators[column] += keep[column];
            numerators[alias[column] as usize] += full - keep[column];
        }
        let (mut low, mut high, mut magnitude) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for (&numerator, &ideal) in numerators.iter().zip(&ideal) {
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
            magnitude = magnitude.max(realised.abs() + ideal.abs());
        }
        // The f64 logarithms and differences above err by a few ulps of the
        // numbers involved; the spread is widened by more than that.
        let rounding = 8.0 * f64::EPSILON * magnitude;
        let entries = keep
            .iter()
            .zip(&alias)
            .map(|(&keep, &alias)| keep << block_bits | u64::from(alias))
            .collect();
        Some(Self {
            block_bits,
            entries,
            log_spread: high - low + 2.0 * rounding,
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
        let threshold_bits = 63 - self.block_bits;
        self.select(uniform63 >> threshold_bits, |keep| {
            uniform63 & low_bits(threshold_bits) < keep
        })
    }

    /// The cell that a field of `block_bits + known` uniform bits selects:
    /// its top bits pick the column, the other `known` are the top of the
    /// threshold word. The threshold's remaining `63 − block_bits − known`
    /// bits are read from `rng` only when the known ones tie with the
    /// column's (probability `2^−known`). The comparison, and so the
    /// realised distribution, is exactly that of [`AliasTable::cell`]: a
    /// uniform threshold is below `keep` iff its top bits are below
    /// `keep`'s, or equal to them with the low bits below `keep`'s.
    /// Lets one random word serve several look-ups.
    #[inline(always)]
    pub(crate) fn cell_lazy<R: Rng + ?Sized>(&self, field: u64, known: u32, rng: &mut R) -> u64 {
        debug_assert!(known >= 1 && self.block_bits + known <= 62);
        let column = field >> known;
        let high = field & low_bits(known);
        let entry = self.entries[column as usize];
        // `keep` fills the entry's top `64 − block_bits` bits, so its top
        // `known + 1` bits (it may equal 2^(63 − block_bits)) are these.
        let keep_high = entry >> (63 - known);
        let keeps = if high != keep_high {
            high < keep_high
        } else {
            let unknown = 63 - self.block_bits - known;
            below_after_tie((entry >> self.block_bits) & low_bits(unknown), unknown, rng)
        };
        // Whether the column keeps the draw is a coin flip: a branch on it
        // would be mispredicted about half the time.
        std::hint::select_unpredictable(keeps, column, entry & low_bits(self.block_bits))
    }

    /// Column `column`, or its alias unless `keeps(keep)`.
    #[inline(always)]
    fn select(&self, column: u64, keeps: impl FnOnce(u64) -> bool) -> u64 {
        let entry = self.entries[column as usize];
        let (keep, alias) = (entry >> self.block_bits, entry & low_bits(self.block_bits));
        // Whether the column keeps the draw is a coin flip: a branch on it
        // would be mispredicted about half the time.
        std::hint::select_unpredictable(keeps(keep), column, alias)
    }
}

/// Replaces each `x` of `out` by `combine(x, draw)`, for draws that each
/// read one 32-bit field of uniform bits (and, rarely, more words from
/// `rng`): two draws per random word.
#[inline]
pub(crate) fn fill_from_halves<R: Rng + ?Sized>(
    out: &mut [i64],
    rng: &mut R,
    mut draw: impl FnMut(u64, &mut R) -> i64,
    combine: impl Fn(i64, i64) -> i64,
) {
    let mut pairs = out.chunks_exact_mut(2);
    for pair in &mut pairs {
        let word = rng.next_u64();
        pair[0] = combine(pair[0], draw(word >> 32, rng));
        pair[1] = combine(pair[1], draw(word & 0xffff_ffff, rng));
    }
    for last in pairs.into_remainder() {
        *last = combine(*last, draw(u64::from(rng.next_u32()), rng));
    }
}

/// `x.round() as u64` (halves away from zero; negative and NaN to 0),
/// without a call to libm's `round`: the table's thresholds are rounded
/// one per cell, and the call was an eighth of the time to build a table.
/// For 0 ≤ `x` < 2⁶⁴, `x as u64` is `x`'s whole part, exactly, and `x`
/// minus it is exact (below 2⁵³ it is `x`'s fraction bits; above, `x` is
/// whole and it is 0); the cast saturates elsewhere, as `round`'s does.
#[inline]
fn rounded(x: f64) -> u64 {
    let whole = x as u64;
    whole.saturating_add(u64::from(x - whole as f64 >= 0.5))
}

/// The lowest `bits` bits set (`bits` < 64).
#[inline]
fn low_bits(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// Whether `bits` fresh uniform bits are below `keep_low`.
#[cold]
fn below_after_tie<R: Rng + ?Sized>(keep_low: u64, bits: u32, rng: &mut R) -> bool {
    (rng.next_u64() >> (64 - bits)) < keep_low
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

    /// Hands out fixed words: the "fresh" threshold bits of a tie.
    struct Words(Vec<u64>);

    impl rand_core::TryRng for Words {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(self.0.pop().expect("a word") as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.0.pop().expect("a word"))
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), Self::Error> {
            unreachable!()
        }
    }

    #[test]
    fn a_lazy_look_up_agrees_with_the_full_one_on_every_split_of_the_word() {
        let table = AliasTable::truncated_geometric(0.01, 6).unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut ties = 0;
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let word = state >> 1;
            for known in [1, 2, 4, 9, 20, 40, 56] {
                let unknown = 57 - known;
                let field = word >> unknown;
                let rest = word & low_bits(unknown);
                // The tie's fresh word carries the rest in its top bits.
                let mut rng = Words(vec![rest << (64 - unknown)]);
                assert_eq!(table.cell_lazy(field, known, &mut rng), table.cell(word));
                ties += usize::from(rng.0.is_empty());
            }
        }
        // Ties are exercised (mostly at `known` = 1 and 2).
        assert!(ties > 1_000, "{ties}");
    }

    /// FNV-1a over a table's entries and spread: two tables with the same
    /// digest draw the same cells and carry the same privacy bound.
    fn digest(table: &AliasTable) -> u64 {
        let words = table.entries.iter().copied();
        let words = words.chain([table.log_spread.to_bits(), u64::from(table.block_bits)]);
        words.fold(0xcbf2_9ce4_8422_2325, |hash, word| {
            (hash ^ word).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The tables are a pure function of their masses, and changing how
    /// they are built must not change them: a changed table changes every
    /// seeded draw and the spread each privacy bound is proven from. The
    /// digests were taken from the first implementation, with glibc's
    /// `exp` and `ln` (another libm may differ in a last bit).
    #[test]
    fn tables_are_built_exactly_as_before() {
        let mut all = 0xcbf2_9ce4_8422_2325u64;
        for (s, bits) in [
            (1e-4, 14),
            (1e-3, 14),
            (0.01, 10),
            (0.3, 6),
            (2.0, 3),
            (1e-3, 1),
        ] {
            let table = AliasTable::truncated_geometric(s, bits).unwrap();
            all = (all ^ digest(&table)).wrapping_mul(0x0100_0000_01b3);
        }
        // Uneven masses with padding cells among them.
        let weight = |cell: usize| match cell % 7 {
            3 => 0.0,
            k => (k as f64 + 1.0) * (1.0 + (cell as f64).sin() * 0.3),
        };
        let total: f64 = (0..512).map(weight).sum();
        let uneven = AliasTable::new(9, |cell| (weight(cell) / total).ln());
        let uneven = digest(&uneven.expect("the uneven table is built"));
        assert_eq!((all, uneven), (8945575685053941015, 14868195438983896392));
    }

    #[test]
    fn rounding_to_a_word_is_rounding_then_a_cast() {
        let mut cases = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            -0.4,
            -3.5,
            f64::NAN,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            (1u64 << 62) as f64,
            9.3e18,
            f64::INFINITY,
        ];
        cases.extend([-0.5, f64::NEG_INFINITY, 1.9e19, 3.7e19]);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Random fraction bits at every exponent from 2^-10 to 2^66,
            // their negatives, and the exact halves and neighbours of each.
            let exponent = 1013 + (state >> 52) % 77;
            let x = f64::from_bits(exponent << 52 | state & ((1 << 52) - 1));
            cases.extend([x, -x, x.trunc() + 0.5, x.next_up(), x.next_down()]);
        }
        let middle = cases.iter().filter(|x| (2.0..4.6e18).contains(*x)).count();
        assert!(middle > 100_000, "{middle} cases between 2 and 2^62");
        for x in cases {
            assert_eq!(rounded(x), x.round() as u64, "{x:e}");
        }
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
