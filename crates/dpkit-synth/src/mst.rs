//! MST (McKenna, Miklau & Sheldon 2021): noisy 1-way marginals, a maximum
//! spanning tree of pairs chosen privately, noisy 2-way marginals on it, a
//! graphical model fitted to them, rows sampled from the model.

use dpkit_core::accounting::{ConcentratedLoss, Cost};
use dpkit_core::mechanism::{ConcentratedDiscreteGaussian, ExponentialMechanism};
use dpkit_core::sampling::uniform_below;
use rand_core::CryptoRng;

use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::junction::JunctionTree;
use crate::marginals::{Marginals, Table};
use crate::measure::{SPLIT_ROOM, add_noise, checked_counts, variance};
use crate::model::{FitOptions, Measurement, Model, fit};
use crate::release::{Release, Synthesizer};

/// Codes whose noisy count is below this many noise standard deviations
/// are merged into one code before the pairs are measured (as Private-PGM's
/// MST does): their counts are mostly noise, and merging them shrinks the
/// 2-way marginals that carry noise on every cell.
const SUPPORT_SIGMAS: f64 = 3.0;

/// MST at a zCDP budget ρ.
///
/// ```
/// use dpkit_synth::{Domain, Mst, Release, Sampling, Synthesizer, Table};
/// use dpkit_core::rng::InsecureSeededRng;
/// // A tiny table: column 1 copies column 0, column 2 is independent.
/// let domain = Domain::new(vec![2, 2, 3]).unwrap();
/// let rows: Vec<Vec<u32>> = (0..3000u32).map(|i| vec![i % 2, i % 2, (i / 2) % 3]).collect();
/// let mut table = Table::from_rows(domain, &rows).unwrap();
/// let mst = Mst::new(1.0, 1.0).unwrap();
/// // A seeded generator, for a reproducible example only: real releases
/// // call `run`, which draws from the operating system's generator.
/// let mut rng = InsecureSeededRng::from_seed_for_testing(1);
/// let release = mst.run_with_rng(&mut table, &mut rng).unwrap();
/// assert!(release.cost().rho() <= 1.0);
/// assert_eq!(release.pairs().len(), 2);
/// let synthetic = release.sample_with_rng(3000, Sampling::Round, &mut rng).unwrap();
/// let agree = (0..3000).filter(|&r| synthetic.column(0)[r] == synthetic.column(1)[r]).count();
/// assert!(agree > 2900);
/// ```
#[derive(Debug, Clone)]
pub struct Mst {
    rho: f64,
    sensitivity: f64,
    iterations: usize,
    selection_iterations: usize,
    #[cfg(test)]
    noiseless: bool,
}

/// The mechanisms MST runs, fixed before any data is read.
struct Plan {
    one_way: Option<ConcentratedDiscreteGaussian>,
    selection: Option<ExponentialMechanism>,
    two_way: Option<ConcentratedDiscreteGaussian>,
    cost: ConcentratedLoss,
}

/// Merging of a column's rare codes into one.
#[derive(Debug, Clone)]
struct Compression {
    /// Original codes kept, in the order of their new codes.
    kept: Vec<u32>,
    /// Original codes merged into the last new code (empty: no merging).
    merged: Vec<u32>,
    /// The new code of each original code.
    map: Vec<u32>,
}

impl Compression {
    fn size(&self) -> usize {
        self.kept.len() + usize::from(!self.merged.is_empty())
    }
}

/// What MST released: the fitted model, the pairs it chose, its cost.
#[derive(Debug, Clone)]
pub struct MstRelease {
    domain: Domain,
    compression: Vec<Compression>,
    model: Model,
    pairs: Vec<(usize, usize)>,
    noisy_one_way: Vec<Vec<f64>>,
    noisy_pairs: Vec<Vec<f64>>,
    cost: ConcentratedLoss,
    one_way_sigma: f64,
    two_way_sigma: f64,
}

