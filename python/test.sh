#!/usr/bin/env bash
# Builds `import dpkit` (an abi3 wheel, with maturin) in a fresh venv and
# runs its pytest suite and doctests against the installed wheel.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The wheel embeds the whole tool. Built in the dev profile into the main
# target, it reuses the DataFusion that the workspace's tests compiled, as
# long as it asks for the same features of shared crates.
bash "$here/feature-check.sh"
venv="$HOME/.cache/dpkit/py-test-venv"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/dpkit/target}"
rm -rf "$venv"
python3 -m venv "$venv"
# nbclient, ipykernel and matplotlib execute the example notebook.
"$venv/bin/pip" install -q pytest nbclient nbformat ipykernel matplotlib
# As the book tells a user to install it: pip builds the wheel in the dev
# profile that python/pyproject.toml names, into CARGO_TARGET_DIR.
"$venv/bin/pip" install -q "$here[arrow]"
# The tests that start `dpkit serve` or run `dpkit query` use the command the
# wheel installed, as a Python user would.
export DPKIT_BIN="$venv/bin/dpkit"
# From elsewhere, so that the source folder cannot stand in for the wheel.
cd "$(mktemp -d)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --doctest-modules --pyargs dpkit
