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
//!
//! **Two private tables joined on the person.** Let `A` and `B` hold rows
//! about the same people, each row naming its person, at most `a` and `b`
//! rows of each person, and let the join's condition require the two rows'
//! persons to be equal (`A.person = B.person`, NULL matching nothing).
//! Every output row is then a row of `A` and a row of `B` of one person,
//! or (an outer join) one side's row padded with NULLs, which keeps that
//! row's person: the output is the disjoint union, over people `p`, of
//! `J(A_p, B_p)`, where `A_p` and `B_p` are `p`'s rows alone. Adding,
//! removing or replacing one person's rows in both tables changes only
//! their own `J(A_p, B_p)`, so the join is a map of the same kind as above,
//! with
//! - **inner join, or an outer join that keeps one side** (`A LEFT JOIN
//!   B`): at most `a · max(b, 1) = a · b` rows of `p` (and `b · a` the other
//!   way round);
//! - **semi- and anti-join** (`A` rows kept by whether a `B` row of theirs
//!   matches): at most `a` rows.
//!
//! [`rows_after_person_join`] returns that number. A full outer join keeps
//! the unmatched rows of both sides and is not covered. A condition
//! without the persons' equality pairs one person's rows with another's
//! and is refused by the planner, which follows each key to the table's own
//! person column rather than trusting a name.

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

/// How two private tables meet, joined on the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonJoin {
    /// Each row paired with the other side's rows of its person (inner, or
    /// outer keeping one side's rows).
    Pairs,
    /// The left side's rows, each kept or dropped by whether a right row
    /// of its person matches.
    KeepLeft,
    /// The right side's rows, likewise.
    KeepRight,
}

/// The most rows one person holds after joining, on the person, a side in
/// which each person holds at most `left` rows with one in which each holds
/// at most `right` (see the module's argument).
///
/// ```
/// use dpkit_core::sensitivity::{PersonJoin, rows_after_person_join};
/// assert_eq!(rows_after_person_join(1, 20, PersonJoin::Pairs).unwrap(), 20);
/// assert_eq!(rows_after_person_join(3, 20, PersonJoin::Pairs).unwrap(), 60);
/// assert_eq!(rows_after_person_join(3, 20, PersonJoin::KeepLeft).unwrap(), 3);
/// assert_eq!(rows_after_person_join(3, 20, PersonJoin::KeepRight).unwrap(), 20);
/// assert!(rows_after_person_join(1 << 40, 1 << 40, PersonJoin::Pairs).is_err());
/// ```
pub fn rows_after_person_join(left: u64, right: u64, join: PersonJoin) -> Result<u64> {
    let rows = match join {
        PersonJoin::Pairs => left.max(1).checked_mul(right.max(1)),
        PersonJoin::KeepLeft => Some(left),
        PersonJoin::KeepRight => Some(right),
    };
    rows.ok_or_else(|| Error::InvalidParameter {
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

    /// Brute force over small people: each person's rows on both sides
    /// joined on the person (every join kind, with and without a further
    /// condition) give each person at most the bound.
    #[test]
    fn a_join_on_the_person_gives_each_person_at_most_the_bound() {
        // (person, value) rows; person 1 holds 3 rows on the left, 2 right.
        let left = [(1, 0), (1, 1), (1, 2), (2, 5), (3, 7)];
        let right = [(1, 0), (1, 4), (2, 5), (4, 9)];
        let most = |rows: &[(i32, i32)]| {
            let count = |p: i32| rows.iter().filter(|r| r.0 == p).count() as u64;
            rows.iter().map(|r| count(r.0)).max().unwrap()
        };
        let (a, b) = (most(&left), most(&right));
        for condition in [|_: i32, _: i32| true, |l: i32, r: i32| l <= r] {
            for person in 1..=4 {
                let l: Vec<_> = left.iter().filter(|r| r.0 == person).collect();
                let r: Vec<_> = right.iter().filter(|r| r.0 == person).collect();
                let meets = |x: &(i32, i32)| r.iter().filter(|y| condition(x.1, y.1)).count();
                let inner: usize = l.iter().map(|x| meets(x)).sum();
                let kept: usize = l.iter().map(|x| meets(x).max(1)).sum();
                let semi = l.iter().filter(|x| meets(x) > 0).count();
                let pairs = rows_after_person_join(a, b, PersonJoin::Pairs).unwrap();
                assert!(inner as u64 <= pairs && kept as u64 <= pairs);
                let kept_left = rows_after_person_join(a, b, PersonJoin::KeepLeft).unwrap();
                assert!(semi as u64 <= kept_left);
            }
        }
        // Person 1 reaches the bound: 3 rows paired with 2 each.
        assert_eq!(rows_after_person_join(a, b, PersonJoin::Pairs).unwrap(), 6);
    }
}
