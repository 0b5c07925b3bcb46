"""The notebooks run end to end at a tiny size (``JAXGRID_TINY=1``): the quickstart in the
default suite, the others (training runs of 1-3 minutes each on a cold 2-core machine)
under ``JAXGRID_VALIDATE=full``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sampled

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def test_every_notebook_is_found():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04"]


@pytest.mark.parametrize(
    "notebook",
    sampled(NOTEBOOKS, keep=[p for p in NOTEBOOKS if p.stem == "01_quickstart"]),
    ids=[p.stem for p in NOTEBOOKS],
)
def test_notebook_runs(notebook, tmp_path):
    cells = json.loads(notebook.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    script = tmp_path / f"{notebook.stem}.py"
    script.write_text(code)
    env = {**os.environ, "JAXGRID_TINY": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
