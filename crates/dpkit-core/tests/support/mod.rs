pub mod naive_laplace;
pub mod privacy_check;
pub mod stats;
