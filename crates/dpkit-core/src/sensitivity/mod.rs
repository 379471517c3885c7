//! How much one person can change a query's answer.

pub mod global;
pub mod grouped;
pub mod joins;
pub mod sampling;

pub use global::{Neighbouring, Sensitivity};
pub use grouped::{
    Calibration, Contribution, GroupedSensitivity, LossGrowth, RowValues, Spread, calibrate,
};
pub use joins::{PersonJoin, PublicJoin, rows_after_person_join, rows_after_public_join};
pub use sampling::{GaussianMixture, Norm, SampledSensitivity, sample_sensitivity};
