"""Whole-process time of typical Adult queries: `dpkit query` (and its
`--explain`) against sqlite3 on an imported copy of the same table, in one run.

    python docs/bench/adult_startup.py --dpkit NAME=PATH [--dpkit NAME=PATH …] [--repeat 20]

Each command runs once to warm the page cache, then `--repeat` times; the
table shows medians. Prints the CPU model first: figures from different
machines do not compare.
"""

import argparse
import csv
import pathlib
import sqlite3
import tempfile

from timing import cpu_model, timed

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = [
    "SELECT sex, COUNT(*) AS people, AVG(age) AS mean_age FROM adult GROUP BY sex",
    "SELECT race, COUNT(*), SUM(\"hours-per-week\") FROM adult WHERE age >= 18 GROUP BY race",
    "SELECT COUNT(*) FROM adult WHERE age > 50",
]




def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dpkit", action="append", required=True, help="NAME=PATH of a dpkit binary")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; medians of {args.repeat} runs, whole process")
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        description = folder / "adult.toml"
        text = (ROOT / "data/adult/adult.toml").read_text()
        csv_path = ROOT / "data/adult/adult.data.csv"
        description.write_text(text.replace('file = "adult.data.csv"', f'file = "{csv_path}"')
                               .replace("epsilon = 10.0", "epsilon = 1000.0"))
        database = folder / "adult.db"
        with open(csv_path) as handle, sqlite3.connect(database) as connection:
            rows = list(csv.reader(handle))
            columns = ", ".join(f'"{c}"' for c in rows[0])
            connection.execute(f"CREATE TABLE adult ({columns})")
            marks = ", ".join("?" for _ in rows[0])
            data = [row for row in rows[1:] if len(row) == len(rows[0])]
            connection.executemany(f"INSERT INTO adult VALUES ({marks})", data)
        builds = [spec.split("=", 1) for spec in args.dpkit]
        header = " | ".join(f"dpkit {name} query | {name} --explain" for name, _ in builds)
        print(f"| query | {header} | sqlite3 (not private) |")
        print("|---" * (2 * len(builds) + 2) + "|")
        for index, sql in enumerate(QUERIES):
            cells = []
            for name, binary in builds:
                ledger = folder / f"ledger-{name}-{index}.sqlite"
                base = [binary, "query", "--description", str(description), "--ledger", str(ledger)]
                query = timed(base + ["--epsilon", "0.01", sql], args.repeat)
                explain = timed(base + ["--epsilon", "0.01", "--explain", sql], args.repeat)
                cells += [f"{query * 1000:.0f} ms", f"{explain * 1000:.0f} ms"]
            plain = timed(["sqlite3", str(database), sql], args.repeat)
            print(f"| `{sql}` | {' | '.join(cells)} | {plain * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
