//! The privacy of one measured vector: how far one person can move a
//! count or a clamped sum released once per group, and what each noise
//! family must be calibrated to for that move to cost at most ε.
//!
//! A query measures, per group, a count or a sum of values clamped to
//! `[L, U]`; each person has at most `k` rows. The arguments:
//!
//! - **Add or remove one person** (up to `k` rows leave or join): every
//!   group moves by at most `k·M` with `M = max(|L|, |U|)` (1 for a
//!   count), the moves add up to at most `k·M` (L1), and their L2 norm is
//!   largest when all rows sit in one group: `k·M`. At most `k` groups move.
//! - **Replace one person** (up to `k` rows out, up to `k` rows in): one
//!   group moves by at most `k·(max(U, 0) − min(L, 0))`; the L1 norm is at
//!   most `2·k·M` (the rows out and the rows in); the L2 norm at most
//!   `max(√2·k·M, k·(max(U,0) − min(L,0)))`; at most `2k` groups move.
//!
//! The noise families differ in how their loss grows with the move:
//! - **Linear** (Laplace, two-sided geometric): the loss of a move `d` in
//!   one group is `ε·|d|/Δ`, so over groups it is `ε·L1/Δ`: calibrate
//!   every group to `Δ = L1` (parallel composition over groups is exact).
//! - **Gaussian**: calibrate to `Δ = L2` over the whole vector.
//! - **Scalar** (staircase, discrete staircase): a move of one grid step
//!   can already cost the full ε, whatever Δ. One value is fine at
//!   `Δ = per-group move`; over groups each moved group costs up to its ε,
//!   so each gets `ε / (groups one person moves)`.
//!
//! Real-valued noise rounds each group's value to its grid (`g ≤ Δ/2^b`,
//! `b` the mechanism's grid resolution), which can add one grid step per
//! moved group to a linear or Gaussian move; Δ is raised to
//! `Δ/(1 − m·2^−b)` for `m` moved groups, which covers it (the grid of the
//! raised Δ is at most `Δ'·2^−b`, so `m` steps are at most `Δ' − Δ`).

use crate::error::{Error, Result};

use super::global::Neighbouring;

/// What one row adds to a measured quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowValues {
    /// A count: each row adds 1.
    Count,
    /// A count of distinct people: each person adds 1 to each group they
    /// have a row in, however many rows.
    People,
    /// A sum of values within `[lower, upper]`.
    Bounded {
        /// Smallest value.
        lower: f64,
        /// Largest value.
        upper: f64,
        /// Whether every value is a whole number (integer noise may be used).
        integer: bool,
    },
}

impl RowValues {
    fn bounds(self) -> (f64, f64) {
        match self {
            Self::Count | Self::People => (0.0, 1.0),
            Self::Bounded { lower, upper, .. } => (lower, upper),
        }
    }

    /// Whether every row's value is a whole number.
    pub fn is_integer(self) -> bool {
        match self {
            Self::Count | Self::People => true,
            Self::Bounded { integer, .. } => integer,
        }
    }
}

/// Whether a measurement is released once or once per group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// One value (no GROUP BY).
    Single,
    /// One value per group; a person's rows can fall in different groups.
    Groups,
}

/// How far one person can move a measured vector.
///
/// ```
/// use dpkit_core::sensitivity::{GroupedSensitivity, Neighbouring, RowValues, Spread};
/// let s = GroupedSensitivity::of(RowValues::Count, 2, Spread::Groups, Neighbouring::AddRemove).unwrap();
/// assert_eq!((s.per_group, s.l1, s.l2, s.groups_moved), (2.0, 2.0, 2.0, 2));
/// let r = GroupedSensitivity::of(RowValues::Count, 1, Spread::Groups, Neighbouring::Replace).unwrap();
/// assert_eq!((r.per_group, r.l1, r.groups_moved), (1.0, 2.0, 2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupedSensitivity {
    /// The largest move of one group's value.
    pub per_group: f64,
    /// The largest L1 norm of the move over all groups.
    pub l1: f64,
    /// The largest L2 norm of the move over all groups.
    pub l2: f64,
    /// The most groups one person can move.
    pub groups_moved: u64,
}

