//! Exactly uniform integers.

use rand_core::Rng;

/// A uniform integer in `0..bound`, exactly (Lemire's multiply-and-reject).
///
/// `bound` must be at least 1.
///
/// ```
/// use dpkit_core::sampling::uniform_below;
/// use dpkit_core::rng::InsecureSeededRng;
/// let mut rng = InsecureSeededRng::from_seed_for_testing(3);
/// assert!((0..1000).all(|_| uniform_below(6, &mut rng) < 6));
/// ```
#[inline]
pub fn uniform_below<R: Rng + ?Sized>(bound: u64, rng: &mut R) -> u64 {
    debug_assert!(bound >= 1);
    let mut product = u128::from(rng.next_u64()) * u128::from(bound);
    let mut low = product as u64;
    if low < bound {
        let threshold = bound.wrapping_neg() % bound;
        while low < threshold {
            product = u128::from(rng.next_u64()) * u128::from(bound);
            low = product as u64;
        }
    }
    (product >> 64) as u64
}
