//! The graphical model fitted to noisy marginals (Private-PGM's estimation):
//! mirror descent over the marginal polytope, with exact belief propagation
//! on a junction tree.

use crate::domain::{Domain, projection};
use crate::error::{Error, Result};
use crate::junction::JunctionTree;

/// A noisy measurement of the marginal over `columns`: one value and one
/// noise variance per cell (row-major over `columns` in the order listed).
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    columns: Vec<usize>,
    values: Vec<f64>,
    variances: Vec<f64>,
}

impl Measurement {
    /// A measurement whose cells all have noise variance `variance` (> 0).
    pub fn new(columns: Vec<usize>, values: Vec<f64>, variance: f64) -> Result<Self> {
        let variances = vec![variance; values.len()];
        Self::with_variances(columns, values, variances)
    }

    /// A measurement with a noise variance (> 0, finite) for each cell.
    pub fn with_variances(
        columns: Vec<usize>,
        values: Vec<f64>,
        variances: Vec<f64>,
    ) -> Result<Self> {
        if columns.is_empty() {
            return Err(Error::NoColumns);
        }
        if variances.len() != values.len() {
            return Err(Error::InvalidParameter {
                name: "variances",
                reason: format!("{} variances for {} values", variances.len(), values.len()),
            });
        }
        if values.iter().any(|v| !v.is_finite()) {
            return Err(Error::InvalidParameter {
                name: "values",
                reason: "every measured value must be finite".into(),
            });
        }
        if variances.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(Error::InvalidParameter {
                name: "variances",
                reason: "every variance must be finite and positive".into(),
            });
        }
        Ok(Self {
            columns,
            values,
            variances,
        })
    }

    /// The measured columns.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The noisy values.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The noise variance of each value.
    pub fn variances(&self) -> &[f64] {
        &self.variances
    }
}

/// How long mirror descent runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// The number of mirror-descent steps (Private-PGM's MST uses 10,000
    /// for the final model).
    pub iterations: usize,
    /// The estimated number of rows; `None` estimates it from the
    /// measurements (their sums, weighted by inverse variance).
    pub total: Option<f64>,
}

impl Default for FitOptions {
    fn default() -> Self {
        Self {
            iterations: 3_000,
            total: None,
        }
    }
}

/// A measurement placed on the clique that holds its columns.
struct Placed<'a> {
    measurement: &'a Measurement,
    clique: usize,
    /// The measurement's cell of each of the clique's cells.
    map: Vec<u32>,
}

/// A distribution over the domain, as a graphical model on a junction tree:
/// log-potentials on each clique, and the clique marginals they give
/// (scaled to the estimated number of rows).
#[derive(Debug, Clone)]
pub struct Model {
    domain: Domain,
    tree: JunctionTree,
    potentials: Vec<Vec<f64>>,
    /// The log-potentials as one table per measurement, over its cells:
    /// every step adds to a clique only functions of the measurements placed
    /// on it, so `potentials` is their sum, and the tables carry the model
    /// to any other junction tree that holds the measured sets (a warm start).
    factors: Vec<Vec<f64>>,
    marginals: Vec<Vec<f64>>,
    total: f64,
}

/// Private-PGM's estimate: the model on `tree` whose clique marginals μ
/// minimise `Σ_m Σ_cells (M_m μ − y_m)² / (2 var)` over the marginal
/// polytope, scaled to a fixed total.
///
/// Entropic mirror descent on the marginals (McKenna, Sheldon & Miklau
/// 2019, Algorithm 1): the step is `θ ← θ − α ∇L(μ)` on the log-potentials θ,
/// and μ is recomputed from θ by belief propagation, exact on the junction
/// tree. The step size follows Private-PGM's line search: a step is kept
/// when `L(μ) − L(μ′) ≥ ½ α ⟨∇L(μ), μ − μ′⟩` (Armijo), and α grows by 1%
/// after a kept step and halves after a refused one; it starts at
/// `2·min var / total` (the loss is `1/min var`-smooth in μ up to the
/// number of measurements sharing a cell).
///
/// # Privacy
/// It reads only the measurements (and the public domain and tree):
/// post-processing of whatever mechanism produced them, free of privacy
/// cost.
///
/// ```
/// use dpkit_synth::{Domain, FitOptions, JunctionTree, Measurement, fit};
/// let domain = Domain::new(vec![2, 2]).unwrap();
/// let tree = JunctionTree::new(&domain, &[vec![0, 1]]).unwrap();
/// let pair = Measurement::new(vec![0, 1], vec![40.0, 10.0, 20.0, 30.0], 1.0).unwrap();
/// let model = fit(&domain, tree, &[pair], FitOptions::default()).unwrap();
/// let fitted = model.marginal(&[0, 1]).unwrap();
/// assert!((fitted[0] - 40.0).abs() < 0.01 && (fitted[3] - 30.0).abs() < 0.01);
/// ```
pub fn fit(
    domain: &Domain,
    tree: JunctionTree,
    measurements: &[Measurement],
    options: FitOptions,
) -> Result<Model> {
    fit_from(domain, tree, measurements, options, &[])
}

