"""dpkit's MST against Private-PGM's MST on the pre-discretised UCI Adult of
the repository (data/adult-discretised/), side by side, seed by seed (issue 64).

    nice -n 19 python3 docs/bench/synth_vs_pgm.py --seeds 0 1 2 [--aim] [--json FILE]
    python3 docs/bench/synth_vs_pgm.py --table FILE   # the table again from a --json file

Both run on adult.csv and adult-domain.json with ε = 1 and δ = 10⁻⁹ (the
flags --epsilon and --delta change them). For each seed the script runs

* dpkit: the release build of the example `adult_mst` of crates/dpkit-synth
  (built first with cargo unless --no-build; CARGO_TARGET_DIR is honoured),
  with `--seed S --out FILE`;
* Private-PGM: the `mbi` package (PyPI, MBI_VERSION below) with JAX on CPU,
  in a virtualenv of its own, created under ~/.cache/dpkit/pgm-venv when
  missing (--venv changes the folder). Private-PGM is never a dependency of
  dpkit: only this benchmark installs it.

The wheel of mbi 2.0.0 ships the estimation library only, not the
mechanisms of the repository (`mechanisms/mst.py` and friends), so the
Private-PGM side is a driver written here on mbi 2.0.0's public API
(`Dataset`, `Domain`, `LinearMeasurement` and its `compress`,
`estimation.MirrorDescent`, `MarkovRandomField.synthetic_data`,
`Dataset.compress`/`decompress`). It follows the algorithm and the settings
of `mechanisms/mst.py` of github.com/ryan112358/private-pgm at commit
4d2b3c566b148da3ef800ce76e6189c548f2da22 (the file last changed in
2573b3c, 2025-05-19; the repository then at mbi 1.0.0): ρ from (ε, δ) by
the conversion of Canonne, Kamath and Steinke (2020) that its cdp2adp.py
uses; σ = √(3 / 2ρ); the 14 one-way marginals measured with Gaussian noise
at σ·√14 each (a third of ρ); the values of a column whose noisy count is
below 3 times its noise merged into one; a model fitted to those with 2,500
mirror-descent steps; 13 edges of a spanning tree chosen one at a time by
the exponential mechanism (ε = √(8·(ρ/3)/13) each, sensitivity 1, score the
L1 error of the pair's marginal under that model, only pairs joining two
components); the 13 pairs measured at σ·√13 each (the last third of ρ);
a model fitted to all measurements with 10,000 mirror-descent steps
(Armijo line search, the total estimated from the identity measurements);
as many rows as that total, by randomised rounding; merged values drawn back
uniformly. NumPy's global generator is seeded with the seed, as mst.py draws
from it; JAX stays in its default float32, as mst.py leaves it.

Both sides are scored by the same code here, from their synthetic CSVs:
total-variation distance ½‖p − p̂‖₁ between the normalised true and
synthetic marginal, mean and max over all 2-way marginals (91) and over all
3-way marginals with at most 10,000 cells (210). The example prints its own
figures, computed in Rust; the script checks that they agree with its own
to the printed digit on every dpkit run, and that both sides charge the same ρ.

With --aim, dpkit's `adult_aim` (its defaults: all 2-way marginals, 80 MB)
also runs on each seed and is set beside Private-PGM's MST of the same seed,
scored the same way. Private-PGM's own AIM is not run here: on this data it
spent 36 minutes in its rounds and had not finished its final fits after
111 minutes (issue 64).

Times: "synthesis" is the time in the process from the table in memory to the
synthetic rows in memory (dpkit: the example's own `time:`; Private-PGM:
around the driver, JAX compilation included, as a user pays it); "process"
is the whole command, reading the CSV, starting Python and importing JAX, and
writing the rows included. The seeds run one after the other, dpkit then
Private-PGM, never in parallel. Prints the CPU model first: figures from
different machines do not compare.
"""

import argparse
import itertools
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

from timing import cpu_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "adult-discretised"
MBI_VERSION = "2.0.0"
JAX_VERSION = "0.10.2"
DEFAULT_VENV = pathlib.Path.home() / ".cache" / "dpkit" / "pgm-venv"
KEYS = ["seconds", "process", "two_mean", "two_max", "three_mean", "three_max"]


