#!/usr/bin/env python3
"""How long `dpkit query` takes to answer on Adult when the rows live in
SQLite or PostgreSQL, against the same CSV file, and the planned work of each
query (crates/dpkit-query/src/timing.rs `Speed`, the book's "What timing can
still show").

Loads data/adult/adult.data.csv into a SQLite file and into a PostgreSQL
server started here (initdb + pg_ctl on 127.0.0.1, work_units.py's `Server`,
stopped and removed at the end), writes a description for each beside the
bundled one, and times the whole `dpkit query` process (a fresh ledger each
run, in /dev/shm when it is there), `--runs` times a query and engine. Each
line gives the median, the least and the most wall time, the planned units a
person (from `--explain`), and the least time per unit a person over the
description's 32,561 people: an upper bound on what a typical run takes a
unit, process start and release time included.

Usage: python3 database_waits.py --dpkit PATH [--runs 3]
"""

import argparse
import csv
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time

import work_units

QUERIES = [
    "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex",
    "SELECT education, AVG(age) AS a FROM adult GROUP BY education",
    "SELECT COUNT(*) AS n FROM adult WHERE occupation LIKE '%Sales%' OR workclass LIKE '%gov%'",
]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADULT = os.path.join(ROOT, "data", "adult")
INTEGERS = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}


def adult_rows():
    with open(os.path.join(ADULT, "adult.data.csv"), newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header = rows[0]
    typed = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        typed.append([int(v) if h in INTEGERS and v.strip().lstrip("-").isdigit() else v.strip()
                      for h, v in zip(header, row)])
    return header, typed


def column_type(name, sql_integer):
    return sql_integer if name in INTEGERS else "TEXT"


def load_sqlite(folder, header, rows):
    path = os.path.join(folder, "adult.sqlite")
    con = sqlite3.connect(path)
    columns = ", ".join(f'"{h}" {column_type(h, "INTEGER")}' for h in header)
    con.execute(f"CREATE TABLE adult ({columns})")
    con.executemany(f"INSERT INTO adult VALUES ({', '.join('?' * len(header))})", rows)
    con.commit()
    con.close()
    return f'sqlite = "{path}"'


def load_postgres(server, header, rows):
    wire = server.connect()
    columns = ", ".join(f'"{h}" {column_type(h, "BIGINT")}' for h in header)
    wire.query(f"CREATE TABLE adult ({columns})")
    for start in range(0, len(rows), 1000):
        values = ", ".join("(" + ", ".join(work_units.pg_literal(v) for v in row) + ")"
                           for row in rows[start:start + 1000])
        wire.query(f"INSERT INTO adult VALUES {values}")
    wire.query("ANALYZE adult")
    wire.close()
    return f'postgres = "host=127.0.0.1 port={server.port} user=dpkit dbname=postgres"'


def description(folder, name, table_line):
    """The bundled description, its file replaced by `table_line`, its
    public tables' files named where they are."""
    with open(os.path.join(ADULT, "adult.toml")) as f:
        text = f.read()
    text = re.sub(r'^file = "adult.data.csv"$', table_line, text, count=1, flags=re.M)
    text = re.sub(r'^file = "(?!/)([^"]+)"$', lambda m: f'file = "{os.path.join(ADULT, m.group(1))}"',
                  text, flags=re.M)
    path = os.path.join(folder, f"{name}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def timed(dpkit, toml, sql, ledger_folder):
    ledger = os.path.join(ledger_folder, "ledger.sqlite")
    for suffix in ["", "-wal", "-shm", "-journal"]:
        if os.path.exists(ledger + suffix):
            os.remove(ledger + suffix)
    started = time.monotonic()
    out = subprocess.run([dpkit, "query", "--description", toml, "--ledger", ledger, "--epsilon", "0.1",
                          sql], capture_output=True, text=True)
    took = time.monotonic() - started
    if out.returncode != 0:
        raise RuntimeError(f"dpkit failed: {(out.stdout + out.stderr).strip()[-300:]}")
    return took


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dpkit", required=True, help="the dpkit binary")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {work_units.machine()}", flush=True)
    folder = tempfile.mkdtemp(prefix="database-waits-")
    os.chmod(folder, 0o755)  # the server's folder inside it is the postgres user's
    ledgers = tempfile.mkdtemp(prefix="database-waits-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    server = None
    try:
        header, rows = adult_rows()
        server = work_units.Server(folder)
        engines = [
            ("files", description(folder, "files", f'file = "{os.path.join(ADULT, "adult.data.csv")}"')),
            ("sqlite", description(folder, "sqlite", load_sqlite(folder, header, rows))),
            ("postgres", description(folder, "postgres", load_postgres(server, header, rows))),
        ]
        people = len(rows)
        for sql in QUERIES:
            print(f"\n{sql}", flush=True)
            for engine, toml in engines:
                work, _ = work_units.explain(args.dpkit, toml, sql)
                walls = [timed(args.dpkit, toml, sql, ledgers) for _ in range(args.runs)]
                print(f"  {engine:<9} {work:>6} units  median {statistics.median(walls):6.2f} s "
                      f"[{min(walls):.2f}..{max(walls):.2f}]  "
                      f"{min(walls) / (people * work) * 1e9:.2f} ns a unit a person at most", flush=True)
    finally:
        if server:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(ledgers, ignore_errors=True)


if __name__ == "__main__":
    main()
