//! Confidence bounds for observed frequencies: the statistics that tests,
//! audits and experiments use to compare what was seen with what was promised.

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
/// use dpkit_core::statistics::binomial_bounds;
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
}
