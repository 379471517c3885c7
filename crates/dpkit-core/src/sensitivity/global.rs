//! Global sensitivity of the common queries (reference §ε-differential privacy).

use crate::error::{Error, Result};

/// What "neighbouring datasets" means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Neighbouring {
    /// One person added or removed.
    AddRemove,
    /// One person's record replaced by another.
    Replace,
}

/// A query's sensitivity in the L1 and L2 norms.
///
/// ```
/// use dpkit_core::sensitivity::{Neighbouring, Sensitivity};
/// assert_eq!(Sensitivity::count().l1, 1.0);
/// let salaries = Sensitivity::bounded_sum(0.0, 200_000.0, Neighbouring::AddRemove).unwrap();
/// assert_eq!(salaries.l1, 200_000.0);
/// let cells = Sensitivity::histogram(4).unwrap();
/// assert_eq!((cells.l1, cells.l2), (4.0, 2.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sensitivity {
    /// `max ‖f(D) − f(D')‖₁`: use with Laplace, staircase, geometric.
    pub l1: f64,
    /// `max ‖f(D) − f(D')‖₂`: use with Gaussian.
    pub l2: f64,
}

impl Sensitivity {
    fn scalar(value: f64) -> Self {
        Self {
            l1: value,
            l2: value,
        }
    }

    /// A count of people: 1.
    pub fn count() -> Self {
        Self::scalar(1.0)
    }

    /// A sum of values clamped to `[lower, upper]`: `max(|L|, |U|)` when a
    /// person is added or removed, `U − L` when one is replaced.
    pub fn bounded_sum(lower: f64, upper: f64, neighbouring: Neighbouring) -> Result<Self> {
        require_bounds(lower, upper)?;
        Ok(Self::scalar(match neighbouring {
            Neighbouring::AddRemove => lower.abs().max(upper.abs()),
            Neighbouring::Replace => upper - lower,
        }))
    }

    /// A mean of `n` values clamped to `[lower, upper]` with `n` public and
    /// fixed (replace-one neighbours): `(U − L)/n`. With unknown n, release a
    /// noisy sum and a noisy count instead.
    pub fn bounded_mean(lower: f64, upper: f64, n: u64) -> Result<Self> {
        require_bounds(lower, upper)?;
        if n == 0 {
            return Err(Error::InvalidParameter {
                name: "n",
                reason: "a mean needs at least one value".into(),
            });
        }
        Ok(Self::scalar((upper - lower) / n as f64))
    }

    /// A histogram where one person falls in up to `cells_per_person` cells
    /// (each contributing 1): L1 = k, L2 = √k.
    pub fn histogram(cells_per_person: u32) -> Result<Self> {
        if cells_per_person == 0 {
            return Err(Error::InvalidParameter {
                name: "cells per person",
                reason: "must be at least 1".into(),
            });
        }
        let k = f64::from(cells_per_person);
        Ok(Self {
            l1: k,
            l2: k.sqrt(),
        })
    }
}

fn require_bounds(lower: f64, upper: f64) -> Result<()> {
    if lower.is_finite() && upper.is_finite() && lower < upper {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name: "bounds",
            reason: format!("need finite lower < upper, got [{lower}, {upper}]"),
        })
    }
}
