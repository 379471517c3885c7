"""Private SQL on the embedded engine (DataFusion, compiled into the wheel).

The same path as ``dpkit query``: the description's table, its bounds and
its budget; the query is planned, its cost charged to the analyst's ledger
(the same file the command line uses, ``<table>.<analyst>.ledger.sqlite``
beside the description, unless ``ledger=`` names another), then run, and
only noisy aggregates come back. A query that cannot be answered privately,
or that the budget cannot pay for, raises :class:`QueryError` and spends
nothing; bad parameters raise ``ValueError``.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from . import _dpkit
from ._dpkit import QueryError

if TYPE_CHECKING:
    from .answer import Answer

__all__ = ["query", "explain", "budget", "QueryError"]


def query(description: str | os.PathLike, sql: str, epsilon: float, delta: float = 0.0,
          mechanism: str = "auto", confidence: float = 0.95, analyst: str = "default",
          ledger: str | os.PathLike | None = None) -> "Answer":
    """Answers ``sql`` privately at (``epsilon``, ``delta``), charged to
    ``analyst``'s ledger; an :class:`dpkit.Answer` (a pandas DataFrame with
    ``name``, ``name_low`` and ``name_high`` per aggregate)::

        answer = dpkit.query("data/adult/adult.toml",
                             "SELECT sex, COUNT(*) AS people FROM adult GROUP BY sex",
                             epsilon=0.5)

    ``mechanism`` is ``auto`` (geometric for counts, staircase for sums),
    ``laplace``, ``gaussian`` (needs δ), ``staircase`` or ``geometric``.
    """
    from .answer import to_answer

    text = _dpkit._query(os.fspath(description), sql, float(epsilon), float(delta), mechanism,
                         float(confidence), analyst, None if ledger is None else os.fspath(ledger))
    return to_answer(json.loads(text))


def explain(description: str | os.PathLike, sql: str, epsilon: float, delta: float = 0.0,
            mechanism: str = "auto", confidence: float = 0.95) -> str:
    """What ``query`` would release and cost, with each aggregate's
    expected error, as text. Spends nothing."""
    return _dpkit._explain(os.fspath(description), sql, float(epsilon), float(delta), mechanism,
                           float(confidence))


def budget(description: str | os.PathLike, analyst: str = "default",
           ledger: str | os.PathLike | None = None, grant: bool = False) -> dict:
    """The analyst's budget on the description's dataset: total, spent and
    remaining ε and δ as plain sums, how many queries were charged, and
    ``concentrated``: what the concentrated accountant (zCDP, half of δ)
    has spent, ``spent_rho`` of ``total_rho`` and the ``spent_epsilon``
    that is at its ``delta``, and the ``spent_threshold_delta`` of the
    ``threshold_delta`` it keeps for keys chosen by a threshold; or None
    where it does not keep the budget.

    A ledger keeps the total it was created with: editing the description's
    ``[budget]`` alone changes nothing (a ``UserWarning`` says so).
    ``grant=True`` sets the ledger's total to the description's, raised or
    lowered; what was spent stays spent."""
    return json.loads(_dpkit._budget(os.fspath(description), analyst,
                                     None if ledger is None else os.fspath(ledger), bool(grant)))
