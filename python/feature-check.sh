#!/usr/bin/env bash
# Fails when building the wheel alone (as maturin does), or the command alone
# (as the README's first command and `cargo install` do), would enable other
# features of a crate than building the whole workspace (as the tests do):
# that build would then compile Arrow and DataFusion a second time, for a
# quarter of an hour and more. Prints the crates whose features differ. The
# workspace's own crates are left out: their tests may switch on features the
# wheel does not ask for, and rebuilding them takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
features() {
    cargo tree "$@" -e features -f '{p} {f}' --prefix none \
        | grep -v ' feature ' | grep -v ' v[^ ]* (/' \
        | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u
}
workspace="$(features --workspace)"
status=0
for member in dpkit-py:python dpkit-cli:crates/dpkit-cli; do
    alone="$(features -p "${member%%:*}")"
    drift=""
    for package in $(awk '{print $1 "@" $2}' <<<"$alone" | sort -u); do
        name="${package%@*}" version="${package#*@}"
        mine="$(grep "^$name $version " <<<"$alone" || true)"
        theirs="$(grep "^$name $version " <<<"$workspace" || true)"
        [ "$mine" = "$theirs" ] || drift+="  ${name} ${version}: alone [${mine#* * }], in the workspace [${theirs#* * }]"$'\n'
    done
    if [ -n "$drift" ]; then
        echo "${member#*:}/Cargo.toml: enable the workspace's features of these crates, or building ${member%%:*} alone rebuilds DataFusion:" >&2
        printf '%s' "$drift" >&2
        status=1
    fi
done
exit "$status"
