"""A client for ``dpkit serve``: the curator's server answers, this asks.

Answers come back as :class:`dpkit.Answer` DataFrames, as from
:func:`dpkit.query`: the group keys, then for each aggregate its released
value and the ends of its interval (``name``, ``name_low``, ``name_high``).
What the answer cost, whether it was a free replay of an earlier identical
request, and the budget left are in ``DataFrame.attrs``. Failures raise :class:`ServeError` with the server's
stable code.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ServeError(Exception):
    """A request the server refused: its HTTP status, stable code and message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Client:
    """Asks ``dpkit serve`` at ``url`` with an analyst's ``key``, for example::

        client = Client("http://127.0.0.1:8640", key)
        frame = client.query("adult", "SELECT sex, COUNT(*) AS people FROM adult GROUP BY sex", epsilon=0.5)

    (``python/tests/test_client.py`` runs this against a real server.)
    """

    def __init__(self, url: str, key: str, timeout: float = 120.0):
        self.url = url.rstrip("/")
        self._key = key
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Client({self.url!r}, key=<hidden>)"

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._key}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            try:
                detail = json.loads(error.read())["error"]
            except (ValueError, KeyError, TypeError):
                detail = {"code": "http", "message": f"HTTP {error.code}"}
            raise ServeError(error.code, detail["code"], detail["message"]) from None

    def datasets(self) -> list[dict]:
        """The datasets granted to this key, with their public descriptions."""
        return self._call("GET", "/v1/datasets")["datasets"]

    def budget(self) -> list[dict]:
        """This key's budget on each dataset granted to it."""
        return self._call("GET", "/v1/budget")["budgets"]

    @staticmethod
    def _body(dataset, sql, epsilon, delta, mechanism, confidence) -> dict:
        return {
            "dataset": dataset,
            "sql": sql,
            "epsilon": float(epsilon),
            "delta": float(delta),
            "mechanism": mechanism,
            "confidence": float(confidence),
        }

    def explain(self, dataset: str, sql: str, epsilon: float, delta: float = 0.0,
                mechanism: str = "auto", confidence: float = 0.95) -> dict:
        """What the query would release and cost, with each aggregate's expected error. Free."""
        return self._call("POST", "/v1/explain", self._body(dataset, sql, epsilon, delta, mechanism, confidence))

    def query(self, dataset: str, sql: str, epsilon: float, delta: float = 0.0,
              mechanism: str = "auto", confidence: float = 0.95):
        """Runs the query, charged to this key's budget; an :class:`dpkit.Answer`
        (a pandas DataFrame), as :func:`dpkit.query` returns."""
        from .answer import to_answer  # pandas only when an answer is made

        answer = self._call("POST", "/v1/query", self._body(dataset, sql, epsilon, delta, mechanism, confidence))
        return to_answer(answer)