impl Mst {
    /// MST at `rho` (> 0) for marginals that one privacy unit changes by
    /// at most `sensitivity` in L1 norm (1 when each unit is one row: one
    /// cell moves by 1; k when a unit has up to k rows). The same bound
    /// serves the measurements' L2 sensitivity (L2 ≤ L1), and it holds for
    /// the marginals over merged codes too (merging never raises L1).
    pub fn new(rho: f64, sensitivity: f64) -> Result<Self> {
        if !(rho.is_finite() && rho > 0.0) {
            return Err(Error::InvalidParameter {
                name: "rho",
                reason: format!("must be finite and positive, got {rho}"),
            });
        }
        if !(sensitivity.is_finite() && sensitivity > 0.0) {
            return Err(Error::InvalidParameter {
                name: "sensitivity",
                reason: format!("must be finite and positive, got {sensitivity}"),
            });
        }
        Ok(Self {
            rho,
            sensitivity,
            iterations: 3_000,
            selection_iterations: 1_000,
            #[cfg(test)]
            noiseless: false,
        })
    }

    /// Mirror-descent steps for the final model (default 3,000) and for
    /// the model of the 1-way marginals the selection compares pairs with
    /// (default 1,000).
    pub fn with_iterations(mut self, fit: usize, selection: usize) -> Self {
        self.iterations = fit;
        self.selection_iterations = selection;
        self
    }

    /// Test-only: no noise and no privacy, the best pair picked each round,
    /// to check the estimation against exact marginals.
    #[cfg(test)]
    pub(crate) fn noiseless() -> Self {
        let mut mst = Self::new(1.0, 1.0).expect("valid");
        mst.noiseless = true;
        mst
    }

    /// The loss MST will be charged on `domain`, known before any data is
    /// read: ρ (the closed form below, within the budget), and the discrete
    /// Gaussian samplers' spread and tail for the most cells the
    /// measurements can have.
    ///
    /// With r columns of sizes nᵢ, Δ the sensitivity and ρ′ = ρ(1 − 10⁻⁹)/3:
    /// * the 1-way marginals, each with discrete Gaussian noise of
    ///   σ₁ = Δ/√(2ρ′/r): r·Δ²/(2σ₁²) = ρ′;
    /// * r − 1 picks, each an exponential mechanism at ε = √(8ρ′/(r − 1)):
    ///   (r − 1)·ε²/8 = ρ′;
    /// * r − 1 pairs, each with σ₂ = Δ/√(2ρ′/(r − 1)): ρ′.
    ///
    /// With one column, the 1-way marginal gets all of ρ(1 − 10⁻⁹).
    pub fn cost(&self, domain: &Domain) -> Result<ConcentratedLoss> {
        Ok(self.plan(domain)?.cost)
    }

    /// MST on `domain` at nearly the largest ρ whose release, taken as one
    /// whole, is (ε, δ)-DP, and what a ledger charges for it: that (ε, δ)
    /// for plain sums and the loss in concentrated form. Known before any
    /// data is read.
    ///
    /// # Privacy
    /// ρ starts at `rho_within(ε, δ₀)` with δ₀ = δ(1 − r), the conversion
    /// of the ideal mechanism, for the least room r of 10⁻⁹, 10⁻⁶ and 10⁻³
    /// that fits; [`Mst::cost`] adds the samplers' spread and tail, and
    /// [`ConcentratedLoss::approximate`] turns the whole into (ε′, δ′)-DP.
    /// ρ is lowered until (ε′, δ′) ≤ (ε, δ), and the ledger's sums count
    /// (ε, δ), which bounds it.
    ///
    /// ```
    /// use dpkit_synth::{Domain, Mst};
    /// let domain = Domain::new(vec![9, 16, 7, 2]).unwrap();
    /// let (mst, cost) = Mst::within(1.0, 1e-9, 1.0, &domain).unwrap();
    /// assert_eq!((cost.loss.epsilon(), cost.loss.delta()), (1.0, 1e-9));
    /// assert_eq!(cost.concentrated, Some(mst.cost(&domain).unwrap()));
    /// ```
    pub fn within(
        epsilon: f64,
        delta: f64,
        sensitivity: f64,
        domain: &Domain,
    ) -> Result<(Self, Cost)> {
        crate::measure::within(epsilon, delta, |rho| {
            let mst = Self::new(rho, sensitivity)?;
            let cost = mst.cost(domain)?;
            Ok((mst, cost))
        })
    }

