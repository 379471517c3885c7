"""The example script runs, end to end, on the bundled Adult data."""

import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "story.py"


def test_the_story_runs_and_tells_all_three_parts():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    ratios = [float(line.split()[-1]) for line in lines[2:6]]
    assert len(ratios) == 4 and all(0 < r <= 1.0 for r in ratios), "the staircase never loses"
    assert ratios[-1] < ratios[0], "and wins more as ε grows"
    assert any("private mean" in line for line in lines)
    assert any("left: ε = 0.0" in line for line in lines), "the budget is spent exactly"
    histogram = [line for line in lines if "(exact" in line]
    assert len(histogram) == 9, done.stdout


NOTEBOOK = SCRIPT.with_name("story.ipynb")


def test_the_notebook_runs_from_its_folder_and_draws_its_three_figures():
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    figures = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(figures) == 3
    shown = "".join(output.get("text", "") + output.get("data", {}).get("text/plain", "")
                    for output in outputs)
    assert "Female" in shown and "Male" in shown, "the counts by sex are shown"
    assert "noisy row count reaches" in shown, "the threshold's note is shown"
    assert "'queries': 3" in shown, "each query was charged once, to the notebook's own ledger"
