//! Two-sided geometric (discrete Laplace) noise, in one or two random words.

use std::sync::Arc;

use rand_core::Rng;

use super::alias_table::{AliasTable, fill_from_halves};
use super::geometric::{GeometricSampler, LN_4};
use crate::error::Result;
use crate::shared_tables::SharedTables;

/// Two-sided geometric (discrete Laplace): `P(Z = z) ∝ e^(-s·|z|)` on all integers.
///
/// # Sampling
/// Three exact strategies, picked by `s`, all built from alias tables whose
/// realised probabilities are known to the last bit:
/// * **direct** (`s ≥ 8.4/2^14`): one table of at most 2^14 cells holds the
///   values `−T..=T` and, as the last cell, the tail `|Z| > T` (mass
///   ≤ e^(−4.2)); two draws per random word.
/// * **blocked** (down to `s ≈ 2·10⁻¹²`): `Z = q·M + r` with `M = 2^m` and
///   `r = Z mod M`. One table picks the block `q` (or one of two tails), one
///   or two more the offset: for `q ≥ 0` the offset is a geometric truncated
///   to `0..M`, for `q < 0` the same variable read from the block's other
///   end. One word per draw.
/// * **sign-magnitude** (smaller `s`): a sign bit and a [`GeometricSampler`]
///   magnitude, rejecting "minus zero".
///
/// In every case the tails continue with a [`GeometricSampler`], using
/// memorylessness, so the realised distribution factors into pieces whose
/// deviations from the ideal are measured or bounded; see
/// [`TwoSidedGeometricSampler::log_ratio_bound`].
///
/// ```
/// use dpkit_core::sampling::TwoSidedGeometricSampler;
/// use dpkit_core::rng::InsecureSeededRng;
/// let noise = TwoSidedGeometricSampler::new(1.0).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(5);
/// let mean_abs = (0..20_000).map(|_| noise.sample(&mut rng).unsigned_abs() as f64).sum::<f64>() / 20_000.0;
/// assert!((mean_abs - 1.0 / 1f64.sinh()).abs() < 0.04);
/// ```
#[derive(Debug, Clone)]
pub struct TwoSidedGeometricSampler {
    tables: Arc<Tables>,
}

/// Everything built for one `s`: the magnitude sampler and the strategy,
/// shared by every sampler of that `s`.
#[derive(Debug)]
struct Tables {
    magnitude: GeometricSampler,
    strategy: Strategy,
}

/// Tables built once per `s` and shared (see `crate::shared_tables`); at
/// most 32 of them, 700 KiB each at most.
static TABLES: SharedTables<u64, Tables> = SharedTables::with_capacity(32);

#[derive(Debug, Clone)]
enum Strategy {
    Direct(DirectTable),
    Blocked(Box<BlockedTables>),
    SignMagnitude,
}

/// The values `−half..=half` as cells `0..=2·half`, the tail as cell `2·half + 1`.
#[derive(Debug, Clone)]
struct DirectTable {
    table: AliasTable,
    half: i64,
}

/// Blocks `q ∈ −half..half` as cells `0..2·half` (`q = cell − half`), the
/// tail `q ≥ half` as cell `2·half`, the tail `q < −half` as cell `2·half + 1`.
#[derive(Debug, Clone)]
struct BlockedTables {
    blocks: AliasTable,
    half: i64,
    block_bits: u32,
    /// Threshold bits of the block's look-up taken from the draw's word.
    block_known: u32,
    offset: Offsets,
    /// How many blocks beyond the first tail block: geometric of ratio `s·M`.
    blocks_beyond: GeometricSampler,
}

/// The offset within a block of `M = 2^m`: the geometric of ratio `s`
/// truncated to `0..M`. Up to `2^f` cells (`f` = 12 or 14) it is one table;
/// beyond, two: `offset = coarse·2^f + fine` with `fine` truncated to
/// `0..2^f` at ratio `s` and `coarse` to `0..M/2^f` at ratio `s·2^f`, which
/// is exact, since `α^(coarse·2^f + fine)` factors into the two.
#[derive(Debug, Clone)]
struct Offsets {
    fine: AliasTable,
    coarse: Option<AliasTable>,
    /// Threshold bits of each look-up taken from the draw's word.
    known: u32,
    /// How many bits of the word the offset reads.
    field_bits: u32,
}

/// Blocks may hold up to `2^MAX_OFFSET_BITS` values (two offset tables,
/// of `2^14` and `2^12` cells).
const MAX_OFFSET_BITS: u32 = 26;