    /// The noise parameters σ of the 1-way and of the 2-way measurements
    /// on `domain` (no 2-way ones with one column): each noisy cell errs
    /// by about `√(2/π)·σ` on average.
    pub fn sigmas(&self, domain: &Domain) -> Result<(f64, Option<f64>)> {
        let plan = self.plan(domain)?;
        let sigma = |noise: Option<ConcentratedDiscreteGaussian>| noise.map(|n| n.sigma());
        Ok((sigma(plan.one_way).unwrap_or(0.0), sigma(plan.two_way)))
    }

    fn plan(&self, domain: &Domain) -> Result<Plan> {
        let r = domain.width();
        let budget = self.rho * (1.0 - SPLIT_ROOM);
        let part = if r == 1 { budget } else { budget / 3.0 };
        let one_way = ConcentratedDiscreteGaussian::new(part / r as f64, self.sensitivity)?;
        let mut cost = ConcentratedLoss::default();
        for &n in domain.sizes() {
            cost = cost.and(one_way.concentrated(n as u64)?);
        }
        let (mut selection, mut two_way) = (None, None);
        if r > 1 {
            let picks = (r - 1) as f64;
            let pick = ExponentialMechanism::new((8.0 * part / picks).sqrt(), self.sensitivity)?;
            let pair = ConcentratedDiscreteGaussian::new(part / picks, self.sensitivity)?;
            // The most cells r − 1 pairs can have (merging only shrinks them).
            let mut pair_cells: Vec<u64> = Vec::new();
            for a in 0..r {
                for b in a + 1..r {
                    // Every pair is counted: one too large to hold is
                    // refused here, before anything is measured.
                    pair_cells.push(domain.cells(&[a, b])? as u64);
                }
            }
            pair_cells.sort_unstable_by(|x, y| y.cmp(x));
            for &cells in pair_cells.iter().take(r - 1) {
                cost = cost.and(pick.concentrated()).and(pair.concentrated(cells)?);
            }
            selection = Some(pick);
            two_way = Some(pair);
        }
        if cost.rho() > self.rho {
            return Err(Error::InvalidParameter {
                name: "rho",
                reason: format!(
                    "the split's rounded loss {} exceeds ρ = {}",
                    cost.rho(),
                    self.rho
                ),
            });
        }
        #[cfg(test)]
        if self.noiseless {
            return Ok(Plan {
                one_way: None,
                selection: None,
                two_way: None,
                cost,
            });
        }
        Ok(Plan {
            one_way: Some(one_way),
            selection,
            two_way,
            cost,
        })
    }
}

impl Synthesizer for Mst {
    type Release = MstRelease;

