"""Budgets and composition, as dpkit-core counts them."""

import math

import pytest

import dpkit


def test_a_budget_takes_what_fits_and_refuses_the_rest_unchanged():
    budget = dpkit.Budget(epsilon=1.0, delta=1e-6)
    for _ in range(10):
        budget.spend(0.1)
    assert budget.spent == (1.0, 0.0), "ten spends of 0.1 are exactly 1"
    with pytest.raises(ValueError) as error:
        budget.spend(1e-9)
    assert "\n" not in str(error.value)
    assert budget.remaining == (0.0, 1e-6)
    with pytest.raises(ValueError):
        dpkit.Budget(epsilon=-1.0)


def test_a_mechanisms_cost_goes_into_a_budget():
    laplace = dpkit.Laplace(epsilon=0.5)
    assert laplace.privacy == (0.5, 0.0)
    gaussian = dpkit.Gaussian(epsilon=0.5, delta=1e-6)
    budget = dpkit.Budget(epsilon=1.0, delta=1e-6)
    budget.spend(*laplace.privacy)
    budget.spend(*gaussian.privacy)
    with pytest.raises(ValueError):
        budget.spend(*laplace.privacy)


def test_composition_follows_its_theorems():
    assert dpkit.sequential_composition([(0.5, 1e-6), (0.25, 0.0)]) == (0.75, 1e-6)
    assert dpkit.parallel_composition([(0.5, 1e-6), (0.25, 0.0)]) == (0.5, 1e-6)
    epsilon, delta = dpkit.group_privacy(0.5, 0.0, 3)
    assert math.isclose(epsilon, 1.5) and delta == 0.0
    # Advanced composition: k steps of ε cost ε·sqrt(2k·ln(1/δ')) + k·ε·(e^ε − 1).
    epsilon, delta = dpkit.advanced_composition(0.01, 0.0, 1000, 1e-6)
    expected = 0.01 * math.sqrt(2 * 1000 * math.log(1 / 1e-6)) + 1000 * 0.01 * math.expm1(0.01)
    assert math.isclose(epsilon, expected, rel_tol=1e-9) and delta == 1e-6
    with pytest.raises(ValueError):
        dpkit.advanced_composition(0.01, 0.0, 10, 0.0)
