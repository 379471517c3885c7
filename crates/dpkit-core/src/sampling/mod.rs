//! Exact discrete samplers that every mechanism builds on.
//!
//! Nothing in here turns a floating-point number into noise directly: every
//! sampler consumes whole random words and compares them against integers,
//! so the distribution it realises is a known dyadic-rational distribution
//! whose distance from the ideal one is computed, not guessed (see
//! [`geometric::GeometricSampler::log_ratio_bound`]).

pub(crate) mod alias_table;
pub mod bernoulli;
pub mod discrete_gaussian;
pub mod geometric;
pub mod two_sided_geometric;
pub mod uniform;

pub use bernoulli::ExactBernoulli;
pub use discrete_gaussian::DiscreteGaussianSampler;
pub use geometric::GeometricSampler;
pub use two_sided_geometric::TwoSidedGeometricSampler;
pub use uniform::uniform_below;
