"""Per released value: dpkit's secure batch and scalar calls against numpy's
Generator.laplace (fast, not safe for privacy), in one process and run.
Prints ns per value and the ratio to numpy. `python bench.py`"""

import platform
import timeit

import numpy as np

import dpkit

N = 1_000_000


def per_value(call, number, values):
    return min(timeit.repeat(call, number=number, repeat=7)) / number / values * 1e9


def main():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    print(f"{cpu} · numpy {np.__version__} · batch of {N:,}")
    rng = np.random.default_rng()
    zeros = np.zeros(N)
    numpy_batch = per_value(lambda: rng.laplace(0.0, 1.0, N), 5, N)
    numpy_scalar = per_value(lambda: rng.laplace(0.0, 1.0), 100_000, 1)
    print(f"{'numpy Generator.laplace':<28} batch {numpy_batch:7.2f} ns   scalar {numpy_scalar:7.1f} ns")
    for name, mechanism in [
        ("Laplace ε=1", dpkit.Laplace(1.0)),
        ("Staircase ε=1", dpkit.Staircase(1.0)),
        ("TwoSidedGeometric ε=1", dpkit.TwoSidedGeometric(1.0)),
        ("Gaussian ε=1 δ=1e-6", dpkit.Gaussian(1.0, 1e-6)),
    ]:
        batch = per_value(lambda: mechanism.release(zeros), 5, N)
        scalar = per_value(lambda: mechanism.release(1.0), 100_000, 1)
        print(
            f"{'dpkit ' + name:<28} batch {batch:7.2f} ns ({batch / numpy_batch:.2f}× numpy)"
            f"   scalar {scalar:7.1f} ns ({scalar / numpy_scalar:.2f}× numpy)"
        )


if __name__ == "__main__":
    main()
