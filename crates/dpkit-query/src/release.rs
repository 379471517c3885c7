//! The private step: noise on the exact per-group results, key selection,
//! post-processing and confidence intervals. Everything here runs in Rust on
//! the small result of the rewritten plan.

use std::collections::HashMap;

use dpkit_core::accounting::PrivacyLoss;
use dpkit_core::mechanism::{AdditiveNoise, MechanismKind};
use dpkit_core::sensitivity::{
    Calibration, GroupedSensitivity, LossGrowth, RowValues, Spread, calibrate,
};

use rand_core::CryptoRng;
use serde::Serialize;

use crate::error::{QueryError, Result};
use crate::plan::{AggregateKind, KeySelection, OutputColumn, PrivateQuery};

/// Which noise to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MechanismChoice {
    /// The least error for each aggregate: two-sided geometric for counts,
    /// staircase for sums.
    #[default]
    Auto,
    /// Laplace everywhere.
    Laplace,
    /// Gaussian everywhere (needs δ): discrete for counts.
    Gaussian,
    /// Staircase everywhere: discrete for counts.
    Staircase,
    /// Two-sided geometric: counts, and sums of whole-number columns.
    Geometric,
}

/// The privacy parameters and error-bar level of one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReleaseSettings {
    /// Total ε of the query (split evenly over its noisy measurements).
    pub epsilon: f64,
    /// Total δ (for key thresholding and Gaussian noise; 0 otherwise).
    pub delta: f64,
    /// Which noise.
    pub mechanism: MechanismChoice,
    /// Confidence level of the intervals.
    pub confidence: f64,
}

/// One measurement's noise, as planned.
#[derive(Debug, Clone)]
pub struct PlannedNoise {
    noise: AdditiveNoise,
    /// ε spent on it.
    pub epsilon: f64,
    /// δ spent on it.
    pub delta: f64,
    /// Its noise's sensitivity (from dpkit-core's privacy map).
    pub sensitivity: f64,
    /// Its noise's ε: the measurement's ε, or a share of it when a scalar
    /// noise is released in several groups one person can move.
    pub noise_epsilon: f64,
    /// Why the calibration costs at most the measurement's ε.
    pub argument: &'static str,
    /// Every mechanism considered for it with its E|error| (the chosen one
    /// included): `auto` takes the least.
    pub considered: Vec<(&'static str, f64)>,
    /// Half-width of its interval at the level its aggregate needs.
    pub half_width: f64,
    /// Its expected absolute error.
    pub expected_absolute_error: f64,
}

impl PlannedNoise {
    /// The mechanism's name.
    pub fn mechanism(&self) -> &'static str {
        self.noise.kind().name()
    }
}

/// The noise for every measurement, the threshold and the total cost.
#[derive(Debug, Clone)]
pub struct NoisePlan {
    /// One per measurement.
    pub noises: Vec<PlannedNoise>,
    /// The noisy row count a key needs to be released (thresholding only).
    pub threshold: Option<f64>,
    /// δ charged for thresholding.
    pub threshold_delta: f64,
    /// What the query costs.
    pub cost: PrivacyLoss,
}

/// Checks the settings: ε, δ and the confidence level.
fn checked_epsilon(settings: &ReleaseSettings) -> Result<f64> {
    let epsilon = PrivacyLoss::pure(settings.epsilon)?.epsilon();
    if !(0.0..1.0).contains(&settings.delta) {
        return Err(QueryError::Mechanism(dpkit_core::Error::InvalidParameter {
            name: "delta",
            reason: format!("must lie in [0, 1), got {}", settings.delta),
        }));
    }
    if !(settings.confidence > 0.0 && settings.confidence < 1.0) {
        return Err(QueryError::Mechanism(dpkit_core::Error::InvalidParameter {
            name: "confidence",
            reason: format!(
                "must lie strictly between 0 and 1, got {}",
                settings.confidence
            ),
        }));
    }
    Ok(epsilon)
}

