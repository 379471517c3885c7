//! AIM (McKenna, Mullins, Sheldon & Miklau, VLDB 2022): noisy 1-way
//! marginals, then rounds that each pick the workload marginal the model
//! gets most wrong, measure it and refit, with a budget that grows when a
//! measurement stops paying, until ρ is spent.

use dpkit_core::accounting::{ConcentratedLoss, Cost};
use dpkit_core::mechanism::ConcentratedDiscreteGaussian;
use rand_core::CryptoRng;

use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::junction::JunctionTree;
use crate::marginals::Marginals;
use crate::measure::{SPLIT_ROOM, add_noise, checked_counts, selection_within, variance};
use crate::model::{FitOptions, Measurement, Model, fit_from};
use crate::release::{Release, Synthesizer};

/// Of each round's ρ, the share of the measurement (the rest selects), as
/// in the paper.
const MEASURE_SHARE: f64 = 0.9;
/// Bytes per model parameter when the model's size is counted (8, a double),
/// and bytes per megabyte (2²⁰), as Private-PGM counts them.
const BYTES_PER_CELL: f64 = 8.0;
const BYTES_PER_MB: f64 = 1_048_576.0;
/// The most columns of one workload set (its subsets are all candidates).
const MAX_SET_WIDTH: usize = 16;

/// The most spread (`|ln(realised/ideal)|` within the windows) the
/// measurements of one AIM run may add up to: a round that could pass it
/// is not run. Known before the data is read, so the run's whole loss is
/// ([`Aim::cost_bound`]). Each draw adds twice its sampler's
/// `log_spread_bound`; `every_run_stays_within_the_loss_charged_before_it`
/// runs AIM for many rounds within this bound. It adds at most 2·10⁻⁵ to
/// the ε the run is charged.
pub const MAX_SPREAD: f64 = 1e-5;
/// The most tail (the chance of a draw outside its window) they may add up to.
pub const MAX_TAIL: f64 = 1e-200;

/// AIM at a zCDP budget ρ.
///
/// ```
/// use dpkit_synth::{Aim, Domain, Release, Sampling, Synthesizer, Table};
/// use dpkit_core::rng::InsecureSeededRng;
/// // Column 1 copies column 0; column 2 is independent of both.
/// let domain = Domain::new(vec![2, 2, 3]).unwrap();
/// let rows: Vec<Vec<u32>> = (0..3000u32).map(|i| vec![i % 2, i % 2, (i / 2) % 3]).collect();
/// let mut table = Table::from_rows(domain, &rows).unwrap();
/// let aim = Aim::new(1.0, 1.0).unwrap().with_iterations(100, 300);
/// // A seeded generator, for a reproducible example only: real releases
/// // call `run`, which draws from the operating system's generator.
/// let mut rng = InsecureSeededRng::from_seed_for_testing(1);
/// let release = aim.run_with_rng(&mut table, &mut rng).unwrap();
/// assert!(release.cost().rho() <= 1.0);
/// let synthetic = release.sample_with_rng(3000, Sampling::Round, &mut rng).unwrap();
/// let agree = (0..3000).filter(|&r| synthetic.column(0)[r] == synthetic.column(1)[r]).count();
/// assert!(agree > 2900);
/// ```
#[derive(Debug, Clone)]
pub struct Aim {
    rho: f64,
    sensitivity: f64,
    workload: Option<Vec<(Vec<usize>, f64)>>,
    max_model_mb: f64,
    rounds: Option<usize>,
    iterations: usize,
    final_iterations: usize,
    /// The spread and tail bounds: [`MAX_SPREAD`] and [`MAX_TAIL`] but in tests.
    samplers: (f64, f64),
}

/// One round of AIM: what it measured, at what noise, under what limit.
#[derive(Debug, Clone, PartialEq)]
pub struct AimRound {
    /// The marginal chosen and measured (columns in increasing order).
    pub columns: Vec<usize>,
    /// The selection's ε (its loss ε²/8).
    pub epsilon: f64,
    /// The measurement's noise σ (its loss Δ²/(2σ²)).
    pub sigma: f64,
    /// The model-size limit the candidates were held to, in MB.
    pub limit_mb: f64,
    /// The model's size with the chosen marginal, in MB (as the limit).
    pub model_mb: f64,
    /// How many candidates the limit left.
    pub candidates: usize,
    /// Whether the next round's σ was halved and its ε doubled, because
    /// this measurement moved the model's marginal by less than its noise.
    pub annealed: bool,
    /// The loss of this round (selection and measurement).
    pub cost: ConcentratedLoss,
}

/// What AIM released: the fitted model, its rounds, its measurements, its cost.
#[derive(Debug, Clone)]
pub struct AimRelease {
    model: Model,
    one_way_sigma: f64,
    rounds: Vec<AimRound>,
    measurements: Vec<Measurement>,
    cost: ConcentratedLoss,
}