    /// Runs MST on `data` with `rng` for the noise and the selection.
    ///
    /// # Privacy
    /// ρ-zCDP (with the samplers' spread and tail as [`Mst::cost`] gives
    /// them) when each marginal of `data` moves by at most the sensitivity
    /// Δ in L1 norm between neighbouring tables, by composition of three
    /// parts of ρ′ = ρ(1 − 10⁻⁹)/3 (Bun & Steinke 2016, zCDP composes
    /// adaptively):
    /// 1. each 1-way marginal gets discrete Gaussian noise of σ₁: ρ′/r each
    ///    (Canonne, Kamath & Steinke 2020; L2 ≤ L1 ≤ Δ);
    /// 2. r − 1 picks by the exponential mechanism at ε = √(8ρ′/(r − 1)),
    ///    ε²/8 each (bounded range, Cesar & Rogers 2021). A pick's score is
    ///    `‖x_ab − x̂_ab‖₁`, x_ab the true 2-way marginal over (possibly
    ///    merged) codes and x̂_ab the model of the noisy 1-way marginals:
    ///    x̂ is fixed by step 1's output, and x_ab moves by at most Δ in L1,
    ///    so the score moves by at most Δ (triangle inequality). Which
    ///    pairs are candidates (those joining two components) depends only
    ///    on earlier picks;
    /// 3. each chosen pair's 2-way marginal over merged codes gets discrete
    ///    Gaussian noise of σ₂: ρ′/(r − 1) each. Merging codes is a
    ///    function of step 1's output, and merging cells never raises the
    ///    L1 norm of a move, so Δ still bounds it.
    ///
    /// Everything after (the model fit, sampling) reads only the noisy
    /// marginals: post-processing.
    fn run_with_rng<M: Marginals + ?Sized, R: CryptoRng + ?Sized>(
        &self,
        data: &mut M,
        rng: &mut R,
    ) -> Result<MstRelease> {
        let domain = data.domain().clone();
        let r = domain.width();
        let plan = self.plan(&domain)?;

        // 1. The noisy 1-way marginals.
        let mut noisy_one_way = Vec::with_capacity(r);
        for column in 0..r {
            let counts = checked_counts(data, &[column])?;
            #[cfg(feature = "planted-holes")]
            let plan = planted_one_way(&plan, column);
            noisy_one_way.push(add_noise(&counts, plan.one_way.as_ref(), rng)?);
        }
        let one_way_sigma = plan.one_way.as_ref().map_or(0.0, |n| n.sigma());
        let compression: Vec<Compression> = noisy_one_way
            .iter()
            .map(|y| compress(y, SUPPORT_SIGMAS * one_way_sigma))
            .collect();
        let small = Domain::new(compression.iter().map(Compression::size).collect())?;
        let one_way_variance = variance(one_way_sigma);
        let mut measurements = Vec::with_capacity(2 * r);
        for (column, (y, merge)) in noisy_one_way.iter().zip(&compression).enumerate() {
            let mut values: Vec<f64> = merge.kept.iter().map(|&c| y[c as usize]).collect();
            let mut variances = vec![one_way_variance; values.len()];
            if !merge.merged.is_empty() {
                values.push(merge.merged.iter().map(|&c| y[c as usize]).sum());
                variances.push(one_way_variance * merge.merged.len() as f64);
            }
            measurements.push(Measurement::with_variances(
                vec![column],
                values,
                variances,
            )?);
        }

        // 2. The spanning tree, pair by pair.
        let mut pairs = Vec::new();
        let mut pair_counts: Vec<Option<Vec<u64>>> = vec![None; r * r];
        if r > 1 {
            let independent = fit(
                &small,
                JunctionTree::new(&small, &[])?,
                &measurements,
                FitOptions {
                    iterations: self.selection_iterations,
                    total: None,
                },
            )?;
            let mut scores = Vec::new();
            let mut candidates = Vec::new();
            for a in 0..r {
                for b in a + 1..r {
                    let counts = checked_counts(data, &[a, b])?;
                    let merged = merge_pair(&counts, &compression[a], &compression[b]);
                    let (pa, pb) = (independent.marginal(&[a])?, independent.marginal(&[b])?);
                    scores.push(pair_score(&merged, &pa, &pb, independent.total()));
                    candidates.push((a, b));
                    pair_counts[a * r + b] = Some(merged);
                }
            }
            let mut components: Vec<usize> = (0..r).collect();
            for _ in 0..r - 1 {
                let open: Vec<usize> = (0..candidates.len())
                    .filter(|&i| {
                        find(&mut components, candidates[i].0)
                            != find(&mut components, candidates[i].1)
                    })
                    .collect();
                let utilities: Vec<f64> = open.iter().map(|&i| scores[i]).collect();
                let chosen = match &plan.selection {
                    Some(mechanism) => mechanism.select_with_rng(&utilities, rng)?,
                    None => (0..utilities.len())
                        .max_by(|&x, &y| utilities[x].total_cmp(&utilities[y]))
                        .ok_or(dpkit_core::Error::EmptyCandidates)?,
                };
                let (a, b) = candidates[open[chosen]];
                let (root_a, root_b) = (find(&mut components, a), find(&mut components, b));
                components[root_a] = root_b;
                pairs.push((a, b));
            }
        }

        // 3. The chosen 2-way marginals, over merged codes.
        let two_way_sigma = plan.two_way.as_ref().map_or(0.0, |n| n.sigma());
        let mut noisy_pairs = Vec::with_capacity(pairs.len());
        for &(a, b) in &pairs {
            let counts = pair_counts[a * r + b].take().expect("scored above");
            let values = add_noise(&counts, plan.two_way.as_ref(), rng)?;
            noisy_pairs.push(values.clone());
            measurements.push(Measurement::new(
                vec![a, b],
                values,
                variance(two_way_sigma),
            )?);
        }

        // 4. The model: post-processing of the noisy marginals.
        let cliques: Vec<Vec<usize>> = pairs.iter().map(|&(a, b)| vec![a, b]).collect();
        let tree = JunctionTree::new(&small, &cliques)?;
        let model = fit(
            &small,
            tree,
            &measurements,
            FitOptions {
                iterations: self.iterations,
                total: None,
            },
        )?;
        Ok(MstRelease {
            domain,
            compression,
            model,
            pairs,
            noisy_one_way,
            noisy_pairs,
            cost: plan.cost,
            one_way_sigma,
            two_way_sigma,
        })
    }
}

