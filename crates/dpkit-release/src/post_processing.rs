//! Post-processing: each aggregate's answer, interval and expected error
//! from its noisy measurements. Nothing here sees the data.

use crate::measured::{AggregateKind, Dispersion};
use crate::{Cell, NoisePlan};

/// Post-processing of one aggregate: counts become non-negative integers,
/// averages a clamped ratio of a noisy sum and a noisy count.
pub(crate) fn aggregate_cell(
    count_ceiling: Option<f64>,
    kind: &AggregateKind,
    measurements: &[usize],
    noisy: &[f64],
    plan: &NoisePlan,
) -> Cell {
    let m = measurements[0];
    let (h, error) = (
        plan.noises[m].half_width + plan.noises[m].conversion_slack(noisy[m]),
        plan.noises[m].expected_absolute_error,
    );
    match kind {
        AggregateKind::CountRows
        | AggregateKind::CountColumn(_)
        | AggregateKind::CountPeople
        | AggregateKind::CountDistinct(_) => {
            // Rounding and clamping to [0, ceiling] only move the value towards
            // any count in that range, so the interval stays valid.
            let ceiling = count_ceiling.unwrap_or(f64::INFINITY);
            let value = noisy[m].round().clamp(0.0, ceiling);
            Cell::Value {
                value,
                low: (value - h).max(0.0),
                high: (value + h).min(ceiling),
                expected_error: Some(error),
            }
        }
        AggregateKind::Sum { integer, .. } => {
            // A sum of whole numbers is a whole number: rounding moves the
            // value by at most 1/2, which the half-width includes.
            let value = if *integer { noisy[m].round() } else { noisy[m] };
            Cell::Value {
                value,
                low: value - h,
                high: value + h,
                expected_error: Some(error),
            }
        }
        AggregateKind::Avg { bounds, centre, .. } => {
            average_cell(*bounds, *centre, measurements, noisy, plan)
        }
        AggregateKind::Dispersion {
            bounds, dispersion, ..
        } => dispersion_cell(*bounds, *dispersion, measurements, noisy, plan),
        AggregateKind::Quantile { .. } => quantile_cell(measurements, noisy),
    }
}

/// An average: `c + S/n` from the noisy centred sum `S` and the noisy count
/// `n`, clamped to the bounds. With probability ≥ 1 − α both true values
/// lie in their boxes (each at α/2), and the true average lies between the
/// box's extreme ratios.
fn average_cell(
    (low, high): (f64, f64),
    centre: f64,
    measurements: &[usize],
    noisy: &[f64],
    plan: &NoisePlan,
) -> Cell {
    let (s, c) = (measurements[0], measurements[1]);
    let (sum, count) = (noisy[s], noisy[c].round());
    let (hs, hc) = (
        plan.noises[s].half_width + plan.noises[s].conversion_slack(sum),
        plan.noises[c].half_width + plan.noises[c].conversion_slack(count),
    );
    let value = (centre + sum / count.max(1.0)).clamp(low, high);
    let smallest_count = count - hc;
    let (interval_low, interval_high) = if smallest_count >= 1.0 {
        let corners = [
            (sum - hs) / smallest_count,
            (sum - hs) / (count + hc),
            (sum + hs) / smallest_count,
            (sum + hs) / (count + hc),
        ];
        let lo = corners.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = corners.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // c + S/n is computed with a few roundings: widen by as many ulps.
        let slack = 8.0 * f64::EPSILON * (centre.abs() + lo.abs().max(hi.abs()));
        (
            (centre + lo - slack).clamp(low, high),
            (centre + hi + slack).clamp(low, high),
        )
    } else {
        (low, high)
    };
    // First order: (Z_S − (μ − c)·Z_n)/n, with the released mean for μ.
    let error = (plan.noises[s].expected_absolute_error
        + (value - centre).abs() * plan.noises[c].expected_absolute_error)
        / count.max(1.0);
    Cell::Value {
        value,
        low: interval_low,
        high: interval_high,
        expected_error: Some(error.min(high - low)),
    }
}

