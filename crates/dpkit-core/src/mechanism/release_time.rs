//! When an answer is released: at a public deadline, or, past it, at a
//! noisy time.
//!
//! Why: how long a run takes is a release too (Haeberlen, Pierce, Narayan,
//! "Differential Privacy Under Fire", USENIX Security 2011). Fuzz holds
//! every answer until a deadline fixed from public facts, so that a run
//! that ends early shows nothing; a run that overruns its deadline is the
//! hard part, since *whether* it overran can hang on one person. Here an
//! overrun is not an exact bit: the release time is itself a noisy,
//! differentially private function of the run's duration.
//!
//! # Privacy
//! Let `A` be the run's duration in whole microseconds (rounded up), `Δ`
//! a public bound on how far one person's rows can move `A` (the planner's
//! bound on their work, in time), and `D` the public deadline. The answer
//! is released at
//!
//! `T = max(D, A + C + Z)`, with `Z` two-sided geometric at `ε` for
//! sensitivity `Δ` and `C` the least integer with `P(|Z| > C) ≤ δ'`,
//!
//! or at `max(D, A)` in the event `Z < −C` (the answer cannot leave before
//! it exists). `A + C + Z` is the two-sided geometric mechanism on `A + C`,
//! exactly ε-DP in `A` for moves of at most `Δ`; `max(D, ·)` with a public
//! `D` is post-processing. The fallback differs from that only on `Z < −C`,
//! of probability at most `δ'/2`, so for any set `S` of times and
//! neighbouring durations `A`, `A'`: `P(T ∈ S) ≤ e^ε·P(T' ∈ S) +
//! (1 + e^ε)·δ'/2`. With `δ' = 2δ/(1 + e^ε)` the release time is
//! (ε, δ)-DP.
//!
//! What this does not cover is any way `A` moves by more than `Δ` for one
//! person: `Δ` is the planner's work bound at the engine's worst speed a
//! unit, timed by the query crate's `tests/row_cost.rs` on its own engine
//! and by `docs/bench/work_units.py` on databases, and only as good as
//! that model and those measurements.
//!
//! ```
//! use std::time::Duration;
//! use dpkit_core::mechanism::ReleaseTime;
//! let release = ReleaseTime::new(
//!     Duration::from_millis(50),
//!     Duration::from_micros(2),
//!     0.01,
//!     1e-9,
//! )
//! .unwrap();
//! // A run of 3 ms is released at the deadline, and shows nothing.
//! let at = release.release_after(Duration::from_millis(3)).unwrap();
//! assert_eq!(at, Duration::from_millis(50));
//! ```

use std::time::Duration;

use rand_core::CryptoRng;

use super::{IntegerMechanism, TwoSidedGeometric};
use crate::accounting::PrivacyLoss;
use crate::accuracy::NoiseAccuracy;
use crate::error::{Error, Result, require_positive};
use crate::rng::with_thread_secure_rng;

/// The release time of a run (see the [module](self)).
#[derive(Debug, Clone)]
pub struct ReleaseTime {
    deadline_us: u64,
    offset_us: u64,
    noise: TwoSidedGeometric,
    privacy: PrivacyLoss,
}

impl ReleaseTime {
    /// Releases no earlier than `deadline`, and past it at a time that is
    /// (`epsilon`, `delta`)-DP for runs whose duration one person moves by
    /// at most `sensitivity` (rounded up to a microsecond, at least one).
    pub fn new(
        deadline: Duration,
        sensitivity: Duration,
        epsilon: f64,
        delta: f64,
    ) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::InvalidParameter {
                name: "delta",
                reason: format!("must lie in (0, 1), got {delta}"),
            });
        }
        let sensitivity_us = micros_up(sensitivity).max(1);
        let noise = TwoSidedGeometric::new(epsilon, sensitivity_us)?;
        let inner_delta = 2.0 * delta / (1.0 + epsilon.exp());
        let offset_us = noise.confidence_half_width(inner_delta)? as u64;
        Ok(Self {
            deadline_us: micros_up(deadline),
            offset_us,
            noise,
            privacy: PrivacyLoss::approximate(epsilon, delta)?,
        })
    }

    /// The public deadline.
    pub fn deadline(&self) -> Duration {
        Duration::from_micros(self.deadline_us)
    }

    /// `C`: how far past its end an overrunning run is released, before
    /// the noise.
    pub fn offset(&self) -> Duration {
        Duration::from_micros(self.offset_us)
    }

    /// What the release time shows of one person's rows.
    pub fn privacy(&self) -> PrivacyLoss {
        self.privacy
    }

    /// When, counted from the run's start, a run that took `ran` is
    /// released, drawn from the thread's OS-seeded generator.
    pub fn release_after(&self, ran: Duration) -> Result<Duration> {
        with_thread_secure_rng(|rng| self.release_after_with_rng(ran, rng))
    }

    /// [`ReleaseTime::release_after`] with the given generator.
    pub fn release_after_with_rng<R: CryptoRng + ?Sized>(
        &self,
        ran: Duration,
        rng: &mut R,
    ) -> Duration {
        let ran_us = micros_up(ran);
        let shifted = i64::try_from(ran_us.saturating_add(self.offset_us)).unwrap_or(i64::MAX);
        let noisy = self.noise.privatize_with_rng(shifted, rng);
        // Z < −C: the answer cannot leave before it exists.
        let noisy = u64::try_from(noisy).unwrap_or(0).max(ran_us);
        Duration::from_micros(noisy.max(self.deadline_us))
    }
}

