#!/usr/bin/env python3
"""What one person's rows cost a query on SQLite and PostgreSQL, per unit of
dpkit's planned work (crates/dpkit-total/src/work.rs).

Mirrors crates/dpkit-query/tests/row_cost.rs (`Neighbours`,
`median_difference`): two neighbouring tables, the same but for one person's
rows; the same statement run on each, alternately; the median of the paired
differences; divided by the work dpkit plans for that query (units, taken from
`dpkit query --explain` on the same description). Each statement is the SQL
dpkit sends to that engine (generated here as dpkit spells it; `--dpkit PATH`
checks the text and the units against the binary's `--explain`).

Engines:
  * SQLite, through Python's sqlite3 module. dpkit runs every function, cast,
    LIKE and arithmetic node of the plan as a function registered on the
    connection (crates/dpkit-databases/src/bridge.rs: DataFusion on a one-row
    batch). Here those functions are Python stand-ins with the same results;
    they cost less per call than dpkit's bridge. With `--dpkit`, the bridge's
    real cost per call is measured through the binary (reached against
    unreached branches, as the CPU time of `dpkit query` processes, since
    their wall time includes the release time's noisy hold) and a projected
    figure is printed beside the measured one.
  * PostgreSQL (Debian's binaries, newest under /usr/lib/postgresql/*/bin),
    started here with initdb + pg_ctl in a temporary folder on 127.0.0.1,
    stopped and removed at the end. A minimal wire-protocol client (simple
    query protocol, trust authentication) so that nothing but python3 is
    needed. Each statement is prepared once per side (PREPARE/EXECUTE), so
    its planning, the same on both sides but noisy, is left out.

Each case prints the median difference, its IQR and a 95% interval, ns per
planned unit, the plain `SELECT COUNT(*)`'s own difference (reading and
capping the target's rows, which the model leaves out), and the "net" ns per
unit: (difference - plain difference) / (units - plain units).

Only python3, the sqlite3 module and PostgreSQL's server binaries are needed;
as root, the server runs as the `postgres` user (runuser).

Usage: python3 work_units.py [--pairs 101] [--dpkit /tmp/stranger-bin/dpkit]
                             [--only sqlite|postgres] [--cases a,b] [--json out.json]
"""

import argparse
import gc
import glob
import json
import math
import os
import random
import re
import shutil
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from decimal import Decimal

MAX_WORK = 1 << 17
NS_PER_UNIT = 4.0
I64 = (-(1 << 63), (1 << 63) - 1)

# ---------------------------------------------------------------- the tables

# Values libm finds slow (row_cost.rs `Neighbours::new`), for the target's x.
SLOW = [-1e-310, -3.7, -1e300, -0.000123]
# The target's id: large, so that numeric arithmetic (PostgreSQL spells
# integer arithmetic in NUMERIC) works on many digits. The others are 1..47.
TARGET_ID = 987654321098765
# row_cost.rs's fillers, and incompressible letters (PostgreSQL compresses
# long text; a random one is stored as it is).
FILLERS = ["ΐ", "İ", "🙂", "ab", "rnd"]


