"""The `dpkit` command that the wheel installs (DPKIT_BIN, which
python/test.sh points at it) and `python -m dpkit`: the binary's code,
started as a user would start it."""

import importlib.metadata
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

ADULT = pathlib.Path(__file__).resolve().parents[2] / "data" / "adult"


def command():
    binary = os.environ.get("DPKIT_BIN")
    assert binary and pathlib.Path(binary).exists(), "set DPKIT_BIN (python/test.sh does)"
    return binary


def test_the_command_answers_a_query_with_its_error_bars(tmp_path):
    done = subprocess.run(
        [command(), "query", "--description", str(ADULT / "adult.toml"), "--epsilon", "1",
         "--ledger", str(tmp_path / "ledger.sqlite"), "SELECT COUNT(*) AS people FROM adult"],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "people" and re.fullmatch(r"\d+ \[\d+, \d+\]", lines[2]), done.stdout
    assert "spent ε = 1, δ = 0" in done.stdout


def test_python_dash_m_is_the_same_command_with_the_same_exit_status(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dpkit", "budget", "--description",
                           str(tmp_path / "missing.toml")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("dpkit: error: ") and done.stderr.count("\n") == 1
    version = subprocess.run([sys.executable, "-m", "dpkit", "--version"],
                             capture_output=True, text=True, check=True)
    assert version.stdout.split() == ["dpkit", importlib.metadata.version("dpkit")]


def test_ctrl_c_stops_a_command_that_waits_inside_rust():
    # `dpkit noise` blocks reading standard input; the interrupt must end it
    # at once, as it ends the binary, not wait for Python's next bytecode.
    process = subprocess.Popen([command(), "noise", "--mechanism", "laplace", "--epsilon", "1",
                                "--sensitivity", "1"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)  # started, imported, blocked on the read
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    try:
        status = process.wait(timeout=10)
    finally:
        process.kill()
        process.stdin.close()
    assert status == -signal.SIGINT