/// How δ is shared: the threshold's share and each Gaussian measurement's.
struct DeltaShares {
    threshold: f64,
    per_gaussian: f64,
    gaussian_count: usize,
}

fn share_delta(query: &PrivateQuery, settings: &ReleaseSettings) -> Result<DeltaShares> {
    let thresholding = query.threshold_measurement.is_some();
    let gaussian = settings.mechanism == MechanismChoice::Gaussian;
    if (thresholding || gaussian) && settings.delta <= 0.0 {
        let why = if thresholding {
            "GROUP BY a column without a public domain releases only keys whose noisy count \
             passes a threshold, which needs δ > 0 (for example --delta 1e-6)"
        } else {
            "the Gaussian mechanism needs δ > 0 (for example --delta 1e-6)"
        };
        return Err(QueryError::NotPrivate(why.into()));
    }
    // The threshold's count is always geometric; every other measurement is
    // Gaussian when asked. δ is shared between the two uses that exist.
    let count = query.measurements.len();
    let gaussian_count = if gaussian {
        count - usize::from(thresholding)
    } else {
        0
    };
    let threshold = match (thresholding, gaussian_count > 0) {
        (true, true) => settings.delta / 2.0,
        (true, false) => settings.delta,
        (false, _) => 0.0,
    };
    let per_gaussian = if gaussian_count > 0 {
        (settings.delta - threshold) / gaussian_count as f64
    } else {
        0.0
    };
    Ok(DeltaShares {
        threshold,
        per_gaussian,
        gaussian_count,
    })
}

/// The mechanisms a measurement may use under `choice` (Auto: every valid
/// one, and the least expected error wins).
fn candidates(choice: MechanismChoice, values: RowValues) -> Result<Vec<MechanismChoice>> {
    use MechanismChoice as M;
    let integer = values.is_integer();
    Ok(match (choice, values) {
        (M::Auto, RowValues::Count) => vec![M::Geometric, M::Staircase],
        (M::Auto, _) if integer => vec![M::Geometric, M::Staircase, M::Laplace],
        (M::Auto, _) => vec![M::Staircase, M::Laplace],
        (M::Geometric, _) if !integer => {
            return Err(QueryError::NotPrivate(
                "the geometric mechanism releases integers: use it for counts and \
                 sums of whole-number columns with whole-number bounds"
                    .into(),
            ));
        }
        (choice, _) => vec![choice],
    })
}

/// The catalogue's mechanism for `choice` on whole or real numbers.
fn kind_of(choice: MechanismChoice, integer: bool) -> MechanismKind {
    use MechanismChoice as M;
    match (choice, integer) {
        (M::Auto | M::Geometric, _) => MechanismKind::Geometric,
        (M::Staircase, true) => MechanismKind::DiscreteStaircase,
        (M::Staircase, false) => MechanismKind::Staircase,
        (M::Laplace, _) => MechanismKind::Laplace,
        (M::Gaussian, true) => MechanismKind::DiscreteGaussian,
        (M::Gaussian, false) => MechanismKind::Gaussian,
    }
}

/// One measurement's noise under `choice`, calibrated by dpkit-core's
/// privacy map for the move one person can cause.
fn build_noise(
    choice: MechanismChoice,
    values: RowValues,
    epsilon: f64,
    delta: f64,
    moved: &GroupedSensitivity,
) -> Result<(AdditiveNoise, Calibration)> {
    let kind = kind_of(choice, values.is_integer());
    let growth = kind.loss_growth().unwrap_or(LossGrowth::Scalar);
    #[cfg(feature = "planted-holes")]
    let planted;
    #[cfg(feature = "planted-holes")]
    let moved = if crate::planted::is_planted(crate::planted::Hole::StaircaseChargedOnce) {
        planted = GroupedSensitivity {
            groups_moved: 1,
            ..*moved
        };
        &planted
    } else {
        moved
    };
    let c = calibrate(growth, epsilon, moved, kind.grid_bits())?;
    let sensitivity = if kind.grid_bits().is_none() {
        c.sensitivity.ceil() // integer noise: a whole Δ, rounded up
    } else {
        c.sensitivity
    };
    let noise = AdditiveNoise::build(kind, c.epsilon, delta, sensitivity)?;
    Ok((noise, Calibration { sensitivity, ..c }))
}

