"""Sensitivity helpers and ε splits: dpkit-core's, from Python."""

import math

import numpy as np
import pytest

import dpkit


def test_global_sensitivities_are_the_closed_forms():
    assert (dpkit.Sensitivity.count().l1, dpkit.Sensitivity.count().l2) == (1.0, 1.0)
    assert dpkit.Sensitivity.bounded_sum(-3.0, 200.0).l1 == 200.0
    assert dpkit.Sensitivity.bounded_sum(-3.0, 200.0, neighbouring="replace").l1 == 203.0
    assert dpkit.Sensitivity.bounded_mean(0.0, 100.0, 50).l1 == 2.0
    cells = dpkit.Sensitivity.histogram(4)
    assert (cells.l1, cells.l2) == (4.0, 2.0)


@pytest.mark.parametrize("make", [
    lambda: dpkit.Sensitivity.bounded_sum(5.0, 1.0),
    lambda: dpkit.Sensitivity.bounded_sum(0.0, 1.0, neighbouring="swap"),
    lambda: dpkit.Sensitivity.bounded_mean(0.0, 1.0, 0),
    lambda: dpkit.Sensitivity.histogram(0),
    lambda: dpkit.GaussianMixture([]),
])
def test_bad_parameters_are_value_errors(make):
    with pytest.raises(ValueError):
        make()


def test_sampled_sensitivity_of_a_mean_height_is_near_its_scale():
    heights = dpkit.GaussianMixture([(0.5, 178.0, 7.0), (0.5, 162.0, 6.5)])
    assert heights.mean == pytest.approx(170.0)
    found = dpkit.sampled_sensitivity(np.mean, heights, dataset_size=100, samples=2000,
                                      gamma=0.05, rho=0.05, seed_for_testing=9)
    # One record of 100 replaced moves the mean by |x - x'|/100, with
    # x - x' of sd ≈ 2·10.1/√2 ≈ 14.3: E|·| ≈ 11.4/100.
    assert 0.10 < found.mean_distance < 0.13
    assert found.sensitivity > found.mean_distance
    assert len(found.distances) == 2000 and found.distances == sorted(found.distances)


def test_an_error_in_the_query_is_raised_as_itself():
    heights = dpkit.GaussianMixture([(1.0, 170.0, 7.0)])

    def broken(records):
        raise KeyError("no such column")

    with pytest.raises(KeyError):
        dpkit.sampled_sensitivity(broken, heights, 10, 200, 0.1, 0.1)


def test_splits_add_up_to_at_most_epsilon():
    shares = dpkit.split_evenly(1.0, 3)
    assert len(shares) == 3 and sum(shares) <= 1.0 and shares[0] == pytest.approx(1 / 3)
    shares = dpkit.split_for_accuracy(1.0, [1.0, 4.0])
    assert sum(shares) <= 1.0 and shares[1] / shares[0] == pytest.approx(2.0)
    with pytest.raises(ValueError):
        dpkit.split_evenly(0.0, 2)
    assert math.isfinite(shares[0])