/// A variance or standard deviation from the noisy centred sum of squares
/// `S₂`, centred sum `S₁` and count `n`: the sum of squared deviations
/// `A = S₂ − S₁²/n` over `n` (or `n − 1`), clamped to what values in the
/// bounds allow. With probability ≥ 1 − α all three true values lie in
/// their boxes (each at α/3). `A` grows with `S₂` and with `n` and shrinks
/// with `|S₁|`, and the true `A` is at least 0, so over the box it lies in
/// `[max(0, S₂⁻ − (|S₁| + h₁)²/n⁻), S₂⁺ − (|S₁| − h₁)₊²/n⁺]`, and the
/// statistic between those over the largest and smallest divisor.
fn dispersion_cell(
    (low, high): (f64, f64),
    dispersion: Dispersion,
    measurements: &[usize],
    noisy: &[f64],
    plan: &NoisePlan,
) -> Cell {
    let (q, s, c) = (measurements[0], measurements[1], measurements[2]);
    let (squares, sum, count) = (noisy[q], noisy[s], noisy[c].round());
    let half = |m: usize| plan.noises[m].half_width + plan.noises[m].conversion_slack(noisy[m]);
    let error = |m: usize| plan.noises[m].expected_absolute_error;
    let least = if dispersion.sample { 2.0 } else { 1.0 };
    let divisor = |n: f64| if dispersion.sample { n - 1.0 } else { n };
    let cap = (high - low).powi(2) / 4.0 * if dispersion.sample { 2.0 } else { 1.0 };
    let n = count.max(least);
    let variance = ((squares - sum * sum / n).max(0.0) / divisor(n)).min(cap);
    let (n_low, n_high) = (count - half(c), count + half(c));
    let (mut v_low, mut v_high) = (0.0, cap);
    if n_low >= least {
        let largest = (sum.abs() + half(s)).powi(2);
        let smallest = (sum.abs() - half(s)).max(0.0).powi(2);
        let a_low = (squares - half(q) - largest / n_low).max(0.0);
        let a_high = (squares + half(q) - smallest / n_high).max(0.0);
        // The roundings of S₂ − S₁²/n and the division: widen by a few ulps.
        let slack = 8.0 * f64::EPSILON * (squares.abs() + largest / n_low) / divisor(n_low);
        v_low = (a_low / divisor(n_high) - slack).clamp(0.0, cap);
        v_high = (a_high / divisor(n_low) + slack).min(cap);
    }
    // First order: (Z₂ − 2m·Z₁ + (m² − V)·Z_n)/n with the released m and V.
    let mean = sum / n;
    let variance_error =
        ((error(q) + 2.0 * mean.abs() * error(s) + (mean * mean - variance).abs() * error(c))
            / divisor(n))
        .min(cap);
    if !dispersion.root {
        return Cell::Value {
            value: variance,
            low: v_low,
            high: v_high,
            expected_error: Some(variance_error),
        };
    }
    // √ is increasing, and |√a − √b| ≤ √|a − b|.
    let deviation = variance.sqrt();
    let linear = if deviation > 0.0 {
        variance_error / (2.0 * deviation)
    } else {
        f64::INFINITY
    };
    Cell::Value {
        value: deviation,
        low: v_low.sqrt(),
        high: v_high.sqrt(),
        expected_error: Some(linear.min(variance_error.sqrt())),
    }
}

/// A quantile: the chosen value, within the interval its two ends make.
/// Each end falls on its side of the true quantile with probability
/// ≥ 1 − α/3, so both do with probability ≥ 1 − α; clamping the value into
/// the interval then only moves it towards the quantile.
fn quantile_cell(measurements: &[usize], noisy: &[f64]) -> Cell {
    let (point, lower, upper) = (
        noisy[measurements[0]],
        noisy[measurements[1]],
        noisy[measurements[2]],
    );
    let (low, high) = (lower.min(upper), lower.max(upper));
    Cell::Value {
        value: point.clamp(low, high),
        low,
        high,
        expected_error: None,
    }
}
