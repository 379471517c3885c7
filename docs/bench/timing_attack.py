"""Timing attacks on one person, through `dpkit serve` and `dpkit query`.

Two copies of Adult that differ in one person (row 11: 37, Private, 280464,
…, the target), each with the bundled public tables, each served by its own
`dpkit serve` on loopback (the demo analyst) and queried by `dpkit query`.
For each attack, RUNS requests a side, interleaved (with, without, with, …),
each a new request (its ε moves by 10⁻¹² so none is a replay), timed from
sending to the whole response. Prints each side's median and spread, the
difference of the medians in spreads (issue 63 asks for at most 3), and how
many runs the best single threshold classifies.

    python3 docs/bench/timing_attack.py --dpkit "$CARGO_TARGET_DIR/debug/dpkit" [--runs 60]
        [--only NAME ...] [--no-cli]

Refused attacks are timed too: a refusal is released at once, and must not
separate either. Run it on a quiet machine; it prints the CPU it ran on.
"""

import argparse
import http.client
import itertools
import json
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from timing import cpu_model

REPO = pathlib.Path(__file__).resolve().parents[2]
TARGET = "a.age = 37 AND a.fnlwgt = 280464"
TARGET_LINE = "37,Private,280464,"


def branches(function, argument, count):
    arms = "".join(
        f" WHEN {function}({argument}, 1.001) BETWEEN {0.5 + i * 1e-3} AND {0.501 + i * 1e-3} THEN 1"
        for i in range(count)
    )
    return f"(CASE{arms} ELSE 0 END) < 0"


FANOUT = (
    "FROM adult a JOIN countries c1 ON true JOIN countries c2 ON true "
    "JOIN (SELECT * FROM education_levels WHERE typical_years <= 9) e ON true"
)

ATTACKS = {
    # Issue 63's attack: 280 numeric branches on the target's rows through
    # 41 × 41 × 5 public rows per row (refused now).
    "fanout-280": f"SELECT COUNT(*) {FANOUT} WHERE CASE WHEN {TARGET} THEN "
    f"{branches('atan2', 'a.age', 280)} ELSE false END",
    # The same with one branch (refused now).
    "fanout-1": f"SELECT COUNT(*) {FANOUT} WHERE CASE WHEN {TARGET} THEN "
    f"{branches('atan2', 'a.age', 1)} ELSE false END",
    # The most numeric work on the target's row that is still accepted: 280
    # branches on the row itself.
    "numeric-280": f"SELECT COUNT(*) FROM adult a WHERE CASE WHEN {TARGET} THEN "
    f"{branches('atan2', 'a.age', 280)} ELSE false END",
    # Numeric branches through the largest join the bound accepts for them.
    "join-41-numeric": "SELECT COUNT(*) FROM adult a JOIN countries c ON true WHERE "
    f"CASE WHEN {TARGET} THEN {branches('pow', 'a.age + length(c.region)', 30)} ELSE false END",
    # The largest numeric attacks on the target's row that are still
    # accepted: 20 branches on the row itself, and 2 through a join of 41
    # public rows per row.
    "numeric-20": f"SELECT COUNT(*) FROM adult a WHERE CASE WHEN {TARGET} THEN "
    f"{branches('atan2', 'a.age', 20)} ELSE false END",
    "join-41-numeric-2": "SELECT COUNT(*) FROM adult a JOIN countries c ON true WHERE "
    f"CASE WHEN {TARGET} THEN {branches('pow', 'a.age + length(c.region)', 2)} ELSE false END",
    # An earlier attack, made to fit the service's request limit: eight
    # long ILIKE patterns one row reaches.
    "ilike-8": "SELECT COUNT(*) FROM adult a WHERE CASE WHEN "
    f"{TARGET} THEN "
    + " OR ".join(f"a.\"native-country\" ILIKE '%{'θ' * 200}{i}%'" for i in range(8))
    + " ELSE false END",
    # An earlier attack: thirty-two long ILIKE patterns one row reaches.
    "ilike-branch": "SELECT COUNT(*) FROM adult a WHERE CASE WHEN "
    f"{TARGET} THEN "
    + " OR ".join(f"a.\"native-country\" ILIKE '%{'θ' * 400}{i}%'" for i in range(32))
    + " ELSE false END",
    # The control: a target no one matches, on both sides.
    "control": f"SELECT COUNT(*) FROM adult a WHERE CASE WHEN a.age = 37 AND a.fnlwgt = 1 THEN "
    f"{branches('atan2', 'a.age', 280)} ELSE false END",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dataset(folder, with_target):
    folder.mkdir(parents=True)
    adult = REPO / "data" / "adult"
    description = (adult / "adult.toml").read_text() + (adult / "public.toml").read_text()
    (folder / "adult.toml").write_text(description.replace("epsilon = 10.0", "epsilon = 1000.0"))
    for name in ["countries.csv", "education_levels.csv"]:
        shutil.copy(adult / name, folder / name)
    lines = (adult / "adult.data.csv").read_text().splitlines(keepends=True)
    if not with_target:
        lines = [line for line in lines if not line.startswith(TARGET_LINE)]
    (folder / "adult.data.csv").write_text("".join(lines))
    return folder


class Server:
    def __init__(self, dpkit, folder):
        self.port = free_port()
        (folder / "serve.toml").write_text(
            f'address = "127.0.0.1:{self.port}"\nstate_dir = "state"\n'
            '[[datasets]]\ndescription = "adult.toml"\n'
            "[limits]\nrequests_per_second = 1000\nburst = 1000\nquery_timeout_seconds = 120\n"
        )
        self.process = subprocess.Popen(
            [dpkit, "serve", "--config", str(folder / "serve.toml"), "--demo"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        key_file = folder / "state" / "demo.key"
        for _ in range(600):
            if key_file.exists() and self.ready():
                break
            time.sleep(0.1)
        else:
            raise SystemExit("dpkit serve did not start")
        self.key = key_file.read_text().strip()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port)

    def ready(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def ask(self, sql, epsilon):
        body = json.dumps({"dataset": "adult", "sql": sql, "epsilon": epsilon})
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        started = time.perf_counter()
        self.connection.request("POST", "/v1/query", body, headers)
        response = self.connection.getresponse()
        text = response.read()
        return time.perf_counter() - started, response.status, text

    def stop(self):
        self.process.terminate()
        self.process.wait()


RUNS = itertools.count()


def cli(dpkit, folder, sql, epsilon):
    # Each run its own request (a comment numbers it): the command line
    # replays an identical one from the ledger, without running it.
    sql = f"{sql}\n-- run {next(RUNS)}"
    command = [dpkit, "query", "--description", str(folder / "adult.toml"), "--epsilon", repr(epsilon), sql]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True)
    return time.perf_counter() - started, done.returncode, done.stderr


def spread(values):
    """The median absolute deviation, scaled to a normal's sd."""
    middle = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - middle) for v in values)


