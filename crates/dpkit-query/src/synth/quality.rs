//! How close a synthetic table comes to what was measured: each measured
//! marginal's synthetic counterpart against its noisy measurement (free:
//! post-processing of the release), and, for the curator only, every 1-,
//! 2- or 3-way marginal against the true one ([`true_marginals`]).

use dpkit_synth::{Marginals, Table};

use super::{EngineMarginals, Planned, Synthesized};
use crate::QueryEngine;
use crate::error::{QueryError, Result};

/// Total-variation distances between marginals, over `marginals` of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The mean distance.
    pub mean: f64,
    /// The largest distance.
    pub max: f64,
    /// How many marginals were compared.
    pub marginals: usize,
}

impl Fit {
    /// The mean and largest of `distances`.
    fn of(distances: &[f64]) -> Self {
        let marginals = distances.len();
        Self {
            mean: distances.iter().sum::<f64>() / marginals.max(1) as f64,
            max: distances.iter().copied().fold(0.0, f64::max),
            marginals,
        }
    }

    /// The fit of the marginals of `way` columns among `each`.
    ///
    /// ```
    /// use dpkit_query::synth::{Fit, MarginalFit};
    /// let each = [
    ///     MarginalFit { columns: vec!["age".into()], distance: 0.02 },
    ///     MarginalFit { columns: vec!["age".into(), "sex".into()], distance: 0.1 },
    ///     MarginalFit { columns: vec!["sex".into()], distance: 0.04 },
    /// ];
    /// let one_way = Fit::of_way(&each, 1);
    /// assert_eq!((one_way.marginals, one_way.max), (2, 0.04));
    /// assert!((one_way.mean - 0.03).abs() < 1e-12);
    /// ```
    pub fn of_way(each: &[MarginalFit], way: usize) -> Self {
        let distances: Vec<f64> = each
            .iter()
            .filter(|m| m.columns.len() == way)
            .map(|m| m.distance)
            .collect();
        Self::of(&distances)
    }
}

/// One marginal's total-variation distance from what it is compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginalFit {
    /// Its columns, by name.
    pub columns: Vec<String>,
    /// The distance, 0 to 1.
    pub distance: f64,
}

impl MarginalFit {
    /// The `count` largest distances of `each`, largest first (ties in
    /// the order given).
    ///
    /// ```
    /// use dpkit_query::synth::MarginalFit;
    /// let fit = |name: &str, distance| MarginalFit { columns: vec![name.into()], distance };
    /// let worst = MarginalFit::worst(&[fit("a", 0.1), fit("b", 0.3), fit("c", 0.2)], 2);
    /// assert_eq!(worst, vec![fit("b", 0.3), fit("c", 0.2)]);
    /// ```
    pub fn worst(each: &[MarginalFit], count: usize) -> Vec<MarginalFit> {
        let mut sorted = each.to_vec();
        sorted.sort_by(|a, b| b.distance.total_cmp(&a.distance));
        sorted.truncate(count);
        sorted
    }
}

/// One noisy measurement as the release holds it: its columns, its values
/// (row-major, the first column's code most significant) and, when the
/// release merged rare codes, each column's map from original codes to
/// the measurement's.
pub(super) struct Noisy {
    pub(super) columns: Vec<usize>,
    pub(super) values: Vec<f64>,
    pub(super) maps: Option<Vec<Vec<u32>>>,
}

impl Noisy {
    /// The synthetic counterpart of this measurement, from `codes`, and
    /// its distance from it.
    pub(super) fn fit(&self, codes: &mut Table, names: &[String]) -> Result<MarginalFit> {
        let failed = |e: dpkit_synth::Error| QueryError::FailedWhileRunning(e.to_string());
        let counts = codes.counts(&self.columns).map_err(failed)?;
        let synthetic = match &self.maps {
            Some(maps) => merged(&counts, maps, self.values.len())?,
            None => counts,
        };
        Ok(MarginalFit {
            columns: self.columns.iter().map(|&c| names[c].clone()).collect(),
            distance: distance(&self.values, &synthetic),
        })
    }
}

