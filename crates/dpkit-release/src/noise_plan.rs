//! Planning the noise: how the query's ε is shared, which mechanism each
//! measurement gets and how it is calibrated (by dpkit-core's privacy maps),
//! and the thresholds and intervals that follow. Nothing here sees the data.

use dpkit_core::accounting::{ConcentratedLoss, Cost, PrivacyLoss, split};
use dpkit_core::mechanism::{AdditiveNoise, MechanismKind, QuantileSelection};
use dpkit_core::sensitivity::{
    Calibration, Contribution, GroupedSensitivity, LossGrowth, RowValues, Spread, calibrate,
};

use crate::error::{ReleaseError, Result};
use crate::measured::{Grid, KeySelection, MeasuredQuery, Measurement, QuantileRole};

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

impl MechanismChoice {
    /// The choice named `name`: `auto`, `laplace`, `gaussian`, `staircase`
    /// or `geometric`.
    ///
    /// ```
    /// use dpkit_release::MechanismChoice;
    /// assert_eq!(MechanismChoice::from_name("laplace"), Some(MechanismChoice::Laplace));
    /// assert_eq!(MechanismChoice::from_name("noise"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "auto" => Self::Auto,
            "laplace" => Self::Laplace,
            "gaussian" => Self::Gaussian,
            "staircase" => Self::Staircase,
            "geometric" => Self::Geometric,
            _ => return None,
        })
    }
}

/// The privacy parameters and error-bar level of one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReleaseSettings {
    /// Total ε of the query (see [`plan_noise`] for how it is shared).
    pub epsilon: f64,
    /// Total δ (for key thresholding and Gaussian noise; 0 otherwise).
    pub delta: f64,
    /// Which noise.
    pub mechanism: MechanismChoice,
    /// Confidence level of the intervals.
    pub confidence: f64,
}

/// What is done to one measurement: noise added to a number, or a cell of
/// a grid chosen from per-cell counts.
#[derive(Debug, Clone)]
pub(crate) enum Noise {
    Additive(AdditiveNoise),
    Quantile {
        selection: QuantileSelection,
        grid: Grid,
        p: f64,
        role: QuantileRole,
        /// Ranks the choice aims away from `p·n` (the interval's ends).
        shift: f64,
    },
}

/// One measurement's noise, as planned.
#[derive(Debug, Clone)]
pub struct PlannedNoise {
    pub(crate) noise: Noise,
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
    /// Half-width of its interval at the level its aggregate needs (in
    /// ranks for a quantile's choices).
    pub half_width: f64,
    /// Its expected absolute error (in ranks for a quantile's choices).
    pub expected_absolute_error: f64,
}

impl PlannedNoise {
    /// How far converting the release `noisy` to the nearest double can
    /// have moved it: nothing within 2^53 of its output spacings, where
    /// every output is a double; beyond, half a unit in the last place.
    /// Intervals include it, so they hold at any size.
    pub(crate) fn conversion_slack(&self, noisy: f64) -> f64 {
        let Noise::Additive(noise) = &self.noise else {
            return 0.0;
        };
        if noisy.abs() < 2f64.powi(53) * noise.output_spacing() {
            0.0
        } else {
            noisy.abs() * f64::EPSILON / 2.0
        }
    }

    /// The mechanism's name.
    pub fn mechanism(&self) -> &'static str {
        match &self.noise {
            Noise::Additive(noise) => noise.kind().name(),
            Noise::Quantile { .. } => "exponential (ranks)",
        }
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
    /// What it costs in concentrated form, for the ledger's concentrated
    /// accountant: `None` when a release has no such form (the threshold
    /// that chooses keys costs δ of its own).
    pub concentrated: Option<ConcentratedLoss>,
}

impl NoisePlan {
    /// What the ledger charges: the cost in each form it has.
    pub fn charge(&self) -> Cost {
        Cost {
            loss: self.cost,
            concentrated: self.concentrated,
        }
    }
}

