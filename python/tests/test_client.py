"""dpkit.Client against a real `dpkit serve`, started by the test on a free
loopback port and stopped by it (the command comes from DPKIT_BIN, which
python/test.sh points at the one the wheel installs)."""

import os
import pathlib
import subprocess
import tempfile

import pytest

import dpkit

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server():
    binary = os.environ.get("DPKIT_BIN")
    assert binary and pathlib.Path(binary).exists(), (
        "set DPKIT_BIN to the dpkit command (python/test.sh does)"
    )
    folder = pathlib.Path(tempfile.mkdtemp(prefix="dpkit-client-"))
    config = folder / "serve.toml"
    config.write_text(
        'address = "127.0.0.1:0"\nstate_dir = "state"\n[[datasets]]\n'
        f'description = "{REPOSITORY / "data/adult/adult.toml"}"\n'
        "[limits]\nrequests_per_second = 1000\nburst = 1000\n"
    )

    def serve(*args):
        done = subprocess.run([binary, "serve", *args, "--config", str(config)],
                              capture_output=True, text=True, check=True)
        return done.stdout.splitlines()[0]

    key = serve("analyst", "add", "ann", "--dataset", "adult", "--epsilon", "1", "--delta", "1e-6")
    process = subprocess.Popen([binary, "serve", "--config", str(config)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    assert "http://" in line, f"the server did not start: {line!r}"
    url = "http://" + line.split("http://")[1].split("/")[0]
    yield url, key
    process.kill()
    process.wait()


def test_a_query_comes_back_as_a_frame_and_again_as_a_free_replay(server):
    url, key = server
    client = dpkit.Client(url, key)
    assert [d["name"] for d in client.datasets()] == ["adult"]
    sql = "SELECT sex, COUNT(*) AS people FROM adult GROUP BY sex"
    explained = client.explain("adult", sql, epsilon=0.5)
    assert explained["epsilon"] == 0.5 and "E|error|" in explained["explanation"]
    frame = client.query("adult", sql, epsilon=0.5)
    assert list(frame.columns) == ["sex", "people", "people_low", "people_high"]
    assert sorted(frame["sex"]) == ["Female", "Male"]
    assert (frame["people_low"] <= frame["people"]).all() and (frame["people"] <= frame["people_high"]).all()
    assert frame.attrs["replay"] is False and frame.attrs["charged_epsilon"] == 0.5
    again = client.query("adult", sql, epsilon=0.5)
    assert again.equals(frame)
    assert again.attrs["replay"] is True and again.attrs["charged_epsilon"] == 0.0
    assert client.budget()[0]["spent_epsilon"] == 0.5
    # An answer without rows (every thresholded group withheld) keeps its
    # interval columns, and so does its replay.
    empty = 'SELECT "native-country", COUNT(*) AS n FROM adult WHERE age > 200 GROUP BY "native-country"'
    for _ in range(2):
        frame = client.query("adult", empty, epsilon=0.1, delta=1e-7)
        assert list(frame.columns) == ["native-country", "n", "n_low", "n_high"] and len(frame) == 0


def test_refusals_raise_with_the_servers_code(server):
    url, key = server
    with pytest.raises(dpkit.ServeError) as error:
        dpkit.Client(url, "dpk_not_a_key").budget()
    assert (error.value.status, error.value.code) == (401, "unauthorized")
    client = dpkit.Client(url, key)
    with pytest.raises(dpkit.ServeError) as error:
        client.query("census", "SELECT COUNT(*) FROM census", epsilon=0.1)
    assert (error.value.status, error.value.code) == (403, "forbidden")
    with pytest.raises(dpkit.ServeError) as error:
        client.query("adult", "SELECT COUNT(*) AS n FROM adult", epsilon=5.0)
    assert (error.value.status, error.value.code) == (409, "budget_exhausted")
    assert key not in repr(client)
