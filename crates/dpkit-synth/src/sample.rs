//! Drawing synthetic rows from a fitted model, along its junction tree.

use dpkit_core::sampling::uniform_below;
use rand_core::Rng;

use crate::domain::{decode, projection};
use crate::error::{Error, Result};
use crate::marginals::Table;
use crate::model::Model;

/// How rows are drawn from the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sampling {
    /// Private-PGM's default (`synthetic_data`, method "round"): the root
    /// clique's fitted counts, scaled to the rows asked for, are rounded to
    /// integers that sum to them, and so is each group of rows sharing a
    /// separator's codes, clique by clique down the tree. The table's
    /// marginals on the tree's cliques then equal the model's to within
    /// rounding, without the sampling noise of independent rows. Rounding
    /// is systematic (one uniform offset per group), so each cell's
    /// expected count is the model's exactly; rows are shuffled in groups.
    #[default]
    Round,
    /// Independent rows: each row's codes drawn from the model's
    /// distribution, clique by clique down the tree (forward sampling).
    Draw,
}

/// A uniform double in `[0, 1)`, 53 random bits.
fn unit<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Fisher–Yates, exactly uniform.
fn shuffle<T, R: Rng + ?Sized>(values: &mut [T], rng: &mut R) {
    for i in (1..values.len()).rev() {
        let j = uniform_below(i as u64 + 1, rng) as usize;
        values.swap(i, j);
    }
}

/// Integer counts summing to `rows`, each `weights[k]/Σ·rows` rounded up
/// or down (systematic rounding: cumulative sums against one uniform
/// offset). All-zero weights count as uniform.
fn round_counts<R: Rng + ?Sized>(weights: &[f64], rows: usize, rng: &mut R) -> Vec<usize> {
    let sum: f64 = weights.iter().sum();
    let uniform = !(sum > 0.0 && sum.is_finite());
    let offset = unit(rng);
    let mut counts = Vec::with_capacity(weights.len());
    let (mut cumulative, mut previous) = (0.0, 0usize);
    for (k, &w) in weights.iter().enumerate() {
        let share = if uniform {
            1.0 / weights.len() as f64
        } else {
            w / sum
        };
        cumulative += share * rows as f64;
        let current = if k + 1 == weights.len() {
            rows
        } else {
            ((cumulative + offset).floor() as usize).clamp(previous, rows)
        };
        counts.push(current - previous);
        previous = current;
    }
    counts
}

/// One index drawn in proportion to `cumulative` (increasing, last = total).
fn draw_index<R: Rng + ?Sized>(cumulative: &[f64], rng: &mut R) -> usize {
    let total = *cumulative.last().expect("non-empty");
    let target = unit(rng) * total;
    cumulative
        .partition_point(|&c| c <= target)
        .min(cumulative.len() - 1)
}