/// A candidate marginal and its weight in the workload.
#[derive(Debug, Clone)]
struct Candidate {
    columns: Vec<usize>,
    weight: f64,
    counts: Vec<u64>,
}

impl Aim {
    /// AIM at `rho` (> 0) for marginals that one privacy unit changes by
    /// at most `sensitivity` in L1 norm (1 when each unit is one row), as
    /// [`crate::Mst::new`]: the bound serves the measurements' L2
    /// sensitivity (L2 ≤ L1) and the selection's scores.
    ///
    /// Defaults as the paper's: the workload of all 2-way marginals, a
    /// model of at most 80 MB, 16 rounds per column to size the first
    /// rounds' budget, 1,000 mirror-descent steps per refit.
    pub fn new(rho: f64, sensitivity: f64) -> Result<Self> {
        for (name, value) in [("rho", rho), ("sensitivity", sensitivity)] {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::InvalidParameter {
                    name,
                    reason: format!("must be finite and positive, got {value}"),
                });
            }
        }
        Ok(Self {
            rho,
            sensitivity,
            workload: None,
            max_model_mb: 80.0,
            rounds: None,
            iterations: 1_000,
            final_iterations: 1_000,
            samplers: (MAX_SPREAD, MAX_TAIL),
        })
    }

    /// The loss of any run, known before any data is read: ρ, and the
    /// spread and tail bounds ([`MAX_SPREAD`], [`MAX_TAIL`]) that no run
    /// passes (the rounds stop before a measurement could).
    pub fn cost_bound(&self) -> Result<ConcentratedLoss> {
        let (spread, tail) = self.samplers;
        Ok(ConcentratedLoss::from_parts(self.rho, spread, tail)?)
    }

    /// AIM at nearly the largest ρ whose run, as one whole, is (ε, δ)-DP
    /// whatever rounds it runs ([`Aim::cost_bound`]), and what a ledger
    /// charges for it, as [`crate::Mst::within`] gives them; `configure`
    /// sets the rest (the workload, the model size) at each ρ tried.
    ///
    /// ```
    /// use dpkit_synth::Aim;
    /// let (aim, cost) = Aim::within(1.0, 1e-9, 1.0, |aim| aim).unwrap();
    /// assert_eq!((cost.loss.epsilon(), cost.loss.delta()), (1.0, 1e-9));
    /// assert_eq!(cost.concentrated, Some(aim.cost_bound().unwrap()));
    /// ```
    pub fn within(
        epsilon: f64,
        delta: f64,
        sensitivity: f64,
        configure: impl Fn(Self) -> Self,
    ) -> Result<(Self, Cost)> {
        crate::measure::within(epsilon, delta, |rho| {
            let aim = configure(Self::new(rho, sensitivity)?);
            let cost = aim.cost_bound()?;
            Ok((aim, cost))
        })
    }

    /// Whether `cost`'s spread and tail are within the run's bounds.
    fn within_samplers(&self, cost: ConcentratedLoss) -> bool {
        cost.spread() <= self.samplers.0 && cost.tail() <= self.samplers.1
    }

    /// Test-only: other bounds on the spread and the tail.
    #[cfg(test)]
    fn with_samplers(mut self, spread: f64, tail: f64) -> Self {
        self.samplers = (spread, tail);
        self
    }

    /// The noise parameter σ of the 1-way measurements on `domain` (the
    /// rounds' σ start there too, and shrink as they anneal).
    pub fn one_way_sigma_on(&self, domain: &Domain) -> Result<f64> {
        let one_way = self
            .candidates(domain)?
            .iter()
            .filter(|(c, _)| c.len() == 1)
            .count();
        let rounds = self.rounds_for(domain, one_way)?;
        let rho = self.rho * (1.0 - SPLIT_ROOM) / rounds as f64;
        Ok(ConcentratedDiscreteGaussian::new(MEASURE_SHARE * rho, self.sensitivity)?.sigma())
    }

    /// An explicit workload: sets of columns, each with a weight (> 0).
    /// Every subset of a set is a candidate, weighted as the paper does:
    /// `Σ_W w_W·|C ∩ W|` over the workload's sets W.
    pub fn with_workload(mut self, workload: Vec<(Vec<usize>, f64)>) -> Self {
        self.workload = Some(workload);
        self
    }

    /// The model-size limit in MB (default 80): the junction tree's
    /// maximal cliques' cells, 8 bytes each, 2²⁰ bytes a MB, as
    /// Private-PGM counts it. Round t may grow the model to the limit times
    /// the share of ρ spent by the end of round t.
    pub fn with_max_model_mb(mut self, mb: f64) -> Self {
        self.max_model_mb = mb;
        self
    }

    /// The number of rounds T that sizes the budget (default 16 per column,
    /// at least the number of 1-way marginals): each 1-way marginal is
    /// measured at 0.9ρ/T and the first round spends ρ/T. More rounds run
    /// when annealing is rare, fewer when it is frequent.
    pub fn with_rounds(mut self, rounds: usize) -> Self {
        self.rounds = Some(rounds);
        self
    }

    /// Mirror-descent steps of each round's refit (default 1,000, as
    /// Private-PGM) and of the final fit (default 1,000, warm-started too).
    pub fn with_iterations(mut self, round: usize, last: usize) -> Self {
        self.iterations = round;
        self.final_iterations = last;
        self
    }

    /// The candidates (the workload's downward closure) with their
    /// weights, in order of size then columns. Checked against the domain
    /// before any data is read.
    fn candidates(&self, domain: &Domain) -> Result<Vec<(Vec<usize>, f64)>> {
        let r = domain.width();
        let workload: Vec<(Vec<usize>, f64)> = match &self.workload {
            Some(w) => w.clone(),
            None if r == 1 => vec![(vec![0], 1.0)],
            None => (0..r)
                .flat_map(|a| (a + 1..r).map(move |b| (vec![a, b], 1.0)))
                .collect(),
        };
        if workload.is_empty() {
            return Err(Error::InvalidParameter {
                name: "workload",
                reason: "at least one set of columns".into(),
            });
        }
        let mut sets: Vec<Vec<usize>> = Vec::new();
        for (set, weight) in &workload {
            if !(weight.is_finite() && *weight > 0.0) {
                return Err(Error::InvalidParameter {
                    name: "workload",
                    reason: format!("a weight must be finite and positive, got {weight}"),
                });
            }
            domain.cells(set)?;
            if set.len() > MAX_SET_WIDTH {
                return Err(Error::InvalidParameter {
                    name: "workload",
                    reason: format!("a set has {} columns, at most {MAX_SET_WIDTH}", set.len()),
                });
            }
            let mut set = set.clone();
            set.sort_unstable();
            for mask in 1u32..1 << set.len() {
                let subset: Vec<usize> = (0..set.len())
                    .filter(|&i| mask & (1 << i) != 0)
                    .map(|i| set[i])
                    .collect();
                sets.push(subset);
            }
        }
        sets.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
        sets.dedup();
        Ok(sets
            .into_iter()
            .map(|c| {
                let weight = workload
                    .iter()
                    .map(|(w, wt)| wt * c.iter().filter(|k| w.contains(k)).count() as f64)
                    .sum();
                (c, weight)
            })
            .collect())
    }

    /// The number of rounds T sizing the budget, checked: the 1-way
    /// marginals take `k·0.9ρ/T` and must leave some for the rounds.
    fn rounds_for(&self, domain: &Domain, one_way: usize) -> Result<usize> {
        let rounds = self.rounds.unwrap_or(16 * domain.width());
        if rounds < one_way.max(1) {
            return Err(Error::InvalidParameter {
                name: "rounds",
                reason: format!("at least the {one_way} 1-way marginals, got {rounds}"),
            });
        }
        if !(self.max_model_mb.is_finite() && self.max_model_mb > 0.0) {
            return Err(Error::InvalidParameter {
                name: "max_model_mb",
                reason: format!("must be finite and positive, got {}", self.max_model_mb),
            });
        }
        Ok(rounds)
    }

    /// The candidate's counts with `noise`, as a measurement.
    fn measure<R: CryptoRng + ?Sized>(
        &self,
        candidate: &Candidate,
        noise: &ConcentratedDiscreteGaussian,
        rng: &mut R,
    ) -> Result<Measurement> {
        let values = add_noise(&candidate.counts, Some(noise), rng)?;
        Measurement::new(candidate.columns.clone(), values, variance(noise.sigma()))
    }

    /// The model on the junction tree covering the measured sets, fitted
    /// to the measurements, warm-started from `start` when given.
    fn refit(
        &self,
        domain: &Domain,
        measured: &[Vec<usize>],
        measurements: &[Measurement],
        start: Option<&Model>,
        iterations: usize,
    ) -> Result<Model> {
        let tree = JunctionTree::covering(domain, measured)?;
        let options = FitOptions {
            iterations,
            total: None,
        };
        fit_from(
            domain,
            tree,
            measurements,
            options,
            start.map_or(&[], |m| m.factors()),
        )
    }
}