# ---------------------------------------------------------------- the metric


def load_codes(path, names):
    """The CSV of integer codes at `path` as one NumPy column per name."""
    import numpy as np

    with open(path) as handle:
        header = handle.readline().strip().split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return {name: table[:, header.index(name)] for name in names}


def counts(columns, names, sizes):
    import numpy as np

    shape = tuple(sizes[n] for n in names)
    index = np.ravel_multi_index(tuple(columns[n] for n in names), shape)
    return np.bincount(index, minlength=int(np.prod(shape)))


def errors(truth, synthetic, sizes):
    """Mean and max ½‖p − p̂‖₁ over all 2-way marginals and over all 3-way
    marginals of at most 10,000 cells."""
    import numpy as np

    names = list(sizes)
    n_true = len(next(iter(truth.values())))
    n_synth = len(next(iter(synthetic.values())))

    def tv(subset):
        p = counts(truth, subset, sizes) / n_true
        q = counts(synthetic, subset, sizes) / n_synth
        return 0.5 * float(np.abs(p - q).sum())

    two = [tv(s) for s in itertools.combinations(names, 2)]
    three = [
        tv(s)
        for s in itertools.combinations(names, 3)
        if sizes[s[0]] * sizes[s[1]] * sizes[s[2]] <= 10_000
    ]
    return {
        "two_mean": float(np.mean(two)),
        "two_max": max(two),
        "three_mean": float(np.mean(three)),
        "three_max": max(three),
        "pairs": len(two),
        "triples": len(three),
    }


# ------------------------------------------ the Private-PGM side (in the venv)


def delta_of(rho, epsilon):
    """The δ that ρ-zCDP gives at ε, by the bound of Canonne, Kamath and
    Steinke (2020, Proposition 12): the infimum over α > 1 of
    exp((α−1)(αρ−ε) + α·log(1−1/α)) / (α−1), found on a bounded α."""
    import math

    from scipy.optimize import minimize_scalar

    def log_delta(alpha):
        return (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)

    upper = (epsilon + 1) / (2 * rho) + 2
    best = minimize_scalar(log_delta, bounds=(1.0 + 1e-9, upper), method="bounded", options={"xatol": 1e-12})
    return min(1.0, math.exp(best.fun))


def rho_of(epsilon, delta):
    """The largest ρ whose zCDP guarantee gives (ε, δ)-DP, by bisection."""
    low, high = 0.0, epsilon + 1.0
    for _ in range(200):
        middle = (low + high) / 2
        if delta_of(middle, epsilon) <= delta:
            low = middle
        else:
            high = middle
    return low


def pgm_mst(data, rho, iterations):
    """MST as mechanisms/mst.py (private-pgm 4d2b3c5) runs it, on mbi 2.0.0's
    API, at ρ-zCDP (mst.py converts (ε, δ) first, as dpkit's example does
    before its clock starts); returns the synthetic Dataset, the tree and the
    seconds of each phase. See the module's docstring."""
    import numpy as np
    from scipy.cluster.hierarchy import DisjointSet
    from scipy.special import logsumexp

    from mbi import LinearMeasurement, estimation

    phases, clock = {}, [time.perf_counter()]

    def phase(name):
        now = time.perf_counter()
        phases[name] = now - clock[0]
        clock[0] = now

    sigma = np.sqrt(3 / (2 * rho))
    columns = list(data.domain.attributes)

    def measured(cliques, source):
        scale = sigma * np.sqrt(len(cliques))  # weights 1/√k, normalised
        out = []
        for clique in cliques:
            x = np.asarray(source.project(clique).datavector())
            noisy = x + np.random.normal(loc=0.0, scale=scale, size=x.size)
            out.append(LinearMeasurement(noisy, clique, scale))
        return out

    # One-way marginals, then the values under 3σ merged into one per column.
    first = measured([(c,) for c in columns], data)
    mapping = {}
    for m in first:
        kept = np.asarray(m.noisy_measurement) >= 3 * m.stddev
        if not kept.all():
            codes = np.full(kept.size, kept.sum(), dtype=np.int64)
            codes[kept] = np.arange(kept.sum())
            mapping[m.clique[0]] = codes
    first = [m.compress(mapping, data.domain) if m.clique[0] in mapping else m for m in first]
    small = data.compress(mapping)
    phase("measure 1-way")

    # The spanning tree, chosen privately with a third of ρ.
    model = estimation.MirrorDescent().estimate(small.domain, first, iters=iterations[0])
    phase("first fit")
    candidates = list(itertools.combinations(columns, 2))
    score = {}
    for pair in candidates:
        x = np.asarray(small.project(pair).datavector())
        x_hat = np.asarray(model.project(pair).datavector())
        score[pair] = np.linalg.norm(x - x_hat, 1)
    phase("scores")
    components = DisjointSet(columns)
    rounds = len(columns) - 1
    step_epsilon = np.sqrt(8 * (rho / 3) / rounds)
    tree = []
    for _ in range(rounds):
        candidates = [e for e in candidates if not components.connected(*e)]
        q = 0.5 * step_epsilon / 1.0 * np.array([score[e] for e in candidates])
        chosen = candidates[np.random.choice(q.size, p=np.exp(q - logsumexp(q)))]
        tree.append(chosen)
        components.merge(*chosen)

    # The tree's pairs measured with the last third, the model fitted, rows drawn.
    phase("selection")
    second = measured(tree, small)
    model = estimation.MirrorDescent().estimate(small.domain, first + second, iters=iterations[1])
    phase("final fit")
    synthetic = model.synthetic_data().decompress(mapping)
    phase("sampling")
    return synthetic, tree, phases