/// [`fit`], starting from the log-potentials of `start` (a model fitted to
/// the first measurements of `measurements`, on any junction tree; the
/// later measurements start at 0) rather than from the uniform model, as
/// AIM refits after each round. With no `start`, it is [`fit`].
pub(crate) fn fit_from(
    domain: &Domain,
    tree: JunctionTree,
    measurements: &[Measurement],
    options: FitOptions,
    start: &[Vec<f64>],
) -> Result<Model> {
    if start.len() > measurements.len()
        || start
            .iter()
            .zip(measurements)
            .any(|(f, m)| f.len() != m.values.len())
    {
        return Err(Error::InvalidParameter {
            name: "start",
            reason: "the warm start's tables do not match the first measurements".into(),
        });
    }
    let mut placed = Vec::with_capacity(measurements.len());
    for measurement in measurements {
        let cells = domain.cells(&measurement.columns)?;
        if cells != measurement.values.len() {
            return Err(Error::WrongCountLength {
                columns: measurement.columns.clone(),
                found: measurement.values.len(),
                expected: cells,
            });
        }
        let clique =
            tree.clique_holding(&measurement.columns)
                .ok_or_else(|| Error::NotInAClique {
                    columns: measurement.columns.clone(),
                })?;
        let map = projection(domain, &tree.cliques()[clique], &measurement.columns);
        placed.push(Placed {
            measurement,
            clique,
            map,
        });
    }
    let total = match options.total {
        Some(total) if total.is_finite() && total > 0.0 => total,
        Some(total) => {
            return Err(Error::InvalidParameter {
                name: "total",
                reason: format!("must be finite and positive, got {total}"),
            });
        }
        None => estimated_total(measurements),
    };
    let cliques = tree.cliques().len();
    let mut model = Model {
        domain: domain.clone(),
        potentials: (0..cliques).map(|c| vec![0.0; tree.cells(c)]).collect(),
        factors: measurements
            .iter()
            .enumerate()
            .map(|(i, m)| match start.get(i) {
                Some(factor) => factor.clone(),
                None => vec![0.0; m.values.len()],
            })
            .collect(),
        marginals: (0..cliques).map(|c| vec![0.0; tree.cells(c)]).collect(),
        tree,
        total,
    };
    for (p, factor) in placed.iter().zip(&model.factors) {
        for (theta, &index) in model.potentials[p.clique].iter_mut().zip(&p.map) {
            *theta += factor[index as usize];
        }
    }
    if placed.is_empty() {
        model.marginals = model.propagate(&model.potentials);
        return Ok(model);
    }
    let min_variance = measurements
        .iter()
        .flat_map(|m| m.variances.iter().copied())
        .fold(f64::INFINITY, f64::min);
    let mut alpha = 2.0 * min_variance / total;
    let mut mu = model.propagate(&model.potentials);
    let mut gradient = Gradient {
        cliques: mu.iter().map(|m| vec![0.0; m.len()]).collect(),
        measurements: model.factors.iter().map(|f| vec![0.0; f.len()]).collect(),
    };
    let mut loss = loss_and_gradient(&placed, &mu, Some(&mut gradient));
    // The trial's gradient is computed with its loss: most steps are kept
    // (α grows 1% a kept step and halves a refused one), and a kept step
    // then needs no second pass over the measurements.
    let mut trial_gradient = Gradient {
        cliques: gradient.cliques.clone(),
        measurements: gradient.measurements.clone(),
    };
    let mut trial = model.potentials.clone();
    for _ in 0..options.iterations {
        for ((t, p), g) in trial
            .iter_mut()
            .zip(&model.potentials)
            .zip(&gradient.cliques)
        {
            for ((t, p), g) in t.iter_mut().zip(p).zip(g) {
                *t = p - alpha * g;
            }
        }
        let mu_trial = model.propagate(&trial);
        let loss_trial = loss_and_gradient(&placed, &mu_trial, Some(&mut trial_gradient));
        let expected: f64 = gradient
            .cliques
            .iter()
            .zip(mu.iter().zip(&mu_trial))
            .map(|(g, (a, b))| {
                g.iter()
                    .zip(a.iter().zip(b))
                    .map(|(g, (a, b))| g * (a - b))
                    .sum::<f64>()
            })
            .sum();
        if loss - loss_trial >= 0.5 * alpha * expected {
            std::mem::swap(&mut model.potentials, &mut trial);
            for (factor, residual) in model.factors.iter_mut().zip(&gradient.measurements) {
                for (f, r) in factor.iter_mut().zip(residual) {
                    *f -= alpha * r;
                }
            }
            mu = mu_trial;
            loss = loss_trial;
            std::mem::swap(&mut gradient, &mut trial_gradient);
            alpha *= 1.01;
        } else {
            alpha *= 0.5;
        }
    }
    model.marginals = mu;
    Ok(model)
}

