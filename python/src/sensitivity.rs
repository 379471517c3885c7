//! dpkit-core's sensitivity helpers and ε splits for Python: global
//! sensitivities of the common queries, sensitivity sampling against a data
//! model, and splitting one ε over several releases.

use std::cell::RefCell;

use dpkit_core::accounting::split;
use dpkit_core::rng::{InsecureSeededRng, SecureRng};
use dpkit_core::sensitivity::{
    GaussianMixture, Neighbouring, Norm, SampledSensitivity, Sensitivity, sample_sensitivity,
};
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rand_core::Rng;

use crate::value_error;

/// A query's sensitivity in the L1 norm (for Laplace, staircase,
/// geometric) and the L2 norm (for Gaussian).
#[pyclass(module = "dpkit._dpkit", name = "Sensitivity", frozen)]
pub(crate) struct PySensitivity(Sensitivity);

#[pymethods]
impl PySensitivity {
    /// `max ‖f(D) − f(D')‖₁`.
    #[getter]
    fn l1(&self) -> f64 {
        self.0.l1
    }

    /// `max ‖f(D) − f(D')‖₂`.
    #[getter]
    fn l2(&self) -> f64 {
        self.0.l2
    }

    /// A count of people: 1.
    #[staticmethod]
    fn count() -> Self {
        Self(Sensitivity::count())
    }

    /// A sum of values clamped to [lower, upper]: max(|L|, |U|) when a
    /// person is added or removed ("add-remove"), U − L when one is
    /// replaced ("replace").
    #[staticmethod]
    #[pyo3(signature = (lower, upper, neighbouring = "add-remove"))]
    fn bounded_sum(lower: f64, upper: f64, neighbouring: &str) -> PyResult<Self> {
        let neighbouring = match neighbouring {
            "add-remove" => Neighbouring::AddRemove,
            "replace" => Neighbouring::Replace,
            _ => {
                return Err(PyValueError::new_err(
                    "neighbouring must be \"add-remove\" or \"replace\"",
                ));
            }
        };
        Sensitivity::bounded_sum(lower, upper, neighbouring)
            .map(Self)
            .map_err(value_error)
    }

    /// A mean of n values clamped to [lower, upper], n public: (U − L)/n.
    #[staticmethod]
    fn bounded_mean(lower: f64, upper: f64, n: u64) -> PyResult<Self> {
        Sensitivity::bounded_mean(lower, upper, n)
            .map(Self)
            .map_err(value_error)
    }

    /// A histogram where one person falls in up to k cells: L1 = k, L2 = √k.
    #[staticmethod]
    fn histogram(cells_per_person: u32) -> PyResult<Self> {
        Sensitivity::histogram(cells_per_person)
            .map(Self)
            .map_err(value_error)
    }

    fn __repr__(&self) -> String {
        format!("Sensitivity(l1={}, l2={})", self.0.l1, self.0.l2)
    }
}

/// A mixture of normal distributions, `[(weight, mean, sd), …]`: a model
/// of the data to draw records from when sampling sensitivity.
#[pyclass(module = "dpkit._dpkit", name = "GaussianMixture", frozen)]
pub(crate) struct PyGaussianMixture(GaussianMixture);

#[pymethods]
impl PyGaussianMixture {
    #[new]
    fn new(components: Vec<(f64, f64, f64)>) -> PyResult<Self> {
        GaussianMixture::new(&components)
            .map(Self)
            .map_err(value_error)
    }

    /// The mixture's mean.
    #[getter]
    fn mean(&self) -> f64 {
        self.0.mean()
    }
}

/// What sensitivity sampling found.
#[pyclass(module = "dpkit._dpkit", name = "SampledSensitivity", frozen, get_all)]
pub(crate) struct PySampledSensitivity {
    /// The order statistic to use as sensitivity: with probability ≥ 1 − ρ,
    /// at most a γ share of neighbouring pairs exceed it.
    sensitivity: f64,
    /// The mean sampled distance: the typical sensitivity.
    mean_distance: f64,
    /// The sampled distances, ascending.
    distances: Vec<f64>,
    /// γ.
    gamma: f64,
    /// ρ.
    rho: f64,
}

