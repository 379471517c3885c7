//! The search for the output event that best separates two output samples.
//!
//! Three families, each scored on both directions (first input favoured, or
//! second):
//! * **intervals** `a < y ≤ b` between quantiles of the pooled sample, which
//!   include one-sided thresholds (StatDP-style tail events);
//! * **likelihood-ratio sets**: when the outputs take few distinct values,
//!   the union of the values with the largest empirical ratio
//!   `count_first / count_second`, for every size of union (the optimal
//!   event of the Neyman–Pearson lemma, as DP-Sniper approximates it);
//! * **grid residues** `|y| ≤ t` and `y` (not) a multiple of `2^m`: the
//!   floating-point artefacts of Mironov (2012), where some last bits are
//!   reachable from one input and not the other.
//!
//! An event's score is a lower confidence bound on ε from the selection
//! samples, so that a large ratio seen in a handful of outputs does not win.

use crate::bounds::{EventCounts, binomial_bounds};
use crate::event::{OutputEvent, finest_grid_exponent};

/// Quantile cut points for the interval family.
const INTERVAL_CUTS: usize = 100;
/// The likelihood-ratio family runs when the outputs take at most this many values.
const MAX_DISTINCT_VALUES: usize = 4096;
/// Magnitude cut points and grid exponents for the residue family.
const RESIDUE_MAGNITUDE_CUTS: usize = 32;
const MAX_RESIDUE_EXPONENTS: usize = 160;
/// Each side of a selection score fails with at most this probability.
const SELECTION_FAILURE: f64 = 1e-3;

/// The best event found, and which input it favours.
#[derive(Debug, Clone, PartialEq)]
pub struct Separation {
    /// The event.
    pub event: OutputEvent,
    /// Whether the event is more likely under the first input.
    pub favours_first: bool,
    /// Its lower bound on ε over the selection samples.
    pub selection_score: f64,
}

/// Finds the event that best separates `first` from `second` (finite outputs).
pub(crate) fn best_separation(first: &[f64], second: &[f64], delta: f64) -> Separation {
    let mut best = Best {
        delta,
        n_first: first.len() as u64,
        n_second: second.len() as u64,
        found: Separation {
            event: OutputEvent::Interval {
                above: None,
                at_most: None,
            },
            favours_first: true,
            selection_score: 0.0,
        },
    };
    search_intervals(first, second, &mut best);
    search_likelihood_ratio_sets(first, second, &mut best);
    search_grid_residues(first, second, &mut best);
    best.found
}

struct Best {
    delta: f64,
    n_first: u64,
    n_second: u64,
    found: Separation,
}

impl Best {
    /// Scores an event in both directions; `event` is only built if it wins.
    fn consider(&mut self, in_first: u64, in_second: u64, event: impl FnOnce() -> OutputEvent) {
        let mut winner = None;
        for favours_first in [true, false] {
            let counts = if favours_first {
                EventCounts {
                    favoured: in_first,
                    favoured_trials: self.n_first,
                    other: in_second,
                    other_trials: self.n_second,
                }
            } else {
                EventCounts {
                    favoured: in_second,
                    favoured_trials: self.n_second,
                    other: in_first,
                    other_trials: self.n_first,
                }
            };
            // The bound never exceeds the plain estimate: skip hopeless events cheaply.
            if counts.favoured == 0 || counts.epsilon_estimate() <= self.found.selection_score {
                continue;
            }
            let score = counts.epsilon_lower_bound(self.delta, SELECTION_FAILURE);
            if score > self.found.selection_score {
                self.found.selection_score = score;
                self.found.favours_first = favours_first;
                winner = Some(());
            }
        }
        if winner.is_some() {
            self.found.event = event();
        }
    }
}

/// Up to `count` distinct values at evenly spaced ranks of `sorted`.
fn quantile_cuts(sorted: &[f64], count: usize) -> Vec<f64> {
    let mut cuts: Vec<f64> = (1..=count)
        .map(|k| sorted[(k * (sorted.len() - 1)) / count])
        .collect();
    cuts.dedup();
    cuts
}

fn pooled_sorted(first: &[f64], second: &[f64], map: impl Fn(f64) -> f64) -> Vec<f64> {
    let mut pooled: Vec<f64> = first.iter().chain(second).map(|&y| map(y)).collect();
    pooled.sort_unstable_by(f64::total_cmp);
    pooled
}

/// `counts[b]` = outputs with `cuts[b−1] < y ≤ cuts[b]` (the last bucket is `y > all cuts`).
fn bucket_counts(samples: &[f64], cuts: &[f64]) -> Vec<u64> {
    let mut counts = vec![0u64; cuts.len() + 1];
    for &y in samples {
        counts[cuts.partition_point(|&c| c < y)] += 1;
    }
    counts
}

fn prefix_sums(counts: &[u64]) -> Vec<u64> {
    let mut sums = Vec::with_capacity(counts.len() + 1);
    sums.push(0);
    for &c in counts {
        sums.push(sums.last().copied().unwrap_or(0) + c);
    }
    sums
}

fn search_intervals(first: &[f64], second: &[f64], best: &mut Best) {
    let pooled = pooled_sorted(first, second, |y| y);
    if pooled.is_empty() {
        return;
    }
    let cuts = quantile_cuts(&pooled, INTERVAL_CUTS);
    let sums_first = prefix_sums(&bucket_counts(first, &cuts));
    let sums_second = prefix_sums(&bucket_counts(second, &cuts));
    let buckets = cuts.len() + 1;
    for low in 0..buckets {
        for high in low..buckets {
            let in_first = sums_first[high + 1] - sums_first[low];
            let in_second = sums_second[high + 1] - sums_second[low];
            best.consider(in_first, in_second, || OutputEvent::Interval {
                above: (low > 0).then(|| cuts[low - 1]),
                at_most: (high < cuts.len()).then(|| cuts[high]),
            });
        }
    }
}