def classified(with_times, without_times):
    """How many runs the best threshold (either way round) puts on their side."""
    labelled = sorted([(t, 1) for t in with_times] + [(t, 0) for t in without_times])
    best = 0
    for cut in range(len(labelled) + 1):
        above_with = sum(1 for t, side in labelled[cut:] if side == 1)
        below_without = sum(1 for t, side in labelled[:cut] if side == 0)
        right = above_with + below_without
        best = max(best, right, len(labelled) - right)
    return best


def report(name, how, with_times, without_times, outcome):
    a, b = statistics.median(with_times), statistics.median(without_times)
    s = max(spread(with_times), spread(without_times), 1e-9)
    print(
        f"{name:<16} {how:<6} with {a * 1e3:9.2f} ms  without {b * 1e3:9.2f} ms  "
        f"spread {s * 1e3:7.2f} ms  difference {abs(a - b) / s:5.2f} spreads  "
        f"classified {classified(with_times, without_times)}/{len(with_times) + len(without_times)}  {outcome}"
    )


def outcome_of(status, text):
    if status == 200:
        return "answered"
    try:
        error = json.loads(text).get("error", {})
        return "refused: " + str(error.get("message", error))[:60]
    except (ValueError, AttributeError):
        return f"status {status}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dpkit", required=True)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--no-cli", action="store_true")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; {args.runs} runs a side, interleaved")
    root = pathlib.Path(tempfile.mkdtemp(prefix="dpkit-timing-"))
    sides = [dataset(root / "with", True), dataset(root / "without", False)]
    servers = [Server(args.dpkit, folder) for folder in sides]
    try:
        step = 0
        for name, sql in ATTACKS.items():
            if args.only and name not in args.only:
                continue
            times = ([], [])
            status = text = None
            for run in range(args.runs):
                for side, server in enumerate(servers):
                    step += 1
                    took, status, text = server.ask(sql, 0.01 + step * 1e-12)
                    times[side].append(took)
            report(name, "serve", times[0], times[1], outcome_of(status, text))
            if args.no_cli:
                continue
            times = ([], [])
            for run in range(args.runs):
                for side, folder in enumerate(sides):
                    step += 1
                    took, code, stderr = cli(args.dpkit, folder, sql, 0.01 + step * 1e-12)
                    times[side].append(took)
            outcome = "answered" if code == 0 else "refused: " + stderr.decode()[:50].strip()
            report(name, "query", times[0], times[1], outcome)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
