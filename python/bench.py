"""Per released value: dpkit's secure batch and scalar calls against numpy's
Generator.laplace (fast, not safe for privacy), and, when they are
installed, diffprivlib's and OpenDP's Laplace, in one process and run.
Prints ns per value and ratios. `python -P python/bench.py` with the
wheel installed (`-P`: not the source folder in its place)
(`pip install diffprivlib "scikit-learn<1.6" opendp` for the other two:
diffprivlib 0.6 does not import with newer scikit-learn)."""

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
    laplace_scalar = None
    for name, mechanism in [
        ("Laplace ε=1", dpkit.Laplace(1.0)),
        ("Staircase ε=1", dpkit.Staircase(1.0)),
        ("TwoSidedGeometric ε=1", dpkit.TwoSidedGeometric(1.0)),
        ("Gaussian ε=1 δ=1e-6", dpkit.Gaussian(1.0, 1e-6)),
    ]:
        batch = per_value(lambda: mechanism.release(zeros), 5, N)
        scalar = per_value(lambda: mechanism.release(1.0), 100_000, 1)
        laplace_scalar = laplace_scalar or scalar
        print(
            f"{'dpkit ' + name:<28} batch {batch:7.2f} ns ({batch / numpy_batch:.2f}× numpy)"
            f"   scalar {scalar:7.1f} ns ({scalar / numpy_scalar:.2f}× numpy)"
        )
    others(laplace_scalar)


def others(dpkit_scalar):
    """diffprivlib's and OpenDP's Laplace at scale 1, if installed."""
    try:
        from diffprivlib.mechanisms import Laplace as DiffprivlibLaplace

        mechanism = DiffprivlibLaplace(epsilon=1.0, sensitivity=1.0)
        scalar = per_value(lambda: mechanism.randomise(1.0), 20_000, 1)
        print(f"{'diffprivlib Laplace':<28} scalar {scalar:9.1f} ns (dpkit is {scalar / dpkit_scalar:.0f}× faster)")
    except ImportError as error:
        print(f"diffprivlib: not measured ({error})")
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        atom = dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0)
        scalar = per_value(lambda: atom(1.0), 5_000, 1)
        vector = dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=1.0
        )
        data = [0.0] * 100_000
        batch = per_value(lambda: vector(data), 1, len(data))
        print(
            f"{'OpenDP make_laplace':<28} batch {batch:9.1f} ns   scalar {scalar:9.1f} ns "
            f"(dpkit is {scalar / dpkit_scalar:.0f}× faster)"
        )
    except ImportError as error:
        print(f"OpenDP: not measured ({error})")


if __name__ == "__main__":
    main()