/// The minimum-variance unbiased combination of the measurements' sums
/// (each sum's variance is the sum of its cells' variances), at least 1.
fn estimated_total(measurements: &[Measurement]) -> f64 {
    let (mut weighted, mut weights) = (0.0, 0.0);
    for m in measurements {
        let variance: f64 = m.variances.iter().sum();
        weighted += m.values.iter().sum::<f64>() / variance;
        weights += 1.0 / variance;
    }
    if weights > 0.0 {
        (weighted / weights).max(1.0)
    } else {
        1.0
    }
}

/// The loss's gradient in μ, per clique, and each measurement's part of
/// it, `(M μ − y)/var` over the measurement's cells.
struct Gradient {
    cliques: Vec<Vec<f64>>,
    measurements: Vec<Vec<f64>>,
}

/// `Σ (M μ − y)² / (2 var)`, and when asked its gradient in μ (per clique)
/// and each measurement's part of it, `(M μ − y)/var` (per measurement).
fn loss_and_gradient(
    placed: &[Placed<'_>],
    mu: &[Vec<f64>],
    mut gradient: Option<&mut Gradient>,
) -> f64 {
    if let Some(gradient) = gradient.as_mut() {
        for g in gradient.cliques.iter_mut() {
            g.iter_mut().for_each(|x| *x = 0.0);
        }
    }
    let mut loss = 0.0;
    let mut projected = Vec::new();
    for (i, p) in placed.iter().enumerate() {
        let m = p.measurement;
        projected.clear();
        projected.resize(m.values.len(), 0.0);
        for (&index, &value) in p.map.iter().zip(&mu[p.clique]) {
            projected[index as usize] += value;
        }
        for ((x, &y), &variance) in projected.iter_mut().zip(&m.values).zip(&m.variances) {
            let difference = *x - y;
            loss += difference * difference / (2.0 * variance);
            *x = difference / variance;
        }
        if let Some(gradient) = gradient.as_mut() {
            for (g, &index) in gradient.cliques[p.clique].iter_mut().zip(&p.map) {
                *g += projected[index as usize];
            }
            gradient.measurements[i].copy_from_slice(&projected);
        }
    }
    loss
}

/// `log Σ exp` of `values` grouped by `groups` into `out` (of the groups' count).
fn grouped_log_sum_exp(values: impl Iterator<Item = f64> + Clone, groups: &[u32], out: &mut [f64]) {
    out.iter_mut().for_each(|x| *x = f64::NEG_INFINITY);
    for (v, &g) in values.clone().zip(groups) {
        let slot = &mut out[g as usize];
        if v > *slot {
            *slot = v;
        }
    }
    let mut sums = vec![0.0; out.len()];
    for (v, &g) in values.zip(groups) {
        sums[g as usize] += (v - out[g as usize]).exp();
    }
    for (o, s) in out.iter_mut().zip(sums) {
        *o += s.ln();
    }
}

impl Model {
    /// Clique marginals, scaled to the total, from log-potentials θ: sum-product
    /// belief propagation, leaves to root then root to leaves, in log space.
    fn propagate(&self, theta: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let tree = &self.tree;
        let count = theta.len();
        let mut belief: Vec<Vec<f64>> = theta.to_vec();
        let mut up: Vec<Vec<f64>> = vec![Vec::new(); count];
        for &c in tree.order().iter().rev() {
            for &k in tree.children(c) {
                for (b, &s) in belief[c].iter_mut().zip(tree.parent_to_separator(k)) {
                    *b += up[k][s as usize];
                }
            }
            if tree.parent(c).is_some() {
                let mut message = vec![0.0; tree.separator_cells(c)];
                grouped_log_sum_exp(
                    belief[c].iter().copied(),
                    tree.to_separator(c),
                    &mut message,
                );
                up[c] = message;
            }
        }
        let mut down = Vec::new();
        for &c in tree.order().iter().skip(1) {
            let p = tree.parent(c).expect("non-root");
            let map = tree.parent_to_separator(c);
            down.clear();
            down.resize(tree.separator_cells(c), 0.0);
            let from_parent = belief[p]
                .iter()
                .zip(map)
                .map(|(&b, &s)| b - up[c][s as usize]);
            grouped_log_sum_exp(from_parent, map, &mut down);
            for (b, &s) in belief[c].iter_mut().zip(tree.to_separator(c)) {
                *b += down[s as usize];
            }
        }
        for b in &mut belief {
            let max = b.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for x in b.iter_mut() {
                *x = (*x - max).exp();
                sum += *x;
            }
            let scale = self.total / sum;
            b.iter_mut().for_each(|x| *x *= scale);
        }
        belief
    }

    /// The public domain.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// The junction tree.
    pub fn tree(&self) -> &JunctionTree {
        &self.tree
    }

    /// The estimated number of rows (the sum of every marginal).
    pub fn total(&self) -> f64 {
        self.total
    }

    /// The log-potentials as one table per measurement fitted (see
    /// [`fit_from`]).
    pub(crate) fn factors(&self) -> &[Vec<f64>] {
        &self.factors
    }

    /// The fitted marginal of clique `clique` of the tree, scaled to the total.
    pub fn clique_marginal(&self, clique: usize) -> &[f64] {
        &self.marginals[clique]
    }

    /// The fitted marginal over `columns` (distinct, in the order listed),
    /// scaled to the total, for any columns of the domain.
    ///
    /// Columns that lie in one clique are summed out of its marginal.
    /// Otherwise the model's distribution on the smallest subtree whose
    /// cliques hold them, `Π p_C / Π p_S` (cliques C, separators S), is
    /// summed out leaf by leaf (variable elimination on the junction tree):
    /// each message keeps only a separator's columns and the asked ones
    /// below it, so the full domain is never enumerated. A message with
    /// more than [`crate::MAX_CELLS`] cells is an error.
    pub fn marginal(&self, columns: &[usize]) -> Result<Vec<f64>> {
        let cells = self.domain.cells(columns)?;
        if let Some(clique) = self.tree.clique_holding(columns) {
            let map = projection(&self.domain, &self.tree.cliques()[clique], columns);
            let mut out = vec![0.0; cells];
            for (&index, &value) in map.iter().zip(&self.marginals[clique]) {
                out[index as usize] += value;
            }
            return Ok(out);
        }
        let mut wanted = columns.to_vec();
        wanted.sort_unstable();
        let tree = &self.tree;
        let count = tree.cliques().len();
        let marked: Vec<bool> = tree
            .cliques()
            .iter()
            .map(|c| c.iter().any(|k| wanted.contains(k)))
            .collect();
        // Whether each clique's subtree holds a marked clique (children first).
        let mut below = marked.clone();
        for &c in tree.order().iter().rev() {
            if let Some(p) = tree.parent(c) {
                below[p] |= below[c];
            }
        }
        // The top of the smallest subtree: down from the root while one
        // child alone leads to every marked clique.
        let mut top = tree.order()[0];
        loop {
            let leading: Vec<usize> = tree
                .children(top)
                .iter()
                .copied()
                .filter(|&k| below[k])
                .collect();
            if marked[top] || leading.len() != 1 {
                break;
            }
            top = leading[0];
        }
        let mut inside = vec![false; count];
        inside[top] = true;
        for &c in tree.order() {
            if let Some(p) = tree.parent(c).filter(|_| c != top) {
                inside[c] = inside[p] && below[c];
            }
        }
        let mut messages: Vec<Option<Factor>> = vec![None; count];
        for &c in tree.order().iter().rev() {
            if !inside[c] {
                continue;
            }
            let clique = &tree.cliques()[c];
            let mut factor = Factor {
                columns: clique.clone(),
                values: self.marginals[c].iter().map(|m| m / self.total).collect(),
            };
            // The clique's columns in no other factor of the subtree (not
            // asked, in no separator to an inside neighbour) are summed out
            // first, before any product can widen the factor.
            let needed: Vec<usize> = clique
                .iter()
                .copied()
                .filter(|k| {
                    wanted.contains(k)
                        || (c != top && tree.separator(c).contains(k))
                        || tree
                            .children(c)
                            .iter()
                            .any(|&j| inside[j] && tree.separator(j).contains(k))
                })
                .collect();
            if needed.len() < clique.len() {
                factor = factor.sum_to(&self.domain, &needed);
            }
            if c != top {
                // p_C / p_S: the clique's columns given its separator's.
                let separator = factor.sum_to(&self.domain, tree.separator(c));
                factor = factor.divide(&self.domain, &separator);
            }
            for &k in tree.children(c) {
                if let Some(message) = messages[k].take() {
                    factor = factor.product(&self.domain, &message)?;
                }
            }
            let keep: Vec<usize> = factor
                .columns
                .iter()
                .copied()
                .filter(|k| wanted.contains(k) || (c != top && tree.separator(c).contains(k)))
                .collect();
            self.domain.cells(&keep)?;
            messages[c] = Some(factor.sum_to(&self.domain, &keep));
        }
        let result = messages[top].take().expect("the top clique is inside");
        let map = projection(&self.domain, &result.columns, columns);
        let mut out = vec![0.0; cells];
        for (&index, &value) in map.iter().zip(&result.values) {
            out[index as usize] += value * self.total;
        }
        Ok(out)
    }
}

/// A nonnegative function of some columns (sorted), row-major.
#[derive(Debug, Clone)]
struct Factor {
    columns: Vec<usize>,
    values: Vec<f64>,
}

impl Factor {
    /// Summed over every column not in `keep` (a sorted subset).
    fn sum_to(&self, domain: &Domain, keep: &[usize]) -> Factor {
        let cells: usize = keep.iter().map(|&k| domain.size(k)).product();
        let mut values = vec![0.0; cells];
        for (&index, &value) in projection(domain, &self.columns, keep)
            .iter()
            .zip(&self.values)
        {
            values[index as usize] += value;
        }
        Factor {
            columns: keep.to_vec(),
            values,
        }
    }

    /// Divided by `other`, whose columns lie in this one's (0 where it is 0).
    fn divide(&self, domain: &Domain, other: &Factor) -> Factor {
        let map = projection(domain, &self.columns, &other.columns);
        let values = self
            .values
            .iter()
            .zip(&map)
            .map(|(&v, &i)| {
                let d = other.values[i as usize];
                if d > 0.0 { v / d } else { 0.0 }
            })
            .collect();
        Factor {
            columns: self.columns.clone(),
            values,
        }
    }

    /// The product, over the union of the columns (an error past the size limit).
    fn product(&self, domain: &Domain, other: &Factor) -> Result<Factor> {
        let mut columns: Vec<usize> = self.columns.iter().chain(&other.columns).copied().collect();
        columns.sort_unstable();
        columns.dedup();
        domain.cells(&columns)?;
        let left = projection(domain, &columns, &self.columns);
        let right = projection(domain, &columns, &other.columns);
        let values = left
            .iter()
            .zip(&right)
            .map(|(&a, &b)| self.values[a as usize] * other.values[b as usize])
            .collect();
        Ok(Factor { columns, values })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decode;
    use dpkit_core::rng::InsecureSeededRng;
    use rand_core::Rng;

    fn random_potentials(tree: &JunctionTree, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
        (0..tree.cliques().len())
            .map(|c| {
                (0..tree.cells(c))
                    .map(|_| (rng.next_u32() % 1000) as f64 / 250.0 - 2.0)
                    .collect()
            })
            .collect()
    }

    /// The clique marginals of `exp(Σ θ_C)` by enumerating the joint.
    fn brute_force(
        domain: &Domain,
        tree: &JunctionTree,
        theta: &[Vec<f64>],
        total: f64,
    ) -> Vec<Vec<f64>> {
        let all: Vec<usize> = (0..domain.width()).collect();
        let cells = domain.cells(&all).unwrap();
        let maps: Vec<Vec<u32>> = tree
            .cliques()
            .iter()
            .map(|c| projection(domain, &all, c))
            .collect();
        let mut out: Vec<Vec<f64>> = (0..theta.len()).map(|c| vec![0.0; tree.cells(c)]).collect();
        let mut sum = 0.0;
        for cell in 0..cells {
            let weight: f64 = maps
                .iter()
                .zip(theta)
                .map(|(m, t)| t[m[cell] as usize])
                .sum::<f64>()
                .exp();
            sum += weight;
            for (o, m) in out.iter_mut().zip(&maps) {
                o[m[cell] as usize] += weight;
            }
        }
        out.iter_mut()
            .for_each(|o| o.iter_mut().for_each(|x| *x *= total / sum));
        out
    }

    #[test]
    fn belief_propagation_gives_the_exact_clique_marginals() {
        let domain = Domain::new(vec![2, 3, 2, 4, 3, 2]).unwrap();
        for cliques in [
            vec![vec![0, 1], vec![1, 2], vec![2, 3], vec![1, 4], vec![4, 5]],
            vec![vec![0, 1, 2], vec![2, 3], vec![1, 2, 4], vec![5]],
            vec![vec![3, 5], vec![0, 2]],
        ] {
            let tree = JunctionTree::new(&domain, &cliques).unwrap();
            let theta = random_potentials(&tree, 11);
            let model = fit(
                &domain,
                tree.clone(),
                &[],
                FitOptions {
                    iterations: 0,
                    total: Some(7.0),
                },
            )
            .unwrap();
            let fast = model.propagate(&theta);
            let slow = brute_force(&domain, &tree, &theta, 7.0);
            for (f, s) in fast.iter().zip(&slow) {
                for (a, b) in f.iter().zip(s) {
                    assert!((a - b).abs() < 1e-12 * 7.0, "{cliques:?}: {a} against {b}");
                }
            }
        }
    }

    #[test]
    fn marginals_across_cliques_match_the_enumerated_joint() {
        let domain = Domain::new(vec![2, 3, 2, 4, 3, 2]).unwrap();
        let all: Vec<usize> = (0..6).collect();
        for cliques in [
            vec![vec![0, 1], vec![1, 2], vec![2, 3], vec![1, 4], vec![4, 5]],
            vec![vec![0, 1, 2], vec![2, 3], vec![1, 2, 4], vec![5]],
            // A chain, whose smallest subtree for (4, 2) leaves out the root.
            vec![vec![0, 1], vec![1, 2], vec![2, 3], vec![3, 4], vec![4, 5]],
        ] {
            let tree = JunctionTree::new(&domain, &cliques).unwrap();
            let theta = random_potentials(&tree, 15);
            let mut model = fit(
                &domain,
                tree.clone(),
                &[],
                FitOptions {
                    iterations: 0,
                    total: Some(3.0),
                },
            )
            .unwrap();
            model.marginals = model.propagate(&theta);
            // The joint, enumerated.
            let maps: Vec<Vec<u32>> = tree
                .cliques()
                .iter()
                .map(|c| projection(&domain, &all, c))
                .collect();
            let cells = domain.cells(&all).unwrap();
            let joint: Vec<f64> = (0..cells)
                .map(|x| {
                    maps.iter()
                        .zip(&theta)
                        .map(|(m, t)| t[m[x] as usize])
                        .sum::<f64>()
                        .exp()
                })
                .collect();
            let sum: f64 = joint.iter().sum();
            for columns in [
                vec![0, 3],
                vec![5, 2, 4],
                vec![3, 0, 5],
                vec![1],
                vec![0, 1, 2, 3, 4, 5],
                vec![3, 5, 4],
                vec![4, 2],
            ] {
                let fast = model.marginal(&columns).unwrap();
                let mut slow = vec![0.0; domain.cells(&columns).unwrap()];
                for (&m, &p) in projection(&domain, &all, &columns).iter().zip(&joint) {
                    slow[m as usize] += p / sum * 3.0;
                }
                for (a, b) in fast.iter().zip(&slow) {
                    assert!(
                        (a - b).abs() < 1e-12,
                        "{cliques:?} {columns:?}: {a} against {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_warm_start_carries_the_model_to_another_tree() {
        // Noisy-looking pairs of a cycle, fitted a little on one covering
        // tree; the same model restarted with no step on another tree that
        // holds the measured sets must have the same marginals.
        let domain = Domain::new(vec![2, 3, 2, 3]).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(21);
        let sets = [vec![0, 1], vec![1, 2], vec![2, 3], vec![3, 0]];
        let measurements: Vec<Measurement> = sets
            .iter()
            .map(|columns| {
                let values = (0..domain.cells(columns).unwrap())
                    .map(|_| 10.0 + (rng.next_u32() % 50) as f64)
                    .collect();
                Measurement::new(columns.clone(), values, 4.0).unwrap()
            })
            .collect();
        let options = |iterations| FitOptions {
            iterations,
            total: None,
        };
        let first = fit(
            &domain,
            JunctionTree::covering(&domain, &sets).unwrap(),
            &measurements[..3],
            options(40),
        )
        .unwrap();
        let wider = JunctionTree::new(&domain, &[vec![0, 1, 2, 3]]).unwrap();
        let carried = fit_from(&domain, wider, &measurements, options(0), first.factors()).unwrap();
        for columns in [vec![0, 1], vec![1, 2], vec![2, 3], vec![0, 3], vec![1, 3]] {
            let (a, b) = (
                first.marginal(&columns).unwrap(),
                carried.marginal(&columns).unwrap(),
            );
            for (x, y) in a.iter().zip(&b) {
                // Totals differ (4 measurements against 3): compare shares.
                let (x, y) = (x / first.total(), y / carried.total());
                assert!((x - y).abs() < 1e-12, "{columns:?}: {x} against {y}");
            }
        }
        // The model moved away from uniform, so the check has teeth.
        let pair = first.marginal(&[0, 1]).unwrap();
        assert!(
            pair.iter()
                .any(|p| (p / first.total() - 1.0 / 6.0).abs() > 1e-3)
        );
        // Tables that do not match the measurements are refused.
        let wrong = vec![vec![0.0; 5]];
        let tree = JunctionTree::covering(&domain, &sets).unwrap();
        assert!(fit_from(&domain, tree, &measurements, options(0), &wrong).is_err());
    }

    #[test]
    fn the_fit_reproduces_exact_marginals_on_a_junction_tree_of_larger_cliques() {
        // Any positive joint distribution's marginals are consistent; the
        // model on the junction tree matching them is the fit's optimum
        // (loss 0), so mirror descent must reach it.
        let domain = Domain::new(vec![2, 3, 2, 3, 2]).unwrap();
        let all: Vec<usize> = (0..5).collect();
        let mut rng = InsecureSeededRng::from_seed_for_testing(12);
        let joint: Vec<f64> = (0..domain.cells(&all).unwrap())
            .map(|_| 1.0 + (rng.next_u32() % 100) as f64)
            .collect();
        let total: f64 = joint.iter().sum();
        let cliques = vec![vec![0, 1, 2], vec![2, 3], vec![1, 2, 4]];
        let measured = [
            vec![0, 1, 2],
            vec![3, 2],
            vec![1, 4],
            vec![4],
            vec![2, 1, 4],
        ];
        let measurements: Vec<Measurement> = measured
            .iter()
            .map(|columns| {
                let map = projection(&domain, &all, columns);
                let mut values = vec![0.0; domain.cells(columns).unwrap()];
                for (&m, &p) in map.iter().zip(&joint) {
                    values[m as usize] += p;
                }
                Measurement::new(columns.clone(), values, 1.0).unwrap()
            })
            .collect();
        let tree = JunctionTree::new(&domain, &cliques).unwrap();
        let model = fit(
            &domain,
            tree,
            &measurements,
            FitOptions {
                iterations: 5_000,
                total: None,
            },
        )
        .unwrap();
        assert!((model.total() - total).abs() < 1e-9 * total);
        for m in &measurements {
            let fitted = model.marginal(m.columns()).unwrap();
            for (a, b) in fitted.iter().zip(m.values()) {
                assert!((a - b).abs() < 1e-3, "{:?}: {a} against {b}", m.columns());
            }
        }
        // A measurement outside every clique is refused.
        let outside = Measurement::new(vec![0, 3], vec![1.0; 6], 1.0).unwrap();
        let tree = JunctionTree::new(&domain, &cliques).unwrap();
        assert!(matches!(
            fit(&domain, tree, &[outside], FitOptions::default()),
            Err(Error::NotInAClique { .. })
        ));
        let mut codes = [0u32; 2];
        decode(&domain, &[1, 3], 7, &mut codes);
        assert_eq!(codes, [2, 1]);
    }
}