/// How much one person may contribute: at most `rows` rows in all, in at
/// most `groups` groups (L0), with at most `rows_per_group` rows in any one
/// (L∞). The planner keeps these by truncating each person's rows before
/// the aggregate; [`Contribution::rows`] is the plain cap, with no bound
/// per group.
///
/// ```
/// use dpkit_core::sensitivity::Contribution;
/// let capped = Contribution::rows(10);
/// assert_eq!((capped.groups, capped.rows_per_group), (10, 10));
/// let bounded = Contribution::bounded(10, 3, 2).unwrap();
/// assert_eq!((bounded.rows, bounded.groups, bounded.rows_per_group), (10, 3, 2));
/// // A bound past the cap is the cap.
/// assert_eq!(Contribution::bounded(4, 9, 9).unwrap(), Contribution::rows(4));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contribution {
    /// Rows one person holds in all.
    pub rows: u64,
    /// Groups one person's rows may fall in.
    pub groups: u64,
    /// Rows one person holds in any one group.
    pub rows_per_group: u64,
}

impl Contribution {
    /// At most `rows` rows, however they fall in groups.
    pub fn rows(rows: u64) -> Self {
        Self {
            rows,
            groups: rows,
            rows_per_group: rows,
        }
    }

    /// At most `rows` rows, in at most `groups` groups, at most
    /// `rows_per_group` in each (bounds past `rows` are `rows`).
    pub fn bounded(rows: u64, groups: u64, rows_per_group: u64) -> Result<Self> {
        if rows == 0 || groups == 0 || rows_per_group == 0 {
            return Err(Error::InvalidParameter {
                name: "contribution",
                reason: "each person needs at least one row, group and row per group".into(),
            });
        }
        Ok(Self {
            rows,
            groups: groups.min(rows),
            rows_per_group: rows_per_group.min(rows),
        })
    }

    /// The same contribution where only `released` groups are released,
    /// for keys that are a public set fixed before any row is read (every
    /// combination of public domains): groups outside the set are never
    /// released, so one person moves at most `released` released groups,
    /// each by at most `rows_per_group` rows and by at most `rows` in all.
    /// The rows a person holds outside the set move nothing released, so
    /// every bound of [`GroupedSensitivity::of_contribution`] holds with
    /// `groups` lowered to `released` (at least 1, which holds when none is
    /// released too: then nothing moves).
    ///
    /// ```
    /// use dpkit_core::sensitivity::Contribution;
    /// // 12 visits per person, counted by 3 public department kinds.
    /// let released = Contribution::rows(12).within_released(3);
    /// assert_eq!((released.rows, released.groups, released.rows_per_group), (12, 3, 12));
    /// ```
    pub fn within_released(self, released: u64) -> Self {
        Self {
            groups: self.groups.min(released.max(1)),
            ..self
        }
    }

    /// The largest sum of squared rows per group: `q` groups full at
    /// `rows_per_group` and one with what is left, `q` as many as the rows
    /// and the groups allow (the move's L2 norm, over the magnitude).
    fn most_squared(self) -> f64 {
        let (k, g, r) = (self.rows, self.groups, self.rows_per_group);
        let full = g.min(k / r);
        let rest = if full < g { (k - full * r).min(r) } else { 0 };
        (full as f64) * (r as f64).powi(2) + (rest as f64).powi(2)
    }
}

impl GroupedSensitivity {
    /// The move of `values` summed per group, with `rows_per_person` rows each.
    pub fn of(
        values: RowValues,
        rows_per_person: u64,
        spread: Spread,
        neighbouring: Neighbouring,
    ) -> Result<Self> {
        Self::of_contribution(
            values,
            Contribution::rows(rows_per_person),
            spread,
            neighbouring,
        )
    }