/// Plans the noise of `query` under `settings`. ε is split evenly over the
/// measurements (sequential composition); each measurement's groups are
/// calibrated by [`dpkit_core::sensitivity::calibrate`].
pub fn plan_noise(query: &PrivateQuery, settings: &ReleaseSettings) -> Result<NoisePlan> {
    let epsilon = checked_epsilon(settings)?;
    let alpha = 1.0 - settings.confidence;
    let delta = share_delta(query, settings)?;
    let count = query.measurements.len();
    let per_measurement = epsilon / count as f64;
    // AVG uses two measurements: each interval at α/2 makes the ratio's box ≥ 1 − α.
    let mut level = vec![alpha; count];
    for (aggregate, measurements) in query.aggregates.iter().zip(&query.measurement_of) {
        if matches!(aggregate.kind, AggregateKind::Avg { .. }) {
            for &m in measurements {
                level[m] = alpha / 2.0;
            }
        }
    }
    let spread = match query.keys {
        KeySelection::Single => Spread::Single,
        _ => Spread::Groups,
    };
    let mut noises = Vec::with_capacity(count);
    for (index, measurement) in query.measurements.iter().enumerate() {
        let values = measurement.row_values();
        let moved =
            GroupedSensitivity::of(values, query.rows_per_person, spread, query.neighbouring)?;
        let is_threshold = query.threshold_measurement == Some(index);
        let choice = if is_threshold {
            MechanismChoice::Geometric
        } else {
            settings.mechanism
        };
        let delta = if choice == MechanismChoice::Gaussian {
            delta.per_gaussian
        } else {
            0.0
        };
        let mut best: Option<PlannedNoise> = None;
        let mut considered = Vec::new();
        for candidate in candidates(choice, values)? {
            let (noise, calibration) =
                build_noise(candidate, values, per_measurement, delta, &moved)?;
            let rounded = values.is_integer(); // whole-number answers are rounded
            let planned = planned(
                noise,
                calibration,
                per_measurement,
                delta,
                level[index],
                rounded,
            )?;
            considered.push((planned.mechanism(), planned.expected_absolute_error));
            if best
                .as_ref()
                .is_none_or(|b| planned.expected_absolute_error < b.expected_absolute_error)
            {
                best = Some(planned);
            }
        }
        noises.extend(best.map(|b| PlannedNoise { considered, ..b }));
    }
    let threshold = query
        .threshold_measurement
        .map(|index| threshold(&noises[index], query.rows_per_person, delta.threshold))
        .transpose()?;
    let total_delta = if query.threshold_measurement.is_some() || delta.gaussian_count > 0 {
        settings.delta
    } else {
        0.0
    };
    Ok(NoisePlan {
        noises,
        threshold,
        threshold_delta: delta.threshold,
        cost: PrivacyLoss::approximate(epsilon, total_delta)?,
    })
}

fn planned(
    noise: AdditiveNoise,
    calibration: Calibration,
    epsilon: f64,
    delta: f64,
    alpha: f64,
    rounded: bool,
) -> Result<PlannedNoise> {
    let accuracy = noise.accuracy();
    let mut half_width = accuracy.confidence_half_width(alpha)?;
    if rounded && !noise.is_integer() {
        half_width += 0.5; // whole-number answers are rounded
    }
    Ok(PlannedNoise {
        expected_absolute_error: accuracy.expected_absolute_error(),
        noise,
        epsilon,
        delta,
        sensitivity: calibration.sensitivity,
        noise_epsilon: calibration.epsilon,
        argument: calibration.argument,
        considered: Vec::new(),
        half_width,
    })
}

