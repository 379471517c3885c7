//! `dpkit._dpkit`: the additive mechanisms of dpkit-core for Python. Arrays
//! are filled in Rust with the GIL released, from the OS-seeded generator
//! (or, only under a name that says so, a seeded one for tests).

mod choices;
mod command;
mod generator;
mod query;
mod sensitivity;
mod synth;

use dpkit_core::accounting::{self, PrivacyBudget, PrivacyLoss};
use dpkit_core::mechanism::{AdditiveNoise, MechanismKind};
use dpkit_core::rng::with_thread_secure_rng;
use generator::Generator;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

pub(crate) fn value_error(error: dpkit_core::Error) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// One additive mechanism, built by dpkit-core's validated constructors.
#[pyclass(module = "dpkit._dpkit", subclass, frozen)]
struct Additive {
    noise: AdditiveNoise,
    /// Seeded only by `_seeded_for_testing`: never on a production path.
    rng: Generator,
}

impl Additive {
    fn build(kind: &str, epsilon: f64, sensitivity: f64, delta: f64) -> PyResult<AdditiveNoise> {
        let kind = MechanismKind::from_name(kind)
            .ok_or_else(|| PyValueError::new_err(format!("no additive mechanism named {kind}")))?;
        AdditiveNoise::build(kind, epsilon, delta, sensitivity).map_err(value_error)
    }

    /// Releases every value of `values` in place.
    fn fill(&self, values: &mut [f64]) -> Result<(), dpkit_core::Error> {
        match self.rng.seeded() {
            Some(mut rng) => self.noise.release_slice(values, &mut *rng),
            None => with_thread_secure_rng(|rng| self.noise.release_slice(values, rng))?,
        }
    }
}

#[pymethods]
impl Additive {
    #[new]
    #[pyo3(signature = (kind, epsilon, sensitivity, delta = 0.0))]
    fn new(kind: &str, epsilon: f64, sensitivity: f64, delta: f64) -> PyResult<Self> {
        Ok(Self {
            noise: Self::build(kind, epsilon, sensitivity, delta)?,
            rng: Generator::new(None),
        })
    }

    /// A mechanism whose noise comes from a seeded generator: for tests and
    /// experiments only, never for a release.
    #[staticmethod]
    fn _seeded_for_testing(
        kind: &str,
        epsilon: f64,
        sensitivity: f64,
        delta: f64,
        seed: u64,
    ) -> PyResult<Self> {
        Ok(Self {
            noise: Self::build(kind, epsilon, sensitivity, delta)?,
            rng: Generator::new(Some(seed)),
        })
    }

    /// `x` plus noise: a float or int for a number, a new float64 array for
    /// a numpy array (filled in Rust without the GIL).
    fn release<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(array) = x.extract::<PyReadonlyArray1<'py, f64>>() {
            let mut values = array.as_slice()?.to_vec();
            py.detach(|| self.fill(&mut values)).map_err(value_error)?;
            return Ok(PyArray1::from_vec(py, values).into_any());
        }
        if x.is_instance_of::<pyo3::types::PyBool>() {
            return Err(PyTypeError::new_err(
                "release takes a number or a float64 array, not a bool",
            ));
        }
        let integer = self.noise.is_integer();
        let value: f64 = x
            .extract()
            .map_err(|_| PyTypeError::new_err("release takes a number or a 1-D float64 array"))?;
        let mut one = [value];
        self.fill(&mut one).map_err(value_error)?;
        if integer {
            Ok((one[0] as i64).into_pyobject(py)?.into_any())
        } else {
            Ok(one[0].into_pyobject(py)?.into_any())
        }
    }

    /// E|noise|, in closed form.
    fn expected_abs_error(&self) -> f64 {
        self.noise.accuracy().expected_absolute_error()
    }

    /// The noise's variance, in closed form.
    fn variance(&self) -> f64 {
        self.noise.accuracy().variance()
    }

    /// The half-width h with P(|noise| ≤ h) ≥ `confidence`.
    fn interval(&self, confidence: f64) -> PyResult<f64> {
        if !(confidence > 0.0 && confidence < 1.0) {
            return Err(PyValueError::new_err(format!(
                "confidence must lie in (0, 1), got {confidence}"
            )));
        }
        self.noise
            .accuracy()
            .confidence_half_width(1.0 - confidence)
            .map_err(value_error)
    }

    /// The privacy one release provides: (ε, δ).
    #[getter]
    fn privacy(&self) -> (f64, f64) {
        let loss = self.noise.privacy();
        (loss.epsilon(), loss.delta())
    }

    /// The mechanism's catalogue name.
    #[getter]
    fn kind(&self) -> &'static str {
        self.noise.kind().name()
    }
}

