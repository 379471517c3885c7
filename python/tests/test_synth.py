"""dpkit.synthesize: a private synthetic copy of a described table as a
pandas DataFrame with the description's types, charged once to the same
ledger as the command line; refusals spend nothing."""

import pytest

import dpkit

COLUMNS = ["age", "sex", "race", "class"]


def test_a_synthetic_table_has_the_described_columns_and_types(description):
    frame = dpkit.synthesize(description, epsilon=1.0, columns=COLUMNS, rows=1000)
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 1000
    assert str(frame["age"].dtype) == "Int64" and str(frame["sex"].dtype) == "string"
    ages = frame["age"].dropna()
    assert ((ages >= 17) & (ages <= 90)).all()
    assert set(frame["sex"].dropna()) <= {"Female", "Male"}
    assert frame.attrs["epsilon"] == 1.0 and frame.attrs["method"] == "MST"
    assert frame.attrs["budget"]["remaining_epsilon"] == 9.0
    assert dpkit.budget(description)["queries"] == 1
    # Each column's noisy marginal, then the spanning tree's 3 pairs.
    fits = frame.attrs["measured_fit"]
    assert [len(fit["columns"]) for fit in fits] == [1, 1, 1, 1, 2, 2, 2]
    assert all(0.0 <= fit["distance"] <= 1.0 for fit in fits)


def test_aim_runs_from_python_too(description):
    frame = dpkit.synthesize(description, epsilon=1.0, columns=COLUMNS, rows=200, method="aim")
    assert frame.attrs["method"] == "AIM" and len(frame) == 200


def test_explain_and_refusals_spend_nothing(description):
    text = dpkit.explain_synthesis(description, epsilon=1.0, columns=COLUMNS)
    assert "by MST" in text and "The budget can pay for" in text
    with pytest.raises(dpkit.QueryError, match="--without fnlwgt,native-country"):
        dpkit.synthesize(description, epsilon=1.0)
    with pytest.raises(dpkit.QueryError, match="needs δ > 0"):
        dpkit.synthesize(description, epsilon=1.0, delta=0.0, columns=COLUMNS)
    with pytest.raises(ValueError, match="mst or aim"):
        dpkit.synthesize(description, epsilon=1.0, method="gan")
    assert dpkit.budget(description)["queries"] == 0
