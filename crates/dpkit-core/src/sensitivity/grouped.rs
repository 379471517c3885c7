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

impl GroupedSensitivity {
    /// The move of `values` summed per group, with `rows_per_person` rows each.
    pub fn of(
        values: RowValues,
        rows_per_person: u64,
        spread: Spread,
        neighbouring: Neighbouring,
    ) -> Result<Self> {
        let (lower, upper) = values.bounds();
        if !(lower.is_finite() && upper.is_finite() && lower <= upper) || rows_per_person == 0 {
            return Err(Error::InvalidParameter {
                name: "sensitivity",
                reason: "bounds must be finite and ordered, with at least one row per person"
                    .into(),
            });
        }
        let k = rows_per_person as f64;
        let magnitude = lower.abs().max(upper.abs());
        let width = upper.max(0.0) - lower.min(0.0);
        let (per_group, l1, l2, moved) = match neighbouring {
            Neighbouring::AddRemove => (k * magnitude, k * magnitude, k * magnitude, 1),
            Neighbouring::Replace => (
                k * width,
                2.0 * k * magnitude,
                (std::f64::consts::SQRT_2 * k * magnitude).max(k * width),
                2,
            ),
        };
        if values == RowValues::People {
            return Ok(Self::people(rows_per_person, spread, neighbouring));
        }
        let single = spread == Spread::Single;
        Ok(Self {
            per_group,
            // A single value moves by at most its per-group move.
            l1: if single { per_group } else { l1 },
            l2: if single { per_group } else { l2 },
            groups_moved: if single { 1 } else { moved * rows_per_person },
        })
    }
}

impl GroupedSensitivity {
    /// A count of distinct people: one person moves each of their groups by
    /// 1 (adding or removing them), or by 1 in each of up to `2k` groups
    /// (replacing them), so L1 is the number of groups moved and L2 its root.
    fn people(rows_per_person: u64, spread: Spread, neighbouring: Neighbouring) -> Self {
        let moved = match (spread, neighbouring) {
            (Spread::Single, _) => 1,
            (Spread::Groups, Neighbouring::AddRemove) => rows_per_person,
            (Spread::Groups, Neighbouring::Replace) => 2 * rows_per_person,
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
