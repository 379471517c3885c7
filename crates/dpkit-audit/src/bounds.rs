//! Confidence bounds on event probabilities and on the privacy loss they imply.

pub use dpkit_core::statistics::binomial_bounds;

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
