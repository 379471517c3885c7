//! Privacy parameters as types, composition rules, and a budget that refuses
//! to be overspent.

pub mod budget;
pub mod composition;
pub mod concentrated;
pub mod filter;
pub mod privacy_loss;
pub mod split;

pub use budget::PrivacyBudget;
pub use composition::{
    advanced_composition, group_privacy, parallel_composition, sequential_composition,
};
pub use concentrated::ConcentratedLoss;
pub use filter::{Cost, Filter};
pub use privacy_loss::PrivacyLoss;
