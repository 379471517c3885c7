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
    # The count's interval is cut at the declared 32,561 people when the
    # noise pushes it past them, so it reads `n ± h` or `n [low, high]`.
    assert lines[0] == "people" and re.fullmatch(r"\d+ (± \d+|\[\d+, \d+\])", lines[2]), \
        done.stdout
    assert "this query cost ε = 1, δ = 0 · left: ε = 9 of 10" in done.stdout


def test_python_dash_m_is_the_same_command_with_the_same_exit_status(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dpkit", "budget", "--description",
                           str(tmp_path / "missing.toml")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("dpkit: error: ") and done.stderr.count("\n") == 1
    version = subprocess.run([sys.executable, "-m", "dpkit", "--version"],
                             capture_output=True, text=True, check=True)
    assert version.stdout.split() == ["dpkit", importlib.metadata.version("dpkit")]


def catches_sigint(pid):
    """Whether the process has a handler of its own for SIGINT (Python's)."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines()
                      if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGINT - 1)))


def test_ctrl_c_stops_a_command_that_waits_inside_rust():
    # `dpkit noise` blocks reading standard input; the interrupt must end it
    # at once, as it ends the binary, not wait for Python's next bytecode
    # (which never comes while Rust waits: it hangs without the fix).
    process = subprocess.Popen([command(), "noise", "--mechanism", "laplace", "--epsilon", "1",
                                "--sensitivity", "1"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Wait until the extension is loaded, SIGINT is no longer Python's
        # and the command blocks (giving up after 10 s), then a little more.
        started = time.monotonic()
        while not (has_loaded_dpkit(process.pid) and not catches_sigint(process.pid)
                   and is_sleeping(process.pid)):
            assert process.poll() is None and time.monotonic() - started < 10
            time.sleep(0.01)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=10)
    finally:
        process.kill()
        process.stdin.close()
    assert status == -signal.SIGINT


def has_loaded_dpkit(pid):
    return "_dpkit" in pathlib.Path(f"/proc/{pid}/maps").read_text()


def is_sleeping(pid):
    return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "S"


def test_help_and_usage_errors_return_to_python_instead_of_ending_it(capfd):
    from dpkit._dpkit import _run_command

    assert _run_command(["dpkit", "--version"]) == 0
    assert _run_command(["dpkit", "query", "--no-such-flag"]) == 2
    out, err = capfd.readouterr()
    assert out.startswith("dpkit ") and "--no-such-flag" in err