    /// The move of `values` summed per group, under `contribution`.
    ///
    /// The argument, with `k` rows, `g` groups and `r` rows per group, and
    /// `M = max(|L|, |U|)`, `W = max(U, 0) − min(L, 0)`: adding or removing
    /// the person moves each of at most `g` groups by at most `r·M`, in all
    /// by at most `min(k, g·r)·M` (L1), and the L2 norm is largest with
    /// groups as full as `r` allows: `M·√(q·r² + s²)` for `q = min(g, ⌊k/r⌋)`
    /// full groups and the rest `s` in one more. Replacing them moves a
    /// group by `r·W`, L1 by twice the add's, over at most `2g` groups, and
    /// L2 by at most `min(W·√(2·S), max(√2·k·M, k·W))` with `S` the
    /// fullest placement's sum of squares: in a group both people use, the
    /// move is at most `max(c, d)·W` for their `c` and `d` rows there, and
    /// `Σ max(c, d)² ≤ Σ c² + Σ d² ≤ 2S`; the second bound is the plain
    /// cap's, which holds for any placement of `k` rows. (A red-team helper
    /// found `max(√2·L2_add, r·W)` too small when both use the same groups
    /// with values of opposite signs.) With `g = r = k` these are the plain
    /// cap's `k·M`, `k·M`, `k·M` (and `k·W`, `2k·M`, `max(√2·k·M, k·W)`).
    ///
    /// ```
    /// use dpkit_core::sensitivity::{Contribution, GroupedSensitivity, Neighbouring, RowValues, Spread};
    /// // 20 visits per person, in at most 3 shops, at most 1 counted per shop.
    /// let c = Contribution::bounded(20, 3, 1).unwrap();
    /// let s = GroupedSensitivity::of_contribution(RowValues::Count, c, Spread::Groups, Neighbouring::AddRemove).unwrap();
    /// assert_eq!((s.per_group, s.l1, s.groups_moved), (1.0, 3.0, 3));
    /// assert_eq!(s.l2, 3f64.sqrt());
    /// ```
    pub fn of_contribution(
        values: RowValues,
        contribution: Contribution,
        spread: Spread,
        neighbouring: Neighbouring,
    ) -> Result<Self> {
        let (lower, upper) = values.bounds();
        let valid = Contribution::bounded(
            contribution.rows,
            contribution.groups,
            contribution.rows_per_group,
        );
        let (Ok(contribution), true) = (
            valid,
            lower.is_finite() && upper.is_finite() && lower <= upper,
        ) else {
            return Err(Error::InvalidParameter {
                name: "sensitivity",
                reason: "bounds must be finite and ordered, with at least one row per person"
                    .into(),
            });
        };
        if values == RowValues::People {
            return Ok(Self::people(contribution.groups, spread, neighbouring));
        }
        let (k, g, r) = (
            contribution.rows as f64,
            contribution.groups,
            contribution.rows_per_group as f64,
        );
        let magnitude = lower.abs().max(upper.abs());
        let width = upper.max(0.0) - lower.min(0.0);
        let l1_add = k.min(g as f64 * r) * magnitude;
        let l2_add = contribution.most_squared().sqrt() * magnitude;
        let (per_group, l1, l2, moved) = match neighbouring {
            Neighbouring::AddRemove => (r * magnitude, l1_add, l2_add, g),
            Neighbouring::Replace => (
                r * width,
                2.0 * l1_add,
                replaced_l2(contribution, magnitude, width),
                2 * g,
            ),
        };
        let single = spread == Spread::Single;
        Ok(Self {
            per_group,
            // A single value moves by at most its per-group move.
            l1: if single { per_group } else { l1 },
            l2: if single { per_group } else { l2 },
            groups_moved: if single { 1 } else { moved },
        })
    }
}

/// The L2 norm of replacing one person (see [`GroupedSensitivity::of_contribution`]).
fn replaced_l2(contribution: Contribution, magnitude: f64, width: f64) -> f64 {
    let k = contribution.rows as f64;
    let plain = (std::f64::consts::SQRT_2 * k * magnitude).max(k * width);
    (width * (2.0 * contribution.most_squared()).sqrt()).min(plain)
}

impl GroupedSensitivity {
    /// A count of distinct people: one person moves each of their (at most
    /// `groups`) groups by 1 (adding or removing them), or by 1 in each of
    /// up to `2·groups` (replacing them), so L1 is the number of groups
    /// moved and L2 its root.
    fn people(groups: u64, spread: Spread, neighbouring: Neighbouring) -> Self {
        let moved = match (spread, neighbouring) {
            (Spread::Single, _) => 1,
            (Spread::Groups, Neighbouring::AddRemove) => groups,
            (Spread::Groups, Neighbouring::Replace) => 2 * groups,
        };
        Self {
            per_group: 1.0,
            l1: moved as f64,
            l2: (moved as f64).sqrt(),
            groups_moved: moved,
        }
    }
}

/// How a noise's privacy loss grows with the move of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossGrowth {
    /// Linearly in the L1 norm (Laplace, two-sided geometric).
    Linear,
    /// As the Gaussian's, in the L2 norm.
    Gaussian,
    /// Only a scalar map: the full ε for any move up to Δ (staircases).
    Scalar,
}

