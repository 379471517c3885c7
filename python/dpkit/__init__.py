"""dpkit: differential privacy with exact samplers, at Rust speed.

Every mechanism is dpkit-core's, with the same validated constructors and
the same one-line errors (``ValueError`` for bad parameters). ``release``
takes a number or a 1-D float64 numpy array; arrays are filled in Rust
without the GIL, from a generator seeded by the operating system.

>>> import dpkit, numpy as np
>>> m = dpkit.Laplace(epsilon=1.0, sensitivity=1.0)
>>> round(m.expected_abs_error(), 3)
1.0
>>> m.release(np.zeros(3)).shape
(3,)
"""

from ._dpkit import Additive as _Additive
from ._dpkit import (
    BinaryRandomizedResponse,
    Budget,
    ExponentialMechanism,
    KaryRandomizedResponse,
    GaussianMixture,
    SampledSensitivity,
    Sensitivity,
    advanced_composition,
    group_privacy,
    parallel_composition,
    sampled_sensitivity,
    sequential_composition,
    split_evenly,
    split_for_accuracy,
)
from .client import Client, ServeError
from .query import QueryError, budget, explain, query
from .synth import explain_synthesis, synthesize

__all__ = [
    "Laplace",
    "Staircase",
    "TwoSidedGeometric",
    "DiscreteStaircase",
    "Gaussian",
    "DiscreteGaussian",
    "seeded_for_testing",
    "Client",
    "ServeError",
    "Budget",
    "BinaryRandomizedResponse",
    "KaryRandomizedResponse",
    "ExponentialMechanism",
    "sequential_composition",
    "parallel_composition",
    "group_privacy",
    "advanced_composition",
    "Sensitivity",
    "GaussianMixture",
    "SampledSensitivity",
    "sampled_sensitivity",
    "split_evenly",
    "split_for_accuracy",
    "query",
    "synthesize",
    "explain_synthesis",
    "explain",
    "budget",
    "QueryError",
    "Answer",
]


def __getattr__(name: str):
    # pandas is needed only for answers: imported when first asked for.
    if name == "Answer":
        from .answer import Answer

        return Answer
    raise AttributeError(f"module 'dpkit' has no attribute {name!r}")


class Laplace(_Additive):
    """Laplace noise of scale sensitivity/ε: ε-DP for real values."""

    def __new__(cls, epsilon: float, sensitivity: float = 1.0):
        return super().__new__(cls, "laplace", epsilon, sensitivity)


class Staircase(_Additive):
    """The staircase mechanism: the least E|error| for a real value at ε."""

    def __new__(cls, epsilon: float, sensitivity: float = 1.0):
        return super().__new__(cls, "staircase", epsilon, sensitivity)


class TwoSidedGeometric(_Additive):
    """Two-sided geometric noise: ε-DP for integers (counts)."""

    def __new__(cls, epsilon: float, sensitivity: int = 1):
        return super().__new__(cls, "geometric", epsilon, sensitivity)


class DiscreteStaircase(_Additive):
    """The discrete staircase: integer queries with sensitivity above 1."""

    def __new__(cls, epsilon: float, sensitivity: int = 1):
        return super().__new__(cls, "discrete-staircase", epsilon, sensitivity)


class Gaussian(_Additive):
    """Gaussian noise calibrated exactly (analytic): (ε, δ)-DP, L2 sensitivity."""

    def __new__(cls, epsilon: float, delta: float, sensitivity: float = 1.0):
        return super().__new__(cls, "gaussian", epsilon, sensitivity, delta)


class DiscreteGaussian(_Additive):
    """The discrete Gaussian: (ε, δ)-DP for integers."""

    def __new__(cls, epsilon: float, delta: float, sensitivity: int = 1):
        return super().__new__(cls, "discrete-gaussian", epsilon, sensitivity, delta)


def seeded_for_testing(kind: str, epsilon: float, sensitivity: float, seed: int, delta: float = 0.0):
    """A mechanism drawing from a seeded generator: for tests only, never a release."""
    return _Additive._seeded_for_testing(kind, epsilon, sensitivity, delta, seed)