/// A mechanism's refusal of measurement `m`, named as `--explain` names
/// it, so that the analyst knows which column's bounds (or which ε) it
/// cannot carry.
fn for_measurement(query: &MeasuredQuery, m: usize, error: ReleaseError) -> ReleaseError {
    let ReleaseError::Mechanism(inner) = error else {
        return error;
    };
    let Some(label) = query.measurement_label(m) else {
        return ReleaseError::Mechanism(inner);
    };
    ReleaseError::Mechanism(dpkit_core::Error::InvalidParameter {
        name: "noise",
        reason: format!(
            "no mechanism can noise the {label} at this ε ({inner}); \
             bounds nearer the values' real range, or another ε, may fit"
        ),
    })
}

/// Checks the settings: ε, δ and the confidence level.
fn checked_epsilon(settings: &ReleaseSettings) -> Result<f64> {
    let epsilon = PrivacyLoss::pure(settings.epsilon)?.epsilon();
    if !(0.0..1.0).contains(&settings.delta) {
        return Err(ReleaseError::Mechanism(
            dpkit_core::Error::InvalidParameter {
                name: "delta",
                reason: format!("must lie in [0, 1), got {}", settings.delta),
            },
        ));
    }
    if !(settings.confidence > 0.0 && settings.confidence < 1.0) {
        return Err(ReleaseError::Mechanism(
            dpkit_core::Error::InvalidParameter {
                name: "confidence",
                reason: format!(
                    "must lie strictly between 0 and 1, got {}",
                    settings.confidence
                ),
            },
        ));
    }
    Ok(epsilon)
}

/// How δ is shared: the threshold's share and each Gaussian measurement's.
struct DeltaShares {
    threshold: f64,
    per_gaussian: f64,
    gaussian_count: usize,
}