/// Keeps the codes whose noisy count is at least `threshold`, merging the
/// rest into one code (none merged when at most one falls below).
fn compress(noisy: &[f64], threshold: f64) -> Compression {
    let kept: Vec<u32> = (0..noisy.len() as u32)
        .filter(|&c| noisy[c as usize] >= threshold)
        .collect();
    let mut merged: Vec<u32> = (0..noisy.len() as u32)
        .filter(|&c| noisy[c as usize] < threshold)
        .collect();
    let (kept, merged) = if merged.len() <= 1 {
        merged.clear();
        ((0..noisy.len() as u32).collect(), merged)
    } else {
        (kept, merged)
    };
    let mut map = vec![kept.len() as u32; noisy.len()];
    for (new, &old) in kept.iter().enumerate() {
        map[old as usize] = new as u32;
    }
    Compression { kept, merged, map }
}

/// A pair's counts over the merged codes of both columns.
fn merge_pair(counts: &[u64], a: &Compression, b: &Compression) -> Vec<u64> {
    let (nb, new_b) = (b.map.len(), b.size());
    let mut out = vec![0u64; a.size() * new_b];
    for (i, &ma) in a.map.iter().enumerate() {
        for (j, &mb) in b.map.iter().enumerate() {
            out[ma as usize * new_b + mb as usize] += counts[i * nb + j];
        }
    }
    out
}

/// `‖x − x̂‖₁`: a pair's counts `x` against the independent model's
/// `x̂ = pa ⊗ pb / total` (its 1-way marginals scaled to the total).
fn pair_score(counts: &[u64], pa: &[f64], pb: &[f64], total: f64) -> f64 {
    let mut score = 0.0;
    for (i, &x) in pa.iter().enumerate() {
        for (j, &y) in pb.iter().enumerate() {
            score += (counts[i * pb.len() + j] as f64 - x * y / total).abs();
        }
    }
    score
}

/// The root of `x` in a union–find forest, with path halving.
fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

impl MstRelease {
    /// The pairs of columns the spanning tree joined, in the order chosen.
    pub fn pairs(&self) -> &[(usize, usize)] {
        &self.pairs
    }

    /// The noisy 1-way marginal of each column, over its original codes.
    pub fn noisy_one_way(&self) -> &[Vec<f64>] {
        &self.noisy_one_way
    }

    /// The noisy 2-way marginal of each pair of [`MstRelease::pairs`], over
    /// the merged codes (row-major, the pair's first column first).
    pub fn noisy_pairs(&self) -> &[Vec<f64>] {
        &self.noisy_pairs
    }

    /// For each column, the model's code of each original code (the kept
    /// codes in order, then the merged ones, all one code): the codes of
    /// [`MstRelease::noisy_pairs`].
    pub fn code_maps(&self) -> Vec<&[u32]> {
        self.compression.iter().map(|c| c.map.as_slice()).collect()
    }

    /// The noise's σ on the 1-way and on the 2-way marginals.
    pub fn sigmas(&self) -> (f64, f64) {
        (self.one_way_sigma, self.two_way_sigma)
    }

    /// For each column, the original codes merged into its last code in
    /// the model (empty when none were).
    pub fn merged_codes(&self) -> Vec<&[u32]> {
        self.compression
            .iter()
            .map(|c| c.merged.as_slice())
            .collect()
    }
}

impl Release for MstRelease {
    /// The fitted model, over the merged codes (see [`MstRelease::merged_codes`]).
    fn model(&self) -> &Model {
        &self.model
    }

    /// The loss charged (as [`Mst::cost`] gives it).
    fn cost(&self) -> ConcentratedLoss {
        self.cost
    }