/// The direct table needs `P(|Z| > T) ≤ e^(−4.2)` with `2T + 2 ≤ 2^14` cells.
const DIRECT_TABLE_MIN_S: f64 = 8.4 / (1u64 << MAX_DIRECT_BITS) as f64;
/// The direct table has at most `2^MAX_DIRECT_BITS` cells (128 KiB).
const MAX_DIRECT_BITS: u32 = 14;
/// Tables are used only when their realised masses are this close to the
/// ideal ones (typically 1e-13); coarser ones (tiny masses at very large s)
/// would eat the calibration margin.
const MAX_TABLE_SPREAD: f64 = 1e-9;
/// Each table's tail mass is at most `e^(−TAIL_EXPONENT)`, under 1/64.
const TAIL_EXPONENT: f64 = 4.2;

impl TwoSidedGeometricSampler {
    /// `P(Z = z) ∝ e^(-unit_log_ratio·|z|)`.
    pub fn new(unit_log_ratio: f64) -> Result<Self> {
        let shared = TABLES.get_or_build(unit_log_ratio.to_bits(), || {
            let magnitude = GeometricSampler::new(unit_log_ratio)?;
            let strategy = Self::strategy_for(magnitude.unit_log_ratio())?;
            Ok(Tables {
                magnitude,
                strategy,
            })
        })?;
        Ok(Self { tables: shared })
    }

    /// The sampling strategy for `s`, with its tables.
    fn strategy_for(s: f64) -> Result<Strategy> {
        // Tables whose smallest cell would be below their resolution (very
        // large s) are refused, and the exact sign-magnitude sampler is used.
        let direct = (s >= DIRECT_TABLE_MIN_S)
            .then(|| DirectTable::new(s))
            .flatten()
            .filter(|direct| direct.table.log_spread() <= MAX_TABLE_SPREAD);
        Ok(match direct {
            Some(direct) => Strategy::Direct(direct),
            None if s < DIRECT_TABLE_MIN_S => match BlockedTables::new(s)? {
                Some(blocked)
                    if blocked.blocks.log_spread() + blocked.offset.log_spread()
                        <= MAX_TABLE_SPREAD =>
                {
                    Strategy::Blocked(Box::new(blocked))
                }
                _ => Strategy::SignMagnitude,
            },
            None => Strategy::SignMagnitude,
        })
    }

    /// The ideal ratio `α = e^(-s)`.
    pub fn ratio(&self) -> f64 {
        (-self.tables.magnitude.unit_log_ratio()).exp()
    }

    /// The ideal `s = −ln α`.
    pub fn unit_log_ratio(&self) -> f64 {
        self.tables.magnitude.unit_log_ratio()
    }

    /// A proven upper bound on the privacy loss `ln P(Z = a) − ln P(Z = b)`
    /// over `|a − b| ≤ shift`, for the distribution actually realised.
    ///
    /// Writing `dev(z) = ln(realised P(z)) − ln(ideal P(z))`, the loss is at
    /// most `shift·s + max |dev(a) − dev(b)|`. The realised probability is a
    /// product of independent factors (table cell, offset, tail geometric),
    /// so `dev` is a sum of their deviations: a table contributes its
    /// measured spread; a tail geometric contributes `|dev_G(g) − dev_G(g')|`
    /// between two tail points, or `|dev_G(g)|` against a body point, where
    /// the points' tail depths `g` are at most `⌈shift/M⌉` (one block per `M`
    /// crossed; `M = 1` for the direct table), so both are within
    /// `dev_G(0)`'s bound plus the geometric's difference bound.
    pub fn log_ratio_bound(&self, shift: u64) -> f64 {
        let exact = shift as f64 * self.unit_log_ratio();
        let tail_term = |tail: &GeometricSampler, depth: u64| {
            2.0 * (tail.log_deviation_bound_at_zero()
                + tail.log_deviation_difference_bound(depth.saturating_add(1)))
        };
        let excess = match &self.tables.strategy {
            Strategy::SignMagnitude => return self.tables.magnitude.log_ratio_bound(shift),
            Strategy::Direct(direct) => {
                direct.table.log_spread() + tail_term(&self.tables.magnitude, shift)
            }
            Strategy::Blocked(blocked) => {
                let depth = shift.div_ceil(1 << blocked.block_bits);
                blocked.blocks.log_spread()
                    + blocked.offset.fine.log_spread()
                    + blocked
                        .offset
                        .coarse
                        .as_ref()
                        .map_or(0.0, AliasTable::log_spread)
                    + tail_term(&blocked.blocks_beyond, depth)
            }
        };
        (exact + excess) * (1.0 + 1e-12) + 1e-15
    }

