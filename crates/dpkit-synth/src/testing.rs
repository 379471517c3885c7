//! What the tests of MST and AIM share: a seeded table, statistical bounds.

use dpkit_core::rng::InsecureSeededRng;
use dpkit_core::sampling::uniform_below;
use rand_core::Rng;

use crate::domain::Domain;
use crate::marginals::Table;

/// x = ln 10⁷: each side of each statistical bound below has probability
/// at most `e^(−x)` = 10⁻⁷, so [`check_standard_noise`] (two bounds, four
/// sides) fails with probability at most 4·10⁻⁷, and a test calling it
/// twice less than once in 10⁶ runs.
pub(crate) const TAIL_LOG: f64 = 16.118_095_650_958_32;

/// A table of `rows` rows over `sizes`, each column a noisy copy of the
/// one before (so that pairs differ in strength), from a seeded generator.
pub(crate) fn chain_table(sizes: &[usize], rows: usize, seed: u64) -> Table {
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let domain = Domain::new(sizes.to_vec()).unwrap();
    let mut data: Vec<Vec<u32>> = Vec::with_capacity(rows);
    for _ in 0..rows {
        let mut row = Vec::with_capacity(sizes.len());
        for (k, &n) in sizes.iter().enumerate() {
            let fresh = uniform_below(n as u64, &mut rng) as u32;
            let keep = k > 0 && !rng.next_u32().is_multiple_of(4);
            let code = if keep { row[k - 1] % n as u32 } else { fresh };
            row.push(code);
        }
        data.push(row);
    }
    Table::from_rows(domain, &data).unwrap()
}

/// Checks that `draws` (noise divided by its σ) look like n independent
/// standard Gaussians: the mean square within Laurent & Massart's bound
/// (2000: `P(|χ²ₙ − n| ≥ 2√(nx) + 2x) ≤ 2e^(−x)`) of 1, and the mean
/// within the Gaussian tail `P(|z̄| ≥ √(2x/n)) ≤ 2e^(−x)` of 0.
pub(crate) fn check_standard_noise(draws: &[f64], what: &str) {
    let n = draws.len() as f64;
    let mean = draws.iter().sum::<f64>() / n;
    let square = draws.iter().map(|z| z * z).sum::<f64>() / n;
    let bound = (2.0 * (n * TAIL_LOG).sqrt() + 2.0 * TAIL_LOG) / n;
    assert!(
        (square - 1.0).abs() < bound,
        "{what}: mean square {square} of σ² over {n} draws (bound {bound})"
    );
    assert!(
        mean.abs() < (2.0 * TAIL_LOG / n).sqrt(),
        "{what}: mean {mean} of σ"
    );
}