impl Model {
    /// `rows` synthetic rows drawn from the model with `rng`.
    ///
    /// Along the junction tree: the root clique's codes are drawn from its
    /// marginal; then each clique's codes not yet drawn are drawn given its
    /// separator's, from the clique's marginal conditioned on them. On a
    /// junction tree this is exactly the model's joint distribution.
    ///
    /// # Privacy
    /// Post-processing of the model: any generator is safe here, and a
    /// seeded one gives reproducible tables.
    pub fn sample_with_rng<R: Rng + ?Sized>(
        &self,
        rows: usize,
        method: Sampling,
        rng: &mut R,
    ) -> Result<Table> {
        let domain = self.domain();
        let tree = self.tree();
        if u32::try_from(rows).is_err() {
            return Err(Error::InvalidParameter {
                name: "rows",
                reason: format!("at most {} rows, got {rows}", u32::MAX),
            });
        }
        let mut columns: Vec<Vec<u32>> = vec![vec![0; rows]; domain.width()];
        let mut codes = vec![0u32; domain.width()];
        for &c in tree.order() {
            let clique = &tree.cliques()[c];
            let separator = tree.separator(c);
            let free: Vec<usize> = clique
                .iter()
                .copied()
                .filter(|k| !separator.contains(k))
                .collect();
            if free.is_empty() {
                continue;
            }
            let free_cells: usize = free.iter().map(|&k| domain.size(k)).product();
            let separator_cells = tree.separator_cells(c);
            // The clique's marginal as a (separator cell × free cell) table.
            let mut conditional = vec![0.0; separator_cells * free_cells];
            let to_free = projection(domain, clique, &free);
            let to_separator: Vec<u32> = if separator.is_empty() {
                vec![0; tree.cells(c)]
            } else {
                tree.to_separator(c).to_vec()
            };
            for ((&s, &f), &m) in to_separator
                .iter()
                .zip(&to_free)
                .zip(self.clique_marginal(c))
            {
                conditional[s as usize * free_cells + f as usize] += m;
            }
            // Each row's separator cell, from the codes drawn so far.
            let mut groups: Vec<Vec<u32>> = vec![Vec::new(); separator_cells];
            let mut index = vec![0usize; rows];
            for &k in separator {
                let size = domain.size(k);
                for (i, &code) in index.iter_mut().zip(&columns[k]) {
                    *i = *i * size + code as usize;
                }
            }
            for (row, &s) in index.iter().enumerate() {
                groups[s].push(row as u32);
            }
            for (s, group) in groups.iter().enumerate() {
                if group.is_empty() {
                    continue;
                }
                let weights = &conditional[s * free_cells..(s + 1) * free_cells];
                let mut assign = |row: u32, f: usize, codes: &mut [u32]| {
                    decode(domain, &free, f, codes);
                    for (&k, &code) in free.iter().zip(codes.iter()) {
                        columns[k][row as usize] = code;
                    }
                };
                match method {
                    Sampling::Round => {
                        let counts = round_counts(weights, group.len(), rng);
                        let mut values: Vec<usize> = counts
                            .iter()
                            .enumerate()
                            .flat_map(|(f, &n)| std::iter::repeat_n(f, n))
                            .collect();
                        shuffle(&mut values, rng);
                        for (&row, &f) in group.iter().zip(&values) {
                            assign(row, f, &mut codes);
                        }
                    }
                    Sampling::Draw => {
                        let sum: f64 = weights.iter().sum();
                        let cumulative: Vec<f64> = if sum > 0.0 && sum.is_finite() {
                            weights
                                .iter()
                                .scan(0.0, |acc, &w| {
                                    *acc += w;
                                    Some(*acc)
                                })
                                .collect()
                        } else {
                            (1..=free_cells).map(|i| i as f64).collect()
                        };
                        for &row in group {
                            let f = draw_index(&cumulative, rng);
                            assign(row, f, &mut codes);
                        }
                    }
                }
            }
        }
        Table::new(domain.clone(), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Domain;
    use crate::junction::JunctionTree;
    use crate::marginals::Marginals;
    use crate::model::{FitOptions, Measurement, fit};
    use dpkit_core::rng::InsecureSeededRng;

    /// A model on cliques {0, 1, 2} and {2, 3} fitted to the marginals of
    /// a fixed positive joint distribution.
    fn small_model() -> Model {
        let domain = Domain::new(vec![2, 3, 2, 2]).unwrap();
        let all = [0, 1, 2, 3];
        let joint: Vec<f64> = (0..24)
            .map(|i| 1.0 + ((i * 7) % 5) as f64 + (i % 3) as f64)
            .collect();
        let measurements: Vec<Measurement> = [vec![0, 1, 2], vec![2, 3]]
            .iter()
            .map(|columns| {
                let mut values = vec![0.0; domain.cells(columns).unwrap()];
                for (&m, &p) in projection(&domain, &all, columns).iter().zip(&joint) {
                    values[m as usize] += p * 10.0;
                }
                Measurement::new(columns.clone(), values, 1.0).unwrap()
            })
            .collect();
        let tree = JunctionTree::new(&domain, &[vec![2, 3], vec![0, 1, 2]]).unwrap();
        assert_eq!(tree.cliques()[0], vec![2, 3]);
        fit(
            &domain,
            tree,
            &measurements,
            FitOptions {
                iterations: 2_000,
                total: None,
            },
        )
        .unwrap()
    }

    /// The model's probability of each cell of the full domain.
    fn model_joint(model: &Model) -> Vec<f64> {
        let (a, b, s) = (
            model.marginal(&[0, 1, 2]).unwrap(),
            model.marginal(&[2, 3]).unwrap(),
            model.marginal(&[2]).unwrap(),
        );
        let total = model.total();
        let mut p = Vec::with_capacity(24);
        for (x, &ax) in a.iter().enumerate() {
            for w in 0..2 {
                let z = x % 2;
                p.push(ax * b[z * 2 + w] / s[z] / total);
            }
        }
        p
    }

    #[test]
    fn drawn_rows_follow_the_model() {
        // Pearson's χ² over the 24 cells of the full joint (23 degrees of
        // freedom, every expected count above 2,000): it checks both the
        // cliques' marginals and the conditional independence the tree
        // implies. Bound: Laurent & Massart (2000), P(χ²ₖ ≥ k + 2√(kx) + 2x)
        // ≤ e^(−x) at x = ln 10⁷, for the χ² law Pearson's statistic follows
        // at these counts.
        let model = small_model();
        let p = model_joint(&model);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let rows = 200_000;
        let mut rng = InsecureSeededRng::from_seed_for_testing(13);
        let mut table = model
            .sample_with_rng(rows, Sampling::Draw, &mut rng)
            .unwrap();
        let counts = table.counts(&[0, 1, 2, 3]).unwrap();
        let statistic: f64 = counts
            .iter()
            .zip(&p)
            .map(|(&o, &q)| {
                let e = q * rows as f64;
                assert!(e > 2_000.0);
                (o as f64 - e).powi(2) / e
            })
            .sum();
        let (k, x) = (23.0f64, 16.118_095_650_958_32);
        let bound = k + 2.0 * (k * x).sqrt() + 2.0 * x;
        assert!(statistic < bound, "χ² = {statistic} ≥ {bound}");
    }

    #[test]
    fn rounded_rows_match_the_clique_marginals_within_rounding() {
        // The root clique {2, 3} (listed first) has each of its 4 cells
        // within 1 of its share; each group of the child's separator {2}
        // then holds within the root's error of its share, and each of the
        // child's 12 cells is within 1 more: Σ |count − share| ≤ 4 on
        // {2, 3} and ≤ 4 + 12 on {0, 1, 2}. Independent rows would be off
        // by about 40 and 170 at 10,007 rows.
        let model = small_model();
        let mut rng = InsecureSeededRng::from_seed_for_testing(14);
        for rows in [10_007, 333] {
            let mut table = model
                .sample_with_rng(rows, Sampling::Round, &mut rng)
                .unwrap();
            for (columns, bound) in [(vec![2, 3], 4.0), (vec![0, 1, 2], 16.0)] {
                let fitted = model.marginal(&columns).unwrap();
                let counts = table.counts(&columns).unwrap();
                let error: f64 = counts
                    .iter()
                    .zip(&fitted)
                    .map(|(&c, &m)| (c as f64 - m / model.total() * rows as f64).abs())
                    .sum();
                assert!(error <= bound, "{columns:?}: {error}");
            }
        }
    }

    #[test]
    fn rounded_counts_sum_to_the_rows_and_stay_within_one_of_their_share() {
        let mut rng = InsecureSeededRng::from_seed_for_testing(5);
        let weights = [0.3, 0.0, 2.2, 1e-9, 7.5, 0.0001];
        let sum: f64 = weights.iter().sum();
        for rows in [0, 1, 7, 1000, 48_842] {
            for _ in 0..100 {
                let counts = round_counts(&weights, rows, &mut rng);
                assert_eq!(counts.iter().sum::<usize>(), rows);
                for (&n, &w) in counts.iter().zip(&weights) {
                    assert!((n as f64 - w / sum * rows as f64).abs() < 1.0 + 1e-9);
                }
            }
        }
        assert_eq!(round_counts(&[0.0, 0.0], 4, &mut rng), vec![2, 2]);
    }
}