fn search_likelihood_ratio_sets(first: &[f64], second: &[f64], best: &mut Best) {
    let pooled = pooled_sorted(first, second, |y| y);
    let mut values = pooled.clone();
    values.dedup();
    if values.len() > MAX_DISTINCT_VALUES {
        return;
    }
    let index_of = |y: f64| values.partition_point(|&v| v < y);
    let mut counts = vec![(0u64, 0u64); values.len()];
    for &y in first {
        counts[index_of(y)].0 += 1;
    }
    for &y in second {
        counts[index_of(y)].1 += 1;
    }
    // Order values by a cautious log-ratio: the difference of the confidence
    // bounds' logarithms, so that a value seen a handful of times under one
    // input and never under the other does not lead the order.
    let (n_first, n_second) = (first.len() as u64, second.len() as u64);
    let cautious_log_ratio = |(a, b): (u64, u64)| {
        let (a_low, a_high) = binomial_bounds(a, n_first, SELECTION_FAILURE);
        let (b_low, b_high) = binomial_bounds(b, n_second, SELECTION_FAILURE);
        let favours_first = (a_low / b_high).ln();
        let favours_second = (b_low / a_high).ln();
        if favours_first >= favours_second {
            favours_first
        } else {
            -favours_second
        }
    };
    let keys: Vec<f64> = counts.iter().map(|&c| cautious_log_ratio(c)).collect();
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| keys[j].total_cmp(&keys[i]));
    // Prefixes favour the first input; suffixes (read backwards) the second.
    for reversed in [false, true] {
        let sequence: Vec<usize> = if reversed {
            order.iter().rev().copied().collect()
        } else {
            order.clone()
        };
        let (mut in_first, mut in_second) = (0u64, 0u64);
        for (taken, &index) in sequence.iter().enumerate() {
            in_first += counts[index].0;
            in_second += counts[index].1;
            best.consider(in_first, in_second, || {
                let mut chosen: Vec<f64> = sequence[..=taken].iter().map(|&i| values[i]).collect();
                chosen.sort_unstable_by(f64::total_cmp);
                OutputEvent::Values(chosen)
            });
        }
    }
}

fn search_grid_residues(first: &[f64], second: &[f64], best: &mut Best) {
    let magnitudes = pooled_sorted(first, second, f64::abs);
    if magnitudes.is_empty() {
        return;
    }
    let magnitude_cuts = quantile_cuts(&magnitudes, RESIDUE_MAGNITUDE_CUTS);
    let mut exponents: Vec<i32> = first
        .iter()
        .chain(second)
        .map(|&y| finest_grid_exponent(y))
        .filter(|&e| e != i32::MAX)
        .collect();
    exponents.sort_unstable();
    exponents.dedup();
    if exponents.len() < 2 {
        return;
    }
    if exponents.len() > MAX_RESIDUE_EXPONENTS {
        let step = exponents.len().div_ceil(MAX_RESIDUE_EXPONENTS);
        exponents = exponents.iter().step_by(step).copied().collect();
    }
    // off[k][j]: outputs with |y| ≤ magnitude_cuts[k] that are off the grid
    // 2^exponents[j], i.e. whose finest grid exponent e is below exponents[j],
    // i.e. with #{listed exponents ≤ e} ≤ j. Zero is on every grid.
    let rows = magnitude_cuts.len();
    let columns = exponents.len() + 1;
    let table = |samples: &[f64]| {
        let mut cells = vec![0u64; rows * columns];
        for &y in samples {
            let row = magnitude_cuts.partition_point(|&c| c < y.abs());
            let e = finest_grid_exponent(y);
            let column = exponents.partition_point(|&listed| listed <= e);
            if row < rows {
                cells[row * columns + column] += 1;
            }
        }
        for row in 0..rows {
            for column in 0..columns {
                let left = if column > 0 {
                    cells[row * columns + column - 1]
                } else {
                    0
                };
                cells[row * columns + column] += left;
            }
        }
        for row in 1..rows {
            for column in 0..columns {
                cells[row * columns + column] += cells[(row - 1) * columns + column];
            }
        }
        cells
    };
    let off_first = table(first);
    let off_second = table(second);
    let all_first = prefix_sums(&bucket_counts_abs(first, &magnitude_cuts));
    let all_second = prefix_sums(&bucket_counts_abs(second, &magnitude_cuts));
    for (k, &cut) in magnitude_cuts.iter().enumerate() {
        for (j, &exponent) in exponents.iter().enumerate() {
            let off = (off_first[k * columns + j], off_second[k * columns + j]);
            let total = (all_first[k + 1], all_second[k + 1]);
            for on_grid in [false, true] {
                let (in_first, in_second) = if on_grid {
                    (total.0 - off.0, total.1 - off.1)
                } else {
                    off
                };
                best.consider(in_first, in_second, || OutputEvent::GridResidue {
                    max_magnitude: cut,
                    grid_exponent: exponent,
                    on_grid,
                });
            }
        }
    }
}

fn bucket_counts_abs(samples: &[f64], cuts: &[f64]) -> Vec<u64> {
    let mut counts = vec![0u64; cuts.len()];
    for &y in samples {
        let bucket = cuts.partition_point(|&c| c < y.abs());
        if bucket < cuts.len() {
            counts[bucket] += 1;
        }
    }
    counts
}