fn loss(epsilon: f64, delta: f64) -> PyResult<PrivacyLoss> {
    PrivacyLoss::approximate(epsilon, delta).map_err(value_error)
}

fn pair(loss: PrivacyLoss) -> (f64, f64) {
    (loss.epsilon(), loss.delta())
}

/// A total budget that refuses to be overspent (dpkit-core's
/// `PrivacyBudget`: sums are exact in integer units).
#[pyclass(module = "dpkit._dpkit")]
struct Budget {
    budget: PrivacyBudget,
}

#[pymethods]
impl Budget {
    #[new]
    #[pyo3(signature = (epsilon, delta = 0.0))]
    fn new(epsilon: f64, delta: f64) -> PyResult<Self> {
        Ok(Self {
            budget: PrivacyBudget::new(loss(epsilon, delta)?),
        })
    }

    /// Records a cost of (ε, δ) if it fits; raises `ValueError` and changes
    /// nothing if it does not.
    #[pyo3(signature = (epsilon, delta = 0.0))]
    fn spend(&mut self, epsilon: f64, delta: f64) -> PyResult<()> {
        self.budget
            .spend(loss(epsilon, delta)?)
            .map_err(value_error)
    }

    /// (ε, δ) spent.
    #[getter]
    fn spent(&self) -> (f64, f64) {
        pair(self.budget.spent())
    }

    /// (ε, δ) left.
    #[getter]
    fn remaining(&self) -> (f64, f64) {
        pair(self.budget.remaining())
    }
}

fn losses(costs: Vec<(f64, f64)>) -> PyResult<Vec<PrivacyLoss>> {
    costs.into_iter().map(|(e, d)| loss(e, d)).collect()
}

/// The cost of running every mechanism of `costs` on the same data.
#[pyfunction]
fn sequential_composition(costs: Vec<(f64, f64)>) -> PyResult<(f64, f64)> {
    Ok(pair(accounting::sequential_composition(&losses(costs)?)))
}

/// The cost of running each mechanism of `costs` on disjoint data.
#[pyfunction]
fn parallel_composition(costs: Vec<(f64, f64)>) -> PyResult<(f64, f64)> {
    Ok(pair(accounting::parallel_composition(&losses(costs)?)))
}

/// The guarantee (ε, δ) gives a group of `size` people.
#[pyfunction]
fn group_privacy(epsilon: f64, delta: f64, size: u32) -> PyResult<(f64, f64)> {
    Ok(pair(
        accounting::group_privacy(loss(epsilon, delta)?, size).map_err(value_error)?,
    ))
}

/// Advanced composition of `steps` runs of (ε, δ), with slack δ'.
#[pyfunction]
fn advanced_composition(
    epsilon: f64,
    delta: f64,
    steps: u64,
    delta_slack: f64,
) -> PyResult<(f64, f64)> {
    Ok(pair(
        accounting::advanced_composition(loss(epsilon, delta)?, steps, delta_slack)
            .map_err(value_error)?,
    ))
}

/// The compiled core of `import dpkit`.
#[pymodule]
fn _dpkit(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Additive>()?;
    module.add_class::<Budget>()?;
    module.add_class::<choices::PyBinaryRandomizedResponse>()?;
    module.add_class::<choices::PyKaryRandomizedResponse>()?;
    module.add_class::<choices::PyExponentialMechanism>()?;
    module.add_function(wrap_pyfunction!(sequential_composition, module)?)?;
    module.add_function(wrap_pyfunction!(parallel_composition, module)?)?;
    module.add_function(wrap_pyfunction!(group_privacy, module)?)?;
    module.add_function(wrap_pyfunction!(advanced_composition, module)?)?;
    module.add_class::<sensitivity::PySensitivity>()?;
    module.add_class::<sensitivity::PyGaussianMixture>()?;
    module.add_class::<sensitivity::PySampledSensitivity>()?;
    module.add_function(wrap_pyfunction!(sensitivity::sampled_sensitivity, module)?)?;
    module.add_function(wrap_pyfunction!(sensitivity::split_evenly, module)?)?;
    module.add_function(wrap_pyfunction!(sensitivity::split_for_accuracy, module)?)?;
    module.add_function(wrap_pyfunction!(query::_query, module)?)?;
    module.add_function(wrap_pyfunction!(query::_explain, module)?)?;
    module.add_function(wrap_pyfunction!(query::_budget, module)?)?;
    module.add_function(wrap_pyfunction!(synth::_synthesize, module)?)?;
    module.add_function(wrap_pyfunction!(command::_run_command, module)?)?;
    module.add("QueryError", module.py().get_type::<query::QueryError>())
}
