#!/usr/bin/env bash
# The load benchmark on this work tree's build and on COMMIT's, in one run:
# the same benchmark source (this tree's) is built against both, the two
# binaries run one after the other ROUNDS times, and each row's median over
# the rounds is printed side by side with the ratio.
#
#   bash crates/dpkit-serve/benches/against.sh COMMIT [SECONDS] [ROUNDS] [ARGS…]
#
# ARGS go to the benchmark (COUNT, GROUP, workers=N). Uses CARGO_TARGET_DIR.
set -euo pipefail
base=${1:?usage: against.sh COMMIT [SECONDS] [ROUNDS] [ARGS…]}
seconds=${2:-4}
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # folder, name: builds the bench there and copies it to $work/name
    # Both trees' crates share names and build into one target folder:
    # touched, each tree's own sources are rebuilt, never taken for fresh.
    find "$1/crates" -name '*.rs' -exec touch {} +
    (cd "$1" && cargo bench -p dpkit-serve --bench load --profile dev --no-run \
        --message-format json 2>/dev/null) |
        python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "load" and m.get("executable"):
        print(m["executable"])' | tail -1 | xargs -I{} cp {} "$work/$2"
    test -x "$work/$2" || { echo "against.sh: the benchmark did not build in $1" >&2; exit 1; }
}

git -C "$root" worktree add --detach "$work/base" "$base" >/dev/null
cp "$root/crates/dpkit-serve/benches/load.rs" "$work/base/crates/dpkit-serve/benches/load.rs"
echo "building $base and this tree…" >&2
build "$work/base" before
build "$root" after

for round in $(seq "$rounds"); do
    for build in before after; do
        (cd "$root/crates/dpkit-serve" && "$work/$build" "$seconds" "$@" 2>/dev/null) |
            grep -E '^(COUNT|GROUP BY|COUNT again) +[0-9]' | sed "s/^/$build /" >> "$work/rows"
    done
done

python3 - "$work/rows" "$base" <<'EOF'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    build, *rest = line.split()
    *kind, clients, rate, p50, p99 = rest
    rows[(" ".join(kind), int(clients), build)].append((float(rate), float(p50), float(p99)))
print(f"medians of each row's runs; before = {sys.argv[2]}, after = this tree")
print(f"{'query':<12}{'clients':>8}{'answers/s before':>18}{'after':>8}{'ratio':>7}"
      f"{'p99 ms before':>15}{'after':>8}")
for kind, clients in sorted({(k, c) for k, c, _ in rows}, key=lambda r: (r[0], r[1])):
    med = lambda b, i: statistics.median(r[i] for r in rows[(kind, clients, b)])
    before, after = med("before", 0), med("after", 0)
    print(f"{kind:<12}{clients:>8}{before:>18.0f}{after:>8.0f}{after / before:>7.2f}"
          f"{med('before', 2):>15.1f}{med('after', 2):>8.1f}")
EOF
