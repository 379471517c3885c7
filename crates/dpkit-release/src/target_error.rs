//! Accuracy first: the smallest ε at which every aggregate of a query has
//! an interval no wider than `±H`. Analysts think in error bars; this turns
//! one into the ε it costs. Nothing here sees the data: the half-widths
//! come from the noise plan's closed forms (and, for averages and spreads,
//! a group size the analyst states).

use crate::error::{ReleaseError, Result};
use crate::measured::{AggregateKind, MeasuredQuery};
use crate::{NoisePlan, ReleaseSettings, plan_noise};

/// The smallest ε searched, and the largest (the ledger's cap per query).
const EPSILON_RANGE: (f64, f64) = (1e-4, 1000.0);

/// What the analyst asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetError {
    /// The largest half-width any aggregate's interval may have.
    pub half_width: f64,
    /// The fewest rows a group has, for averages and spreads, whose
    /// intervals shrink with the group.
    pub rows: Option<f64>,
}

/// The widest interval half-width of `query`'s aggregates under `plan`
/// (averages and spreads for a group of `rows` rows, whatever its mean).
///
/// For an average, the interval spans the ratios of the sum's and the
/// count's boxes: at most `(h_S + r·h_n)/(n − h_n)` from the true mean,
/// with `r` the largest distance from the centre to a bound. For a
/// variance, `(h₂ + 2r·h₁ + r²·h_n)/(n − h_n − 1)` in the same way, and
/// a standard deviation moves by at most the root of that.
pub fn widest_half_width(
    query: &MeasuredQuery,
    plan: &NoisePlan,
    rows: Option<f64>,
) -> Result<f64> {
    let mut widest: f64 = 0.0;
    for (a, aggregate) in query.aggregates.iter().enumerate() {
        let h = |i: usize| plan.noises[query.measurement_of[a][i]].half_width;
        let need_rows = || {
            rows.ok_or_else(|| {
                ReleaseError::NotPrivate(format!(
                    "the interval of '{}' shrinks with its group: give the fewest rows a group \
                     has (--target-rows)",
                    aggregate.name
                ))
            })
        };
        let half_width = match &aggregate.kind {
            AggregateKind::CountRows
            | AggregateKind::CountColumn(_)
            | AggregateKind::CountPeople
            | AggregateKind::CountDistinct(_)
            | AggregateKind::Sum { .. } => h(0),
            AggregateKind::Avg { bounds, centre, .. } => {
                let r = reach(*bounds, *centre);
                ratio(h(0) + r * h(1), need_rows()? - h(1))
            }
            AggregateKind::Dispersion {
                bounds,
                centre,
                dispersion,
                ..
            } => {
                let r = reach(*bounds, *centre);
                let variance = ratio(
                    h(0) + 2.0 * r * h(1) + r * r * h(2),
                    need_rows()? - h(2) - 1.0,
                );
                if dispersion.root {
                    variance.sqrt()
                } else {
                    variance
                }
            }
            AggregateKind::Quantile { .. } => {
                return Err(ReleaseError::NotPrivate(format!(
                    "--target-error does not apply to '{}': a percentile's error is in ranks",
                    aggregate.name
                )));
            }
        };
        widest = widest.max(half_width);
    }
    Ok(widest)
}

/// The largest distance from the centre to a bound.
fn reach((low, high): (f64, f64), centre: f64) -> f64 {
    (high - centre).max(centre - low)
}

fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator >= 1.0 {
        numerator / denominator
    } else {
        f64::INFINITY
    }
}

/// The smallest ε (to three significant digits, rounded up) at which every
/// aggregate's half-width is at most the target, and the noise plan at it.
/// Half-widths shrink as ε grows, so a bisection on `log ε` finds it.
pub fn smallest_epsilon(
    query: &MeasuredQuery,
    settings: &ReleaseSettings,
    target: TargetError,
) -> Result<(f64, NoisePlan)> {
    if !query.combinations.is_empty() {
        return Err(ReleaseError::NotPrivate(
            "--target-error does not cover arithmetic over aggregates yet: ask for the \
             aggregates themselves, or choose ε with --epsilon and read the interval"
                .into(),
        ));
    }
    if !(target.half_width > 0.0 && target.half_width.is_finite()) {
        return Err(ReleaseError::NotPrivate(
            "the target error must be a positive number".into(),
        ));
    }
    let plan_at = |epsilon: f64| {
        plan_noise(
            query,
            &ReleaseSettings {
                epsilon,
                ..*settings
            },
        )
    };
    let meets = |epsilon: f64| -> Result<Option<NoisePlan>> {
        // A mechanism that cannot be built at so small an ε does not meet it.
        let plan = match plan_at(epsilon) {
            Err(ReleaseError::Mechanism(_)) => return Ok(None),
            other => other?,
        };
        let widest = widest_half_width(query, &plan, target.rows)?;
        Ok((widest <= target.half_width).then_some(plan))
    };
    let (mut low, mut high) = EPSILON_RANGE;
    // The top of the search is the ledger's cap per query, or, below it,
    // the largest ε the mechanism takes (Gaussian noise stops at 500).
    let refused = |epsilon: f64| match plan_at(epsilon) {
        Err(error @ ReleaseError::Mechanism(_)) => Some(error),
        _ => None,
    };
    if let Some(at_cap) = refused(high) {
        let mut builds = false;
        while high > low && !builds {
            high /= 2.0;
            builds = refused(high).is_none();
        }
        if !builds {
            // Nothing builds at any ε (settings or bounds no mechanism
            // takes): the mechanism's own reason, not a search that found
            // nothing.
            return Err(at_cap);
        }
    }
    if meets(high)?.is_none() {
        return Err(ReleaseError::NotPrivate(format!(
            "no ε up to {high} makes every interval ±{} or narrower",
            target.half_width
        )));
    }
    if meets(low)?.is_some() {
        high = low;
    }
    for _ in 0..48 {
        if high / low < 1.0 + 1e-4 {
            break;
        }
        let middle = (low * high).sqrt();
        if meets(middle)?.is_some() {
            high = middle;
        } else {
            low = middle;
        }
    }
    let epsilon = round_up(high);
    let plan = meets(epsilon)?.ok_or_else(|| {
        ReleaseError::NotPrivate("the target error is not met at the ε found".into())
    })?;
    Ok((epsilon, plan))
}

/// `x` rounded up to three significant digits.
fn round_up(x: f64) -> f64 {
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).ceil() / scale
}

#[cfg(test)]
mod tests {
    use super::round_up;

    #[test]
    fn rounding_up_keeps_three_digits_and_never_goes_down() {
        for (x, expected) in [
            (0.123_41, 0.124),
            (4.0, 4.0),
            (12.34, 12.4),
            (999.01, 1000.0),
        ] {
            let r = round_up(x);
            assert!((r - expected).abs() < 1e-9 && r >= x, "{x}: {r}");
        }
    }
}
