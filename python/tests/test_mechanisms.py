"""dpkit's mechanisms from Python: validation, types, and the noise against
its closed forms. The statistical checks draw from a seeded generator (fixed
seeds: each check's outcome is fixed) with 5.5-sigma bounds, which a correct
sampler fails with probability below 1e-7 per check for a fresh seed."""

import math

import numpy as np
import pytest

import dpkit

N = 200_000

REAL = [
    ("laplace", 1.0, 1.0, 0.0),
    ("laplace", 0.1, 3.0, 0.0),
    ("staircase", 1.0, 1.0, 0.0),
    ("gaussian", 1.0, 1.0, 1e-6),
]
INTEGER = [
    ("geometric", 1.0, 1, 0.0),
    ("geometric", 0.3, 2, 0.0),
    ("discrete-staircase", 1.0, 4, 0.0),
    ("discrete-gaussian", 1.0, 1, 1e-6),
]


@pytest.mark.parametrize("kind,epsilon,sensitivity,delta", REAL + INTEGER)
def test_noise_matches_its_closed_forms(kind, epsilon, sensitivity, delta):
    mechanism = dpkit.seeded_for_testing(kind, epsilon, sensitivity, seed=20261123, delta=delta)
    noise = mechanism.release(np.zeros(N))
    expected_abs, variance = mechanism.expected_abs_error(), mechanism.variance()
    spread = math.sqrt(max(variance - expected_abs**2, 0.0) / N)
    assert abs(np.abs(noise).mean() - expected_abs) <= 5.5 * spread
    # The sample variance's spread needs the fourth moment; the Laplace's is
    # the largest here (kurtosis 6), so 5.5·sqrt(5·σ⁴/N) bounds every row.
    assert abs(noise.var() - variance) <= 5.5 * math.sqrt(5.0 * variance**2 / N)
    assert abs(noise.mean()) <= 5.5 * math.sqrt(variance / N)
    half_width = mechanism.interval(0.95)
    covered = np.mean(np.abs(noise) <= half_width)
    assert covered >= 0.95 - 5.5 * math.sqrt(0.95 * 0.05 / N)


@pytest.mark.parametrize("kind,epsilon,sensitivity,delta", INTEGER)
def test_integer_noise_is_whole(kind, epsilon, sensitivity, delta):
    mechanism = dpkit.seeded_for_testing(kind, epsilon, sensitivity, seed=7, delta=delta)
    released = mechanism.release(np.full(1000, 5.0))
    assert np.all(released == np.round(released))
    assert isinstance(mechanism.release(5), int)


def test_numbers_give_numbers_and_arrays_new_arrays():
    laplace = dpkit.Laplace(epsilon=1.0)
    assert isinstance(laplace.release(3.0), float)
    assert isinstance(laplace.release(3), float)
    values = np.arange(5, dtype=np.float64)
    released = laplace.release(values)
    assert released.dtype == np.float64 and released.shape == (5,)
    assert np.array_equal(values, np.arange(5)), "the input is left as it was"
    assert not np.array_equal(released, values)
    assert isinstance(dpkit.TwoSidedGeometric(epsilon=1.0).release(10), int)


def test_the_default_generator_is_the_operating_systems():
    laplace = dpkit.Laplace(epsilon=1.0)
    first, second = laplace.release(np.zeros(64)), laplace.release(np.zeros(64))
    assert not np.array_equal(first, second)
    a = dpkit.seeded_for_testing("laplace", 1.0, 1.0, seed=3).release(np.zeros(8))
    b = dpkit.seeded_for_testing("laplace", 1.0, 1.0, seed=3).release(np.zeros(8))
    assert np.array_equal(a, b), "a test seed repeats"


@pytest.mark.parametrize(
    "make",
    [
        lambda: dpkit.Laplace(epsilon=0.0),
        lambda: dpkit.Laplace(epsilon=float("nan")),
        lambda: dpkit.Laplace(epsilon=-1.0),
        lambda: dpkit.Laplace(epsilon=1.0, sensitivity=0.0),
        lambda: dpkit.TwoSidedGeometric(epsilon=1.0, sensitivity=0),
        lambda: dpkit.Gaussian(epsilon=1.0, delta=0.0),
        lambda: dpkit.Gaussian(epsilon=1.0, delta=1.5),
        lambda: dpkit.seeded_for_testing("no-such-mechanism", 1.0, 1.0, seed=1),
    ],
)
def test_bad_parameters_are_one_line_value_errors(make):
    with pytest.raises(ValueError) as error:
        make()
    assert "\n" not in str(error.value) and str(error.value)


def test_bad_inputs_are_refused_with_one_line():
    laplace = dpkit.Laplace(epsilon=1.0)
    with pytest.raises(ValueError):
        laplace.release(float("inf"))
    with pytest.raises(ValueError):
        laplace.release(np.array([1.0, float("nan")]))
    with pytest.raises(TypeError):
        laplace.release(True)
    with pytest.raises(TypeError):
        laplace.release("1.0")
    with pytest.raises(TypeError):
        laplace.release(np.zeros((2, 2)))
    with pytest.raises(ValueError):
        laplace.interval(1.0)
