//! How many rows one person can hold after the private table is joined
//! with a public one: the stability of a join with a fixed table.
//!
//! The argument. A public table `P` is the same in every pair of
//! neighbouring inputs. Joining the private table `T` with `P` maps each
//! row `r` of `T`, on its own, to a set of output rows `f(r)`:
//! - **inner join**: `r` paired with each row of `P` whose key matches, so
//!   `|f(r)| ≤ m`, the most rows of `P` that share one key value;
//! - **outer join that keeps every row of `T`** (`T LEFT JOIN P`): the
//!   same, or `r` alone padded with NULLs when nothing matches, so
//!   `|f(r)| ≤ max(m, 1)`;
//! - **semi- and anti-join** (`WHERE key IN (SELECT … FROM P)`, `NOT IN`):
//!   `r` itself or nothing, so `|f(r)| ≤ 1`.
//!
//! The output is the multiset union of `f(r)` over the rows of `T`, so
//! whatever one person's (at most `k`) rows do to `T` (leave, join, or be
//! replaced by another's), at most `k · max|f(r)|` output rows do the same
//! to the output, and the output rows of one input row belong to its
//! person. Every privacy map in [`super::grouped`] then holds with
//! `k · max|f(r)|` rows per person in place of `k`: that is the number
//! [`rows_after_public_join`] returns.
//!
//! A join that keeps the public table's unmatched rows (`P LEFT JOIN T`,
//! `FULL JOIN`) is not such a map (whether a row of `P` is unmatched
//! depends on every row of `T`), and a join of `T` with itself pairs two
//! people's rows: neither is covered here.

use crate::error::{Error, Result};

/// How the private table meets a public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicJoin {
    /// Each private row paired with every public row whose key matches.
    Inner,
    /// Every private row kept, paired with its matches or with NULLs.
    KeepPrivate,
    /// Each private row kept or dropped by whether a public row matches.
    Semi,
}

/// The most rows one person holds after `join` with a public table in which
/// one key value matches at most `matches` rows, if each person held at
/// most `rows_per_person` before (see the module's argument).
///
/// ```
/// use dpkit_core::sensitivity::{PublicJoin, rows_after_public_join};
/// assert_eq!(rows_after_public_join(2, 3, PublicJoin::Inner).unwrap(), 6);
/// assert_eq!(rows_after_public_join(2, 0, PublicJoin::KeepPrivate).unwrap(), 2);
/// assert_eq!(rows_after_public_join(2, 3, PublicJoin::Semi).unwrap(), 2);
/// assert!(rows_after_public_join(1 << 40, 1 << 40, PublicJoin::Inner).is_err());
/// ```
pub fn rows_after_public_join(rows_per_person: u64, matches: u64, join: PublicJoin) -> Result<u64> {
    let per_row = match join {
        PublicJoin::Inner => matches,
        PublicJoin::KeepPrivate => matches.max(1),
        PublicJoin::Semi => 1,
    };
    // An inner join that matches nothing leaves no rows: one row per
    // person still bounds that (and keeps every sensitivity defined).
    rows_per_person
        .checked_mul(per_row.max(1))
        .ok_or_else(|| Error::InvalidParameter {
            name: "rows per person",
            reason: "the join lets one person hold more rows than can be counted".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every output row of a join is counted against the person whose row
    /// made it: brute force over small public tables agrees with the bound.
    #[test]
    fn the_bound_is_the_most_rows_any_private_row_becomes() {
        // Public keys with repeats: key 1 appears 3 times, key 2 once.
        let public = [1, 1, 1, 2, 4];
        let person = [1, 2, 3];
        let matches = |key: i32| public.iter().filter(|&&p| p == key).count() as u64;
        let most = public.iter().map(|&k| matches(k)).max().unwrap();
        let inner: u64 = person.iter().map(|&k| matches(k)).sum();
        let kept: u64 = person.iter().map(|&k| matches(k).max(1)).sum();
        let semi = person.iter().filter(|&&k| matches(k) > 0).count() as u64;
        let k = person.len() as u64;
        assert!(inner <= rows_after_public_join(k, most, PublicJoin::Inner).unwrap());
        assert!(kept <= rows_after_public_join(k, most, PublicJoin::KeepPrivate).unwrap());
        assert!(semi <= rows_after_public_join(k, most, PublicJoin::Semi).unwrap());
        // A person whose every row has the most frequent key reaches it.
        assert_eq!(
            3 * matches(1),
            rows_after_public_join(3, most, PublicJoin::Inner).unwrap()
        );
    }
}