    /// `E|Z| = 2α/(1 − α²) = 1/sinh(s)` of the ideal distribution.
    pub fn expected_absolute_value(&self) -> f64 {
        1.0 / self.unit_log_ratio().sinh()
    }

    /// `Var Z = 2α/(1 − α)² = 1/(2 sinh²(s/2))` of the ideal distribution.
    pub fn variance(&self) -> f64 {
        let half_sinh = (self.unit_log_ratio() / 2.0).sinh();
        1.0 / (2.0 * half_sinh * half_sinh)
    }

    /// `P(Z = k) = (1 − α)/(1 + α)·α^|k|` of the ideal distribution.
    pub fn probability(&self, k: i64) -> f64 {
        let s = self.unit_log_ratio();
        (s / 2.0).tanh() * (-(k.unsigned_abs() as f64) * s).exp()
    }

    /// `P(|Z| > t) = 2α^(t+1)/(1 + α)` of the ideal distribution.
    pub fn tail_probability(&self, t: u64) -> f64 {
        2.0 * (-(t as f64 + 1.0) * self.unit_log_ratio()).exp() / (1.0 + self.ratio())
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        match &self.tables.strategy {
            Strategy::Direct(direct) => {
                direct.draw(u64::from(rng.next_u32()), &self.tables.magnitude, rng)
            }
            Strategy::Blocked(blocked) => blocked.sample(rng),
            Strategy::SignMagnitude => self.sample_sign_magnitude(rng),
        }
    }

    /// Fills `out` with independent draws, each as
    /// [`TwoSidedGeometricSampler::sample`] makes it, in one tight loop.
    ///
    /// ```
    /// use dpkit_core::sampling::TwoSidedGeometricSampler;
    /// use dpkit_core::rng::InsecureSeededRng;
    /// let noise = TwoSidedGeometricSampler::new(0.5).unwrap();
    /// let mut draws = vec![0i64; 1000];
    /// noise.sample_into(&mut draws, &mut InsecureSeededRng::from_seed_for_testing(1));
    /// assert!(draws.iter().any(|&z| z != 0));
    /// ```
    pub fn sample_into<R: Rng + ?Sized>(&self, out: &mut [i64], rng: &mut R) {
        self.combine_into(out, rng, |_, draw| draw);
    }

    /// Adds an independent draw to each value, saturating at the ends of
    /// `i64`, in one tight loop.
    ///
    /// ```
    /// use dpkit_core::sampling::TwoSidedGeometricSampler;
    /// use dpkit_core::rng::InsecureSeededRng;
    /// let noise = TwoSidedGeometricSampler::new(0.5).unwrap();
    /// let mut counts = vec![100i64; 1000];
    /// noise.add_into(&mut counts, &mut InsecureSeededRng::from_seed_for_testing(1));
    /// assert!(counts.iter().any(|&c| c != 100));
    /// ```
    pub fn add_into<R: Rng + ?Sized>(&self, values: &mut [i64], rng: &mut R) {
        self.combine_into(values, rng, i64::saturating_add);
    }

    /// Replaces each `x` of `out` by `combine(x, draw)`.
    fn combine_into<R: Rng + ?Sized>(
        &self,
        out: &mut [i64],
        rng: &mut R,
        combine: impl Fn(i64, i64) -> i64,
    ) {
        match &self.tables.strategy {
            Strategy::Direct(direct) => direct.draw_all(out, &self.tables.magnitude, rng, combine),
            Strategy::Blocked(blocked) => blocked.draw_all(out, rng, combine),
            Strategy::SignMagnitude => {
                for x in out {
                    *x = combine(*x, self.sample_sign_magnitude(rng));
                }
            }
        }
    }

    fn sample_sign_magnitude<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        loop {
            let (negative, magnitude) = self.tables.magnitude.sample_with_sign(rng);
            let magnitude = magnitude.min(i64::MAX as u64) as i64;
            match (negative, magnitude) {
                (true, 0) => continue,
                (true, m) => return -m,
                (false, m) => return m,
            }
        }
    }
}

