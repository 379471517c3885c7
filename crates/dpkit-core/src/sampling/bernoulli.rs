//! A coin whose heads probability is *exactly* a given double.

use rand_core::Rng;

use crate::error::{Result, require_unit_interval};

/// A Bernoulli trial whose success probability is exactly the dyadic rational
/// that a given `f64` denotes (every finite double is one), so the realised
/// distribution is known to the last bit.
///
/// The probability `p = m / 2^e` (with `m` odd) is sampled by drawing an
/// `e`-bit uniform integer `U` lazily, word by word, and succeeding iff `U < m`.
///
/// ```
/// use dpkit_core::sampling::ExactBernoulli;
/// use dpkit_core::rng::InsecureSeededRng;
/// let coin = ExactBernoulli::new(0.25).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(1);
/// let heads = (0..10_000).filter(|_| coin.sample(&mut rng)).count();
/// assert!((2_300..2_700).contains(&heads));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExactBernoulli {
    probability: f64,
    numerator: u64,
    /// The denominator's base-2 logarithm; 0 means "always" (p = 1) or "never" (p = 0).
    exponent: u32,
}

impl ExactBernoulli {
    /// A coin with success probability exactly `probability` ∈ [0, 1].
    pub fn new(probability: f64) -> Result<Self> {
        require_unit_interval("probability", probability)?;
        if probability == 0.0 || probability == 1.0 {
            return Ok(Self {
                probability,
                numerator: probability as u64,
                exponent: 0,
            });
        }
        let bits = probability.to_bits();
        let biased_exponent = ((bits >> 52) & 0x7ff) as u32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mut numerator, mut exponent) = if biased_exponent == 0 {
            (fraction, 1074)
        } else {
            (fraction | (1u64 << 52), 1075 - biased_exponent)
        };
        let zeros = numerator.trailing_zeros();
        numerator >>= zeros;
        exponent -= zeros;
        Ok(Self {
            probability,
            numerator,
            exponent,
        })
    }

    /// The exact success probability.
    pub fn probability(&self) -> f64 {
        self.probability
    }

    /// Whether a trial reads at most the top 63 bits of one word, leaving the
    /// lowest bit of that word unused (and so independent of the outcome).
    pub fn leaves_lowest_bit(&self) -> bool {
        self.exponent <= 63
    }

    /// One trial that reads only the top bits of `word`; valid only when
    /// [`ExactBernoulli::leaves_lowest_bit`] holds.
    #[inline]
    pub(crate) fn decide_with_word(&self, word: u64) -> bool {
        debug_assert!(self.leaves_lowest_bit());
        if self.exponent == 0 {
            return self.numerator == 1;
        }
        (word >> (64 - self.exponent)) < self.numerator
    }

    /// One trial.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        if self.exponent == 0 {
            return self.numerator == 1;
        }
        if self.exponent <= 64 {
            return (rng.next_u64() >> (64 - self.exponent)) < self.numerator;
        }
        // U < m needs the top (e - 64) bits of U to be zero, then the last 64 below m.
        let mut leading = self.exponent - 64;
        while leading >= 64 {
            if rng.next_u64() != 0 {
                return false;
            }
            leading -= 64;
        }
        if leading > 0 && rng.next_u64() >> (64 - leading) != 0 {
            return false;
        }
        rng.next_u64() < self.numerator
    }
}
