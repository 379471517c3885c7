"""Fixtures shared by the tests of `import dpkit`."""

import pathlib

import pytest

ADULT = pathlib.Path(__file__).resolve().parents[2] / "data" / "adult"


@pytest.fixture
def description(tmp_path):
    """Adult's description in a folder of its own, so its ledgers are the test's."""
    text = (ADULT / "adult.toml").read_text()
    text = text.replace('file = "adult.data.csv"', f'file = "{ADULT / "adult.data.csv"}"')
    path = tmp_path / "adult.toml"
    path.write_text(text)
    return path