/// What each group's noise is built with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// ε of each group's noise.
    pub epsilon: f64,
    /// Δ of each group's noise.
    pub sensitivity: f64,
    /// Why this costs at most the measurement's ε, in one line.
    pub argument: &'static str,
}

/// The per-group noise parameters under which releasing every group costs
/// at most `epsilon`, for noise whose loss grows as `growth` and which
/// rounds to a grid of `grid_bits` steps per Δ (`None` for integer noise
/// on integer values, which does not round).
///
/// ```
/// use dpkit_core::sensitivity::{calibrate, GroupedSensitivity, LossGrowth, Neighbouring, RowValues, Spread};
/// let moved = GroupedSensitivity::of(RowValues::Count, 2, Spread::Groups, Neighbouring::AddRemove).unwrap();
/// // A staircase cannot be charged once per group: two groups move, so each gets ε/2.
/// let c = calibrate(LossGrowth::Scalar, 1.0, &moved, Some(20)).unwrap();
/// assert_eq!((c.epsilon, c.sensitivity), (0.5, 2.0));
/// let linear = calibrate(LossGrowth::Linear, 1.0, &moved, None).unwrap();
/// assert_eq!((linear.epsilon, linear.sensitivity), (1.0, 2.0));
/// ```
pub fn calibrate(
    growth: LossGrowth,
    epsilon: f64,
    moved: &GroupedSensitivity,
    grid_bits: Option<i32>,
) -> Result<Calibration> {
    let groups = moved.groups_moved.max(1);
    let (epsilon, base, argument) = match growth {
        LossGrowth::Linear => (
            epsilon,
            moved.l1,
            "linear loss: ε·L1/Δ over all groups, with Δ = L1",
        ),
        LossGrowth::Gaussian => (
            epsilon,
            moved.l2,
            "Gaussian loss in the L2 norm of the move over all groups, with Δ = L2",
        ),
        LossGrowth::Scalar if groups == 1 => (
            epsilon,
            moved.per_group,
            "one value: the full ε for any move up to Δ",
        ),
        LossGrowth::Scalar => (
            epsilon / groups as f64,
            moved.per_group,
            "a scalar map only: ε divided over the groups one person can move",
        ),
    };
    let sensitivity = match (growth, grid_bits) {
        (LossGrowth::Scalar, _) | (_, None) => base,
        (_, Some(_)) if groups == 1 => base,
        (_, Some(bits)) => with_grid_slack(base, groups, bits)?,
    };
    Ok(Calibration {
        epsilon,
        sensitivity,
        argument,
    })
}