def filled(filler, characters, seed=7):
    if filler == "rnd":
        rng = random.Random(seed)
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxy") for _ in range(characters))
    return filler * (characters // len(filler))


def numeric_rows(target_rows, with_target):
    rows = [(i, 1.0) for i in range(1, 48) for _ in range(2)]
    if with_target:
        rows += [(TARGET_ID, SLOW[r % len(SLOW)]) for r in range(target_rows)]
    return rows


def text_rows(target_rows, value, with_target):
    rows = [(i, "x") for i in range(1, 48) for _ in range(2)]
    if with_target:
        rows += [(TARGET_ID, value) for _ in range(target_rows)]
    return rows


# ------------------------------------------------------ dpkit's SQL, spelled

def rust_exp(x):
    """Rust's `{:e}` of an f64 (shortest digits): 0.501 -> 5.01e-1."""
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    d = "".join(map(str, digits))
    mantissa = d[0] + ("." + d[1:] if len(d) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{exponent + len(d) - 1}"


class Spell:
    """The pieces of a statement as dpkit writes it for one engine."""

    def __init__(self, engine):
        self.engine = engine
        self.q = "`" if engine == "sqlite" else '"'

    def col(self, table, name):
        return f"{self.q}{table}{self.q}.{self.q}{name}{self.q}"

    def double(self, literal):
        # A Float64 literal: as printed on SQLite, a cast of its `{:e}` on PG.
        if self.engine == "sqlite":
            return repr(literal)
        return f"CAST('{rust_exp(literal)}' AS DOUBLE PRECISION)"

    def zero_double(self):
        return "CAST(0 AS DOUBLE)" if self.engine == "sqlite" else "CAST(0 AS DOUBLE PRECISION)"

    def in_bigint(self, r):
        # crates/dpkit-databases/src/spelling.rs `in_bigint`: `r` once.
        return (f"CAST(NULLIF(NULLIF(LEAST(GREATEST({r}, -9223372036854775809), "
                f"9223372036854775808), -9223372036854775809), 9223372036854775808) AS BIGINT)")

    def int_op(self, x, op, y):
        # crates/dpkit-databases/src/spelling.rs `postgres_integer`.
        return self.in_bigint(f"(CAST(({x}) AS NUMERIC) {op} ({y}))")


def public_cte(engine, public_rows):
    ks = [k % 7 for k in range(public_rows)]
    if engine == "sqlite":
        values = ", ".join(f"({k})" for k in ks)
        return f'"p" AS (SELECT column1 AS "k" FROM (VALUES {values}))'
    values = ", ".join(f"(CAST({k} AS BIGINT))" for k in ks)
    return f'"p" AS (SELECT CAST(column1 AS BIGINT) AS "k" FROM (VALUES {values}) AS dpkit_public)'


def raw_cte(engine, kind, max_length):
    if engine == "sqlite":
        ident = "CASE WHEN typeof(\"id\") = 'integer' THEN \"id\" END AS \"id\""
        if kind == "num":
            col = "CASE WHEN (+\"x\") COLLATE BINARY < '' THEN \"x\" END AS \"x\""
        else:
            col = ("(CASE WHEN (+\"a\") COLLATE BINARY < x'' THEN CAST(\"a\" AS TEXT) END) COLLATE BINARY AS \"a\", "
                   "(CASE WHEN (+\"a\") COLLATE BINARY < x'' THEN CASE WHEN octet_length(\"a\") <= "
                   f"{max_length} THEN CAST(\"a\" AS TEXT) WHEN instr(CAST(\"a\" AS TEXT), char(0)) = 0 "
                   f"THEN SUBSTR(CAST(\"a\" AS TEXT), 1, {max_length}) END END) COLLATE BINARY AS \"__dpkit_cut_a\"")
    else:
        ident = 'CAST("id" AS BIGINT) AS "id"'
        col = ('CAST("x" AS DOUBLE PRECISION) AS "x"' if kind == "num"
               else 'CAST("a" AS TEXT) COLLATE "C" AS "a"')
    return f'"__dpkit_raw_t" AS (SELECT {ident}, {col} FROM "t")'


def capped(engine, kind, cap, max_length, checks, inner_alias):
    """The per-person cap over the typed view; `checks` names the two bridged
    functions of the id's check on SQLite."""
    s = Spell(engine)
    v = "x" if kind == "num" else "a"
    q = s.q
    raw = lambda c: s.col("__dpkit_raw_t", c)
    if engine == "sqlite":
        check = f"(dpkit_f{checks[0]}({raw('id')}) = dpkit_f{checks[1]}({raw('id')}))"
        value = raw("x") if kind == "num" else raw("__dpkit_cut_a")
        tail = f") WHERE {q}id{q} IS NOT NULL)"
    else:
        check = f"(CAST({raw('id')} AS VARCHAR) = CAST({raw('id')} AS VARCHAR))"
        value = raw("x") if kind == "num" else f"CAST(({raw('a')}) AS VARCHAR({max_length}))"
        tail = f") AS {q}{inner_alias}{q} WHERE {q}id{q} IS NOT NULL)"
    return (f"(SELECT {q}id{q}, {q}{v}{q} FROM (SELECT {q}id{q} AS {q}id{q}, {q}{v}{q} AS {q}{v}{q}, "
            f"row_number() OVER (PARTITION BY {q}id{q} ORDER BY random() ASC NULLS FIRST, {q}id{q} ASC NULLS FIRST, "
            f"{q}{v}{q} ASC NULLS FIRST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS {q}__dpkit_row_of_person{q} "
            f"FROM (SELECT CASE WHEN {check} THEN {raw('id')} ELSE NULL END AS {q}id{q}, "
            f"{value} AS {q}{v}{q} FROM {q}__dpkit_raw_t{q}{tail} AS {q}__dpkit_n1{q} "
            f"WHERE ({q}__dpkit_row_of_person{q} <= {cap}))")


def statement(engine, case, max_length=None):
    """The whole statement dpkit sends for `case` on `engine`."""
    s = Spell(engine)
    q = s.q
    head = f"WITH {raw_cte(engine, case.kind, max_length)}, {public_cte(engine, case.public)} "
    measure = f"SELECT count(1) AS {q}__dpkit_measure_0{q} FROM "
    if case.self_join:
        a = capped(engine, case.kind, case.cap, max_length, (0, 1), "__dpkit_n4")
        b = capped(engine, case.kind, case.cap, max_length, (2, 3), "__dpkit_n4")
        body = (f"{a} AS {q}__dpkit_n2{q} INNER JOIN {b} AS {q}__dpkit_n3{q} ON "
                f"{s.col('__dpkit_n2', 'id')} = {s.col('__dpkit_n3', 'id')} WHERE "
                f"({s.col('__dpkit_n2', 'x')} <= {s.col('__dpkit_n3', 'x')})")
        return head + measure + body
    table = capped(engine, case.kind, case.cap, max_length, (0, 1), "__dpkit_n2") + f" AS {q}t{q}"
    if case.public_join:
        table += f" INNER JOIN {q}p{q} ON true"
    where = case.where(s)
    return head + measure + table + (f" WHERE {where}" if where else "")


# ------------------------------------------------------------------ the cases

class Case:
    def __init__(self, name, what, kind, analyst, where, units, engines, rows=1, cap=2,
                 public=5, public_join=False, self_join=False, functions=(), group="row_cost",
                 per_byte=None, baseline=None):
        self.name, self.what, self.kind = name, what, kind
        self.analyst = analyst          # the query as the analyst writes it
        self.where = where              # Spell -> the WHERE clause dpkit sends
        self.units = units              # dpkit's planned work (--explain)
        self.engines = engines
        self.rows, self.cap, self.public = rows, cap, public
        self.public_join, self.self_join = public_join, self_join
        self.functions = list(functions)  # SQLite: the bridged nodes f2, f3, ...
        self.group = group
        self.per_byte = per_byte        # text: units per byte of the function
        self.plain_units = None         # the plain count's units (PLAIN_UNITS, or dpkit)
        self.max_length = None          # text: the column's max_length (characters)
        self.baseline = baseline


def untaken_analyst(function, argument, branches):
    arms = "".join(f" WHEN {function}({argument}, 1.001) BETWEEN {0.5 + i * 1e-3!r} AND "
                   f"{0.5 + i * 1e-3 + 1e-3!r} THEN 1" for i in range(branches))
    return f"(CASE{arms} ELSE 0 END) < 0"


def gated(s, inner):
    """`CASE WHEN x < 0 THEN <inner> ELSE false END`: only the target's rows
    (x negative) reach the costly part."""
    return f"CASE WHEN ({s.col('t', 'x')} < {s.zero_double()}) THEN ({inner}) ELSE false END"


def bounds(i):
    return 0.5 + i * 1e-3, 0.5 + i * 1e-3 + 1e-3


def bridged_branches(s, branches, call):
    """CASE arms whose test is a bridged call (SQLite only): `call(s, i)`
    gives the call text of branch i."""
    arms = "".join(f" WHEN ({call(s, i)} BETWEEN {s.double(bounds(i)[0])} AND {s.double(bounds(i)[1])}) THEN 1"
                   for i in range(branches))
    return f"CASE{arms} ELSE 0 END < 0"


def analyst_comparison_branches(branches):
    """The analyst's query whose WHERE `comparison_branches` spells: only the
    target's rows (x < 0) reach `branches` BETWEEN tests."""
    arms = "".join(f" WHEN x BETWEEN {bounds(i)[0]!r} AND {bounds(i)[1]!r} THEN 1" for i in range(branches))
    return f"SELECT COUNT(*) FROM t WHERE CASE WHEN x < 0 THEN (CASE{arms} ELSE 0 END) < 0 ELSE false END"


def comparison_branches(s, branches):
    arms = "".join(f" WHEN ({s.col('t', 'x')} BETWEEN {s.double(bounds(i)[0])} AND {s.double(bounds(i)[1])}) THEN 1"
                   for i in range(branches))
    return f"CASE{arms} ELSE 0 END < 0"


def int_join_branches(s, branches):
    arms = []
    for i in range(branches):
        lo, hi = 1000 + 2 * i, 1001 + 2 * i
        if s.engine == "sqlite":
            e = f"dpkit_f{3 + 2 * i}(dpkit_f{2 + 2 * i}({s.col('t', 'id')}), {s.col('p', 'k')})"
        else:
            e = s.int_op(s.int_op(s.col("t", "id"), "*", "7"), "+", s.col("p", "k"))
        arms.append(f" WHEN ({e} BETWEEN {lo} AND {hi}) THEN 1")
    return f"CASE{''.join(arms)} ELSE 0 END < 0"


def nested_adds(s, depth):
    if s.engine == "sqlite":
        e = s.col("t", "id")
        for i in range(depth):
            e = f"dpkit_f{2 + i}({e})"
        return f"{e} = 5"
    e = s.col("t", "id")
    for i in range(depth):
        e = s.int_op(e, "+", str(i + 1))
    return f"{e} = 5"


def row_adds(s, branches):
    arms = []
    for i in range(branches):
        if s.engine == "sqlite":
            e = f"dpkit_f{2 + i}({s.col('t', 'id')})"
        else:
            e = s.int_op(s.col("t", "id"), "+", str(i + 1))
        arms.append(f" WHEN ({e} = 1001) THEN 1")
    return f"CASE{''.join(arms)} ELSE 0 END < 0"


def cases():
    neg = "CASE WHEN x < 0 THEN"
    out = []
    # --- row_cost.rs's numbers_and_joins cases (atan2/pow/real arithmetic are
    # refused on PostgreSQL, so those run on SQLite only).
    out.append(Case("atan2_30", "atan2, 30 branches (1 row)", "num",
                    f"SELECT COUNT(*) FROM t WHERE {neg} {untaken_analyst('atan2', 'x', 30)} ELSE false END",
                    lambda s: gated(s, bridged_branches(s, 30, lambda s, i: f"dpkit_f{2 + i}({s.col('t', 'x')})")),
                    117520, ["sqlite"], rows=1, cap=2, public=1, functions=["atan2"] * 30))
    out.append(Case("pow_30", "pow, 30 branches (1 row)", "num",
                    f"SELECT COUNT(*) FROM t WHERE {neg} {untaken_analyst('pow', 'x', 30)} ELSE false END",
                    lambda s: gated(s, bridged_branches(s, 30, lambda s, i: f"dpkit_f{2 + i}({s.col('t', 'x')})")),
                    117520, ["sqlite"], rows=1, cap=2, public=1, functions=["pow"] * 30))
    out.append(Case("atan2_24_12rows", "atan2, 24 branches, 12 rows", "num",
                    f"SELECT COUNT(*) FROM t WHERE {neg} {untaken_analyst('atan2', 'x', 24)} ELSE false END",
                    lambda s: gated(s, bridged_branches(s, 24, lambda s, i: f"dpkit_f{2 + i}({s.col('t', 'x')})")),
                    106312, ["sqlite"], rows=12, cap=12, public=1, functions=["atan2"] * 24))
    out.append(Case("join5_atan2_6", "join of 5 public rows, then atan2 (x + p.k), 6 branches", "num",
                    f"SELECT COUNT(*) FROM t JOIN p ON true WHERE {neg} {untaken_analyst('atan2', 'x + p.k', 6)} ELSE false END",
                    lambda s: gated(s, bridged_branches(
                        s, 6, lambda s, i: f"dpkit_f{3 + 2 * i}(dpkit_f{2 + 2 * i}({s.col('t', 'x')}, CAST({s.col('p', 'k')} AS DOUBLE)))")),
                    115120, ["sqlite"], rows=1, cap=2, public=5, public_join=True,
                    functions=["add_real", "atan2"] * 6))
    out.append(Case("join20", "join of 20 public rows", "num",
                    "SELECT COUNT(*) FROM t JOIN p ON true WHERE t.x < 0 AND p.k >= 0",
                    lambda s: f"(({s.col('t', 'x')} < {s.zero_double()}) AND ({s.col('p', 'k')} >= 0))",
                    0, ["sqlite", "postgres"], rows=1, cap=2, public=20, public_join=True))
    out.append(Case("selfjoin14", "self-join on the person, 14 rows", "num",
                    "SELECT COUNT(*) FROM t a JOIN t b ON a.id = b.id WHERE a.x <= b.x",
                    None, 81520, ["sqlite", "postgres"], rows=14, cap=14, public=1, self_join=True))
    # --- the same shapes in what PostgreSQL accepts: comparisons, and
    # integer arithmetic (spelled in NUMERIC there), through a fan-out.
    out.append(Case("cmp_40", "comparison branches (x BETWEEN), 40 branches (1 row)", "num",
                    analyst_comparison_branches(40),
                    lambda s: gated(s, comparison_branches(s, 40)), 0, ["sqlite", "postgres"],
                    rows=1, cap=2, public=1, group="pg_shapes"))
    out.append(Case("join5_int_6", "join of 5 public rows, then integer t.id * 7 + p.k, 6 branches", "num",
                    f"SELECT COUNT(*) FROM t JOIN p ON true WHERE {neg} (CASE" + "".join(
                        f" WHEN t.id * 7 + p.k BETWEEN {1000 + 2 * i} AND {1001 + 2 * i} THEN 1" for i in range(6))
                    + " ELSE 0 END) < 0 ELSE false END",
                    lambda s: gated(s, int_join_branches(s, 6)), 0, ["sqlite", "postgres"],
                    rows=1, cap=2, public=5, public_join=True, functions=["mul7", "add_int"] * 6,
                    group="pg_shapes"))
    for depth, rows, cap in [(6, 1, 2), (8, 1, 2), (8, 12, 12), (24, 12, 12)]:
        e = "t.id"
        for i in range(depth):
            e = f"({e} + {i + 1})"
        out.append(Case(f"nested_add{depth}_{rows}rows", f"nested integer additions, depth {depth}, {rows} row(s)", "num",
                        f"SELECT COUNT(*) FROM t WHERE CASE WHEN x < 0 THEN {e} = 5 ELSE false END",
                        (lambda d: lambda s: gated(s, nested_adds(s, d)))(depth), 0, ["sqlite", "postgres"],
                        rows=rows, cap=cap, public=1, functions=[f"add{i + 1}" for i in range(depth)],
                        group="pg_shapes"))
    # --- many rows per person: a node's per-row cost without the batch term
    # (4 units a node a row; 128 a node for each of 4 batches, whatever the
    # rows) -- beyond row_cost.rs.
    out.append(Case("rows500_cmp_4", "4 comparison branches on 500 rows", "num",
                    analyst_comparison_branches(4),
                    lambda s: gated(s, comparison_branches(s, 4)), 0, ["sqlite", "postgres"],
                    rows=500, cap=500, public=1, group="many_rows"))
    out.append(Case("rows500_add_4", "4 integer-addition branches (id + i = 1001) on 500 rows", "num",
                    f"SELECT COUNT(*) FROM t WHERE {neg} (CASE" + "".join(
                        f" WHEN id + {i + 1} = 1001 THEN 1" for i in range(4)) + " ELSE 0 END) < 0 ELSE false END",
                    lambda s: gated(s, row_adds(s, 4)), 0, ["sqlite", "postgres"],
                    rows=500, cap=500, public=1, functions=[f"add{i + 1}" for i in range(4)],
                    group="many_rows"))
    # --- text at max_length (row_cost.rs's every_text_function...; two rows
    # of the target at the cap of 2). PostgreSQL refuses upper, lower, LIKE
    # with `_` or an inner `%`, and length's cast: it runs LIKE '%zz%' and
    # greatest.
    text = [
        ("upper", "upper(a) = 'x'", 16, ["sqlite"], lambda s: f"(dpkit_f2({s.col('t', 'a')}) = 'x')", ["upper"]),
        ("lower", "lower(a) = 'x'", 4, ["sqlite"], lambda s: f"(dpkit_f2({s.col('t', 'a')}) = 'x')", ["lower"]),
        ("like_zz", "a LIKE '%zz%'", 1, ["sqlite", "postgres"],
         lambda s: f"dpkit_f2({s.col('t', 'a')})" if s.engine == "sqlite" else f"{s.col('t', 'a')} LIKE '%zz%'",
         ["like_zz"]),
        ("like_a_b_a", "a LIKE '%a_b_a%'", 1, ["sqlite"], lambda s: f"dpkit_f2({s.col('t', 'a')})", ["like_a_b_a"]),
        ("length", "length(a) = 3", 1, ["sqlite"], lambda s: f"(dpkit_f3(dpkit_f2({s.col('t', 'a')})) = 3)",
         ["length", "i32_to_i64"]),
        ("greatest", "greatest(a, 'x') = 'y'", 1, ["sqlite", "postgres"],
         lambda s: f"(dpkit_f2({s.col('t', 'a')}) = 'y')" if s.engine == "sqlite"
         else f"(greatest({s.col('t', 'a')}, 'x') = 'y')", ["greatest_x"]),
    ]
    for name, expr, per_byte, engines, where, functions in text:
        out.append(Case(f"text_{name}", f"{expr} at max_length (2 rows)", "text",
                        f"SELECT COUNT(*) FROM t WHERE {expr}", where, 0, engines, rows=2, cap=2,
                        public=5, functions=functions, group="text", per_byte=per_byte))
    return out


# Planned units and max_length, from `dpkit query --explain` (dpkit at
# /tmp/stranger-bin/dpkit); `--dpkit` checks them again.
PLANNED = {
    "atan2_30": 117928, "pow_30": 117928, "atan2_24_12rows": 106896, "join5_atan2_6": 104840,
    "join20": 89120, "selfjoin14": 81520, "cmp_40": 111768, "join5_int_6": 96200,
    "nested_add6_1rows": 13488, "nested_add8_1rows": 15568, "nested_add8_12rows": 16608,
    "nested_add24_12rows": 34528, "rows500_cmp_4": 79920, "rows500_add_4": 89968,
    "text_upper": 130994, "text_lower": 131058, "text_like_zz": 131072, "text_like_a_b_a": 131070,
    "text_length": 131072, "text_greatest": 131068,
}
# The plain `SELECT COUNT(*) FROM t` on each case's table (its reading and
# capping): the part of a case's units that the "net" figures leave out.
PLAIN_UNITS = {
    "atan2_24_12rows": 2144, "nested_add8_12rows": 2144, "nested_add24_12rows": 2144, "selfjoin14": 2160,
    "rows500_cmp_4": 6048, "rows500_add_4": 6048,
}   # every other case: 2064
MAX_LENGTH = {
    "text_upper": 987, "text_lower": 3950, "text_like_zz": 15866, "text_like_a_b_a": 15930,
    "text_length": 15738, "text_greatest": 15736,
}


# ------------------------------------------------------------ Python bridges

def _none(*args):
    return any(a is None for a in args)


def _i64(v):
    return v if I64[0] <= v <= I64[1] else None


def make_functions():
    """Stand-ins for dpkit's bridged nodes (DataFusion's results, NULL for
    NULL; SQLite stores NaN as NULL)."""
    def finite(v):
        return None if v is None or v != v else v

    def atan2(x):
        return None if x is None else math.atan2(x, 1.001)

    def pow_(x):
        if x is None:
            return None
        try:
            return finite(math.pow(x, 1.001))
        except (ValueError, OverflowError):
            return None   # DataFusion: NaN (negative base) or inf; SQLite: NULL

    f = {
        "id_a": lambda v: None if v is None else str(int(v)),   # TRY_CAST(TRY_CAST(id AS Int64) AS Utf8)
        "id_b": lambda v: None if v is None else str(v),        # TRY_CAST(id AS Utf8)
        "atan2": atan2,
        "pow": pow_,
        "add_real": lambda a, b: None if a is None or b is None else a + b,
        "mul7": lambda v: None if v is None else _i64(v * 7),
        "add_int": lambda v, k: None if v is None or k is None else _i64(v + k),
        "upper": lambda s: None if s is None else s.upper(),
        "lower": lambda s: None if s is None else s.lower(),
        "like_zz": lambda s: None if s is None else int("zz" in s),
        "like_a_b_a": lambda s: None if s is None else int(_A_B_A.search(s) is not None),
        "length": lambda s: None if s is None else len(s),
        "i32_to_i64": lambda v: v,
        "greatest_x": lambda s: None if s is None else max(s, "x"),
    }
    for i in range(1, 33):
        f[f"add{i}"] = (lambda c: lambda v: None if v is None else _i64(v + c))(i)
    return f


_A_B_A = re.compile("a.b.a", re.S)


def register(connection, case, counting=None):
    functions = make_functions()
    names = ["id_a", "id_b"] + (["id_a", "id_b"] if case.self_join else []) + case.functions
    for number, name in enumerate(names):
        fn = functions[name]
        if counting is not None:
            fn = (lambda fn, key: lambda *a: (counting.__setitem__(key, counting.get(key, 0) + 1), fn(*a))[1])(fn, name)
        arity = fn.__code__.co_argcount if counting is None else -1
        connection.create_function(f"dpkit_f{number}", arity, fn, deterministic=True)


# --------------------------------------------------------------- statistics

def summary(differences):
    d = sorted(differences)
    n = len(d)
    median = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
    # A distribution-free 95% interval for the median: order statistics.
    k = max(0, int(n / 2 - 0.98 * math.sqrt(n)))
    return {"median": median, "p25": d[n // 4], "p75": d[(3 * n) // 4],
            "ci_low": d[k], "ci_high": d[n - 1 - k], "n": n}


def paired(run_with, run_without, pairs, warmup=5):
    for _ in range(warmup):
        run_with()
        run_without()
    differences = []
    gc.disable()
    try:
        for i in range(pairs):
            # Alternate which side runs first, so that neither always runs
            # right after the other.
            if i % 2 == 0:
                a = run_with()
                b = run_without()
            else:
                b = run_without()
                a = run_with()
            differences.append(a - b)
    finally:
        gc.enable()
    return summary(differences)


# ------------------------------------------------------------------- SQLite

def sqlite_runnable(sql):
    """dpkit's SQLite (rusqlite's, 3.43 or later) has octet_length; an older
    library (Debian 12's 3.40) does not: the same count of bytes as
    `length(CAST(a AS BLOB))`, which reads the stored size without decoding."""
    if sqlite3.sqlite_version_info >= (3, 43, 0):
        return sql
    return sql.replace('octet_length("a")', 'length(CAST("a" AS BLOB))')


class SqliteSide:
    def __init__(self, folder, name, case, rows):
        self.path = os.path.join(folder, f"{name}.sqlite")
        if os.path.exists(self.path):
            os.remove(self.path)
        c = sqlite3.connect(self.path)
        if case.kind == "num":
            c.execute("CREATE TABLE t (id INTEGER, x REAL)")
            c.executemany("INSERT INTO t VALUES (?, ?)", rows)
        else:
            c.execute("CREATE TABLE t (id INTEGER, a TEXT)")
            c.executemany("INSERT INTO t VALUES (?, ?)", rows)
        c.commit()
        c.close()
        # dpkit opens the file read-only.
        self.connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        register(self.connection, case)

    def timer(self, sql):
        sql = sqlite_runnable(sql)
        c = self.connection
        pc = time.perf_counter_ns

        def run():
            started = pc()
            c.execute(sql).fetchall()
            return pc() - started
        return run

    def answer(self, sql):
        return self.connection.execute(sqlite_runnable(sql)).fetchall()

    def calls(self, case, sql):
        sql = sqlite_runnable(sql)
        counts = {}
        c = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        register(c, case, counting=counts)
        c.execute(sql).fetchall()
        c.close()
        return counts

    def close(self):
        self.connection.close()


# --------------------------------------------------------------- PostgreSQL

def postgres_bin():
    found = []
    for initdb in glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        version = os.path.basename(os.path.dirname(os.path.dirname(initdb)))
        try:
            found.append((float(version), os.path.dirname(initdb)))
        except ValueError:
            pass
    found = [f for f in found if f[0] >= 15]
    if not found:
        sys.exit("no PostgreSQL 15+ server binaries under /usr/lib/postgresql/*/bin")
    return max(found)[1]


class Server:
    """initdb + pg_ctl in a temporary folder, on 127.0.0.1 (as `postgres`
    when run as root), each backend's address space limited so that a
    runaway statement fails rather than exhausting the machine."""

    def __init__(self, workdir):
        self.bin = postgres_bin()
        self.folder = tempfile.mkdtemp(prefix="work-units-pg-", dir=workdir)
        self.root = os.geteuid() == 0
        if self.root:
            subprocess.run(["chown", "-R", "postgres:postgres", self.folder], check=True)
        self.data = os.path.join(self.folder, "data")
        self.port = free_port()
        self._run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "dpkit", "--auth=trust",
                   "-E", "UTF8", "--locale=C"])
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c autovacuum=off")   # tables are analysed here once loaded
        start = (f"ulimit -v 4000000; exec {os.path.join(self.bin, 'pg_ctl')} -D {self.data} "
                 f"-l {os.path.join(self.folder, 'log')} -o '{options}' -w -t 60 start")
        self._run(["sh", "-c", start])
        self.version = None

    def _run(self, command):
        if self.root:
            command = ["runuser", "-u", "postgres", "--"] + command
        r = subprocess.run(command, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{command}: {r.stdout}{r.stderr}")

    def connect(self, database="postgres"):
        return Wire("127.0.0.1", self.port, "dpkit", database)

    def stop(self):
        try:
            self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"])
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def free_port():
    rng = random.Random(os.getpid())
    for _ in range(1000):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    sys.exit("no free loopback port")


class Wire:
    """PostgreSQL's frontend/backend protocol, version 3: trust
    authentication and simple queries only."""

    def __init__(self, host, port, user, database):
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        params = f"user\0{user}\0database\0{database}\0client_encoding\0UTF8\0\0".encode()
        self.sock.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        while True:
            kind, body = self._message()
            if kind == b"R" and struct.unpack("!i", body[:4])[0] != 0:
                raise RuntimeError("the server asks for a password (trust expected)")
            if kind == b"E":
                raise RuntimeError(self._error(body))
            if kind == b"Z":
                break

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("the server went away")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _message(self):
        header = self._read(5)
        length = struct.unpack("!i", header[1:5])[0]
        return header[:1], self._read(length - 4)

    @staticmethod
    def _error(body):
        fields = dict((f[:1], f[1:].decode(errors="replace")) for f in body.split(b"\0") if f)
        return f"{fields.get(b'S', '')} {fields.get(b'C', '')}: {fields.get(b'M', '')}"

    def query(self, sql):
        """Runs `sql` (simple protocol); returns the rows of its last result
        as text values."""
        data = sql.encode()
        self.sock.sendall(b"Q" + struct.pack("!i", len(data) + 5) + data + b"\0")
        rows, error = [], None
        while True:
            kind, body = self._message()
            if kind == b"D":
                count = struct.unpack("!h", body[:2])[0]
                at, row = 2, []
                for _ in range(count):
                    n = struct.unpack("!i", body[at:at + 4])[0]
                    at += 4
                    row.append(None if n < 0 else body[at:at + n].decode())
                    at += max(n, 0)
                rows.append(row)
            elif kind == b"T":
                rows = []
            elif kind == b"E":
                error = self._error(body)
            elif kind == b"Z":
                break
        if error:
            raise RuntimeError(error)
        return rows

    def close(self):
        try:
            self.sock.sendall(b"X" + struct.pack("!i", 4))
        finally:
            self.sock.close()


def pg_literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


class PostgresSide:
    def __init__(self, server, database, case, rows):
        admin = server.connect()
        if not admin.query(f"SELECT 1 FROM pg_database WHERE datname = '{database}'"):
            admin.query(f"CREATE DATABASE {database}")
        admin.close()
        self.c = server.connect(database)
        self.c.query("DROP TABLE IF EXISTS t")
        if case.kind == "num":
            self.c.query("CREATE TABLE t (id BIGINT, x DOUBLE PRECISION)")
        else:
            self.c.query("CREATE TABLE t (id BIGINT, a TEXT)")
        for at in range(0, len(rows), 200):
            values = ", ".join(f"({pg_literal(a)}, {pg_literal(b)})" for a, b in rows[at:at + 200])
            self.c.query(f"INSERT INTO t VALUES {values}")
        self.c.query("VACUUM ANALYZE t")
        # dpkit runs each statement in a read-only transaction with the run's
        # time limit (crates/dpkit-databases/src/postgres.rs `run`); here a
        # minute, for safety.
        self.c.query("SET statement_timeout = 60000")
        self.prepared = 0

    def timer(self, sql):
        """Runs of `sql`, prepared once: PostgreSQL's planning of the
        statement (the same on both neighbours, but tens to hundreds of
        milliseconds for the nested spellings, whose noise would swamp the
        difference) is left out; dpkit plans it on every run."""
        c = self.c
        self.prepared += 1
        name = f"q{self.prepared}"
        c.query(f"PREPARE {name} AS {sql}")
        pc = time.perf_counter_ns

        def run():
            c.query("BEGIN READ ONLY")
            started = pc()
            c.query(f"EXECUTE {name}")
            took = pc() - started
            c.query("ROLLBACK")
            return took
        return run

    def answer(self, sql):
        return self.c.query(sql)

    def close(self):
        self.c.close()


# ------------------------------------------------------------ measurement

def table_rows(case, with_target, value=None):
    if case.kind == "num":
        return numeric_rows(case.rows, with_target)
    return text_rows(case.rows, value, with_target)


def report_line(engine, case, units, s, extra=""):
    per_unit = s["median"] / units if units else float("nan")
    verdict = "ok" if per_unit <= NS_PER_UNIT else "OVER"
    print(f"  {engine:<8} {case:<34} {units:>7} u  median {s['median'] / 1e3:>9.1f} µs "
          f"[IQR {s['p25'] / 1e3:.1f}..{s['p75'] / 1e3:.1f}, 95% CI {s['ci_low'] / 1e3:.1f}..{s['ci_high'] / 1e3:.1f}]"
          f"  {per_unit:>7.2f} ns/unit {verdict}{extra}", flush=True)
    return per_unit


# ---------------------------------------------------------------- dpkit

def description(case, backend, folder, max_length=None, port=None, database=None, stem="t",
                cap=None, budget=1.0, public=None):
    """A dpkit description of the case's tables (row_cost.rs's, with the
    engine's source)."""
    source = {"csv": f'file = "{stem}.csv"', "sqlite": f'sqlite = "{stem}.sqlite"',
              "postgres": f'postgres = "host=127.0.0.1 port={port} user=dpkit dbname={database} sslmode=disable"'}[backend]
    column = ('[columns.x]\ntype = "real"\nbounds = [-10, 10]\n' if case.kind == "num"
              else f'[columns.a]\ntype = "text"\nmax_length = {max_length}\n')
    public = case.public if public is None else public
    with open(os.path.join(folder, "p.csv"), "w") as f:
        f.write("k\n" + "".join(f"{k % 7}\n" for k in range(public)))
    text = (f'[table]\nname = "t"\n{source}\n[privacy_unit]\nkind = "id"\ncolumn = "id"\n'
            f'max_rows_per_person = {cap or case.cap}\n[budget]\nepsilon = {budget}\n'
            f'[columns.id]\ntype = "integer"\n{column}'
            '[public.p]\nfile = "p.csv"\n[public.p.columns.k]\ntype = "integer"\n')
    path = os.path.join(folder, f"{stem}-{backend}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def explain(dpkit, toml, sql):
    r = subprocess.run([dpkit, "query", "--description", toml, "--epsilon", "0.1", "--explain", sql],
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    units = re.search(r"at most (\d+) units", out)
    sent = re.search(r"SQL sent to \w+ \(.*?\):\n(.*?)\n\nTime:", out, re.S)
    if not units:
        raise RuntimeError(f"dpkit refused: {out.strip()[-300:]}")
    return int(units.group(1)), (sent.group(1) if sent else None)


def normal(sql):
    return re.sub(r"\s+", " ", sql).strip()


def write_csv(folder, case, stem="t", value="x"):
    with open(os.path.join(folder, f"{stem}.csv"), "w") as f:
        if case.kind == "num":
            f.write("id,x\n1,1\n")
        else:
            f.write(f"id,a\n1,{value}\n")


def planned_units(dpkit, case, folder):
    """The case's planned work (and, for text, the longest max_length whose
    plan stays within MAX_WORK), from dpkit's --explain on a CSV table."""
    write_csv(folder, case)
    if case.kind == "num":
        return explain(dpkit, description(case, "csv", folder), case.analyst)[0], None
    u1 = explain(dpkit, description(case, "csv", folder, 100), case.analyst)[0]
    u2 = explain(dpkit, description(case, "csv", folder, 200), case.analyst)[0]
    slope = (u2 - u1) / 100
    length = int((MAX_WORK - (u1 - 100 * slope)) // slope)
    while explain(dpkit, description(case, "csv", folder, length), case.analyst)[0] > MAX_WORK:
        length -= 1
    return explain(dpkit, description(case, "csv", folder, length), case.analyst)[0], length


def check_sql(dpkit, case, engine, folder, server=None):
    """Whether the statement generated here is dpkit's own (whitespace aside)."""
    if engine == "sqlite":
        c = sqlite3.connect(os.path.join(folder, "t.sqlite"))
        c.execute("DROP TABLE IF EXISTS t")
        c.execute("CREATE TABLE t (id INTEGER, x REAL)" if case.kind == "num" else "CREATE TABLE t (id INTEGER, a TEXT)")
        c.commit()
        c.close()
        toml = description(case, "sqlite", folder, case.max_length)
    else:
        database = "explain_num" if case.kind == "num" else "explain_text"
        side = PostgresSide(server, database, case, [])
        side.close()
        toml = description(case, "postgres", folder, case.max_length, server.port, database)
    units, sent = explain(dpkit, toml, case.analyst)
    ours = normal(statement(engine, case, case.max_length))
    if sent is None or normal(sent) != ours:
        theirs = normal(sent or "")
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        return units, f"DIFFERS at {at}: ours …{ours[max(0, at - 60):at + 60]}… dpkit …{theirs[max(0, at - 60):at + 60]}…"
    return units, "identical"


# ----------------------------------------- SQLite's bridge, through dpkit

def time_dpkit(dpkit, toml, sql):
    """CPU time (user + system, all threads) of one `dpkit query`: its wall
    time includes the release time's hold (crates/dpkit-query/src/timing.rs),
    a sleep of noise whose scale is the query's work bound over ε = 0.01,
    which would swamp what is measured here; the sleep takes no CPU."""
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen([dpkit, "query", "--description", toml, "--epsilon", "0.001", sql],
                             stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        error = p.stderr.read().decode(errors="replace")
        p.stderr.close()
    if p.returncode != 0:
        raise RuntimeError(f"dpkit: {error.strip()[-300:]}")
    return int((usage.ru_utime + usage.ru_stime) * 1e9)


def bridge_pairs(dpkit, toml, reached, unreached, pairs):
    """Median of paired differences between a query whose rows reach a
    branch and the same query whose rows do not: equal planned work, so the
    release time's offset is the same and its noise has mean zero. A
    literal changes every run (a repeated query would be replayed)."""
    differences = []
    for i in range(pairs):
        a = time_dpkit(dpkit, toml, reached(i))
        b = time_dpkit(dpkit, toml, unreached(i))
        differences.append(a - b)
    return summary(differences)


def python_pairs(path, functions, reached_sql, unreached_sql, pairs):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    made = make_functions()
    for number, name in enumerate(functions):
        c.create_function(f"dpkit_f{number}", made[name].__code__.co_argcount, made[name], deterministic=True)
    pc = time.perf_counter_ns

    reached_sql, unreached_sql = sqlite_runnable(reached_sql), sqlite_runnable(unreached_sql)

    def timed(sql):
        started = pc()
        c.execute(sql).fetchall()
        return pc() - started
    s = paired(lambda: timed(reached_sql), lambda: timed(unreached_sql), pairs, warmup=1)
    c.close()
    return s


def calibrate_numeric(dpkit, folder, pairs=7, rows=50_000):
    """ns per bridged call of a numeric node (`x + c`), dpkit's bridge
    against the Python stand-in."""
    case = Case("calibration", "", "num", "", None, 0, [], cap=1, public=1)
    path = os.path.join(folder, "cal.sqlite")
    if os.path.exists(path):
        os.remove(path)
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t (id INTEGER, x REAL)")
    rng = random.Random(1)
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, rng.uniform(-10, 10)) for i in range(rows)])
    c.commit()
    c.close()
    toml = description(case, "sqlite", folder, stem="cal", cap=1, budget=1000.0)
    query = lambda gate, n: (f"SELECT COUNT(*) FROM t WHERE CASE WHEN x {gate} 100 THEN "
                             f"x + 1 > {50 + n} OR x + 2 > {50 + n} OR x + 3 > {50 + n} OR x + 4 > {50 + n} ELSE false END")
    real = bridge_pairs(dpkit, toml, lambda n: query("<", n), lambda n: query(">", n), pairs)
    _, reached_sql = explain(dpkit, toml, query("<", 0))
    _, unreached_sql = explain(dpkit, toml, query(">", 0))
    functions = ["id_a", "id_b"] + ["add_real"] * 4   # x + CAST(c AS DOUBLE), two arguments
    python = python_pairs(path, functions, reached_sql, unreached_sql, 15)
    calls = rows * 4
    return {"real_ns_per_call": real["median"] / calls, "python_ns_per_call": python["median"] / calls,
            "real": real, "python": python, "calls": calls}


def calibrate_text(dpkit, folder, case, filler, pairs=5):
    """ns per row of the case's text function on its value at max_length,
    dpkit's bridge against the Python stand-in."""
    value = filled(filler, case.max_length)
    rows = max(50, min(20_000, int(3e7 / (len(value.encode()) * case.per_byte))))
    path = os.path.join(folder, "calt.sqlite")
    if os.path.exists(path):
        os.remove(path)
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t (id INTEGER, a TEXT)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, value) for i in range(rows)])
    c.commit()
    c.close()
    toml = description(case, "sqlite", folder, case.max_length, stem="calt", cap=1, budget=1000.0)
    expr = case.analyst.split(" WHERE ", 1)[1]
    query = lambda gate, n: f"SELECT COUNT(*) FROM t WHERE CASE WHEN id {gate} {-n - 1} THEN {expr} ELSE false END"
    real = bridge_pairs(dpkit, toml, lambda n: query(">", n), lambda n: query("<", n), pairs)
    _, reached_sql = explain(dpkit, toml, query(">", 0))
    _, unreached_sql = explain(dpkit, toml, query("<", 0))
    python = python_pairs(path, ["id_a", "id_b"] + case.functions, reached_sql, unreached_sql, 9)
    return {"rows": rows, "real_ns_per_row": real["median"] / rows, "python_ns_per_row": python["median"] / rows,
            "real": real, "python": python}


