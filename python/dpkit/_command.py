"""The ``dpkit`` command that ``pip install`` puts on PATH: the same tool as
the ``dpkit`` binary, run by the same Rust code inside the wheel."""

import signal
import sys

from ._dpkit import _run_command


def main() -> None:
    """Run ``dpkit`` on this process's arguments and exit with its status."""
    # The command, not Python, owns Ctrl-C, as the binary does: a long query
    # stops at once instead of waiting to return to the interpreter.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_run_command(["dpkit", *sys.argv[1:]]))