/// The current model and what it was fitted to.
struct Current<'a> {
    domain: &'a Domain,
    model: &'a Model,
    measured: &'a [Vec<usize>],
    measurements: &'a [Measurement],
}

impl Current<'_> {
    /// The model's marginal over `columns`. [`Model::marginal`] eliminates
    /// along the model's tree, and a marginal across large cliques may need
    /// a message above [`crate::MAX_CELLS`] cells there (on Adult, a clique
    /// of 10⁵ cells times an 85-code column); then it is
    /// [`Current::carried`]. Post-processing: it reads only the model.
    fn estimate(&self, columns: &[usize]) -> Result<Vec<f64>> {
        match self.model.marginal(columns) {
            Err(Error::DomainTooLarge { .. }) => self.carried(columns),
            other => other,
        }
    }

    /// The marginal over `columns` of the same model carried (its
    /// log-potentials, no step) to the junction tree covering the measured
    /// sets and `columns`, where one clique holds them: the tree the size
    /// limit measures, so no larger than the limit when `columns` is a
    /// candidate.
    fn carried(&self, columns: &[usize]) -> Result<Vec<f64>> {
        let mut sets = self.measured.to_vec();
        sets.push(columns.to_vec());
        let options = FitOptions {
            iterations: 0,
            total: Some(self.model.total()),
        };
        let tree = JunctionTree::covering(self.domain, &sets)?;
        let start = self.model.factors();
        fit_from(self.domain, tree, self.measurements, options, start)?.marginal(columns)
    }
}

