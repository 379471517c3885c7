"""Private synthetic tables on the embedded engine (or the database the
table lives in): the same path as ``dpkit synth``.

Every column of the table is coded over its public domain from the
description (a text column's ``domain``, an integer column's ``bounds`` cut
into bins); the 1- and 2-way marginals are counted by the private plan,
measured with noise, a graphical model is fitted to them (MST or AIM), and
rows are drawn from it. The whole table is charged once to the analyst's
ledger, the same file the command line uses. A table that cannot be made
privately, or that the budget cannot pay for, raises :class:`QueryError`
and spends nothing; bad parameters raise ``ValueError``.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Iterable

from . import _dpkit

if TYPE_CHECKING:
    import pandas

__all__ = ["synthesize", "explain_synthesis"]


def _asked(epsilon, delta, method, rows, table, columns, without, bins):
    if method not in ("mst", "aim"):
        raise ValueError("method must be mst or aim")
    return {
        "epsilon": float(epsilon),
        "delta": float(delta),
        "method": method,
        "rows": None if rows is None else int(rows),
        "table": table,
        "columns": list(columns or []),
        "without": list(without or []),
        "bins": int(bins),
    }


def synthesize(description: str | os.PathLike, epsilon: float, delta: float = 1e-9,
               method: str = "mst", rows: int | None = None, table: str | None = None,
               columns: Iterable[str] | None = None, without: Iterable[str] | None = None,
               bins: int = 32, analyst: str = "default",
               ledger: str | os.PathLike | None = None) -> "pandas.DataFrame":
    """A private synthetic copy of the description's table (or of its
    private ``table``) as a pandas DataFrame, charged once at (``epsilon``,
    ``delta``): text columns as strings, integer columns as nullable
    ``Int64``, the missing code as ``<NA>``::

        frame = dpkit.synthesize("data/adult/adult.toml", epsilon=1.0,
                                 without=["fnlwgt", "native-country"])

    ``method`` is ``mst`` (seconds) or ``aim`` (minutes on Adult, less
    error on 3-way marginals). ``rows`` defaults to as many as the noisy
    model estimates. ``attrs`` holds the cost, the marginals measured after
    the 1-way ones, each measured marginal's total-variation distance from
    its noisy measurement (``measured_fit``, free), and the budget left.
    """
    import pandas as pd

    asked = _asked(epsilon, delta, method, rows, table, columns, without, bins)
    text = _dpkit._synthesize(os.fspath(description), asked, analyst,
                              None if ledger is None else os.fspath(ledger), False)
    drawn = json.loads(text)
    frame = pd.DataFrame({
        column["name"]: pd.array(column["values"],
                                 dtype="Int64" if column["type"] == "integer" else "string")
        for column in drawn["columns"]
    })
    for key in ("dataset", "method", "measured", "epsilon", "delta", "one_way_fit",
                "measured_fit", "budget"):
        frame.attrs[key] = drawn[key]
    return frame


def explain_synthesis(description: str | os.PathLike, epsilon: float, delta: float = 1e-9,
                      method: str = "mst", table: str | None = None,
                      columns: Iterable[str] | None = None,
                      without: Iterable[str] | None = None, bins: int = 32,
                      analyst: str = "default",
                      ledger: str | os.PathLike | None = None) -> str:
    """What ``synthesize`` would measure and cost, with the noise on each
    marginal, as text (as ``dpkit synth --explain`` prints it). Spends
    nothing."""
    asked = _asked(epsilon, delta, method, None, table, columns, without, bins)
    text = _dpkit._synthesize(os.fspath(description), asked, analyst,
                              None if ledger is None else os.fspath(ledger), True)
    explained = json.loads(text)
    left = explained["tables_left"]
    return (f"{explained['explanation']}The budget can pay for {left} more "
            f"{'table' if left == 1 else 'tables'} like this one.\n")
