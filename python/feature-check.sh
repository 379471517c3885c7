#!/usr/bin/env bash
# Fails when building the wheel alone (as maturin does) would enable other
# features of a crate than building the whole workspace (as the tests do):
# the wheel would then compile DataFusion a second time, for 13 minutes.
# Prints the crates whose features differ. The workspace's own crates are
# left out: their tests may switch on features the wheel does not ask for,
# and rebuilding them takes about a minute, not DataFusion's thirteen.
set -euo pipefail
cd "$(dirname "$0")/.."
features() {
    cargo tree "$@" -e features -f '{p} {f}' --prefix none \
        | grep -v ' feature ' | grep -v ' v[^ ]* (/' \
        | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u
}
wheel="$(features -p dpkit-py)"
workspace="$(features --workspace)"
drift=""
for package in $(awk '{print $1 "@" $2}' <<<"$wheel" | sort -u); do
    name="${package%@*}" version="${package#*@}"
    mine="$(grep "^$name $version " <<<"$wheel" || true)"
    theirs="$(grep "^$name $version " <<<"$workspace" || true)"
    [ "$mine" = "$theirs" ] || drift+="  ${name} ${version}: the wheel has [${mine#* * }], the workspace [${theirs#* * }]"$'\n'
done
if [ -n "$drift" ]; then
    echo "python/Cargo.toml: enable the workspace's features of these crates, or the wheel rebuilds DataFusion:" >&2
    printf '%s' "$drift" >&2
    exit 1
fi