impl DirectTable {
    fn new(s: f64) -> Option<Self> {
        // Smallest table with 2^(m−1) ≥ 4.2/s, so the tail has mass ≤ e^(−4.2).
        let bits = ((2.0 * TAIL_EXPONENT / s).log2().ceil().max(2.0) as u32).min(MAX_DIRECT_BITS);
        let half = (1i64 << (bits - 1)) - 1;
        let alpha = (-s).exp();
        let log_zero = (s / 2.0).tanh().ln();
        let log_tail = (2.0f64).ln() - (half + 1) as f64 * s - (1.0 + alpha).ln();
        let table = AliasTable::new(bits, |cell| {
            if cell as i64 <= 2 * half {
                log_zero - (cell as i64 - half).unsigned_abs() as f64 * s
            } else {
                log_tail
            }
        })?;
        Some(Self { table, half })
    }

    /// Fills `out` with draws (a loop of its own, so that the table's
    /// address and size stay in registers across it).
    #[inline(never)]
    fn draw_all<R: Rng + ?Sized>(
        &self,
        out: &mut [i64],
        magnitude: &GeometricSampler,
        rng: &mut R,
        combine: impl Fn(i64, i64) -> i64,
    ) {
        let draw = |field, rng: &mut R| self.draw(field, magnitude, rng);
        fill_from_halves(out, rng, draw, combine);
    }

    /// The draw that a 32-bit `field` of uniform bits selects (see
    /// [`AliasTable::cell_lazy`]); the tail's words come from `rng`.
    #[inline(always)]
    fn draw<R: Rng + ?Sized>(&self, field: u64, magnitude: &GeometricSampler, rng: &mut R) -> i64 {
        let known = 32 - self.table.block_bits();
        let cell = self.table.cell_lazy(field, known, rng) as i64;
        if cell <= 2 * self.half {
            cell - self.half
        } else {
            self.tail(magnitude, rng)
        }
    }

    /// The tail: a fair sign and T + 1 + a geometric (memorylessness).
    #[cold]
    fn tail<R: Rng + ?Sized>(&self, magnitude: &GeometricSampler, rng: &mut R) -> i64 {
        let (negative, beyond) = magnitude.sample_with_sign(rng);
        let magnitude = beyond
            .saturating_add(self.half as u64 + 1)
            .min(i64::MAX as u64) as i64;
        if negative { -magnitude } else { magnitude }
    }
}

impl BlockedTables {
    /// `None` when `s` is too small for a block table of at most `2^16`
    /// cells with blocks of at most `2^26` values.
    fn new(s: f64) -> Result<Option<Self>> {
        // Blocks of M = 2^m with s·M ≥ ln 4 where possible (as the
        // geometric's finest level), in the first layout that fits, from the
        // smallest tables (fastest to read) to the largest.
        let wanted = (LN_4 / s).log2().ceil().max(1.0) as u32;
        // (bits of M at most, of the fine offset table, of the block table):
        // measured fastest first.
        let layouts = [
            (12, 12, 12),
            (14, 14, 16),
            (24, 12, 12),
            (MAX_OFFSET_BITS, 14, 16),
        ];
        let Some((block_bits, fine_cap)) = layouts.iter().find_map(|&(offset_cap, fine, table)| {
            let block_bits = wanted.min(offset_cap);
            (Self::block_table_bits(s, block_bits) <= table).then_some((block_bits, fine))
        }) else {
            return Ok(None);
        };
        let block_ratio = s * (1u64 << block_bits) as f64;
        let half = (TAIL_EXPONENT / block_ratio).ceil() as i64;
        let bits = Self::block_table_bits(s, block_bits);
        // P(block q) = c·S·α^(qM) for q ≥ 0 and c·S·α^((|q|−1)M + 1) for q < 0,
        // with c = tanh(s/2) = P(Z = 0) and S = Σ_{r<M} α^r; the tails sum these.
        let log_common =
            (s / 2.0).tanh().ln() + (-(-block_ratio).exp_m1()).ln() - (-(-s).exp_m1()).ln();
        let log_geometric_sum = -(-(-block_ratio).exp_m1()).ln();
        let blocks = AliasTable::new(bits, |cell| {
            let cell = cell as i64;
            let q = cell - half;
            if cell < 2 * half && q >= 0 {
                log_common - q as f64 * block_ratio
            } else if cell < 2 * half {
                log_common - ((-q - 1) as f64 * block_ratio + s)
            } else if cell == 2 * half {
                log_common - half as f64 * block_ratio + log_geometric_sum
            } else if cell == 2 * half + 1 {
                log_common - (half as f64 * block_ratio + s) + log_geometric_sum
            } else {
                f64::NEG_INFINITY
            }
        });
        // The word's bits beyond the columns are shared by the look-ups.
        let lookups = if block_bits > fine_cap { 3 } else { 2 };
        let known = (64 - bits - block_bits) / lookups;
        let offset = Offsets::new(s, block_bits, fine_cap, known);
        let (Some(blocks), Some(offset)) = (blocks, offset) else {
            return Ok(None);
        };
        Ok(Some(Self {
            block_known: 64 - bits - offset.field_bits,
            blocks,
            half,
            block_bits,
            offset,
            blocks_beyond: GeometricSampler::new(block_ratio)?,
        }))
    }