/// The noisy row count a key needs. A key held by one person has count ≤ k;
/// it is released only if its noise reaches τ − k, which happens with
/// probability ≤ δ/k per key, so ≤ δ over the person's ≤ k keys.
fn threshold(planned: &PlannedNoise, k: u64, delta: f64) -> Result<f64> {
    let AdditiveNoise::Geometric(geometric) = &planned.noise else {
        return Err(QueryError::NotPrivate(
            "thresholded keys need the geometric count".into(),
        ));
    };
    let per_key = delta / k as f64;
    let mut steps = 1u64;
    while geometric.noise().tail_probability(steps - 1) / 2.0 > per_key {
        steps += 1;
    }
    Ok((k + steps) as f64)
}

/// The exact result of the rewritten plan: keys and one value per measurement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExactGroups {
    /// One key per group (one string per GROUP BY column), each once.
    pub keys: Vec<Vec<String>>,
    /// `values[g][m]`: group g's measurement m (NULL sums are 0).
    pub values: Vec<Vec<f64>>,
}

impl ExactGroups {
    /// The groups of `rows`, merged by key. Keys are what the answer
    /// prints: engine groups that print alike (+NaN and −NaN, say) are one
    /// key, and their measurements add up, so that no key is released twice.
    pub fn merged(rows: impl IntoIterator<Item = (Vec<String>, Vec<f64>)>) -> Self {
        let mut merged = Self::default();
        let mut index: HashMap<Vec<String>, usize> = HashMap::new();
        for (key, values) in rows {
            #[cfg(feature = "planted-holes")]
            let key_seen = if crate::planted::is_planted(crate::planted::Hole::RepeatedKeys) {
                None
            } else {
                index.get(&key)
            };
            #[cfg(not(feature = "planted-holes"))]
            let key_seen = index.get(&key);
            match key_seen {
                Some(&at) => {
                    for (total, value) in merged.values[at].iter_mut().zip(values) {
                        *total += value;
                    }
                }
                None => {
                    index.insert(key.clone(), merged.keys.len());
                    merged.keys.push(key);
                    merged.values.push(values);
                }
            }
        }
        merged
    }
}

/// One cell of the answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cell {
    /// A group key (public: from a domain, or a thresholded key).
    Key(String),
    /// A released number and its confidence interval.
    Value {
        /// The released value.
        value: f64,
        /// The interval's lower end.
        low: f64,
        /// The interval's upper end.
        high: f64,
    },
}

/// The private answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReleasedTable {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<Cell>>,
    /// The confidence level of the intervals.
    pub confidence: f64,
    /// ε charged.
    pub epsilon: f64,
    /// δ charged.
    pub delta: f64,
}

