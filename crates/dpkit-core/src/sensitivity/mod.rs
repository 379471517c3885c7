//! How much one person can change a query's answer.

pub mod global;
pub mod sampling;

pub use global::{Neighbouring, Sensitivity};
pub use sampling::{GaussianMixture, Norm, SampledSensitivity, sample_sensitivity};