/// `Δ/(1 − m·2^−b)`: room for one grid step in each of `m` moved groups.
fn with_grid_slack(base: f64, groups: u64, bits: i32) -> Result<f64> {
    let fraction = groups as f64 * 2f64.powi(-bits);
    if fraction > 0.125 {
        return Err(Error::InvalidParameter {
            name: "rows per person",
            reason: format!(
                "one person can move {groups} groups, too many for this noise's grid: \
                 use fewer rows per person or integer noise"
            ),
        });
    }
    Ok(base / (1.0 - fraction))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(values: RowValues, k: u64, spread: Spread, n: Neighbouring) -> GroupedSensitivity {
        GroupedSensitivity::of(values, k, spread, n).unwrap()
    }

    #[test]
    fn replacing_a_person_moves_sums_by_the_width() {
        let values = RowValues::Bounded {
            lower: -10.0,
            upper: 10.0,
            integer: true,
        };
        let single = moved(values, 1, Spread::Single, Neighbouring::Replace);
        assert_eq!((single.per_group, single.l1), (20.0, 20.0));
        let groups = moved(values, 3, Spread::Groups, Neighbouring::Replace);
        assert_eq!(
            (groups.per_group, groups.l1, groups.groups_moved),
            (60.0, 60.0, 6)
        );
        assert_eq!(groups.l2, 60.0);
    }

    #[test]
    fn adding_a_person_moves_by_the_magnitude() {
        let values = RowValues::Bounded {
            lower: 17.0,
            upper: 90.0,
            integer: true,
        };
        let groups = moved(values, 2, Spread::Groups, Neighbouring::AddRemove);
        assert_eq!(
            (groups.per_group, groups.l1, groups.l2),
            (180.0, 180.0, 180.0)
        );
        assert_eq!(groups.groups_moved, 2);
    }

    #[test]
    fn linear_noise_over_groups_leaves_room_for_rounding() {
        let m = moved(RowValues::Count, 4, Spread::Groups, Neighbouring::AddRemove);
        let c = calibrate(LossGrowth::Linear, 1.0, &m, Some(10)).unwrap();
        assert!(c.sensitivity > 4.0 && c.sensitivity < 4.0 * 1.01);
        assert_eq!(
            calibrate(LossGrowth::Linear, 1.0, &m, None)
                .unwrap()
                .sensitivity,
            4.0
        );
        let many = moved(
            RowValues::Count,
            200,
            Spread::Groups,
            Neighbouring::AddRemove,
        );
        assert!(calibrate(LossGrowth::Linear, 1.0, &many, Some(10)).is_err());
    }

    #[test]
    fn distinct_people_move_each_group_by_one() {
        let m = moved(
            RowValues::People,
            3,
            Spread::Groups,
            Neighbouring::AddRemove,
        );
        assert_eq!((m.per_group, m.l1, m.groups_moved), (1.0, 3.0, 3));
        assert_eq!(m.l2, 3f64.sqrt());
        let one = moved(RowValues::People, 3, Spread::Single, Neighbouring::Replace);
        assert_eq!((one.per_group, one.l1), (1.0, 1.0));
    }

    #[test]
    fn a_single_staircase_keeps_its_epsilon() {
        let m = moved(RowValues::Count, 3, Spread::Single, Neighbouring::AddRemove);
        let c = calibrate(LossGrowth::Scalar, 1.0, &m, Some(20)).unwrap();
        assert_eq!((c.epsilon, c.sensitivity), (1.0, 3.0));
    }
}

#[cfg(test)]
mod contribution_tests {
    use super::*;

    /// The norms are the largest over every way one person's rows can fall
    /// in groups within the bounds: found by brute force for small cases.
    #[test]
    fn the_norms_are_the_largest_any_placement_of_rows_reaches() {
        for k in 1..=7u64 {
            for g in 1..=k {
                for r in 1..=k {
                    let c = Contribution::bounded(k, g, r).unwrap();
                    let (mut l1, mut l2) = (0u64, 0u64);
                    // Rows per group, each 0..=r, in g groups, in all ≤ k.
                    let mut counts = vec![0u64; g as usize];
                    loop {
                        if counts.iter().sum::<u64>() <= k {
                            l1 = l1.max(counts.iter().sum());
                            l2 = l2.max(counts.iter().map(|c| c * c).sum());
                        }
                        let mut i = 0;
                        while i < counts.len() && counts[i] == r {
                            counts[i] = 0;
                            i += 1;
                        }
                        if i == counts.len() {
                            break;
                        }
                        counts[i] += 1;
                    }
                    let s = GroupedSensitivity::of_contribution(
                        RowValues::Count,
                        c,
                        Spread::Groups,
                        Neighbouring::AddRemove,
                    )
                    .unwrap();
                    assert_eq!(s.l1, l1 as f64, "k {k} g {g} r {r}");
                    assert_eq!(s.l2, (l2 as f64).sqrt(), "k {k} g {g} r {r}");
                    assert_eq!(s.per_group, r as f64);
                    assert_eq!(s.groups_moved, g);
                }
            }
        }
    }

