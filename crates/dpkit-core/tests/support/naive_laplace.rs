#![allow(dead_code)]
//! The textbook floating-point Laplace mechanism, kept only as a bad example:
//! tests show the privacy checks catch it, benchmarks time against it.
//! Never use it on real data (Mironov 2012).

use rand_core::Rng;

/// `q + λ·F⁻¹(u)` computed in doubles, with `u` a 53-bit uniform in (0, 1).
pub struct NaiveFloatLaplace {
    pub scale: f64,
}

impl NaiveFloatLaplace {
    /// The uniform the sampler would use for the 53-bit integer `k` (0 < k < 2⁵³).
    pub fn uniform_from(k: u64) -> f64 {
        k as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// The noise for uniform `u` (reference §Laplace inverse CDF).
    pub fn noise_from_uniform(&self, u: f64) -> f64 {
        if u < 0.5 {
            self.scale * (2.0 * u).ln()
        } else {
            -self.scale * (2.0 - 2.0 * u).ln()
        }
    }

    #[inline]
    pub fn privatize<R: Rng + ?Sized>(&self, value: f64, rng: &mut R) -> f64 {
        loop {
            let k = rng.next_u64() >> 11;
            if k != 0 {
                return value + self.noise_from_uniform(Self::uniform_from(k));
            }
        }
    }
}