    /// One draw.
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        let word = rng.next_u64();
        if self.offset.coarse.is_some() {
            self.draw::<true, R>(word, rng)
        } else {
            self.draw::<false, R>(word, rng)
        }
    }

    /// Bits of the block table for blocks of `2^block_bits`: its `2·half + 2`
    /// cells, with `half` blocks on each side before the tails.
    fn block_table_bits(s: f64, block_bits: u32) -> u32 {
        let half = (TAIL_EXPONENT / (s * (1u64 << block_bits) as f64)).ceil();
        (2.0 * half + 2.0).log2().ceil() as u32
    }

    /// Fills `out` with draws (a loop of its own, so that the tables'
    /// addresses and sizes stay in registers across it).
    #[inline(never)]
    fn draw_all<R: Rng + ?Sized>(
        &self,
        out: &mut [i64],
        rng: &mut R,
        combine: impl Fn(i64, i64) -> i64,
    ) {
        // One loop per table count, so that the one-table loop has no trace
        // of the second.
        if self.offset.coarse.is_some() {
            for x in out.iter_mut() {
                *x = combine(*x, self.draw::<true, R>(rng.next_u64(), rng));
            }
        } else {
            for x in out.iter_mut() {
                *x = combine(*x, self.draw::<false, R>(rng.next_u64(), rng));
            }
        }
    }

    /// The draw that `word` selects: its high bits pick the block, its low
    /// bits the offset (see [`AliasTable::cell_lazy`]); the tails' words
    /// come from `rng`.
    /// `COARSE` says whether the offset has two tables.
    #[inline(always)]
    fn draw<const COARSE: bool, R: Rng + ?Sized>(&self, word: u64, rng: &mut R) -> i64 {
        let offset_bits = self.offset.field_bits;
        let cell = self
            .blocks
            .cell_lazy(word >> offset_bits, self.block_known, rng) as i64;
        let offset_field = word & ((1u64 << offset_bits) - 1);
        let offset = self.offset.draw::<COARSE, R>(offset_field, rng) as i64;
        let block = if cell < 2 * self.half {
            cell - self.half
        } else {
            self.tail_block(cell, rng)
        };
        self.value(block, offset)
    }

    /// The value in block `q` at offset `offset`: for q < 0 the offset is
    /// read from the block's other end, `(M − 1) − offset`, which for
    /// `0 ≤ offset < M` is `offset XOR (M − 1)` (no branch on the sign,
    /// which is a coin flip).
    #[inline(always)]
    fn value(&self, block: i64, offset: i64) -> i64 {
        let negative_mask = block >> 63;
        let last_offset = (1i64 << self.block_bits) - 1;
        (block << self.block_bits) + (offset ^ (negative_mask & last_offset))
    }

    /// The block of a tail cell: `half + G` above, `−half − 1 − G` below.
    #[cold]
    fn tail_block<R: Rng + ?Sized>(&self, cell: i64, rng: &mut R) -> i64 {
        // Depths beyond 2^62 / M saturate: a fixed function of the exact value.
        let limit = 1u64 << (62 - self.block_bits);
        let beyond = self.blocks_beyond.sample(rng).min(limit) as i64;
        if cell == 2 * self.half {
            self.half + beyond
        } else {
            -self.half - 1 - beyond
        }
    }
}

impl Offsets {
    /// The tables for blocks of `2^bits`, the fine one of at most
    /// `2^fine_cap` cells, each look-up taking `known` threshold bits from
    /// the word.
    fn new(s: f64, bits: u32, fine_cap: u32, known: u32) -> Option<Self> {
        let fine_bits = bits.min(fine_cap);
        let fine = AliasTable::truncated_geometric(s, fine_bits)?;
        let coarse = match bits - fine_bits {
            0 => None,
            coarse_bits => Some(AliasTable::truncated_geometric(
                s * (1u64 << fine_bits) as f64,
                coarse_bits,
            )?),
        };
        let coarse_bits = coarse.as_ref().map_or(0, |c| c.block_bits() + known);
        Some(Self {
            field_bits: fine.block_bits() + known + coarse_bits,
            fine,
            coarse,
            known,
        })
    }