/// Adds the noise to `exact`, selects keys and builds the answer.
pub fn release<R: CryptoRng + ?Sized>(
    query: &PrivateQuery,
    plan: &NoisePlan,
    exact: &ExactGroups,
    confidence: f64,
    rng: &mut R,
) -> Result<ReleasedTable> {
    let by_key: HashMap<&Vec<String>, usize> =
        exact.keys.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let zeros = vec![0.0; query.measurements.len()];
    // (key, exact values) of every candidate row.
    let candidates: Vec<(Vec<String>, &Vec<f64>)> = match &query.keys {
        KeySelection::Single => vec![(vec![], exact.values.first().unwrap_or(&zeros))],
        KeySelection::Domain(cells) => cells
            .iter()
            .map(|cell| {
                (
                    cell.clone(),
                    by_key.get(cell).map_or(&zeros, |&i| &exact.values[i]),
                )
            })
            .collect(),
        KeySelection::Threshold => {
            // Sorted keys: the order of the engine's result must not show through.
            let mut seen: Vec<(Vec<String>, &Vec<f64>)> = exact
                .keys
                .iter()
                .cloned()
                .zip(exact.values.iter())
                .collect();
            seen.sort_by(|a, b| a.0.cmp(&b.0));
            seen
        }
    };
    let mut rows = Vec::new();
    for (key, values) in candidates {
        let mut noisy = Vec::with_capacity(values.len());
        for (noise, &value) in plan.noises.iter().zip(values.iter()) {
            noisy.push(noise.noise.release(value, rng)?);
        }
        if let (Some(index), Some(threshold)) = (query.threshold_measurement, plan.threshold)
            && noisy[index] < threshold
        {
            continue;
        }
        let mut row = Vec::with_capacity(query.outputs.len());
        for (_, output) in &query.outputs {
            row.push(match *output {
                OutputColumn::Group(g) => Cell::Key(key[g].clone()),
                OutputColumn::Aggregate(a) => aggregate_cell(
                    query.count_ceiling,
                    &query.aggregates[a].kind,
                    &query.measurement_of[a],
                    &noisy,
                    plan,
                ),
            });
        }
        rows.push(row);
    }
    for &(column, ascending) in query.order_by.iter().rev() {
        rows.sort_by(|a, b| {
            let ordering = compare_cells(&a[column], &b[column]);
            if ascending {
                ordering
            } else {
                ordering.reverse()
            }
        });
    }
    if let Some(limit) = query.limit {
        rows.truncate(limit);
    }
    Ok(ReleasedTable {
        columns: query.outputs.iter().map(|(name, _)| name.clone()).collect(),
        rows,
        confidence,
        epsilon: plan.cost.epsilon(),
        delta: plan.cost.delta(),
    })
}

fn compare_cells(a: &Cell, b: &Cell) -> std::cmp::Ordering {
    match (a, b) {
        (Cell::Key(x), Cell::Key(y)) => match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(p), Ok(q)) => p.total_cmp(&q),
            _ => x.cmp(y),
        },
        (Cell::Value { value: x, .. }, Cell::Value { value: y, .. }) => x.total_cmp(y),
        (Cell::Key(_), _) => std::cmp::Ordering::Less,
        _ => std::cmp::Ordering::Greater,
    }
}

/// Post-processing of one aggregate: counts become non-negative integers,
/// averages a clamped ratio of a noisy sum and a noisy count.
fn aggregate_cell(
    count_ceiling: Option<f64>,
    kind: &AggregateKind,
    measurements: &[usize],
    noisy: &[f64],
    plan: &NoisePlan,
) -> Cell {
    match kind {
        AggregateKind::CountRows | AggregateKind::CountColumn(_) | AggregateKind::CountPeople => {
            // Rounding and clamping to [0, ceiling] only move the value towards
            // any count in that range, so the interval stays valid.
            let m = measurements[0];
            let ceiling = count_ceiling.unwrap_or(f64::INFINITY);
            let value = noisy[m].round().clamp(0.0, ceiling);
            let h = plan.noises[m].half_width;
            Cell::Value {
                value,
                low: (value - h).max(0.0),
                high: (value + h).min(ceiling),
            }
        }
        AggregateKind::Sum { integer, .. } => {
            // A sum of whole numbers is a whole number: rounding moves the
            // value by at most 1/2, which the half-width includes.
            let m = measurements[0];
            let h = plan.noises[m].half_width;
            let value = if *integer { noisy[m].round() } else { noisy[m] };
            Cell::Value {
                value,
                low: value - h,
                high: value + h,
            }
        }
        AggregateKind::Avg {
            bounds: (low, high),
            ..
        } => {
            let (s, c) = (measurements[0], measurements[1]);
            let (sum, count) = (noisy[s], noisy[c].round());
            let (hs, hc) = (plan.noises[s].half_width, plan.noises[c].half_width);
            let value = (sum / count.max(1.0)).clamp(*low, *high);
            // With probability ≥ 1 − α both true values lie in their boxes,
            // and the true average lies between the box's extreme ratios.
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
                (lo.clamp(*low, *high), hi.clamp(*low, *high))
            } else {
                (*low, *high)
            };
            Cell::Value {
                value,
                low: interval_low,
                high: interval_high,
            }
        }
    }
}