impl From<SampledSensitivity> for PySampledSensitivity {
    fn from(s: SampledSensitivity) -> Self {
        Self {
            sensitivity: s.sensitivity,
            mean_distance: s.mean_distance,
            distances: s.distances,
            gamma: s.gamma,
            rho: s.rho,
        }
    }
}

/// `query` of a numpy array of records, as floats; the first Python error
/// is kept in `failed` and the run stopped by a non-finite distance.
fn call_query(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    records: &[f64],
    failed: &RefCell<Option<PyErr>>,
) -> Vec<f64> {
    if failed.borrow().is_some() {
        return vec![f64::NAN];
    }
    let outcome = query
        .call1((PyArray1::from_slice(py, records),))
        .and_then(|answer| match answer.extract::<f64>() {
            Ok(value) => Ok(vec![value]),
            Err(_) => answer.extract::<Vec<f64>>(),
        });
    outcome.unwrap_or_else(|error| {
        *failed.borrow_mut() = Some(error);
        vec![f64::NAN]
    })
}

fn sample_with<R: Rng>(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    model: &GaussianMixture,
    sizes: (usize, usize),
    norm: Norm,
    (gamma, rho): (f64, f64),
    rng: &mut R,
) -> PyResult<PySampledSensitivity> {
    let failed = RefCell::new(None);
    let outcome = sample_sensitivity(
        |rng: &mut R| model.sample(rng),
        |records: &[f64]| call_query(py, query, records, &failed),
        sizes.0,
        norm,
        sizes.1,
        gamma,
        rho,
        rng,
    );
    if let Some(error) = failed.into_inner() {
        return Err(error);
    }
    outcome.map(Into::into).map_err(value_error)
}

/// Sensitivity sampling (Rubinstein & Aldà): draws `samples` pairs of
/// neighbouring datasets of `dataset_size` records from `model`, measures
/// how far `query` moves in `norm` ("l1" or "l2"), and returns the order
/// statistic that bounds all but a γ share of pairs with confidence 1 − ρ.
#[pyfunction]
#[pyo3(signature = (query, model, dataset_size, samples, gamma, rho, norm = "l1", seed_for_testing = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sampled_sensitivity(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    model: &PyGaussianMixture,
    dataset_size: usize,
    samples: usize,
    gamma: f64,
    rho: f64,
    norm: &str,
    seed_for_testing: Option<u64>,
) -> PyResult<PySampledSensitivity> {
    let norm = match norm {
        "l1" => Norm::L1,
        "l2" => Norm::L2,
        _ => return Err(PyValueError::new_err("norm must be \"l1\" or \"l2\"")),
    };
    let sizes = (dataset_size, samples);
    match seed_for_testing {
        Some(seed) => {
            let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
            sample_with(py, query, &model.0, sizes, norm, (gamma, rho), &mut rng)
        }
        None => {
            let mut rng = SecureRng::from_os().map_err(value_error)?;
            sample_with(py, query, &model.0, sizes, norm, (gamma, rho), &mut rng)
        }
    }
}

/// ε shared equally by `parts` releases (each share rounded down so the
/// shares never add up to more than ε).
#[pyfunction]
pub(crate) fn split_evenly(epsilon: f64, parts: usize) -> PyResult<Vec<f64>> {
    split::evenly(epsilon, parts).map_err(value_error)
}

/// ε split to make `Σ wᵢ·E|Zᵢ|` least, from each release's weighted
/// E|error| at the whole ε: shares ∝ √(wᵢeᵢ).
#[pyfunction]
pub(crate) fn split_for_accuracy(epsilon: f64, weighted_errors: Vec<f64>) -> PyResult<Vec<f64>> {
    split::for_accuracy(epsilon, &weighted_errors).map_err(value_error)
}
