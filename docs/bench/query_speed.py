"""Whole-process query times: dpkit builds against DataFusion's and DuckDB's
Python packages, on the same generated files, in one run.

    python docs/bench/query_speed.py --dpkit dev=PATH --dpkit release=PATH [--rows 10000000]

Needs `pip install duckdb datafusion` (DuckDB also writes the test files).
Each command runs once to warm the page cache, then `--repeat` times; the
table shows medians and each one's ratio to the fastest dpkit build.
Prints the CPU model first: figures from different machines do not compare.
"""

import argparse
import pathlib
import sys
import tempfile

from timing import cpu_model, timed

SQL = "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM people GROUP BY sex"

DESCRIPTION = """\
[table]
name = "people"
file = "{file}"

[privacy_unit]
kind = "row"

[budget]
epsilon = 1000.0
delta = 1e-5

[columns.age]
type = "integer"
bounds = [17, 90]

[columns.sex]
type = "text"
domain = ["Female", "Male"]

[columns.hours]
type = "integer"
bounds = [1, 99]
"""

PEER = {
    "DataFusion (Python)": """
import datafusion, sys
ctx = datafusion.SessionContext()
path = sys.argv[1]
(ctx.register_parquet if path.endswith('.parquet') else ctx.register_csv)('people', path)
ctx.sql(sys.argv[2]).collect()
""",
    "DuckDB (Python)": """
import duckdb, sys
path = sys.argv[1]
reader = 'read_parquet' if path.endswith('.parquet') else 'read_csv_auto'
duckdb.sql(f"CREATE VIEW people AS SELECT * FROM {reader}('{path}')")
duckdb.sql(sys.argv[2]).fetchall()
""",
}



def generate(folder, rows):
    import duckdb

    select = (
        f"SELECT CASE WHEN hash(i) % 3 = 0 THEN 'Female' ELSE 'Male' END AS sex, "
        f"17 + (hash(i * 7) % 74)::INTEGER AS age, 1 + (hash(i * 13) % 99)::INTEGER AS hours "
        f"FROM range({rows}) t(i)"
    )
    files = {}
    for kind in ("csv", "parquet"):
        path = folder / f"people.{kind}"
        options = "(HEADER)" if kind == "csv" else "(FORMAT PARQUET)"
        duckdb.sql(f"COPY ({select}) TO '{path}' {options}")
        description = folder / f"people-{kind}.toml"
        description.write_text(DESCRIPTION.format(file=path.name))
        files[kind] = (path, description)
    return files



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dpkit", action="append", required=True, help="NAME=PATH of a dpkit binary")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; {args.rows:,} rows; medians of {args.repeat} runs, whole process")
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        files = generate(folder, args.rows)
        rows = []
        for kind, (path, description) in files.items():
            results = []
            for spec in args.dpkit:
                name, binary = spec.split("=", 1)
                ledger = folder / f"{name}-{kind}.ledger.sqlite"
                command = [binary, "query", "--description", str(description), "--ledger", str(ledger),
                           "--epsilon", "0.01", SQL]
                results.append((f"dpkit {name}", timed(command, args.repeat)))
            for name, script in PEER.items():
                command = [sys.executable, "-c", script, str(path), SQL]
                results.append((name, timed(command, args.repeat)))
            fastest = min(t for n, t in results if n.startswith("dpkit"))
            for name, seconds in results:
                rows.append(f"| {kind.upper()} | {name} | {seconds:.2f} s | {seconds / fastest:.2f} |")
        print("| file | what | time | ratio to the fastest dpkit |")
        print("|---|---|---|---|")
        print("\n".join(rows))


if __name__ == "__main__":
    main()
