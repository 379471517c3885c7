//! The privacy parameters ε and (ε, δ).

use std::fmt;

use crate::error::{Error, Result};

/// A privacy guarantee: ε-DP when `delta == 0`, (ε, δ)-DP otherwise.
///
/// ```
/// use dpkit_core::accounting::PrivacyLoss;
/// let pure = PrivacyLoss::pure(1.0).unwrap();
/// assert_eq!(pure.delta(), 0.0);
/// assert!(PrivacyLoss::pure(0.0).is_err());
/// assert!(PrivacyLoss::approximate(1.0, 1.5).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivacyLoss {
    epsilon: f64,
    delta: f64,
}

impl PrivacyLoss {
    /// ε-DP, `ε` finite and > 0.
    pub fn pure(epsilon: f64) -> Result<Self> {
        Self::approximate(epsilon, 0.0)
    }

    /// (ε, δ)-DP, `ε` finite and > 0, `δ ∈ [0, 1)`.
    pub fn approximate(epsilon: f64, delta: f64) -> Result<Self> {
        crate::error::require_positive("epsilon", epsilon)?;
        if !(0.0..1.0).contains(&delta) {
            return Err(Error::InvalidParameter {
                name: "delta",
                reason: format!("must lie in [0, 1), got {delta}"),
            });
        }
        Ok(Self { epsilon, delta })
    }

    /// Builds a loss that composition produced; ε may be 0 (nothing spent).
    pub(crate) fn from_parts(epsilon: f64, delta: f64) -> Self {
        Self {
            epsilon,
            delta: delta.min(1.0),
        }
    }

    /// No privacy spent.
    pub fn zero() -> Self {
        Self {
            epsilon: 0.0,
            delta: 0.0,
        }
    }

    /// ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ.
    pub fn delta(&self) -> f64 {
        self.delta
    }
}

impl fmt::Display for PrivacyLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.delta == 0.0 {
            write!(f, "ε = {}", self.epsilon)
        } else {
            write!(f, "(ε = {}, δ = {:e})", self.epsilon, self.delta)
        }
    }
}