fn share_delta(query: &MeasuredQuery, settings: &ReleaseSettings) -> Result<DeltaShares> {
    let thresholding = query.threshold_measurement.is_some();
    let gaussian = settings.mechanism == MechanismChoice::Gaussian;
    if (thresholding || gaussian) && settings.delta <= 0.0 {
        let why = if thresholding {
            "GROUP BY a column without a public domain releases only keys whose noisy count \
             passes a threshold, which needs δ > 0 (for example --delta 1e-6); or list the \
             keys wanted in the WHERE (col IN ('a', 'b')), which releases those without one"
        } else {
            "the Gaussian mechanism needs δ > 0 (for example --delta 1e-6)"
        };
        return Err(ReleaseError::NotPrivate(why.into()));
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
            return Err(ReleaseError::NotPrivate(
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
    let moved = if dpkit_planted::is_planted(dpkit_planted::Hole::StaircaseChargedOnce) {
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

/// The measurements that answer one aggregate (or the threshold's own
/// count), which share one part of ε, and their error weights.
struct Unit {
    measurements: Vec<usize>,
    weights: Vec<f64>,
}

fn release_units(query: &MeasuredQuery) -> Vec<Unit> {
    let mut units: Vec<Unit> = query
        .aggregates
        .iter()
        .zip(&query.measurement_of)
        .map(|(aggregate, measurements)| Unit {
            measurements: measurements.clone(),
            weights: aggregate.kind.error_weights(),
        })
        .collect();
    if let Some(threshold) = query.threshold_measurement
        && !units.iter().any(|u| u.measurements.contains(&threshold))
    {
        units.push(Unit {
            measurements: vec![threshold],
            weights: vec![1.0],
        });
    }
    units
}

/// What every measurement's noise is planned with.
struct Planner<'a> {
    query: &'a MeasuredQuery,
    settings: &'a ReleaseSettings,
    delta: DeltaShares,
    spread: Spread,
}

impl Planner<'_> {
    /// Measurement `index`'s noise at `epsilon`, its interval at level
    /// `alpha`: the chosen mechanism, or under `auto` the least E|error|.
    fn best(&self, index: usize, epsilon: f64, alpha: f64) -> Result<PlannedNoise> {
        let query = self.query;
        if let Measurement::Quantile { grid, p, role } = query.measurements[index] {
            return self.quantile(epsilon, alpha, grid, p, role);
        }
        let values = query.measurements[index].row_values();
        let moved = GroupedSensitivity::of_contribution(
            values,
            query.released_contribution(),
            self.spread,
            query.neighbouring,
        )?;
        let choice = if query.threshold_measurement == Some(index) {
            MechanismChoice::Geometric
        } else {
            self.settings.mechanism
        };
        let delta = if choice == MechanismChoice::Gaussian {
            self.delta.per_gaussian
        } else {
            0.0
        };
        let mut best: Option<PlannedNoise> = None;
        let mut considered = Vec::new();
        let mut unfit = None;
        for candidate in candidates(choice, values)? {
            // A mechanism that cannot carry this Δ at this ε (integer noise
            // past Δ = 10^15, a grid past 2^±990) leaves the others: which
            // fit depends on public facts only.
            let rounded = values.is_integer(); // whole-number answers are rounded
            let planned = build_noise(candidate, values, epsilon, delta, &moved).and_then(
                |(noise, calibration)| planned(noise, calibration, epsilon, delta, alpha, rounded),
            );
            let planned = match planned {
                Ok(planned) => planned,
                Err(error) => {
                    unfit.get_or_insert(error);
                    continue;
                }
            };
            considered.push((planned.mechanism(), planned.expected_absolute_error));
            if best
                .as_ref()
                .is_none_or(|b| planned.expected_absolute_error < b.expected_absolute_error)
            {
                best = Some(planned);
            }
        }
        match (best, unfit) {
            (Some(best), _) => Ok(PlannedNoise { considered, ..best }),
            (None, Some(error)) => Err(error),
            (None, None) => Err(ReleaseError::NotPrivate("no mechanism fits".into())),
        }
    }

    /// One of a quantile's choices: the rank utility moves like a count
    /// (see [`QuantileSelection`]), so it is calibrated like one, with
    /// linear growth over groups.
    fn quantile(
        &self,
        epsilon: f64,
        alpha: f64,
        grid: Grid,
        p: f64,
        role: QuantileRole,
    ) -> Result<PlannedNoise> {
        let query = self.query;
        let moved = GroupedSensitivity::of_contribution(
            RowValues::Count,
            query.released_contribution(),
            self.spread,
            query.neighbouring,
        )?;
        let calibration = calibrate(LossGrowth::Linear, epsilon, &moved, None)?;
        let selection = QuantileSelection::new(calibration.epsilon, calibration.sensitivity)?;
        // An end chooses among the cells and one beyond each bound.
        let candidates = match role {
            QuantileRole::Point => grid.cells,
            _ => grid.cells + 2,
        };
        let half_width = selection.rank_error_bound(candidates, alpha).map_err(|_| {
            ReleaseError::NotPrivate(
                "a percentile's interval needs a confidence level below 99.99%".into(),
            )
        })?;
        // The point aims at the middle of the ranks of PERCENTILE_CONT's
        // value, p·(n − 1) counted from 0: rank p·n + ½ − p, the first value
        // for p = 0 (MIN) and the last for p = 1 (MAX), where a target of
        // p·n would tie every empty cell beyond them with theirs. The shift
        // is public and fixed, as dpkit-core's privacy argument requires.
        // An end aims one rank beyond its own error bound, so that it falls
        // on its side of the quantile with probability ≥ 1 − its α.
        let centre = 0.5 - p;
        let shift = match role {
            QuantileRole::Point => centre,
            QuantileRole::Lower => centre - (half_width + 1.0),
            QuantileRole::Upper => centre + half_width + 1.0,
        };
        Ok(PlannedNoise {
            expected_absolute_error: selection.expected_rank_error(grid.cells),
            noise: Noise::Quantile {
                selection,
                grid,
                p,
                role,
                shift,
            },
            epsilon,
            delta: 0.0,
            sensitivity: calibration.sensitivity,
            noise_epsilon: calibration.epsilon,
            argument: calibration.argument,
            considered: Vec::new(),
            half_width,
        })
    }

    /// A unit's share of ε split over its measurements: dpkit-core's
    /// [`split::for_accuracy`], from each one's weighted error at the whole
    /// share, or [`split::evenly`], whichever gives the smaller weighted
    /// error `Σ wᵢ·E|Zᵢ(εᵢ)|` with the mechanisms actually chosen at those
    /// shares. The √ rule is exact when errors fall as 1/ε, but the
    /// staircase's falls exponentially at large ε, where the rule can starve
    /// a count of ε. Either split costs at most the share, and the choice
    /// looks only at public facts (bounds and mechanisms).
    fn shares(&self, unit: &Unit, epsilon: f64) -> Result<Vec<f64>> {
        let parts = unit.measurements.len();
        if parts == 1 {
            return Ok(vec![epsilon]);
        }
        let even = split::evenly(epsilon, parts)?;
        let whole = vec![epsilon; parts];
        let weighted = self.weighted_errors(unit, &whole)?;
        if weighted.iter().any(|&e| !e.is_finite() || e <= 0.0) {
            return Ok(even);
        }
        let by_rule = split::for_accuracy(epsilon, &weighted)?;
        let error = |shares: &[f64]| -> Result<f64> {
            Ok(self.weighted_errors(unit, shares)?.iter().sum())
        };
        Ok(if error(&by_rule)? <= error(&even)? {
            by_rule
        } else {
            even
        })
    }

    /// `wᵢ·E|Zᵢ|` of each measurement of `unit` at its share `shares[i]`.
    fn weighted_errors(&self, unit: &Unit, shares: &[f64]) -> Result<Vec<f64>> {
        let measures = unit.measurements.iter().zip(&unit.weights).zip(shares);
        measures
            .map(|((&m, &weight), &share)| {
                Ok(weight * self.best(m, share, 0.5)?.expected_absolute_error)
            })
            .collect()
    }
}

/// Plans the noise of `query` under `settings`. ε is shared evenly by the
/// aggregates (and the threshold's own count, if any); an aggregate built
/// from several measurements splits its share to make its own expected
/// error least (sequential composition either way, by dpkit-core's
/// [`split`]); each measurement's groups are calibrated by
/// [`dpkit_core::sensitivity::calibrate`].
pub fn plan_noise(query: &MeasuredQuery, settings: &ReleaseSettings) -> Result<NoisePlan> {
    let epsilon = checked_epsilon(settings)?;
    let alpha = 1.0 - settings.confidence;
    let planner = Planner {
        query,
        settings,
        delta: share_delta(query, settings)?,
        spread: match query.keys {
            KeySelection::Single => Spread::Single,
            _ => Spread::Groups,
        },
    };
    let units = release_units(query);
    let mut noises: Vec<Option<PlannedNoise>> = vec![None; query.measurements.len()];
    let parts = split::evenly(epsilon, units.len())?;
    for (index, (unit, unit_epsilon)) in units.iter().zip(parts).enumerate() {
        // Several measurements: each interval at α/parts, so that all hold
        // together with probability ≥ 1 − α (a union bound); an aggregate
        // in a combination of j aggregates splits α by j first. Units
        // after the aggregates' (the threshold's) split nothing more.
        let divisor = match index < query.aggregates.len() {
            true => query.interval_divisor(index),
            false => 1,
        };
        let level = alpha / (unit.measurements.len() * divisor) as f64;
        let shares = planner.shares(unit, unit_epsilon)?;
        for (&m, share) in unit.measurements.iter().zip(shares) {
            let noise = planner.best(m, share, level);
            noises[m] = Some(noise.map_err(|error| for_measurement(query, m, error))?);
        }
    }
    let noises: Vec<PlannedNoise> = noises.into_iter().flatten().collect();
    if noises.len() != query.measurements.len() {
        return Err(ReleaseError::NotPrivate(
            "a measurement belongs to no aggregate".into(),
        ));
    }
    let delta = &planner.delta;
    let threshold = query
        .threshold_measurement
        .map(|index| threshold(&noises[index], query.contribution, delta.threshold))
        .transpose()?;
    let total_delta = if query.threshold_measurement.is_some() || delta.gaussian_count > 0 {
        settings.delta
    } else {
        0.0
    };
    Ok(NoisePlan {
        concentrated: concentrated(query, &noises, delta.threshold),
        noises,
        threshold,
        threshold_delta: delta.threshold,
        cost: PrivacyLoss::approximate(epsilon, total_delta)?,
    })
}

/// The query's loss in concentrated form: its measurements' losses added
/// up (composition), each for as many values as the query releases per
/// measurement (one per key). A pure measurement is ε-DP at its share of ε
/// over all its values, so (share²/2)-zCDP; a Gaussian one is the
/// Gaussian's ρ for the L2 move it was built for. Keys chosen by a
/// threshold add the threshold's δ as the loss's `keys`
/// ([`ConcentratedLoss::with_keys`]), if every measurement is pure: a
/// Gaussian sampler's spread and tail grow with its draws, and the number
/// of keys that pass is not known before the run, so such a query has no
/// concentrated form.
fn concentrated(
    query: &MeasuredQuery,
    noises: &[PlannedNoise],
    threshold_delta: f64,
) -> Option<ConcentratedLoss> {
    let draws = match &query.keys {
        KeySelection::Single => 1,
        KeySelection::Domain(keys) => keys.len() as u64,
        KeySelection::Threshold if noises.iter().all(is_pure) => 1,
        KeySelection::Threshold => return None,
    };
    let loss = noises
        .iter()
        .try_fold(ConcentratedLoss::default(), |total, planned| {
            let loss = match &planned.noise {
                Noise::Additive(noise) => noise.concentrated(planned.epsilon, draws),
                Noise::Quantile { .. } => ConcentratedLoss::pure(planned.epsilon),
            };
            Some(total.and(loss.ok()?))
        })?;
    match query.keys {
        KeySelection::Threshold => loss.with_keys(threshold_delta).ok(),
        _ => Some(loss),
    }
}

/// Whether a measurement's noise is pure ε-DP with an exact sampler (its
/// concentrated loss is ε²/2 whatever the number of values it noises).
fn is_pure(planned: &PlannedNoise) -> bool {
    match &planned.noise {
        Noise::Additive(noise) => matches!(
            noise,
            AdditiveNoise::Laplace(_)
                | AdditiveNoise::Staircase(_)
                | AdditiveNoise::Geometric(_)
                | AdditiveNoise::DiscreteStaircase(_)
        ),
        Noise::Quantile { .. } => true,
    }
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
        noise: Noise::Additive(noise),
        epsilon,
        delta,
        sensitivity: calibration.sensitivity,
        noise_epsilon: calibration.epsilon,
        argument: calibration.argument,
        considered: Vec::new(),
        half_width,
    })
}

/// The noisy row count a key needs. A key held by one person has count ≤ r
/// (their rows in one group: k, or the bound per group); it is released
/// only if its noise reaches τ − r, which happens with probability ≤ δ/g
/// per key, so ≤ δ over the person's ≤ g keys (k, or the bound on groups).
fn threshold(planned: &PlannedNoise, contribution: Contribution, delta: f64) -> Result<f64> {
    let (k, groups) = (contribution.rows_per_group, contribution.groups);
    let Noise::Additive(AdditiveNoise::Geometric(geometric)) = &planned.noise else {
        return Err(ReleaseError::NotPrivate(
            "thresholded keys need the geometric count".into(),
        ));
    };
    let per_key = delta / groups as f64;
    let mut steps = 1u64;
    while geometric.noise().tail_probability(steps - 1) / 2.0 > per_key {
        steps += 1;
    }
    Ok((k + steps) as f64)
}

/// `Σ wᵢ·E|Zᵢ|` over aggregate `a`'s measurements (weights from
/// [`crate::AggregateKind::error_weights`]): its expected error to first order,
/// times the group's size for an average.
pub fn composite_error(query: &MeasuredQuery, plan: &NoisePlan, a: usize) -> f64 {
    query.aggregates[a]
        .kind
        .error_weights()
        .iter()
        .zip(&query.measurement_of[a])
        .map(|(w, &m)| w * plan.noises[m].expected_absolute_error)
        .sum()
}