    /// The sum of the tables' spreads: the offset's probability is the
    /// product of theirs, so its `ln(realised/ideal)` is the sum of theirs.
    fn log_spread(&self) -> f64 {
        self.fine.log_spread() + self.coarse.as_ref().map_or(0.0, AliasTable::log_spread)
    }

    /// The offset that the low `field_bits()` bits of `field` select;
    /// `COARSE` must say whether there are two tables.
    #[inline(always)]
    fn draw<const COARSE: bool, R: Rng + ?Sized>(&self, field: u64, rng: &mut R) -> u64 {
        let fine_bits = self.fine.block_bits() + self.known;
        let fine = self
            .fine
            .cell_lazy(field & ((1u64 << fine_bits) - 1), self.known, rng);
        match (COARSE, &self.coarse) {
            (false, _) | (true, None) => fine,
            (true, Some(coarse)) => {
                let high = coarse.cell_lazy(field >> fine_bits, self.known, rng);
                high << self.fine.block_bits() | fine
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout chosen for `s`: direct (cells), blocked (block table
    /// bits, offset table bits), or sign-magnitude.
    fn layout(s: f64) -> String {
        let sampler = TwoSidedGeometricSampler::new(s).unwrap();
        match &sampler.tables.strategy {
            Strategy::Direct(direct) => format!("direct {}", direct.table.block_bits()),
            Strategy::Blocked(b) => {
                let coarse = b.offset.coarse.as_ref().map_or(0, AliasTable::block_bits);
                let fine = b.offset.fine.block_bits();
                format!("blocked {} {fine}+{coarse}", b.blocks.block_bits())
            }
            Strategy::SignMagnitude => "sign-magnitude".into(),
        }
    }

    #[test]
    fn each_s_gets_the_layout_the_distribution_tests_expect() {
        let expected = [
            (0.9, "direct 4"),
            (0.05, "direct 8"),
            (1e-3, "direct 14"),
            (3e-4, "blocked 4 12+0"),
            (2e-7, "blocked 12 14+0"),
            (1e-8, "blocked 16 14+0"),
            (3e-9, "blocked 8 12+12"),
            (3e-11, "blocked 13 14+12"),
            (1e-13, "sign-magnitude"),
        ];
        for (s, layout_name) in expected {
            assert_eq!(layout(s), layout_name, "s = {s}");
        }
    }

    #[test]
    fn blocks_and_offsets_cover_every_body_value_exactly_once() {
        // q ∈ −half..half and offsets 0..M must give each of
        // −half·M..half·M once, with the ideal probability's shape:
        // offset 0 of a block is its value nearest 0.
        for s in [3e-4, 2e-3 / 4096.0] {
            let sampler = TwoSidedGeometricSampler::new(s).unwrap();
            let Strategy::Blocked(b) = &sampler.tables.strategy else {
                panic!("s = {s} is blocked")
            };
            let size = 1i64 << b.block_bits;
            let lowest = -b.half * size;
            let mut seen = vec![false; (2 * b.half * size) as usize];
            for q in -b.half..b.half {
                for offset in 0..size {
                    let index = (b.value(q, offset) - lowest) as usize;
                    assert!(!seen[index], "s = {s}: a value drawn twice");
                    seen[index] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "s = {s}: a value never drawn");
            for q in [-b.half, -1, 0, b.half - 1] {
                let nearest = (q.abs() - i64::from(q < 0)) * size + i64::from(q < 0);
                assert_eq!(b.value(q, 0).abs(), nearest, "q = {q}");
            }
        }
    }

    #[test]
    fn every_blocked_layout_reads_one_word_with_room_for_each_threshold() {
        for s in [3e-4, 2e-7, 1e-8, 3e-9, 3e-11] {
            let sampler = TwoSidedGeometricSampler::new(s).unwrap();
            let Strategy::Blocked(b) = &sampler.tables.strategy else {
                panic!("s = {s} is blocked")
            };
            assert_eq!(
                b.blocks.block_bits() + b.block_known + b.offset.field_bits,
                64
            );
            assert!(
                b.offset.known >= 7 && b.block_known >= b.offset.known,
                "s = {s}"
            );
        }
    }
}