# ------------------------------------------------------------------- main

def measure_case(engine, case, pairs, folder, server, results, fillers):
    """Both neighbours on `engine`, each filler (text); returns the worst."""
    worst = None
    for filler in (fillers if case.kind == "text" else [None]):
        value = filled(filler, case.max_length) if case.kind == "text" else None
        sql = statement(engine, case, case.max_length)
        plain_case = Case("plain", "", case.kind, "", lambda s: "", 0, [], rows=case.rows, cap=case.cap,
                          public=case.public)
        plain_sql = statement(engine, plain_case, case.max_length)
        if engine == "sqlite":
            with_ = SqliteSide(folder, "with", case, table_rows(case, True, value))
            without = SqliteSide(folder, "without", case, table_rows(case, False, value))
        else:
            with_ = PostgresSide(server, "nb_with", case, table_rows(case, True, value))
            without = PostgresSide(server, "nb_without", case, table_rows(case, False, value))
        try:
            answers = (with_.answer(sql), without.answer(sql))
            s = paired(with_.timer(sql), without.timer(sql), pairs)
            base = paired(with_.timer(plain_sql), without.timer(plain_sql), max(51, pairs // 2))
            calls, plain_calls = None, None
            if engine == "sqlite":
                a, b = with_.calls(case, sql), without.calls(case, sql)
                calls = {k: a.get(k, 0) - b.get(k, 0) for k in set(a) | set(b)}
                a, b = with_.calls(case, plain_sql), without.calls(case, plain_sql)
                plain_calls = sum(a.values()) - sum(b.values())
        finally:
            with_.close()
            without.close()
        label = case.name + (f" [{filler}]" if filler else "")
        plain_units = PLAIN_UNITS.get(case.name, 2064) if case.plain_units is None else case.plain_units
        net = (s["median"] - base["median"]) / (case.units - plain_units)
        extra = (f"  plain read+cap {base['median'] / 1e3:.1f} µs ({plain_units} u); "
                 f"net {net:.2f} ns/unit")
        per_unit = report_line(engine, label, case.units, s, extra)
        entry = {"engine": engine, "case": case.name, "what": case.what, "group": case.group, "filler": filler,
                 "units": case.units, "max_length": case.max_length, "target_rows": case.rows, "cap": case.cap,
                 "public_rows": case.public, "median_ns": s["median"], "p25_ns": s["p25"], "p75_ns": s["p75"],
                 "ci95_ns": [s["ci_low"], s["ci_high"]], "pairs": s["n"], "ns_per_unit": per_unit,
                 "plain_median_ns": base["median"], "plain_p25_ns": base["p25"], "plain_p75_ns": base["p75"],
                 "plain_units": plain_units, "net_ns_per_unit": net,
                 "answers": [str(answers[0]), str(answers[1])], "bridged_calls_of_target": calls,
                 "plain_bridged_calls": plain_calls}
        results.append(entry)
        if worst is None or entry["ns_per_unit"] > worst["ns_per_unit"]:
            worst = entry
    return worst


def main_with(args):
    workdir = os.path.dirname(os.path.abspath(__file__))
    folder = tempfile.mkdtemp(prefix="work-units-", dir=workdir)
    all_cases = cases()
    if args.cases:
        keep = set(args.cases.split(","))
        all_cases = [c for c in all_cases if c.name in keep]
    for case in all_cases:
        case.units = PLANNED.get(case.name, case.units)
        case.max_length = MAX_LENGTH.get(case.name)
    print(f"machine: {machine()}", flush=True)
    server = None
    results, checks, calibration = [], {}, {}
    try:
        if args.dpkit:
            print("planned units (dpkit --explain on a CSV table):", flush=True)
            for case in all_cases:
                units, length = planned_units(args.dpkit, case, folder)
                if units != case.units or length != case.max_length:
                    print(f"  {case.name}: dpkit plans {units} units (max_length {length}); "
                          f"this script had {case.units} ({case.max_length})", flush=True)
                case.units, case.max_length = units, length
                write_csv(folder, case)
                case.plain_units = explain(args.dpkit, description(case, "csv", folder, length),
                                           "SELECT COUNT(*) FROM t")[0]
            print("  " + ", ".join(f"{c.name} {c.units}" + (f" (max_length {c.max_length})" if c.max_length else "")
                                   for c in all_cases), flush=True)
        engines = [e for e in ["sqlite", "postgres"] if not args.only or e == args.only]
        if "postgres" in engines:
            server = Server(workdir)
            version = server.connect().query("SHOW server_version")[0][0]
            print(f"PostgreSQL {version} on 127.0.0.1:{server.port} ({server.bin}), "
                  f"data in {server.folder}", flush=True)
        if args.dpkit:
            print("SQL generated here against dpkit's --explain (whitespace aside):", flush=True)
            for engine in engines:
                for case in all_cases:
                    if engine in case.engines:
                        units, verdict = check_sql(args.dpkit, case, engine, folder, server)
                        checks[f"{engine}/{case.name}"] = verdict
                        print(f"  {engine:<8} {case.name:<24} {verdict}" +
                              ("" if units == case.units else f" (units {units} != {case.units})"), flush=True)
        for engine in engines:
            print(f"\n{engine}: one person's rows, median of {args.pairs} alternating pairs "
                  f"(with - without), against the planned work:", flush=True)
            for case in all_cases:
                if engine in case.engines:
                    measure_case(engine, case, args.pairs, folder, server, results, FILLERS)
        if args.dpkit and "sqlite" in engines:
            print("\nSQLite's bridge (dpkit's registered functions) against the Python stand-ins:", flush=True)
            num = calibrate_numeric(args.dpkit, folder)
            calibration["numeric"] = num
            print(f"  numeric node (x + c): dpkit {num['real_ns_per_call']:.0f} ns a call "
                  f"[IQR {num['real']['p25'] / num['calls']:.0f}..{num['real']['p75'] / num['calls']:.0f}], "
                  f"Python {num['python_ns_per_call']:.0f} ns a call", flush=True)
            for case in all_cases:
                if case.kind != "text" or "sqlite" not in case.engines:
                    continue
                for filler in FILLERS:
                    t = calibrate_text(args.dpkit, folder, case, filler)
                    calibration[f"{case.name}/{filler}"] = t
                    print(f"  {case.name:<18} [{filler}] max_length {case.max_length}: dpkit "
                          f"{t['real_ns_per_row'] / 1e3:.1f} µs a row, Python {t['python_ns_per_row'] / 1e3:.1f} µs "
                          f"({t['rows']} rows)", flush=True)
            print("\nSQLite projected with dpkit's bridge (measured + target's calls x (dpkit - Python)):", flush=True)
            for entry in results:
                if entry["engine"] != "sqlite":
                    continue
                calls = entry["bridged_calls_of_target"] or {}
                text_fns = set()
                for case in all_cases:
                    if case.name == entry["case"] and case.kind == "text":
                        text_fns = set(case.functions)
                numeric_calls = sum(v for k, v in calls.items() if k not in text_fns)
                correction = numeric_calls * (num["real_ns_per_call"] - num["python_ns_per_call"])
                key = f"{entry['case']}/{entry['filler']}"
                if key in calibration:
                    t = calibration[key]
                    correction += entry["target_rows"] * (t["real_ns_per_row"] - t["python_ns_per_row"])
                projected = entry["median_ns"] + correction
                # The plain count's own bridged calls: the id's check, on
                # each of the target's rows (counted once per case).
                plain_projected = entry["plain_median_ns"] + entry["plain_bridged_calls"] * (
                    num["real_ns_per_call"] - num["python_ns_per_call"])
                entry["projected_ns"] = projected
                entry["projected_ns_per_unit"] = projected / entry["units"]
                entry["projected_net_ns_per_unit"] = (projected - plain_projected) / (entry["units"] - entry["plain_units"])
                print(f"  {entry['case'] + (' [' + entry['filler'] + ']' if entry['filler'] else ''):<34} "
                      f"{entry['units']:>7} u  {projected / 1e3:>9.1f} µs  {projected / entry['units']:>7.2f} ns/unit "
                      f"{'ok' if projected / entry['units'] <= NS_PER_UNIT else 'OVER'}; "
                      f"net {entry['projected_net_ns_per_unit']:.2f} ns/unit  "
                      f"(bridged calls of the target: {numeric_calls} numeric"
                      f"{', ' + str(entry['target_rows']) + ' text rows' if key in calibration else ''})", flush=True)
    finally:
        if server:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print("\nworst ns per unit:", flush=True)
    for engine in ["sqlite", "postgres"]:
        mine = [r for r in results if r["engine"] == engine]
        if not mine:
            continue
        w = max(mine, key=lambda r: r["ns_per_unit"])
        line = f"  {engine}: {w['ns_per_unit']:.2f} ns/unit ({w['case']}{' [' + w['filler'] + ']' if w['filler'] else ''})"
        p = [r for r in mine if "projected_ns_per_unit" in r]
        if p:
            wp = max(p, key=lambda r: r["projected_ns_per_unit"])
            line += (f"; with dpkit's bridge {wp['projected_ns_per_unit']:.2f} ns/unit "
                     f"({wp['case']}{' [' + wp['filler'] + ']' if wp['filler'] else ''})")
        print(line, flush=True)
    with open(args.json, "w") as f:
        json.dump({"machine": machine(), "pairs": args.pairs, "results": results, "sql_checks": checks,
                   "calibration": calibration}, f, indent=1, default=str)
    print(f"results: {args.json}")


def machine():
    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    return f"{model}, {os.cpu_count()} CPUs, load average {load}, Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=101)
    parser.add_argument("--dpkit", help="dpkit binary: check SQL and units, measure SQLite's bridge")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument("--cases", help="comma-separated case names")
    parser.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "work_units_results.json"))
    args = parser.parse_args()
    main_with(args)


if __name__ == "__main__":
    main()