    /// Only `n` of `n + 2` groups released: the largest move of the
    /// released ones, over every placement of one person's rows within the
    /// bounds, is what `within_released(n)` gives, for counts of rows and
    /// of people.
    #[test]
    fn a_public_set_of_released_groups_bounds_the_groups_moved() {
        for k in 1..=5u64 {
            for (g, r, n) in
                (1..=k).flat_map(|g| (1..=k).flat_map(move |r| (0..=3).map(move |n| (g, r, n))))
            {
                let c = Contribution::bounded(k, g, r).unwrap().within_released(n);
                let (mut l1, mut l2, mut people) = (0u64, 0u64, 0u64);
                let groups = (n + 2) as usize;
                let mut counts = vec![0u64; groups];
                loop {
                    let used = counts.iter().filter(|&&c| c > 0).count() as u64;
                    if counts.iter().sum::<u64>() <= k && used <= g {
                        let released = &counts[..n as usize];
                        l1 = l1.max(released.iter().sum());
                        l2 = l2.max(released.iter().map(|c| c * c).sum());
                        people = people.max(released.iter().filter(|&&c| c > 0).count() as u64);
                    }
                    let mut i = 0;
                    while i < groups && counts[i] == r {
                        counts[i] = 0;
                        i += 1;
                    }
                    if i == groups {
                        break;
                    }
                    counts[i] += 1;
                }
                let of = |values| {
                    GroupedSensitivity::of_contribution(
                        values,
                        c,
                        Spread::Groups,
                        Neighbouring::AddRemove,
                    )
                    .unwrap()
                };
                let case = format!("k {k} g {g} r {r} n {n}");
                if n > 0 {
                    assert_eq!(of(RowValues::Count).l1, l1 as f64, "{case}");
                    assert_eq!(of(RowValues::Count).l2, (l2 as f64).sqrt(), "{case}");
                    assert_eq!(of(RowValues::People).l1, people as f64, "{case}");
                } else {
                    assert_eq!((l1, people), (0, 0), "{case}");
                }
            }
        }
    }

    #[test]
    fn the_plain_cap_is_a_contribution_with_no_bound_per_group() {
        for neighbouring in [Neighbouring::AddRemove, Neighbouring::Replace] {
            let values = RowValues::Bounded {
                lower: -3.0,
                upper: 10.0,
                integer: true,
            };
            let plain = GroupedSensitivity::of(values, 4, Spread::Groups, neighbouring).unwrap();
            assert_eq!(
                plain.per_group,
                4.0 * if neighbouring == Neighbouring::Replace {
                    13.0
                } else {
                    10.0
                }
            );
            assert_eq!(
                plain.groups_moved,
                if neighbouring == Neighbouring::Replace {
                    8
                } else {
                    4
                }
            );
        }
    }
}

#[cfg(test)]
mod replace_tests {
    use super::*;

    /// Every placement of up to `k` rows in at most `g` of `groups` groups,
    /// at most `r` in each.
    fn placements(k: u64, g: u64, r: u64, groups: usize) -> Vec<Vec<u64>> {
        let mut all = Vec::new();
        let mut counts = vec![0u64; groups];
        loop {
            let used = counts.iter().filter(|&&c| c > 0).count() as u64;
            if counts.iter().sum::<u64>() <= k && used <= g {
                all.push(counts.clone());
            }
            let mut i = 0;
            while i < groups && counts[i] == r {
                counts[i] = 0;
                i += 1;
            }
            if i == groups {
                return all;
            }
            counts[i] += 1;
        }
    }

    /// Replacing one person (rows `c` out, rows `d` in, values anywhere in
    /// the bounds) never moves the vector further in L2 than calibrated:
    /// by brute force over placements, for bounds of either sign.
    #[test]
    fn the_replace_l2_bound_covers_every_pair_of_placements() {
        for (lower, upper) in [(-100.0, 100.0), (-30.0, 100.0), (0.0, 100.0), (20.0, 100.0)] {
            let values = RowValues::Bounded {
                lower,
                upper,
                integer: true,
            };
            let m = f64::max(lower.abs(), upper.abs());
            for k in 1..=4u64 {
                for g in 1..=k {
                    for r in 1..=k {
                        let groups = (2 * g as usize).min(4);
                        let all = placements(k, g, r, groups);
                        let mut most: f64 = 0.0;
                        for c in &all {
                            for d in &all {
                                let mut squares = 0.0;
                                for (&ci, &di) in c.iter().zip(d) {
                                    let (ci, di) = (ci as f64, di as f64);
                                    let moved = match (ci > 0.0, di > 0.0) {
                                        (true, true) => {
                                            (di * upper - ci * lower).max(ci * upper - di * lower)
                                        }
                                        _ => (ci + di) * m,
                                    };
                                    squares += moved * moved;
                                }
                                most = most.max(squares.sqrt());
                            }
                        }
                        let c = Contribution::bounded(k, g, r).unwrap();
                        let s = GroupedSensitivity::of_contribution(
                            values,
                            c,
                            Spread::Groups,
                            Neighbouring::Replace,
                        )
                        .unwrap();
                        assert!(
                            most <= s.l2 * (1.0 + 1e-12),
                            "[{lower}, {upper}] k {k} g {g} r {r}: moved {most} > {}",
                            s.l2
                        );
                    }
                }
            }
        }
    }
}
