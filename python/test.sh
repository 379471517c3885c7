#!/usr/bin/env bash
# Builds `import dpkit` (an abi3 wheel, with maturin) in a fresh venv and
# runs its pytest suite and doctests against the installed wheel.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The client's tests start a real `dpkit serve`: the binary of the main build.
main_target="${CARGO_TARGET_DIR:-$HOME/.cache/dpkit/target}"
(cd "$here/.." && CARGO_TARGET_DIR="$main_target" cargo build -q -p dpkit-cli)
export DPKIT_BIN="$main_target/debug/dpkit"
# The wheel embeds the query engine. Built in the dev profile into the same
# target, it reuses the DataFusion that the workspace's tests compiled, as
# long as it asks for the same features of shared crates.
bash "$here/feature-check.sh"
venv="$HOME/.cache/dpkit/py-test-venv"
export CARGO_TARGET_DIR="$main_target"
wheels="$(mktemp -d)"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q maturin numpy pandas pyarrow pytest
"$venv/bin/maturin" build -q --profile dev -m "$here/Cargo.toml" --out "$wheels"
"$venv/bin/pip" install -q "$wheels"/dpkit-*.whl
# From elsewhere, so that the source folder cannot stand in for the wheel.
cd "$(mktemp -d)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --doctest-modules --pyargs dpkit
