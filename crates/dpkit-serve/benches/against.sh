#!/usr/bin/env bash
# The load benchmark on this work tree's build and on COMMIT's, in one run:
# the same benchmark source (this tree's) is built against both, the
# binaries run one after the other ROUNDS times, and each row's median over
# the rounds is printed side by side with each build's ratio to COMMIT's,
# then every run's row.
#
#   bash crates/dpkit-serve/benches/against.sh [--release] COMMIT [SECONDS] [ROUNDS] [ARGS…]
#
# Both are built in the dev profile, as the README's commands build.
# --release adds a third build, this tree's in the release profile (as
# `cargo install` builds; a long build from nothing, see
# docs/book/src/speed/build.md), run in the same rounds. ARGS go to the benchmark (COUNT, GROUP, workers=N,
# analysts=N).
# Uses CARGO_TARGET_DIR.
set -euo pipefail
release=false
if [ "${1:-}" = --release ]; then
    release=true
    shift
fi
base=${1:?usage: against.sh [--release] COMMIT [SECONDS] [ROUNDS] [ARGS…]}
seconds=${2:-4}
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # folder, name, cargo's profile: builds the bench there, copies it to $work/name
    # Both trees' crates share names and build into one target folder:
    # touched, each tree's own sources are rebuilt, never taken for fresh.
    find "$1/crates" -name '*.rs' -exec touch {} +
    (cd "$1" && cargo bench -p dpkit-serve --bench load --profile "$3" --no-run \
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
build "$work/base" before dev
builds="before after"
if $release; then
    build "$root" release bench
    builds="$builds release"
fi
build "$root" after dev

for round in $(seq "$rounds"); do
    for build in $builds; do
        (cd "$root/crates/dpkit-serve" && "$work/$build" "$seconds" "$@" 2>/dev/null) > "$work/run"
        # The benchmark's first line names the machine: kept once.
        [ -f "$work/machine" ] || head -1 "$work/run" > "$work/machine"
        grep -E '^(COUNT|GROUP BY|COUNT again) +[0-9]' "$work/run" | sed "s/^/$build /" >> "$work/rows"
    done
done

cat "$work/machine"
python3 - "$work/rows" "$base" $builds <<'EOF_PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    build, *rest = line.split()
    *kind, clients, rate, p50, p99 = rest
    rows[(" ".join(kind), int(clients), build)].append((float(rate), float(p50), float(p99)))
builds = sys.argv[3:]
print(f"medians of each row's runs; before = {sys.argv[2]}, after = this tree"
      + (", release = this tree in the release profile" if "release" in builds else ""))
head = f"{'query':<12}{'clients':>8}" + "".join(f"{'answers/s ' + b:>19}" for b in builds)
head += "".join(f"{b + '/before':>16}" for b in builds[1:])
head += "".join(f"{'p99 ms ' + b:>16}" for b in builds)
print(head)
for kind, clients in sorted({(k, c) for k, c, _ in rows}, key=lambda r: (r[0], r[1])):
    med = lambda b, i: statistics.median(r[i] for r in rows[(kind, clients, b)])
    line = f"{kind:<12}{clients:>8}" + "".join(f"{med(b, 0):>19.0f}" for b in builds)
    line += "".join(f"{med(b, 0) / med('before', 0):>16.2f}" for b in builds[1:])
    line += "".join(f"{med(b, 2):>16.1f}" for b in builds)
    print(line)
print()
print("each run, in order (build, query, clients, answers/s, p50 ms, p99 ms):")
print(open(sys.argv[1]).read(), end="")
EOF_PY
