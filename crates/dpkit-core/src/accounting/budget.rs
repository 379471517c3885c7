//! A privacy budget that refuses to be overspent.

use super::PrivacyLoss;
use crate::error::{Error, Result};

/// Resolution of the ledger: ε and δ are counted in whole units of 10⁻¹⁵, so
/// that decimal spends add up exactly (0.1 + 0.2 spends exactly 0.3). Each
/// spend is rounded to the nearest unit; dpkit's own mechanisms realise at
/// most ε·(1 − 10⁻⁶) of their declared ε, which absorbs that rounding.
const UNITS_PER_ONE: f64 = 1e15;

fn to_units(value: f64) -> u128 {
    (value * UNITS_PER_ONE).round() as u128
}

fn from_units(units: u128) -> f64 {
    units as f64 / UNITS_PER_ONE
}

/// A total (ε, δ) allowance, spent under sequential composition.
///
/// ```
/// use dpkit_core::accounting::{PrivacyBudget, PrivacyLoss};
/// let mut budget = PrivacyBudget::new(PrivacyLoss::pure(1.0).unwrap());
/// budget.spend(PrivacyLoss::pure(0.7).unwrap()).unwrap();
/// assert!(budget.spend(PrivacyLoss::pure(0.5).unwrap()).is_err()); // refused, nothing spent
/// assert!((budget.remaining().epsilon() - 0.3).abs() < 1e-12);
/// ```
#[derive(Debug, Clone)]
pub struct PrivacyBudget {
    total_epsilon: u128,
    total_delta: u128,
    spent_epsilon: u128,
    spent_delta: u128,
}

impl PrivacyBudget {
    /// A budget of `total`.
    pub fn new(total: PrivacyLoss) -> Self {
        Self {
            total_epsilon: to_units(total.epsilon()),
            total_delta: to_units(total.delta()),
            spent_epsilon: 0,
            spent_delta: 0,
        }
    }

    /// What has been spent so far.
    pub fn spent(&self) -> PrivacyLoss {
        PrivacyLoss::from_parts(from_units(self.spent_epsilon), from_units(self.spent_delta))
    }

    /// What can still be spent.
    pub fn remaining(&self) -> PrivacyLoss {
        PrivacyLoss::from_parts(
            from_units(self.total_epsilon - self.spent_epsilon),
            from_units(self.total_delta - self.spent_delta),
        )
    }

    /// Records `cost` if it fits; otherwise returns [`Error::BudgetExceeded`]
    /// and changes nothing.
    pub fn spend(&mut self, cost: PrivacyLoss) -> Result<()> {
        let epsilon = self.spent_epsilon + to_units(cost.epsilon());
        let delta = self.spent_delta + to_units(cost.delta());
        if epsilon > self.total_epsilon || delta > self.total_delta {
            return Err(Error::BudgetExceeded {
                requested: cost.to_string(),
                remaining: self.remaining().to_string(),
            });
        }
        self.spent_epsilon = epsilon;
        self.spent_delta = delta;
        Ok(())
    }

    /// Spends `cost`, then runs `release`; if the cost does not fit, `release`
    /// never runs, so nothing is computed from the data.
    ///
    /// ```
    /// use dpkit_core::accounting::{PrivacyBudget, PrivacyLoss};
    /// use dpkit_core::mechanism::{Laplace, RealMechanism};
    /// let mut budget = PrivacyBudget::new(PrivacyLoss::pure(1.0).unwrap());
    /// let laplace = Laplace::new(1.0, 1.0).unwrap();
    /// let noisy = budget.charge_then(laplace.privacy(), || laplace.privatize(42.0)).unwrap();
    /// assert!(noisy.is_ok());
    /// assert!(budget.charge_then(laplace.privacy(), || laplace.privatize(42.0)).is_err());
    /// ```
    pub fn charge_then<T>(&mut self, cost: PrivacyLoss, release: impl FnOnce() -> T) -> Result<T> {
        self.spend(cost)?;
        Ok(release())
    }
}
