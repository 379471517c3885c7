//! Randomized response: each person randomises their own answer (local DP).

use rand_core::CryptoRng;

use crate::accounting::PrivacyLoss;
use crate::error::{Error, Result, require_open_unit_interval, require_positive};
use crate::rng::with_thread_secure_rng;
use crate::sampling::{ExactBernoulli, uniform_below};

/// The two-coin binary mechanism (reference §Randomized response): flip a coin
/// with heads probability `p`; heads, answer truthfully; tails, answer with a
/// second such coin (heads → true, tails → false).
///
/// # Privacy
/// ε is computed, not assumed: `ln max(P(1|1)/P(1|0), P(0|0)/P(0|1))`
/// `= ln max((2 − p)/(1 − p), (1 − p + p²)/(1 − p)²)`, which differ when
/// `p ≠ ½`. Both coins are [`ExactBernoulli`] trials of exactly `p`, so this is
/// the ε of what is actually sampled.
///
/// ```
/// use dpkit_core::mechanism::BinaryRandomizedResponse;
/// let fair = BinaryRandomizedResponse::new(0.5).unwrap();
/// assert!((fair.privacy().epsilon() - 3f64.ln()).abs() < 1e-12);
/// let _answer = fair.privatize(true).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct BinaryRandomizedResponse {
    coin: ExactBernoulli,
    epsilon: f64,
}

impl BinaryRandomizedResponse {
    /// The mechanism with coin probability `p ∈ (0, 1)`.
    pub fn new(coin_probability: f64) -> Result<Self> {
        let p = require_open_unit_interval("coin probability", coin_probability)?;
        let q = 1.0 - p;
        let ones_ratio = (2.0 - p) / q;
        let zeros_ratio = (q + p * p) / (q * q);
        // Four ulps above the computed logarithm cover its rounding.
        let epsilon = ones_ratio.max(zeros_ratio).ln() * (1.0 + 4.0 * f64::EPSILON);
        Ok(Self {
            coin: ExactBernoulli::new(p)?,
            epsilon,
        })
    }

    /// The exact ε.
    pub fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("p in (0, 1) gives ε > 0")
    }

    /// `P(report true | truth)`.
    pub fn probability_of_true_report(&self, truth: bool) -> f64 {
        let p = self.coin.probability();
        if truth {
            p + (1.0 - p) * p
        } else {
            (1.0 - p) * p
        }
    }

    /// One randomised report, using `rng`.
    pub fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, truth: bool, rng: &mut R) -> bool {
        if self.coin.sample(rng) {
            truth
        } else {
            self.coin.sample(rng)
        }
    }

    /// One randomised report, with this thread's OS-seeded generator.
    pub fn privatize(&self, truth: bool) -> Result<bool> {
        with_thread_secure_rng(|rng| self.privatize_with_rng(truth, rng))
    }

    /// The unbiased estimate of the share of true answers from `true_reports`
    /// of `reports`, with its standard error and a Hoeffding half-width that
    /// covers the truth with probability ≥ 1 − alpha.
    ///
    /// ```
    /// use dpkit_core::mechanism::BinaryRandomizedResponse;
    /// let rr = BinaryRandomizedResponse::new(0.5).unwrap();
    /// // P(report true) = 0.25 + 0.5·π: 4,000 of 10,000 means π ≈ 0.3
    /// let estimate = rr.estimate_proportion(4_000, 10_000, 0.05).unwrap();
    /// assert!((estimate.proportion - 0.3).abs() < 1e-12);
    /// ```
    pub fn estimate_proportion(
        &self,
        true_reports: u64,
        reports: u64,
        alpha: f64,
    ) -> Result<ProportionEstimate> {
        let alpha = crate::accuracy::require_alpha(alpha)?;
        if reports == 0 || true_reports > reports {
            return Err(Error::InvalidParameter {
                name: "reports",
                reason: "need at least one report and no more true reports than reports".into(),
            });
        }
        let p = self.coin.probability();
        let n = reports as f64;
        let observed = true_reports as f64 / n;
        let proportion = (observed - (1.0 - p) * p) / p;
        Ok(ProportionEstimate {
            proportion,
            standard_error: (observed * (1.0 - observed) / n).sqrt() / p,
            half_width: ((2.0 / alpha).ln() / (2.0 * n)).sqrt() / p,
        })
    }
}

