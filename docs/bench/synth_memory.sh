#!/usr/bin/env bash
# Peak memory of `dpkit synth` against the plain GROUP BY query its largest
# marginals need, on a generated table of ROWS rows (default 10⁷: 4 columns,
# 106 MB of CSV), one run after the other on the same machine.
#   bash docs/bench/synth_memory.sh [ROWS]
# Needs a built `dpkit` (DPKIT, default: the dev build in CARGO_TARGET_DIR).
set -euo pipefail
rows="${1:-10000000}"
dpkit="${DPKIT:-${CARGO_TARGET_DIR:-$HOME/.cache/dpkit/target}/debug/dpkit}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
python3 - "$rows" <<'PY'
import random, sys
random.seed(7)
with open("big.csv", "w") as out:
    out.write("a,b,c,d\n")
    rows = []
    for _ in range(int(sys.argv[1])):
        a = random.randrange(100)
        rows.append(f"{a},{(a + random.randrange(10)) % 100},{random.randrange(50)},{random.choice('xyzw')}\n")
        if len(rows) == 100_000:
            out.write("".join(rows))
            rows = []
    out.write("".join(rows))
PY
cat > big.toml <<TOML
[table]
name = "big"
file = "big.csv"
people = $rows
[privacy_unit]
kind = "row"
[budget]
epsilon = 100.0
delta = 1e-5
[columns.a]
type = "integer"
bounds = [0, 99]
[columns.b]
type = "integer"
bounds = [0, 99]
[columns.c]
type = "integer"
bounds = [0, 49]
[columns.d]
type = "text"
domain = ["x", "y", "z", "w"]
TOML
peak() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }
query=$(peak "$dpkit" query --description big.toml --ledger q.sqlite --epsilon 1 --format csv \
    "SELECT a, b, COUNT(*) AS n FROM big GROUP BY a, b")
synth=$(peak "$dpkit" synth --description big.toml --ledger s.sqlite --epsilon 1 --bins 100 \
    --rows 1000 --out s.csv)
whole=$(peak "$dpkit" synth --description big.toml --ledger w.sqlite --epsilon 1 --bins 100 \
    --out w.csv)
echo "rows: $rows"
echo "GROUP BY a, b (the largest marginal): $query KB"
echo "synth, 1,000 rows out: $synth KB ($(python3 -c "print(round($synth / $query, 3))") of the GROUP BY's)"
echo "synth, as many rows out as the model estimates: $whole KB"
