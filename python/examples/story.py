"""The seeds' story, retold with `import dpkit`: the staircase against the
Laplace, a private mean height, and a histogram of ages from the Adult data.

`python python/examples/story.py [path/to/adult.data.csv]`
"""

import csv
import pathlib
import sys

import numpy as np

import dpkit

ADULT = pathlib.Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data.csv"


def staircase_against_laplace():
    print("1. The staircase against the Laplace: E|error| for a sum of sensitivity 1")
    print(f"   {'ε':>5} {'Laplace':>9} {'staircase':>10} {'ratio':>6}")
    for epsilon in [0.1, 1.0, 5.0, 10.0]:
        laplace = dpkit.Laplace(epsilon).expected_abs_error()
        staircase = dpkit.Staircase(epsilon).expected_abs_error()
        print(f"   {epsilon:5} {laplace:9.4f} {staircase:10.4f} {staircase / laplace:6.3f}")


def mean_height(epsilon=1.0):
    print(f"\n2. A private mean height at ε = {epsilon}, half for the sum and half for the count")
    heights = np.random.default_rng(1).normal(170.0, 10.0, 1000)  # made-up people
    # Clamped to public bounds and centred on their midpoint: one person
    # added or removed moves the sum of (height − 175) by at most 35.
    low, high = 140.0, 210.0
    middle = (low + high) / 2
    centred = np.clip(heights, low, high) - middle
    budget = dpkit.Budget(epsilon)
    total = dpkit.Laplace(epsilon / 2, sensitivity=(high - low) / 2)
    count = dpkit.TwoSidedGeometric(epsilon / 2)
    budget.spend(*total.privacy)
    budget.spend(*count.privacy)
    noisy_sum, noisy_count = total.release(float(centred.sum())), count.release(len(centred))
    print(f"   true mean {heights.mean():.2f} cm; private mean {middle + noisy_sum / noisy_count:.2f} cm"
          f" (sum ± {total.interval(0.95):.1f}, count ± {count.interval(0.95):.0f} at 95%)")
    print(f"   budget spent: ε = {budget.spent[0]}, left: ε = {budget.remaining[0]}")


def age_histogram(path, epsilon=0.5):
    print(f"\n3. A histogram of ages in the Adult data at ε = {epsilon} (bins are disjoint:"
          " one person is in one bin, so every bin has the whole ε)")
    with open(path, newline="") as file:
        ages = np.array([int(row["age"]) for row in csv.DictReader(file)])
    edges = np.arange(10, 101, 10)
    exact, _ = np.histogram(ages, bins=edges)
    noise = dpkit.TwoSidedGeometric(epsilon)
    released = noise.release(exact.astype(np.float64))
    print(f"   cost by parallel composition: ε = {dpkit.parallel_composition([noise.privacy] * len(exact))[0]}")
    for left, true, private in zip(edges[:-1], exact, released):
        print(f"   {left:2}–{left + 9:2} {int(private):6}  (exact {true}, ± {noise.interval(0.95):.0f})")


if __name__ == "__main__":
    staircase_against_laplace()
    mean_height()
    age_histogram(sys.argv[1] if len(sys.argv) > 1 else ADULT)