/// An estimate of a population share from randomised reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProportionEstimate {
    /// The unbiased estimate (may fall outside [0, 1]; clamp it if you like).
    pub proportion: f64,
    /// Its plug-in standard error.
    pub standard_error: f64,
    /// Hoeffding half-width at the requested confidence.
    pub half_width: f64,
}

/// k-ary randomized response: report the true category with probability
/// `e^ε/(e^ε + k − 1)`, otherwise one of the other `k − 1` uniformly.
///
/// # Privacy
/// Exactly ε-DP: the truth coin's probability is rounded down before sampling,
/// which can only lower the ratio, and the other category is exactly uniform.
///
/// ```
/// use dpkit_core::mechanism::KaryRandomizedResponse;
/// let rr = KaryRandomizedResponse::new(1.0, 7).unwrap();
/// let report = rr.privatize(3).unwrap();
/// assert!(report < 7);
/// assert!(rr.privatize(7).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct KaryRandomizedResponse {
    epsilon: f64,
    categories: u64,
    truth_coin: ExactBernoulli,
}

impl KaryRandomizedResponse {
    /// ε-DP randomised response over `categories ≥ 2` categories.
    pub fn new(epsilon: f64, categories: u64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        if categories < 2 {
            return Err(Error::InvalidParameter {
                name: "categories",
                reason: format!("need at least 2, got {categories}"),
            });
        }
        let others = (categories - 1) as f64;
        let ideal = 1.0 / (1.0 + others * (-epsilon).exp());
        let rounded_down = (ideal * (1.0 - 2f64.powi(-50))).next_down();
        Ok(Self {
            epsilon,
            categories,
            truth_coin: ExactBernoulli::new(rounded_down)?,
        })
    }

    /// ε.
    pub fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }

    /// The realised probability of reporting the true category.
    pub fn probability_of_truth(&self) -> f64 {
        self.truth_coin.probability()
    }

    /// One randomised report of category `truth ∈ 0..k`, using `rng`.
    pub fn privatize_with_rng<R: CryptoRng + ?Sized>(
        &self,
        truth: u64,
        rng: &mut R,
    ) -> Result<u64> {
        if truth >= self.categories {
            return Err(Error::ValueOutOfRange);
        }
        if self.truth_coin.sample(rng) {
            return Ok(truth);
        }
        let other = uniform_below(self.categories - 1, rng);
        Ok(if other >= truth { other + 1 } else { other })
    }

    /// One randomised report with this thread's OS-seeded generator.
    pub fn privatize(&self, truth: u64) -> Result<u64> {
        with_thread_secure_rng(|rng| self.privatize_with_rng(truth, rng))?
    }

    /// Unbiased estimates of each category's share from report counts.
    pub fn estimate_frequencies(&self, report_counts: &[u64]) -> Result<Vec<f64>> {
        if report_counts.len() as u64 != self.categories {
            return Err(Error::InvalidParameter {
                name: "report counts",
                reason: format!("need one count per category ({})", self.categories),
            });
        }
        let n: u64 = report_counts.iter().sum();
        if n == 0 {
            return Err(Error::InvalidParameter {
                name: "report counts",
                reason: "need at least one report".into(),
            });
        }
        let keep = self.truth_coin.probability();
        let flip = (1.0 - keep) / (self.categories - 1) as f64;
        Ok(report_counts
            .iter()
            .map(|&c| (c as f64 / n as f64 - flip) / (keep - flip))
            .collect())
    }
}
