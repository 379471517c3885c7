"""dpkit's noise samplers against numpy's, in one run on one machine.

    python docs/bench/samplers.py [--quick]

Needs `pip install numpy`. Runs the Rust benchmark
(`cargo bench -p dpkit-core --bench noise_throughput -- --tsv`), then times
numpy's `Generator.laplace` and, for each two-sided geometric, the
difference of two `Generator.geometric` draws at the same ratio, with the
same number of values and repeats (median). numpy's default generator
(PCG64) is fast but predictable: neither call is safe for privacy.

Prints the CPU model and a Markdown table: each secure sampler's batch time
per value, its peer's, and their ratio. The goals (issue 14): every
real-valued sampler at most numpy's Laplace (ratio ≤ 1), every two-sided
geometric at most half numpy's geometric difference (ratio ≤ 0.5).
"""

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def rust_rows(quick):
    command = ["cargo", "bench", "-q", "-p", "dpkit-core", "--bench", "noise_throughput", "--"]
    command += ["--tsv"] + (["--quick"] if quick else [])
    output = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    cpu, values, repeats, rows = "unknown", 0, 0, []
    for line in output.stdout.splitlines():
        fields = line.split("\t")
        if fields[0] == "cpu":
            cpu = fields[1]
        elif fields[0] == "values":
            values, repeats = int(fields[1]), int(fields[2])
        elif fields[0] == "row":
            rows.append((fields[1], fields[2], float(fields[3]), float(fields[4])))
    return cpu, values, repeats, rows


def ns_per_value(call, values, repeats):
    call()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) / values * 1e9)
    return statistics.median(times)


def numpy_peer(peer, values, repeats, rng):
    if peer == "laplace":
        return ns_per_value(lambda: rng.laplace(0.0, 1.0, values), values, repeats)
    p = float(peer.split(":", 1)[1])
    return ns_per_value(
        lambda: rng.geometric(p, values) - rng.geometric(p, values), values, repeats
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cpu, values, repeats, rows = rust_rows(args.quick)
    rng = np.random.default_rng()
    peers = {peer: numpy_peer(peer, values, repeats, rng) for _, peer, _, _ in rows}
    print(f"CPU: {cpu}; {values:,} values × {repeats} repeats, median ns per value; "
          f"numpy {np.__version__}, Python {sys.version.split()[0]}")
    print()
    print("| sampler (ε = 1) | dpkit batch | dpkit scalar | numpy peer | peer | batch / peer |")
    print("|---|---|---|---|---|---|")
    for name, peer, batch, scalar in rows:
        label = "`laplace`" if peer == "laplace" else "`geometric − geometric`"
        print(f"| {name} | {batch:.1f} | {scalar:.1f} | {label} | {peers[peer]:.1f} "
              f"| {batch / peers[peer]:.2f} |")


if __name__ == "__main__":
    main()