impl Synthesizer for Aim {
    type Release = AimRelease;

    /// Runs AIM on `data` with `rng` for the noise and the selections.
    ///
    /// # Privacy
    /// ρ-zCDP (with the discrete Gaussian samplers' spread and tail, as
    /// [`AimRelease::cost`] gives them) when each marginal of `data` moves
    /// by at most the sensitivity Δ in L1 norm between neighbouring tables.
    /// Let ρ′ = ρ(1 − 10⁻⁹) and T the rounds that size the budget; each
    /// step's ρ is its own mechanism's loss, and they compose (Bun & Steinke
    /// 2016):
    /// 1. each of the k 1-way marginals of the workload gets discrete
    ///    Gaussian noise at `0.9ρ′/T` (Canonne, Kamath & Steinke 2020;
    ///    L2 ≤ L1 ≤ Δ);
    /// 2. each round t has a budget ρₜ, split `0.1ρₜ` to select and `0.9ρₜ`
    ///    to measure:
    ///    * the selection is an exponential mechanism at `ε = √(0.8ρₜ)`,
    ///      `ε²/8 = 0.1ρₜ` (bounded range, Cesar & Rogers 2021; core's
    ///      `ExponentialMechanism::concentrated`). A candidate C's score
    ///      is `w_C·(‖x_C − x̂_C‖₁ − √(2/π)·σₜ·n_C)`: x_C its true counts,
    ///      x̂_C the current model's (a function of the earlier noisy
    ///      outputs only), σₜ and the cell count n_C public. x_C moves by
    ///      at most Δ in L1, so the score by at most `w_C·Δ`, and the
    ///      mechanism's sensitivity is `Δ·max w_C` over the candidates.
    ///      Which candidates are offered (the model-size limit) depends
    ///      only on the earlier choices;
    ///    * the chosen marginal gets discrete Gaussian noise at `0.9ρₜ`.
    /// *  the samplers' spread and tail (how far the realised discrete
    ///    Gaussians are from the ideal ones, [`ConcentratedLoss`]) add up
    ///    within [`MAX_SPREAD`] and [`MAX_TAIL`]: a round that could pass
    ///    them with its largest open candidate is not run, a choice made
    ///    from earlier outputs and public sizes, as the filter of the
    ///    ledger's concentrated accountant makes it. So every run's loss is
    ///    within [`Aim::cost_bound`], fixed before any data is read.
    /// 3. ρₜ is chosen from earlier outputs only: it starts at `ρ′/T`; it
    ///    is multiplied by 4 (σ halved, ε doubled) after a round whose
    ///    measurement moved the model's marginal by less than the noise's
    ///    expected L1 norm `√(2/π)·σₜ·n_C`, which compares two models
    ///    fitted to noisy outputs (post-processing); and when what is left,
    ///    `ρ′ − Σ spent`, is below `2ρₜ`, the round takes all of it and is
    ///    the last. Every round's ρₜ is at most what is left, so the sum
    ///    never exceeds ρ′ whatever the outputs. zCDP under this fully
    ///    adaptive choice of each mechanism's parameters, with a fixed
    ///    total, holds by the Rényi privacy filter (Feldman & Zrnic 2021,
    ///    Theorem 3.1, at every Rényi order α: each step is (α, αρₜ)-RDP
    ///    and the αρₜ sum to at most αρ′), as the paper argues.
    ///
    /// The losses charged are the mechanisms' own, rounded up, and the run
    /// fails rather than release if their sum exceeds ρ. The fits, the
    /// annealing test and sampling read only the noisy marginals:
    /// post-processing.
    fn run_with_rng<M: Marginals + ?Sized, R: CryptoRng + ?Sized>(
        &self,
        data: &mut M,
        rng: &mut R,
    ) -> Result<AimRelease> {
        let domain = data.domain().clone();
        let weighted = self.candidates(&domain)?;
        let one_way: Vec<usize> = weighted
            .iter()
            .filter(|(c, _)| c.len() == 1)
            .map(|(c, _)| c[0])
            .collect();
        let rounds = self.rounds_for(&domain, one_way.len())?;
        let budget = self.rho * (1.0 - SPLIT_ROOM);
        let mut round_rho = budget / rounds as f64;
        let mut candidates = Vec::with_capacity(weighted.len());
        for (columns, weight) in weighted {
            let counts = checked_counts(data, &columns)?;
            candidates.push(Candidate {
                columns,
                weight,
                counts,
            });
        }

        // 1. The noisy 1-way marginals.
        let first = ConcentratedDiscreteGaussian::new(MEASURE_SHARE * round_rho, self.sensitivity)?;
        let one_way_sigma = first.sigma();
        let mut cost = ConcentratedLoss::default();
        let mut measurements = Vec::new();
        for candidate in candidates.iter().filter(|c| c.columns.len() == 1) {
            cost = cost.and(first.concentrated(candidate.counts.len() as u64)?);
            measurements.push(self.measure(candidate, &first, rng)?);
        }
        if !self.within_samplers(cost) {
            return Err(Error::InvalidParameter {
                name: "domain",
                reason: "the 1-way measurements alone pass the samplers' spread bound".into(),
            });
        }
        let mut measured: Vec<Vec<usize>> = one_way.iter().map(|&c| vec![c]).collect();
        let mut model = self.refit(&domain, &measured, &measurements, None, self.iterations)?;

        // 2. The rounds.
        let mut log = Vec::new();
        loop {
            let left = budget - cost.rho();
            let last = left < 2.0 * round_rho;
            if last {
                round_rho = left;
            }
            let noise =
                ConcentratedDiscreteGaussian::new(MEASURE_SHARE * round_rho, self.sensitivity)?;
            let sigma = noise.sigma();
            let limit_mb = self.max_model_mb * (cost.rho() + round_rho) / self.rho;
            let mut open = Vec::new();
            let mut sizes = Vec::new();
            for (i, candidate) in candidates.iter().enumerate() {
                let free = measured
                    .iter()
                    .any(|m| candidate.columns.iter().all(|c| m.contains(c)));
                let mut sets = measured.clone();
                sets.push(candidate.columns.clone());
                let mb = match JunctionTree::covering_cells(&domain, &sets) {
                    Ok(cells) => cells as f64 * BYTES_PER_CELL / BYTES_PER_MB,
                    Err(Error::DomainTooLarge { .. }) => f64::INFINITY,
                    Err(e) => return Err(e),
                };
                if free || mb <= limit_mb {
                    open.push(i);
                    sizes.push(mb);
                }
            }
            let max_weight = open
                .iter()
                .map(|&i| candidates[i].weight)
                .fold(0.0, f64::max);
            let selection = selection_within(
                (1.0 - MEASURE_SHARE) * round_rho,
                self.sensitivity * max_weight,
            )?;
            // The samplers' spread and tail stay within their bounds for
            // any open candidate, or the rounds end here: a choice made
            // from public sizes and earlier outputs only.
            let most_cells = open.iter().map(|&i| candidates[i].counts.len()).max();
            let worst = noise.concentrated(most_cells.unwrap_or(1) as u64)?;
            if !self.within_samplers(cost.and(selection.concentrated()).and(worst)) {
                break;
            }
            let current = Current {
                domain: &domain,
                model: &model,
                measured: &measured,
                measurements: &measurements,
            };
            let mut utilities = Vec::with_capacity(open.len());
            let bias = (2.0 / std::f64::consts::PI).sqrt() * sigma;
            for &i in &open {
                let candidate = &candidates[i];
                let estimate = current.estimate(&candidate.columns)?;
                let error: f64 = candidate
                    .counts
                    .iter()
                    .zip(&estimate)
                    .map(|(&x, &y)| (x as f64 - y).abs())
                    .sum();
                let cells = candidate.counts.len() as f64;
                utilities.push(candidate.weight * (error - bias * cells));
            }
            let chosen = selection.select_with_rng(&utilities, rng)?;
            let candidate = &candidates[open[chosen]];
            let round_cost = selection
                .concentrated()
                .and(noise.concentrated(candidate.counts.len() as u64)?);
            cost = cost.and(round_cost);
            let before = current.estimate(&candidate.columns)?;
            measurements.push(self.measure(candidate, &noise, rng)?);
            if !measured.contains(&candidate.columns) {
                measured.push(candidate.columns.clone());
            }
            model = self.refit(
                &domain,
                &measured,
                &measurements,
                Some(&model),
                self.iterations,
            )?;
            let after = model.marginal(&candidate.columns)?;
            let moved: f64 = before.iter().zip(&after).map(|(a, b)| (a - b).abs()).sum();
            let annealed = !last && moved <= bias * candidate.counts.len() as f64;
            log.push(AimRound {
                columns: candidate.columns.clone(),
                epsilon: selection.privacy().epsilon(),
                sigma,
                limit_mb,
                model_mb: sizes[chosen],
                candidates: open.len(),
                annealed,
                cost: round_cost,
            });
            if last {
                break;
            }
            if annealed {
                round_rho *= 4.0;
            }
        }
        if cost.rho() > self.rho {
            return Err(Error::InvalidParameter {
                name: "rho",
                reason: format!("the rounds' loss {} exceeds ρ = {}", cost.rho(), self.rho),
            });
        }
        let model = self.refit(
            &domain,
            &measured,
            &measurements,
            Some(&model),
            self.final_iterations,
        )?;
        Ok(AimRelease {
            model,
            one_way_sigma,
            rounds: log,
            measurements,
            cost,
        })
    }
}

