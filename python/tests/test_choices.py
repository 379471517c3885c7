"""Randomized response and the exponential mechanism: frequencies from a
seeded generator against their closed forms (5.5-sigma bounds)."""

import math

import pytest

import dpkit

N = 100_000


def within(count, probability, n=N):
    return abs(count / n - probability) <= 5.5 * math.sqrt(probability * (1 - probability) / n)


def test_binary_randomized_response_reports_true_at_its_probabilities():
    mechanism = dpkit.BinaryRandomizedResponse(0.5, seed_for_testing=11)
    for truth in (True, False):
        trues = sum(mechanism.release(truth) for _ in range(N))
        assert within(trues, mechanism.probability_of_true_report(truth))
    epsilon, delta = mechanism.privacy
    assert epsilon > 0 and delta == 0


def test_kary_randomized_response_tells_the_truth_at_its_probability_and_estimates():
    mechanism = dpkit.KaryRandomizedResponse(1.0, 4, seed_for_testing=12)
    reports = [mechanism.release(2) for _ in range(N)]
    assert within(reports.count(2), mechanism.probability_of_truth())
    # Unbiased estimates of the true proportions: everyone's truth was 2.
    estimate = mechanism.estimate_frequencies([reports.count(c) for c in range(4)])
    p = mechanism.probability_of_truth()
    q = (1 - p) / 3
    assert abs(estimate[2] - 1.0) <= 5.5 * math.sqrt(p * (1 - p) / N) / (p - q)
    assert math.isclose(sum(estimate), 1.0, rel_tol=1e-9)
    with pytest.raises(ValueError):
        mechanism.release(4)


def test_the_exponential_mechanism_selects_at_its_probabilities():
    mechanism = dpkit.ExponentialMechanism(1.0, 1.0, seed_for_testing=13)
    utilities = [0.0, 1.0, 3.0]
    probabilities = mechanism.selection_probabilities(utilities)
    assert math.isclose(sum(probabilities), 1.0, rel_tol=1e-12)
    chosen = [mechanism.select(utilities) for _ in range(N)]
    for index, probability in enumerate(probabilities):
        assert within(chosen.count(index), probability)
    with pytest.raises(ValueError):
        dpkit.ExponentialMechanism(0.0, 1.0)
    with pytest.raises(ValueError):
        mechanism.select([])