def pgm_main(args):
    """One Private-PGM run: prints a JSON line with its time and ρ."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np

    import jax
    import mbi

    sizes = json.loads((DATA / "adult-domain.json").read_text())
    columns = load_codes(DATA / "adult.csv", list(sizes))
    data = mbi.Dataset(columns, mbi.Domain(list(sizes), list(sizes.values())))
    rho = rho_of(args.epsilon, args.delta)
    np.random.seed(args.seed)
    started = time.perf_counter()
    synthetic, tree, phases = pgm_mst(data, rho, (args.select_iterations, args.iterations))
    elapsed = time.perf_counter() - started
    out = synthetic.to_dict()
    table = np.column_stack([np.asarray(out[name]) for name in sizes])
    np.savetxt(args.out, table, fmt="%d", delimiter=",", header=",".join(sizes), comments="")
    print(json.dumps({
        "seconds": elapsed, "rho": rho, "rows": int(table.shape[0]),
        "tree": [list(e) for e in tree], "phases": phases, "mbi": mbi.__version__ if hasattr(mbi, "__version__") else MBI_VERSION,
        "jax": jax.__version__, "x64": bool(jax.config.jax_enable_x64),
    }))


# ------------------------------------------------------------------ the driver


def in_venv(venv):
    return pathlib.Path(sys.prefix).resolve() == venv.resolve()


def ensure_venv(venv):
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv} with mbi=={MBI_VERSION} jax=={JAX_VERSION}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        f"mbi=={MBI_VERSION}", f"jax=={JAX_VERSION}"], check=True)
    return python


def run_dpkit(binary, seed, args, out, extra=()):
    command = [str(binary), "--epsilon", str(args.epsilon), "--delta", str(args.delta),
               "--seed", str(seed), "--out", str(out), *extra]
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    process = time.perf_counter() - started
    text = done.stdout
    seconds = float(re.search(r"time: ([0-9.]+) s", text).group(1))
    rho = float(re.search(r"ρ = ([0-9.]+), seed", text).group(1))
    two = re.search(r"2-way TV over \d+: mean ([0-9.]+), max ([0-9.]+)", text)
    three = re.search(r"3-way TV over \d+ .*: mean ([0-9.]+), max ([0-9.]+)", text)
    printed = [float(two.group(1)), float(two.group(2)), float(three.group(1)), float(three.group(2))]
    return {"seconds": seconds, "process": process, "rho": rho, "printed": printed, "stdout": text}


def run_pgm(python, seed, args, out):
    command = [str(python), str(pathlib.Path(__file__).resolve()), "--pgm-run", "--seed", str(seed),
               "--epsilon", str(args.epsilon), "--delta", str(args.delta),
               "--iterations", str(args.pgm_iterations), "--select-iterations", str(args.select_iterations),
               "--out", str(out)]
    environment = dict(os.environ, JAX_PLATFORMS="cpu")
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment)
    if done.returncode != 0:
        sys.exit(f"Private-PGM, seed {seed}, failed:\n{done.stderr}")
    process = time.perf_counter() - started
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = process
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--iterations", type=int, default=3000,
                        help="dpkit's mirror-descent steps (its example's default); with --pgm-run, Private-PGM's final fit")
    parser.add_argument("--pgm-iterations", type=int, default=10_000, help="Private-PGM's final fit (mst.py: 10,000)")
    parser.add_argument("--select-iterations", type=int, default=2_500, help="Private-PGM's fit before selection (mst.py: 2,500)")
    parser.add_argument("--venv", type=pathlib.Path, default=DEFAULT_VENV)
    parser.add_argument("--no-build", action="store_true", help="use the built example as it is")
    parser.add_argument("--aim", action="store_true",
                        help="also run dpkit's adult_aim (its defaults) on each seed, beside Private-PGM's MST")
    parser.add_argument("--keep", type=pathlib.Path, help="keep the synthetic CSVs in this folder")
    parser.add_argument("--json", type=pathlib.Path, help="write every figure here too, after each seed")
    parser.add_argument("--table", type=pathlib.Path, help="only print the table of a file written by --json")
    parser.add_argument("--pgm-run", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pgm_run:
        return pgm_main(args)
    if args.table:
        saved = json.loads(args.table.read_text())
        pgm = {r["seed"]: r["pgm"] for r in saved["runs"]}
        table([(r["seed"], r["dpkit"], r["pgm"]) for r in saved["runs"]])
        if saved.get("aim"):
            table([(r["seed"], r["dpkit"], pgm[r["seed"]]) for r in saved["aim"]], ("dpkit AIM", "Private-PGM MST"))
        return

    venv = args.venv.expanduser()
    if not in_venv(venv):
        python = ensure_venv(venv)
        os.execv(str(python), [str(python), str(pathlib.Path(__file__).resolve())] + sys.argv[1:])

    import jax
    import numpy as np
    from importlib.metadata import version

    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "dpkit-synth", "--example", "adult_mst",
                        "--example", "adult_aim"],
                       cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=str(target)))
    binary = target / "release" / "examples" / "adult_mst"
    aim_binary = target / "release" / "examples" / "adult_aim"

    sizes = json.loads((DATA / "adult-domain.json").read_text())
    truth = load_codes(DATA / "adult.csv", list(sizes))

    def scored(run, csv, seed):
        """The run with the script's own TV figures, checked against those
        the example printed."""
        run.update(errors(truth, load_codes(csv, list(sizes)), sizes))
        mine = [round(run[k], 4) for k in ("two_mean", "two_max", "three_mean", "three_max")]
        if any(abs(a - b) > 1.5e-4 for a, b in zip(mine, run["printed"])):
            sys.exit(f"seed {seed}: the script's TV {mine} disagrees with the example's {run['printed']}")
        return run

    print(f"CPU: {cpu_model()}; {os.cpu_count()} logical CPUs; load average {os.getloadavg()[0]:.2f}")
    print(f"mbi {version('mbi')}, jax {jax.__version__} (CPU, x64 {jax.config.jax_enable_x64}), numpy {np.__version__};"
          f" ε = {args.epsilon}, δ = {args.delta:g}; dpkit {args.iterations} steps,"
          f" Private-PGM {args.select_iterations} + {args.pgm_iterations} steps", flush=True)

    rows, aim_rows = [], []
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or pathlib.Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for seed in args.seeds:
            dpkit_csv, pgm_csv = folder / f"dpkit-mst-{seed}.csv", folder / f"pgm-mst-{seed}.csv"
            ours = scored(run_dpkit(binary, seed, args, dpkit_csv, ["--iterations", str(args.iterations)]),
                          dpkit_csv, seed)
            theirs = run_pgm(sys.executable, seed, args, pgm_csv)
            theirs.update(errors(truth, load_codes(pgm_csv, list(sizes)), sizes))
            if abs(theirs["rho"] - ours["rho"]) > 1e-6:
                sys.exit(f"seed {seed}: ρ {theirs['rho']:.6f} (Private-PGM) against {ours['rho']:.6f} (dpkit)")
            theirs["load"] = os.getloadavg()[0]
            rows.append((seed, ours, theirs))
            print(f"seed {seed}: dpkit {ours['seconds']:.2f} s ({ours['process']:.2f} s process),"
                  f" 2-way {ours['two_mean']:.4f}/{ours['two_max']:.4f}, 3-way {ours['three_mean']:.4f}/{ours['three_max']:.4f}"
                  f" (the example printed {ours['printed']}); Private-PGM {theirs['seconds']:.1f} s"
                  f" ({theirs['process']:.1f} s process), 2-way {theirs['two_mean']:.4f}/{theirs['two_max']:.4f},"
                  f" 3-way {theirs['three_mean']:.4f}/{theirs['three_max']:.4f}, {theirs['rows']} rows; ρ {theirs['rho']:.6f};"
                  f" load average {theirs['load']:.2f}",
                  flush=True)
            print("  Private-PGM phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in theirs["phases"].items()), flush=True)
            if args.aim:
                aim_csv = folder / f"dpkit-aim-{seed}.csv"
                aim = scored(run_dpkit(aim_binary, seed, args, aim_csv), aim_csv, seed)
                aim_rows.append((seed, aim, theirs))
                print(f"  dpkit AIM {aim['seconds']:.2f} s ({aim['process']:.2f} s process),"
                      f" 2-way {aim['two_mean']:.4f}/{aim['two_max']:.4f}, 3-way {aim['three_mean']:.4f}/{aim['three_max']:.4f}",
                      flush=True)
            if args.json:  # after every seed, so that a run cut short keeps what it measured
                args.json.write_text(json.dumps({
                    "cpu": cpu_model(), "mbi": version("mbi"), "jax": jax.__version__,
                    "runs": [{"seed": s, "dpkit": {k: v for k, v in o.items() if k != "stdout"}, "pgm": t}
                             for s, o, t in rows],
                    "aim": [{"seed": s, "dpkit": {k: v for k, v in a.items() if k != "stdout"}} for s, a, _ in aim_rows],
                }, indent=1))

    table(rows)
    if aim_rows:
        table(aim_rows, ("dpkit AIM", "Private-PGM MST"))


def table(rows, names=("dpkit", "Private-PGM")):
    """The Markdown table of `rows` (seed, dpkit's figures, Private-PGM's):
    three lines a seed (dpkit, Private-PGM, their ratio), then the means."""
    print()
    print(f"Ratio = {names[0]} / {names[1]} (below 1: {names[0]} faster or closer). TV: ½‖p − p̂‖₁ of the normalised"
          f" counts, 2-way over all {rows[0][1]['pairs']} marginals, 3-way over the {rows[0][1]['triples']}"
          " of at most 10,000 cells.")
    print()
    print("| seed | | synthesis time | process time | 2-way mean TV | 2-way max TV | 3-way mean TV | 3-way max TV |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")

    def cells(figures):
        return [f"{figures['seconds']:.2f} s", f"{figures['process']:.2f} s"] + [
            f"{figures[k]:.4f}" for k in ("two_mean", "two_max", "three_mean", "three_max")]

    def block(label, ours, theirs):
        print(f"| {label} | {names[0]} | " + " | ".join(cells(ours)) + " |")
        print(f"| | {names[1]} | " + " | ".join(cells(theirs)) + " |")
        ratios = []
        for k in KEYS:
            r = ours[k] / theirs[k]
            if k in ("seconds", "process"):
                ratios.append(f"{r:.3g}" + (f" (1/{1 / r:.0f})" if r < 1 else ""))
            else:
                ratios.append(f"{r:.3f}")
        print("| | ratio | " + " | ".join(ratios) + " |")

    for seed, ours, theirs in rows:
        block(str(seed), ours, theirs)
    mean_ours = {k: statistics.mean(r[1][k] for r in rows) for k in KEYS}
    mean_theirs = {k: statistics.mean(r[2][k] for r in rows) for k in KEYS}
    block(f"mean of {len(rows)} (ratio of the means)", mean_ours, mean_theirs)

if __name__ == "__main__":
    main()
