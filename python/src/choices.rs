//! Randomized response and the exponential mechanism for Python: the
//! mechanisms that choose among values rather than add noise.

use dpkit_core::mechanism::{
    BinaryRandomizedResponse, ExponentialMechanism, KaryRandomizedResponse,
};
use pyo3::prelude::*;

use crate::generator::Generator;
use crate::value_error;

/// Binary randomized response: each person reports their bit truthfully
/// with probability `coin_probability`'s rule (local DP).
#[pyclass(module = "dpkit._dpkit", name = "BinaryRandomizedResponse", frozen)]
pub(crate) struct PyBinaryRandomizedResponse {
    mechanism: BinaryRandomizedResponse,
    rng: Generator,
}

#[pymethods]
impl PyBinaryRandomizedResponse {
    #[new]
    #[pyo3(signature = (coin_probability, seed_for_testing = None))]
    fn new(coin_probability: f64, seed_for_testing: Option<u64>) -> PyResult<Self> {
        Ok(Self {
            mechanism: BinaryRandomizedResponse::new(coin_probability).map_err(value_error)?,
            rng: Generator::new(seed_for_testing),
        })
    }

    /// One randomised report of `truth`.
    fn release(&self, truth: bool) -> PyResult<bool> {
        self.rng
            .with(|rng| self.mechanism.privatize_with_rng(truth, rng))
    }

    /// The probability of reporting true when the truth is `truth`.
    fn probability_of_true_report(&self, truth: bool) -> f64 {
        self.mechanism.probability_of_true_report(truth)
    }

    /// (ε, δ).
    #[getter]
    fn privacy(&self) -> (f64, f64) {
        let loss = self.mechanism.privacy();
        (loss.epsilon(), loss.delta())
    }
}

/// k-ary randomized response over categories 0..k.
#[pyclass(module = "dpkit._dpkit", name = "KaryRandomizedResponse", frozen)]
pub(crate) struct PyKaryRandomizedResponse {
    mechanism: KaryRandomizedResponse,
    rng: Generator,
}

#[pymethods]
impl PyKaryRandomizedResponse {
    #[new]
    #[pyo3(signature = (epsilon, categories, seed_for_testing = None))]
    fn new(epsilon: f64, categories: u64, seed_for_testing: Option<u64>) -> PyResult<Self> {
        Ok(Self {
            mechanism: KaryRandomizedResponse::new(epsilon, categories).map_err(value_error)?,
            rng: Generator::new(seed_for_testing),
        })
    }

    /// One randomised report of category `truth`.
    fn release(&self, truth: u64) -> PyResult<u64> {
        self.rng
            .with(|rng| self.mechanism.privatize_with_rng(truth, rng))?
            .map_err(value_error)
    }

    /// The probability of reporting the true category.
    fn probability_of_truth(&self) -> f64 {
        self.mechanism.probability_of_truth()
    }

    /// Unbiased estimates of the true frequencies from the report counts.
    fn estimate_frequencies(&self, report_counts: Vec<u64>) -> PyResult<Vec<f64>> {
        self.mechanism
            .estimate_frequencies(&report_counts)
            .map_err(value_error)
    }

    /// (ε, δ).
    #[getter]
    fn privacy(&self) -> (f64, f64) {
        let loss = self.mechanism.privacy();
        (loss.epsilon(), loss.delta())
    }
}

/// The exponential mechanism: picks a candidate with probability growing
/// as e^(ε·utility / 2Δ).
#[pyclass(module = "dpkit._dpkit", name = "ExponentialMechanism", frozen)]
pub(crate) struct PyExponentialMechanism {
    mechanism: ExponentialMechanism,
    rng: Generator,
}

#[pymethods]
impl PyExponentialMechanism {
    #[new]
    #[pyo3(signature = (epsilon, utility_sensitivity, seed_for_testing = None))]
    fn new(
        epsilon: f64,
        utility_sensitivity: f64,
        seed_for_testing: Option<u64>,
    ) -> PyResult<Self> {
        Ok(Self {
            mechanism: ExponentialMechanism::new(epsilon, utility_sensitivity)
                .map_err(value_error)?,
            rng: Generator::new(seed_for_testing),
        })
    }

    /// The index of the chosen candidate.
    fn select(&self, utilities: Vec<f64>) -> PyResult<usize> {
        self.rng
            .with(|rng| self.mechanism.select_with_rng(&utilities, rng))?
            .map_err(value_error)
    }

    /// Each candidate's probability of being chosen.
    fn selection_probabilities(&self, utilities: Vec<f64>) -> PyResult<Vec<f64>> {
        self.mechanism
            .selection_probabilities(&utilities)
            .map_err(value_error)
    }

    /// (ε, δ).
    #[getter]
    fn privacy(&self) -> (f64, f64) {
        let loss = self.mechanism.privacy();
        (loss.epsilon(), loss.delta())
    }
}