    /// A merged code becomes one of the codes it merged, uniformly, as in
    /// Private-PGM.
    fn original_codes<R: CryptoRng + ?Sized>(&self, table: Table, rng: &mut R) -> Result<Table> {
        let mut columns = Vec::with_capacity(self.domain.width());
        for (column, merge) in self.compression.iter().enumerate() {
            let codes = table
                .column(column)
                .iter()
                .map(|&code| match merge.kept.get(code as usize) {
                    Some(&original) => original,
                    None => merge.merged[uniform_below(merge.merged.len() as u64, rng) as usize],
                })
                .collect();
            columns.push(codes);
        }
        Table::new(self.domain.clone(), columns)
    }
}

/// Test-only: the plan with column 0's 1-way noise taken off when the
/// hole is planted.
#[cfg(feature = "planted-holes")]
fn planted_one_way(plan: &Plan, column: usize) -> Plan {
    use dpkit_planted::{Hole, is_planted};
    let unnoised = column == 0 && is_planted(Hole::UnnoisedMarginal);
    Plan {
        one_way: if unnoised { None } else { plan.one_way.clone() },
        selection: plan.selection.clone(),
        two_way: plan.two_way.clone(),
        cost: plan.cost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sampling;
    use crate::testing::{chain_table, check_standard_noise};
    use dpkit_core::rng::InsecureSeededRng;
    use rand_core::Rng;

    #[test]
    fn the_cost_is_its_closed_form_within_the_budget() {
        let domain = Domain::new(vec![3, 4, 5, 2, 6]).unwrap();
        let r = 5.0f64;
        for (rho, delta) in [(0.5, 1.0), (0.014_973, 1.0), (2.0, 3.0)] {
            let mst = Mst::new(rho, delta).unwrap();
            let part = rho * (1.0 - 1e-9) / 3.0;
            let sigma_one = delta / (2.0 * part / r).sqrt();
            let epsilon = (8.0 * part / (r - 1.0)).sqrt();
            let sigma_two = delta / (2.0 * part / (r - 1.0)).sqrt();
            let closed = r * delta * delta / (2.0 * sigma_one * sigma_one)
                + (r - 1.0) * epsilon * epsilon / 8.0
                + (r - 1.0) * delta * delta / (2.0 * sigma_two * sigma_two);
            let cost = mst.cost(&domain).unwrap();
            assert!(
                (cost.rho() - closed).abs() <= 1e-12 * closed,
                "{} {closed}",
                cost.rho()
            );
            assert!(cost.rho() <= rho && cost.rho() >= rho * (1.0 - 2e-9));
            assert!(cost.spread() > 0.0 && cost.spread() < 1e-3 && cost.tail() < 1e-280);
            // The release charges the same, and its noise has the closed form's σ.
            let mut table = chain_table(&[3, 4, 5, 2, 6], 500, 1);
            let mut rng = InsecureSeededRng::from_seed_for_testing(2);
            let release = mst
                .with_iterations(5, 5)
                .run_with_rng(&mut table, &mut rng)
                .unwrap();
            assert_eq!(release.cost(), cost);
            let (one, two) = release.sigmas();
            assert!((one - sigma_one).abs() <= 1e-12 * sigma_one);
            assert!((two - sigma_two).abs() <= 1e-12 * sigma_two);
        }
        // One column: the whole budget on its 1-way marginal.
        let single = Domain::new(vec![7]).unwrap();
        let cost = Mst::new(0.3, 1.0).unwrap().cost(&single).unwrap();
        assert!(cost.rho() <= 0.3 && cost.rho() >= 0.3 * (1.0 - 2e-9));
    }

    #[test]
    fn without_noise_the_model_reproduces_the_measured_marginals() {
        let sizes = [3, 2, 4, 3];
        let mut table = chain_table(&sizes, 5_000, 3);
        let mut rng = InsecureSeededRng::from_seed_for_testing(4);
        let release = Mst::noiseless()
            .with_iterations(5_000, 500)
            .run_with_rng(&mut table, &mut rng)
            .unwrap();
        assert!(release.merged_codes().iter().all(|m| m.is_empty()));
        let model = release.model();
        assert!((model.total() - 5_000.0).abs() < 1e-6);
        let mut marginals: Vec<Vec<usize>> = (0..sizes.len()).map(|c| vec![c]).collect();
        marginals.extend(release.pairs().iter().map(|&(a, b)| vec![a, b]));
        for columns in marginals {
            let exact = table.counts(&columns).unwrap();
            let fitted = model.marginal(&columns).unwrap();
            for (&x, &y) in exact.iter().zip(&fitted) {
                assert!((x as f64 - y).abs() < 0.01, "{columns:?}: {x} against {y}");
            }
        }
    }

    #[test]
    fn the_measurement_noise_has_the_calibrated_variance() {
        // 10,000 codes of count 20 in column 0 (no code is merged: 20 is
        // far above 3σ₁ ≈ 5.2), column 1 its parity.
        let codes = 10_000u32;
        let domain = Domain::new(vec![codes as usize, 2]).unwrap();
        let column: Vec<u32> = (0..20 * codes).map(|i| i % codes).collect();
        let parity: Vec<u32> = column.iter().map(|c| c % 2).collect();
        let mut table = Table::new(domain, vec![column, parity]).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(5);
        let release = Mst::new(1.0, 1.0)
            .unwrap()
            .with_iterations(1, 1)
            .run_with_rng(&mut table, &mut rng)
            .unwrap();
        let (sigma_one, sigma_two) = release.sigmas();
        let mut noises = vec![];
        let exact_one = table.counts(&[0]).unwrap();
        noises.push((release.noisy_one_way()[0].clone(), exact_one, sigma_one));
        assert_eq!(release.pairs(), &[(0, 1)]);
        let exact_pair = table.counts(&[0, 1]).unwrap();
        noises.push((release.noisy_pairs()[0].clone(), exact_pair, sigma_two));
        for (noisy, exact, sigma) in noises {
            let draws: Vec<f64> = noisy
                .iter()
                .zip(&exact)
                .map(|(y, &x)| (y - x as f64) / sigma)
                .collect();
            check_standard_noise(&draws, &format!("σ = {sigma}"));
        }
    }

    #[test]
    fn the_pairs_form_a_spanning_tree_over_all_columns() {
        for (seed, sizes) in [
            (6, vec![2, 3, 4, 2, 5, 3, 2]),
            (7, vec![4, 4]),
            (8, vec![2, 2, 2, 2, 2, 2, 2, 2, 2, 2]),
        ] {
            let mut table = chain_table(&sizes, 2_000, seed);
            let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
            let release = Mst::new(0.1, 1.0)
                .unwrap()
                .with_iterations(10, 10)
                .run_with_rng(&mut table, &mut rng)
                .unwrap();
            let r = sizes.len();
            assert_eq!(release.pairs().len(), r - 1);
            let mut parent: Vec<usize> = (0..r).collect();
            for &(a, b) in release.pairs() {
                assert!(a < b && b < r);
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                assert_ne!(ra, rb, "pair ({a}, {b}) closes a cycle");
                parent[ra] = rb;
            }
            let root = find(&mut parent, 0);
            assert!((0..r).all(|c| find(&mut parent, c) == root));
            let cliques: Vec<Vec<usize>> =
                release.pairs().iter().map(|&(a, b)| vec![a, b]).collect();
            assert_eq!(release.model().tree().cliques(), cliques.as_slice());
        }
    }

    #[test]
    fn the_tree_follows_the_dependence_in_the_data() {
        // Each column copies the one before with probability 3/4: adjacent
        // pairs score about 2·¾·⅔·5,000 = 5,000, pairs two apart about
        // 3,750. At ρ = 1 each pick's ε is 0.82, so another pair than the
        // best is picked with probability below e^(−0.82·1,000/2) per pick.
        let rows = 5_000;
        let mut rng = InsecureSeededRng::from_seed_for_testing(16);
        let mut data = Vec::with_capacity(rows);
        for _ in 0..rows {
            let mut row: Vec<u32> = vec![uniform_below(3, &mut rng) as u32];
            for k in 1..5 {
                let copy = !rng.next_u32().is_multiple_of(4);
                row.push(if copy {
                    row[k - 1]
                } else {
                    uniform_below(3, &mut rng) as u32
                });
            }
            data.push(row);
        }
        let mut table = Table::from_rows(Domain::new(vec![3; 5]).unwrap(), &data).unwrap();
        let release = Mst::new(1.0, 1.0)
            .unwrap()
            .with_iterations(10, 200)
            .run_with_rng(&mut table, &mut rng)
            .unwrap();
        let mut pairs = release.pairs().to_vec();
        pairs.sort_unstable();
        assert_eq!(pairs, vec![(0, 1), (1, 2), (2, 3), (3, 4)]);
    }

    #[test]
    fn a_pair_scores_its_l1_distance_from_the_independent_model() {
        // x̂ = [40, 60] ⊗ [20, 80] / 100 = [[8, 32], [12, 48]].
        let score = pair_score(&[10, 30, 10, 50], &[40.0, 60.0], &[20.0, 80.0], 100.0);
        assert!((score - (2.0 + 2.0 + 2.0 + 2.0)).abs() < 1e-12, "{score}");
        let score = pair_score(&[0, 40, 20, 40], &[40.0, 60.0], &[20.0, 80.0], 100.0);
        assert!((score - (8.0 + 8.0 + 8.0 + 8.0)).abs() < 1e-12, "{score}");
    }

    #[test]
    fn the_release_path_draws_from_the_operating_system() {
        let mut table = chain_table(&[3, 3, 2], 3_000, 10);
        let release = Mst::new(1.0, 1.0).unwrap().run(&mut table).unwrap();
        let synthetic = release.sample(2_000, Sampling::Round).unwrap();
        assert_eq!(synthetic.rows(), 2_000);
        assert!((release.estimated_rows() as f64 - 3_000.0).abs() < 100.0);
    }

    /// A source that returns one count too few.
    struct Short(Domain);

    impl Marginals for Short {
        fn domain(&self) -> &Domain {
            &self.0
        }
        fn counts(&mut self, columns: &[usize]) -> Result<Vec<u64>> {
            Ok(vec![1; self.0.cells(columns)? - 1])
        }
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let mut rng = InsecureSeededRng::from_seed_for_testing(9);
        assert!(matches!(Domain::new(vec![]), Err(Error::NoColumns)));
        assert!(matches!(
            Domain::new(vec![3, 0]),
            Err(Error::EmptyDomain { column: 1 })
        ));
        assert!(matches!(
            Domain::new(vec![2, usize::MAX]),
            Err(Error::DomainTooLarge { .. })
        ));
        let domain = Domain::new(vec![2, 3]).unwrap();
        assert!(matches!(
            Table::from_rows(domain.clone(), &[vec![1, 2], vec![1, 3]]),
            Err(Error::CodeOutOfDomain {
                column: 1,
                row: 1,
                code: 3,
                size: 3
            })
        ));
        assert!(matches!(
            Table::from_rows(domain.clone(), &[vec![1]]),
            Err(Error::RowLength { .. })
        ));
        assert!(matches!(
            Table::new(domain.clone(), vec![vec![0, 1], vec![0]]),
            Err(Error::RaggedColumns { .. })
        ));
        let mut table = Table::from_rows(domain.clone(), &[vec![1, 2]]).unwrap();
        assert!(matches!(table.counts(&[]), Err(Error::NoColumns)));
        assert!(matches!(
            table.counts(&[0, 0]),
            Err(Error::BadColumns { .. })
        ));
        assert!(matches!(table.counts(&[2]), Err(Error::BadColumns { .. })));
        // A pair too large to hold is refused before anything is measured.
        let wide = Domain::new(vec![5_000, 5_000]).unwrap();
        let mut table = Table::from_rows(wide, &[vec![0, 0]]).unwrap();
        let mst = Mst::new(1.0, 1.0).unwrap();
        assert!(matches!(
            mst.cost(table.domain()),
            Err(Error::DomainTooLarge { .. })
        ));
        assert!(matches!(
            mst.run_with_rng(&mut table, &mut rng),
            Err(Error::DomainTooLarge { .. })
        ));
        // Fourteen columns of 10⁶ codes: the joint domain is astronomical;
        // only marginals are ever held, and a too-large one is an error.
        let huge = Domain::new(vec![1_000_000; 14]).unwrap();
        assert!(matches!(
            huge.cells(&[0, 1]),
            Err(Error::DomainTooLarge { .. })
        ));
        assert!(matches!(
            mst.run_with_rng(&mut Short(domain), &mut rng),
            Err(Error::WrongCountLength { .. })
        ));
        for (rho, sensitivity) in [
            (0.0, 1.0),
            (f64::NAN, 1.0),
            (1.0, -1.0),
            (f64::INFINITY, 1.0),
        ] {
            assert!(matches!(
                Mst::new(rho, sensitivity),
                Err(Error::InvalidParameter { .. })
            ));
        }
    }
}