/// `counts` over original codes (row-major) gathered into `cells` cells
/// over the codes `maps` give.
fn merged(counts: &[u64], maps: &[Vec<u32>], cells: usize) -> Result<Vec<u64>> {
    let mut out = vec![0u64; cells];
    let sizes: Vec<usize> = maps
        .iter()
        .map(|m| m.iter().map(|&c| c as usize + 1).max().unwrap_or(0))
        .collect();
    for (index, &count) in counts.iter().enumerate() {
        let (mut rest, mut cell, mut stride) = (index, 0usize, 1usize);
        for (map, size) in maps.iter().zip(&sizes).rev() {
            cell += map[rest % map.len()] as usize * stride;
            rest /= map.len();
            stride *= size;
        }
        *out.get_mut(cell).ok_or_else(|| {
            QueryError::FailedWhileRunning(
                "a merged marginal has fewer cells than its codes".into(),
            )
        })? += count;
    }
    Ok(out)
}

/// Total-variation distance between two marginals, each normalised
/// (negative noisy counts as 0).
pub(super) fn distance(a: &[f64], b: &[u64]) -> f64 {
    let a_total: f64 = a.iter().map(|x| x.max(0.0)).sum();
    let b_total: f64 = b.iter().map(|&x| x as f64).sum();
    if a_total <= 0.0 || b_total <= 0.0 {
        return 1.0;
    }
    a.iter()
        .zip(b)
        .map(|(x, &y)| (x.max(0.0) / a_total - y as f64 / b_total).abs())
        .sum::<f64>()
        / 2.0
}

/// For the curator only, never through the service: the synthetic table's
/// `way`-way marginals (every set of `way` columns) against the true ones,
/// counted exactly. A release of the data without noise: the command line
/// prints it to the curator who holds the data.
pub fn true_marginals(
    engine: &QueryEngine,
    planned: &Planned,
    synthetic: &Synthesized,
    way: usize,
) -> Result<Vec<MarginalFit>> {
    let mut truth = EngineMarginals::new(engine, &planned.table, &planned.plans)?;
    let mut codes = synthetic.codes.clone();
    let names = planned.names();
    let mut each = Vec::new();
    for columns in subsets(planned.table.columns.len(), way) {
        let failed = |e: dpkit_synth::Error| QueryError::FailedWhileRunning(e.to_string());
        let exact: Vec<f64> = match truth.counts(&columns) {
            Ok(counts) => counts.into_iter().map(|c| c as f64).collect(),
            Err(e) => return Err(truth.take_failure().unwrap_or_else(|| failed(e))),
        };
        let synthetic = codes.counts(&columns).map_err(failed)?;
        each.push(MarginalFit {
            columns: columns.iter().map(|&c| names[c].clone()).collect(),
            distance: distance(&exact, &synthetic),
        });
    }
    Ok(each)
}

/// Every set of `k` of `n` columns, in order.
pub(super) fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    if k > n {
        return Vec::new();
    }
    let mut out = subsets(n - 1, k);
    for mut set in subsets(n - 1, k - 1) {
        set.push(n - 1);
        out.push(set);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two columns of 3 and 2 codes, the first's codes 1 and 2 merged into
    /// its code 1: each original cell lands in its merged cell.
    #[test]
    fn merged_cells_gather_their_original_codes() {
        let counts = [1, 2, 3, 4, 5, 6]; // (0,0) (0,1) (1,0) (1,1) (2,0) (2,1)
        let maps = vec![vec![0, 1, 1], vec![0, 1]];
        assert_eq!(merged(&counts, &maps, 4).unwrap(), vec![1, 2, 8, 10]);
        let swapped = vec![vec![0, 1], vec![1, 0, 0]];
        assert_eq!(
            merged(&[1, 2, 3, 4, 5, 6], &swapped, 4).unwrap(),
            vec![5, 1, 11, 4]
        );
        assert!(merged(&counts, &maps, 3).is_err());
    }

    #[test]
    fn distance_is_half_the_l1_between_shares() {
        assert_eq!(distance(&[1.0, 1.0], &[1, 1]), 0.0);
        assert_eq!(distance(&[2.0, -5.0], &[0, 7]), 1.0);
        assert!((distance(&[3.0, 1.0], &[1, 1]) - 0.25).abs() < 1e-12);
        assert_eq!(distance(&[-1.0, 0.0], &[1, 1]), 1.0);
    }
}
