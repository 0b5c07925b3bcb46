"""Every ```python block of README.md runs as shown.

Each block runs on its own, in a fresh namespace (a reader copies one block, not the
page), from the repository root (blocks name files such as ``configs/voltage33-v0.toml``).
No python block is exempt; ```bash blocks (install, train, the whole suite) are not run
here.
"""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks() -> list[tuple[int, str]]:
    """``(line, code)`` of each python block, ``line`` that of its opening fence."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in PYTHON_BLOCK.finditer(text)]


BLOCKS = python_blocks()


def test_every_python_block_is_found():
    assert len(BLOCKS) == README.read_text().count("```python") >= 4


@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_python_block_runs(line, code, monkeypatch):
    monkeypatch.chdir(README.parent)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": f"README.md:{line}"})