/// `duration` in whole microseconds, rounded up.
fn micros_up(duration: Duration) -> u64 {
    let micros = duration.as_nanos().div_ceil(1000);
    u64::try_from(micros).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::InsecureSeededRng;

    fn release(deadline_ms: u64, sensitivity_us: u64, epsilon: f64, delta: f64) -> ReleaseTime {
        ReleaseTime::new(
            Duration::from_millis(deadline_ms),
            Duration::from_micros(sensitivity_us),
            epsilon,
            delta,
        )
        .unwrap()
    }

    #[test]
    fn a_run_well_within_its_deadline_is_released_at_the_deadline() {
        let release = release(100, 5, 0.01, 1e-9);
        let mut rng = InsecureSeededRng::from_seed_for_testing(1);
        for ran in [0, 1_000, 50_000] {
            let at = release.release_after_with_rng(Duration::from_micros(ran), &mut rng);
            assert_eq!(at, Duration::from_millis(100), "{ran} µs");
        }
    }

    /// Past the deadline: `A + C + Z`, whose mean is `A + C` and whose mean
    /// distance from it is the two-sided geometric's `E|Z|`.
    #[test]
    fn an_overrun_is_released_at_its_end_plus_the_offset_and_calibrated_noise() {
        let release = release(1, 100, 0.5, 1e-6);
        let expected = release.noise.expected_absolute_error();
        let offset = release.offset().as_micros() as f64;
        // C: P(|Z| > C) ≤ 2δ/(1 + e^ε) at scale Δ/ε = 200 µs.
        assert!((2_000.0..3_000.0).contains(&offset), "{offset}");
        let mut rng = InsecureSeededRng::from_seed_for_testing(7);
        let ran = Duration::from_millis(20);
        let n = 200_000;
        let (mut sum, mut absolute) = (0.0, 0.0);
        for _ in 0..n {
            let at = release.release_after_with_rng(ran, &mut rng);
            assert!(at >= ran);
            let z = at.as_micros() as f64 - 20_000.0 - offset;
            sum += z;
            absolute += z.abs();
        }
        // Var Z ≈ 2·200² = 80,000: the mean of 200,000 draws has sd 0.63;
        // |Z| has sd ≈ 200: its mean's sd is 0.45. Seven sd each.
        assert!((sum / n as f64).abs() < 4.5, "{}", sum / n as f64);
        assert!(
            (absolute / n as f64 - expected).abs() < 3.2,
            "{} against {expected}",
            absolute / n as f64
        );
    }

    /// The fallback to the run's own end happens with probability at most
    /// δ, checked at a large δ where it can be seen.
    #[test]
    fn the_release_falls_back_to_the_runs_end_at_most_delta_of_the_time() {
        let delta = 0.05;
        let release = release(1, 10, 1.0, delta);
        let mut rng = InsecureSeededRng::from_seed_for_testing(3);
        let ran = Duration::from_millis(5);
        let n = 100_000;
        let fallbacks = (0..n)
            .filter(|_| release.release_after_with_rng(ran, &mut rng) == ran)
            .count();
        // Z ≤ −C (the run's end, or a tie with it): P ≈ δ/(1 + e)·1.06 ≈
        // 0.014; 100,000 draws, sd of the frequency 0.00037, so δ is far
        // above. An offset too small (C = 0) gives about a half.
        let rate = fallbacks as f64 / n as f64;
        assert!(rate <= delta, "{rate}");
        assert!(rate > 0.0, "the fallback never happened: {rate}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let (d, s) = (Duration::from_millis(1), Duration::from_micros(1));
        assert!(ReleaseTime::new(d, s, 0.0, 1e-9).is_err());
        assert!(ReleaseTime::new(d, s, 1.0, 0.0).is_err());
        assert!(ReleaseTime::new(d, s, 1.0, 1.0).is_err());
        assert!(ReleaseTime::new(d, s, f64::NAN, 1e-9).is_err());
        // The largest durations give an answer or an error, never a panic.
        let _ = ReleaseTime::new(Duration::MAX, Duration::MAX, 1.0, 1e-9);
    }
}
