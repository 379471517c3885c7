//! Confidence bounds on event probabilities and on the privacy loss they imply.

/// `KL(x ‖ p)` between Bernoulli(x) and Bernoulli(p), in nats.
fn bernoulli_kl(x: f64, p: f64) -> f64 {
    let term = |a: f64, b: f64| if a == 0.0 { 0.0 } else { a * (a / b).ln() };
    term(x, p) + term(1.0 - x, 1.0 - p)
}

/// Chernoff–KL confidence bounds `(low, high)` on a binomial probability
/// after `successes` in `trials`: each side fails with probability at most
/// `failure_probability`, since `P(p̂ ≤ x) ≤ e^(−n·KL(x‖p))` for `x < p`
/// (and symmetrically). Exact, with no normal approximation, so it holds for
/// counts of zero and for tiny probabilities.
///
/// ```
/// use dpkit_audit::bounds::binomial_bounds;
/// let (low, high) = binomial_bounds(0, 100_000, 1e-6);
/// assert_eq!(low, 0.0);
/// // ln(10⁶)/n: no event seen in 100,000 trials still allows p ≈ 1.4e-4
/// assert!((high - 13.8155 / 100_000.0).abs() < 2e-6);
/// ```
pub fn binomial_bounds(successes: u64, trials: u64, failure_probability: f64) -> (f64, f64) {
    debug_assert!(successes <= trials && trials > 0);
    let n = trials as f64;
    let observed = successes as f64 / n;
    let budget = (1.0 / failure_probability).ln() / n;
    let search = |mut inside: f64, mut outside: f64| {
        for _ in 0..100 {
            let middle = 0.5 * (inside + outside);
            if bernoulli_kl(observed, middle) <= budget {
                inside = middle;
            } else {
                outside = middle;
            }
        }
        inside
    };
    let low = if successes == 0 {
        0.0
    } else {
        search(observed, 0.0)
    };
    let high = if successes == trials {
        1.0
    } else {
        search(observed, 1.0)
    };
    (low, high)
}

/// The counts of one event under the two inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventCounts {
    /// Outputs in the event from the input the event favours.
    pub favoured: u64,
    /// Draws from that input.
    pub favoured_trials: u64,
    /// Outputs in the event from the other input.
    pub other: u64,
    /// Draws from the other input.
    pub other_trials: u64,
}

impl EventCounts {
    /// A lower confidence bound on ε implied by these counts: with
    /// probability at least `1 − failure_probability`,
    /// `ε ≥ ln((P_low − δ) / P_high)`, where `P_low` bounds the favoured
    /// probability from below and `P_high` the other from above (each side
    /// failing with half the probability). 0 when the counts show nothing.
    ///
    /// ```
    /// use dpkit_audit::bounds::EventCounts;
    /// let counts = EventCounts { favoured: 30_000, favoured_trials: 100_000, other: 10_000, other_trials: 100_000 };
    /// let bound = counts.epsilon_lower_bound(0.0, 1e-6);
    /// assert!(bound > 1.0 && bound < 3f64.ln());
    /// ```
    pub fn epsilon_lower_bound(&self, delta: f64, failure_probability: f64) -> f64 {
        let half = failure_probability / 2.0;
        let (favoured_low, _) = binomial_bounds(self.favoured, self.favoured_trials, half);
        let (_, other_high) = binomial_bounds(self.other, self.other_trials, half);
        let numerator = favoured_low - delta;
        if numerator <= 0.0 {
            return 0.0;
        }
        (numerator / other_high).ln().max(0.0)
    }

    /// The plain estimate `ln(p̂_favoured / p̂_other)` (∞ when the other count is 0).
    pub fn epsilon_estimate(&self) -> f64 {
        let favoured = self.favoured as f64 / self.favoured_trials as f64;
        let other = self.other as f64 / self.other_trials as f64;
        (favoured / other).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_bracket_the_observed_share_and_tighten_with_trials() {
        let (low, high) = binomial_bounds(500, 1000, 1e-3);
        assert!(low < 0.5 && 0.5 < high);
        let (low_more, high_more) = binomial_bounds(50_000, 100_000, 1e-3);
        assert!(low_more > low && high_more < high);
        assert_eq!(binomial_bounds(1000, 1000, 1e-3).1, 1.0);
    }

    #[test]
    fn a_lower_bound_needs_the_favoured_side_to_clear_delta() {
        let counts = EventCounts {
            favoured: 10,
            favoured_trials: 100_000,
            other: 0,
            other_trials: 100_000,
        };
        assert_eq!(counts.epsilon_lower_bound(1e-3, 1e-6), 0.0);
        assert!(counts.epsilon_lower_bound(0.0, 1e-6) >= 0.0);
    }
}
