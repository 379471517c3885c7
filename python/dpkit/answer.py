"""The answer to a private query, from the embedded engine or from
``dpkit serve``: a pandas DataFrame with the group keys, then for each
aggregate its released value and the ends of its interval (``name``,
``name_low``, ``name_high``). What it cost and the budget left are in
``attrs``; :meth:`Answer.to_arrow` gives the same table as Arrow. Notes
on reading the answer (drawn from public facts only, such as a literal
outside a column's public domain) are in ``attrs["notes"]``, each also
given as a ``UserWarning``.
"""

from __future__ import annotations

import json
import math
import sys
import warnings

import pandas as pd

#: The answer's facts kept in ``Answer.attrs``.
FACTS = ("dataset", "confidence", "epsilon", "delta", "replay", "charged_epsilon", "charged_delta", "budget")


class Answer(pd.DataFrame):
    """A private answer: a DataFrame with value, low and high columns per
    aggregate. Operations on it return plain DataFrames."""

    @property
    def _constructor(self):
        return pd.DataFrame

    def to_arrow(self):
        """The answer as a ``pyarrow.Table`` (needs ``pyarrow``), with
        ``attrs`` as JSON in the schema's ``dpkit`` metadata."""
        import pyarrow as pa

        table = pa.Table.from_pandas(pd.DataFrame(self), preserve_index=False)
        metadata = dict(table.schema.metadata or {})
        metadata[b"dpkit"] = json.dumps(self.attrs).encode()
        return table.replace_schema_metadata(metadata)


def _number(value) -> float:
    """A released number; an unbounded end of an interval (sent as the largest double) as
    an infinity."""
    number = float(value)
    if abs(number) >= sys.float_info.max:
        return math.copysign(math.inf, number)
    return number


def to_answer(answer: dict) -> Answer:
    """A ``dpkit serve``-shaped answer (columns, rows, facts) as an :class:`Answer`."""
    columns: dict[str, list] = {}
    # Which columns hold released values; a service older than that field
    # (or an answer it kept) shows it only in the first row.
    released = answer.get("released") or None
    if released is not None and len(released) != len(answer["columns"]):
        released = None
    for index, name in enumerate(answer["columns"]):
        cells = [row[index] for row in answer["rows"]]
        if released is not None:
            values = bool(released[index])
        else:
            values = bool(cells) and isinstance(cells[0], dict)
        names = [name, f"{name}_low", f"{name}_high"] if values else [name]
        # dpkit refuses a query whose columns clash so; a service older than
        # that refusal must not lose a column without a word.
        clash = sorted(set(names) & set(columns))
        if clash:
            raise ValueError(f"the answer's column {clash[0]!r} is named twice (an interval "
                             "is named <name>_low and <name>_high): rename one with AS")
        if values:
            for column, part in ((name, "value"), (f"{name}_low", "low"), (f"{name}_high", "high")):
                columns[column] = pd.Series([_number(cell[part]) for cell in cells], dtype="float64")
        else:
            columns[name] = cells
    frame = Answer(columns)
    for key in FACTS:
        frame.attrs[key] = answer[key]
    frame.attrs["notes"] = list(answer.get("notes", []))
    for note in frame.attrs["notes"]:
        # Raised where the analyst called dpkit.query or Client.query.
        warnings.warn(note, UserWarning, stacklevel=3)
    return frame