impl AimRelease {
    /// The noise's σ on the 1-way marginals.
    pub fn one_way_sigma(&self) -> f64 {
        self.one_way_sigma
    }

    /// The rounds, in order.
    pub fn rounds(&self) -> &[AimRound] {
        &self.rounds
    }

    /// Every noisy measurement: the 1-way marginals, then one per round.
    pub fn measurements(&self) -> &[Measurement] {
        &self.measurements
    }
}

impl Release for AimRelease {
    fn model(&self) -> &Model {
        &self.model
    }

    /// The sum of the mechanisms' losses, rounded up.
    fn cost(&self) -> ConcentratedLoss {
        self.cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marginals::Table;
    use crate::sample::Sampling;
    use crate::testing::{chain_table, check_standard_noise};
    use dpkit_core::rng::InsecureSeededRng;

    /// `aim` run on a chain table of `rows` rows over `sizes` (seeded by
    /// `seed`), with a generator seeded by `seed + 1`: the table, the
    /// release, the generator.
    fn run_on_chain(
        aim: Aim,
        sizes: &[usize],
        rows: usize,
        seed: u64,
    ) -> (Table, AimRelease, InsecureSeededRng) {
        let mut table = chain_table(sizes, rows, seed);
        let mut rng = InsecureSeededRng::from_seed_for_testing(seed + 1);
        let release = aim.run_with_rng(&mut table, &mut rng).unwrap();
        (table, release, rng)
    }

    /// `Δ²/(2σ²)`, the loss of Gaussian noise of σ.
    fn gaussian_rho(delta: f64, sigma: f64) -> f64 {
        delta * delta / (2.0 * sigma * sigma)
    }

    #[test]
    fn every_run_stays_within_the_loss_charged_before_it() {
        // The default bounds hold a run of many rounds.
        let sizes = [3, 4, 5, 2, 6];
        let aim = Aim::new(1.0, 1.0).unwrap().with_iterations(5, 0);
        let bound = aim.cost_bound().unwrap();
        let (_, release, _) = run_on_chain(aim.clone(), &sizes, 5_000, 5);
        let cost = release.cost();
        assert!(cost.rho() <= bound.rho() && cost.tail() <= bound.tail());
        assert!(cost.spread() > 0.0 && cost.spread() <= bound.spread());
        assert!(release.rounds().len() >= 2);
        // A spread bound that the 1-way measurements fill but for half a
        // round: the rounds stop before one could pass it (and without the
        // check, they would run and pass it).
        let rounds: Vec<f64> = release.rounds().iter().map(|r| r.cost.spread()).collect();
        let one_way = cost.spread() - rounds.iter().sum::<f64>();
        let least = rounds.iter().copied().fold(f64::INFINITY, f64::min);
        let tight = aim.with_samplers(one_way + least / 2.0, MAX_TAIL);
        let bound = tight.cost_bound().unwrap();
        let (_, release, _) = run_on_chain(tight, &sizes, 5_000, 5);
        assert!(
            release.cost().spread() <= bound.spread(),
            "{:?}",
            release.cost()
        );
        assert!(release.rounds().is_empty());
    }

    #[test]
    fn the_cost_is_its_closed_form_over_the_rounds_run_and_within_rho() {
        let sizes = [3, 4, 5, 2, 6];
        let mut annealed = 0;
        for (seed, rho, delta, rounds) in [
            (1, 0.5, 1.0, None),
            (2, 0.014_973, 1.0, None),
            (3, 2.0, 3.0, Some(12)),
            (4, 50.0, 1.0, Some(8)),
        ] {
            let mut aim = Aim::new(rho, delta).unwrap().with_iterations(50, 0);
            if let Some(rounds) = rounds {
                aim = aim.with_rounds(rounds);
            }
            let t = rounds.unwrap_or(16 * sizes.len()) as f64;
            let (_, release, _) = run_on_chain(aim, &sizes, 2_000, seed);
            let budget = rho * (1.0 - 1e-9);
            // The 1-way marginals at 0.9ρ′/T each.
            let sigma_one = release.one_way_sigma();
            assert!((gaussian_rho(delta, sigma_one) - 0.9 * budget / t).abs() < 1e-12 * budget);
            let mut closed = sizes.len() as f64 * gaussian_rho(delta, sigma_one);
            // Each round but the last at ρ′/T times 4 per earlier annealing;
            // the last takes what is left, less than twice its planned ρ.
            let mut planned = budget / t;
            let count = release.rounds().len();
            for (i, round) in release.rounds().iter().enumerate() {
                let select = round.epsilon * round.epsilon / 8.0;
                let measure = gaussian_rho(delta, round.sigma);
                assert!((select - 0.1 * (select + measure)).abs() < 1e-9 * select);
                if i + 1 < count {
                    assert!(((select + measure) - planned).abs() < 1e-9 * planned);
                    assert!(budget - closed >= 2.0 * planned * (1.0 - 1e-9));
                } else {
                    assert!(budget - closed < 2.0 * planned);
                    assert!(!round.annealed);
                }
                if round.annealed {
                    planned *= 4.0;
                    annealed += 1;
                }
                closed += select + measure;
                assert!((round.cost.rho() - (select + measure)).abs() < 1e-9 * (select + measure));
            }
            let cost = release.cost().rho();
            assert!(
                (cost - closed).abs() <= 1e-9 * closed,
                "{cost} against {closed}"
            );
            assert!(
                cost <= rho && cost >= rho * (1.0 - 3e-9),
                "{cost} against {rho}"
            );
            assert_eq!(release.measurements().len(), sizes.len() + count);
        }
        // The schedule was exercised: some rounds annealed.
        assert!(annealed > 0);
    }

    #[test]
    fn every_chosen_marginal_respects_the_model_size_limit() {
        // Ten columns of 10 codes: a pair is 100 cells, 800 bytes; a limit
        // of 0.02 MB (2,621 cells) binds long before ρ is spent.
        let sizes = [10; 10];
        let domain = Domain::new(sizes.to_vec()).unwrap();
        let aim = Aim::new(10.0, 1.0)
            .unwrap()
            .with_max_model_mb(0.02)
            .with_rounds(40)
            .with_iterations(30, 0);
        let (_, release, _) = run_on_chain(aim, &sizes, 3_000, 5);
        let mut measured: Vec<Vec<usize>> = (0..sizes.len()).map(|c| vec![c]).collect();
        let all_candidates = sizes.len() * (sizes.len() + 1) / 2;
        let mut excluded = 0;
        for round in release.rounds() {
            let free = measured
                .iter()
                .any(|m| round.columns.iter().all(|c| m.contains(c)));
            measured.push(round.columns.clone());
            let tree = JunctionTree::covering(&domain, &measured).unwrap();
            let cells: usize = (0..tree.cliques().len()).map(|c| tree.cells(c)).sum();
            let mb = cells as f64 * 8.0 / 1_048_576.0;
            assert!(
                (mb - round.model_mb).abs() < 1e-12,
                "{mb} {}",
                round.model_mb
            );
            assert!(free || mb <= round.limit_mb, "{round:?}");
            assert!(round.limit_mb <= 0.02);
            excluded += all_candidates - round.candidates;
        }
        assert!(excluded > 0, "the limit never bound");
        // The final model is within the limit too.
        let tree = release.model().tree();
        let cells: usize = (0..tree.cliques().len()).map(|c| tree.cells(c)).sum();
        assert!(cells as f64 * 8.0 / 1_048_576.0 <= 0.02);
    }

    #[test]
    fn the_measurement_noise_has_the_calibrated_variance() {
        // Two columns of 100 codes: every measurement has 100 or 10,000
        // cells (at least one pair is measured); the noise over all of
        // them, each draw divided by its round's σ, must look like
        // standard Gaussians. ρ is small enough that σ stays above 1
        // (where the discrete Gaussian's variance is σ² within 10⁻¹²)
        // however often it halves.
        let sizes = [100, 100];
        let aim = Aim::new(0.05, 1.0).unwrap().with_iterations(5, 0);
        let (mut table, release, _) = run_on_chain(aim, &sizes, 50_000, 7);
        let mut sigmas = vec![release.one_way_sigma(); sizes.len()];
        sigmas.extend(release.rounds().iter().map(|r| r.sigma));
        let mut draws = Vec::new();
        for (m, sigma) in release.measurements().iter().zip(sigmas) {
            assert!(sigma >= 1.0);
            let exact = table.counts(m.columns()).unwrap();
            draws.extend(
                m.values()
                    .iter()
                    .zip(&exact)
                    .map(|(y, &x)| (y - x as f64) / sigma),
            );
        }
        assert!(draws.len() >= 10_000, "{}", draws.len());
        check_standard_noise(&draws, "AIM's measurements");
    }

    #[test]
    fn with_a_huge_rho_the_synthetic_marginals_approach_the_true_ones() {
        // A chain: its pairs (k, k + 1) determine the joint distribution,
        // so a model of measured pairs can match every 2-way marginal.
        let sizes = [3, 4, 2, 3, 2];
        let rows = 4_000;
        let aim = Aim::new(1e6, 1.0).unwrap().with_iterations(300, 3_000);
        let (mut table, release, mut rng) = run_on_chain(aim, &sizes, rows, 9);
        let mut synthetic = release
            .sample_with_rng(release.estimated_rows(), Sampling::Round, &mut rng)
            .unwrap();
        assert!(release.estimated_rows().abs_diff(rows) <= 1);
        let mut worst: f64 = 0.0;
        for a in 0..sizes.len() {
            for b in a + 1..sizes.len() {
                let truth = table.counts(&[a, b]).unwrap();
                let synth = synthetic.counts(&[a, b]).unwrap();
                let tv = truth
                    .iter()
                    .zip(&synth)
                    .map(|(&x, &y)| (x as f64 - y as f64).abs())
                    .sum::<f64>()
                    / (2.0 * rows as f64);
                worst = worst.max(tv);
            }
        }
        assert!(worst < 0.01, "worst 2-way total variation {worst}");
    }

    #[test]
    fn a_marginal_on_the_covering_tree_is_the_models_marginal() {
        // The fallback for marginals too large to eliminate on the model's
        // tree: on a small model, it must give what elimination gives.
        let sizes = [3, 4, 2, 3, 2];
        let aim = Aim::new(0.5, 1.0).unwrap().with_iterations(100, 100);
        let (_, release, _) = run_on_chain(aim, &sizes, 2_000, 13);
        let domain = Domain::new(sizes.to_vec()).unwrap();
        let measured: Vec<Vec<usize>> = release
            .measurements()
            .iter()
            .map(|m| m.columns().to_vec())
            .collect();
        let model = release.model();
        let current = Current {
            domain: &domain,
            model,
            measured: &measured,
            measurements: release.measurements(),
        };
        let mut across = 0;
        for a in 0..sizes.len() {
            for b in a + 1..sizes.len() {
                let columns = [b, a];
                across += usize::from(model.tree().clique_holding(&columns).is_none());
                let direct = model.marginal(&columns).unwrap();
                let carried = current.carried(&columns).unwrap();
                for (x, y) in direct.iter().zip(&carried) {
                    assert!((x - y).abs() < 1e-9 * model.total(), "{columns:?}: {x} {y}");
                }
            }
        }
        assert!(across > 0, "no pair lay across cliques");
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let mut table = chain_table(&[3, 3, 2], 100, 11);
        let mut rng = InsecureSeededRng::from_seed_for_testing(12);
        let aim = Aim::new(1.0, 1.0).unwrap();
        for workload in [
            vec![],
            vec![(vec![0, 1], 0.0)],
            vec![(vec![0, 1], f64::NAN)],
            vec![(vec![0, 3], 1.0)],
            vec![(vec![1, 1], 1.0)],
        ] {
            let run = aim
                .clone()
                .with_workload(workload)
                .run_with_rng(&mut table, &mut rng);
            assert!(run.is_err());
        }
        for bad in [
            aim.clone().with_rounds(2),
            aim.clone().with_max_model_mb(0.0),
            aim.clone().with_max_model_mb(f64::NAN),
        ] {
            assert!(matches!(
                bad.run_with_rng(&mut table, &mut rng),
                Err(Error::InvalidParameter { .. })
            ));
        }
        for (rho, sensitivity) in [(0.0, 1.0), (f64::INFINITY, 1.0), (1.0, -1.0)] {
            assert!(matches!(
                Aim::new(rho, sensitivity),
                Err(Error::InvalidParameter { .. })
            ));
        }
        // An explicit workload: only its subsets are measured.
        let release = aim
            .with_workload(vec![(vec![2, 0], 1.0)])
            .with_iterations(10, 0)
            .run_with_rng(&mut table, &mut rng)
            .unwrap();
        assert!(
            release
                .measurements()
                .iter()
                .all(|m| [vec![0], vec![2], vec![0, 2]].contains(&m.columns().to_vec()))
        );
    }

    #[test]
    fn candidates_are_weighted_as_the_paper_weights_them() {
        let domain = Domain::new(vec![2; 4]).unwrap();
        let aim = Aim::new(1.0, 1.0).unwrap();
        // All pairs of 4 columns: a pair meets itself (2) and 4 others in
        // one column (1 each): 6 = 2(r − 1); a column meets 3 pairs: 3.
        let candidates = aim.candidates(&domain).unwrap();
        assert_eq!(candidates.len(), 4 + 6);
        for (columns, weight) in &candidates {
            let expected = if columns.len() == 1 { 3.0 } else { 6.0 };
            assert_eq!(*weight, expected, "{columns:?}");
        }
        let candidates = aim
            .with_workload(vec![(vec![0, 1, 2], 2.0), (vec![2, 3], 1.0)])
            .candidates(&domain)
            .unwrap();
        let weight = |c: &[usize]| candidates.iter().find(|(x, _)| x == c).unwrap().1;
        assert_eq!(candidates.len(), 7 + 2);
        assert_eq!(weight(&[0, 1, 2]), 2.0 * 3.0 + 1.0);
        assert_eq!(weight(&[2]), 3.0);
        assert_eq!(weight(&[2, 3]), 2.0 + 2.0);
        assert_eq!(weight(&[3]), 1.0);
    }
}
