"""The documentation: every code block of README.md and docs/ runs, the site builds strictly.

Python blocks of one page run in order in one namespace (a page is read top to bottom,
so a tutorial's later blocks use its earlier names), from the repository root (blocks
name files such as ``configs/voltage33-v0.toml``). No python block is exempt: the default
suite runs every page but the heaviest (``HEAVY``), the validation command those too. Bash
blocks run where they are cheap: every command of the block is ``jaxgrid list`` or a
``--help``; installs, training runs and the whole suite are left to CI and the Quickstart.
"""

import importlib.util
import os
import pkgutil
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sampled

import jaxgrid

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```$", re.S | re.M)
CHEAP = re.compile(r"^jaxgrid( list| [a-z]+ --help| --help)$")


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _blocks(page: Path, pattern: re.Pattern) -> list[tuple[int, str]]:
    """``(line, code)`` of each block, ``line`` that of its opening fence."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in pattern.finditer(text)]


WITH_PYTHON = [p for p in PAGES if _blocks(p, PYTHON_BLOCK)]
CHEAP_BASH = [
    (p, line, code)
    for p in PAGES
    for line, code in _blocks(p, BASH_BLOCK)
    if all(CHEAP.match(c.strip()) for c in code.strip().splitlines())
]


# pages whose blocks take 60-120 s on a cold 2-core machine (eager DC-OPFs, a custom
# environment's check_env, training runs): their blocks run under JAXGRID_VALIDATE=full
HEAVY = (
    "docs/concepts.md",
    "docs/dispatch.md",
    "docs/environments/gencos.md",
    "docs/own-environment.md",
    "docs/physics.md",
    "docs/training.md",
)


def test_every_block_is_found():
    for page in PAGES:
        text = page.read_text()
        assert len(_blocks(page, PYTHON_BLOCK)) == text.count("```python"), _name(page)
    assert len(WITH_PYTHON) >= 10 and CHEAP_BASH


@pytest.mark.parametrize(
    "page",
    sampled(WITH_PYTHON, keep=[p for p in WITH_PYTHON if _name(p) not in HEAVY]),
    ids=[_name(p) for p in WITH_PYTHON],
)
def test_python_blocks_run(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": _name(page)}
    for line, code in _blocks(page, PYTHON_BLOCK):
        exec(compile(code, f"{_name(page)}:{line}", "exec"), namespace)


@pytest.mark.parametrize(
    "page, line, code", CHEAP_BASH, ids=[f"{_name(p)}:{line}" for p, line, _ in CHEAP_BASH]
)
def test_cheap_bash_blocks_run(page, line, code):
    for command in code.strip().splitlines():
        argv = shlex.split(command)
        done = subprocess.run(
            [sys.executable, "-m", "jaxgrid.cli", *argv[1:]],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{_name(page)}:{line}: {command}\n{done.stderr[-2000:]}"


def test_every_public_module_has_an_api_page():
    documented = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        documented |= set(re.findall(r"^::: ([\w.]+)$", page.read_text(), re.M))
    public = {
        m.name
        for m in pkgutil.walk_packages(jaxgrid.__path__, "jaxgrid.")
        if not m.name.rsplit(".", 1)[-1].startswith("_")
    }
    assert public - documented == set(), "modules without an API page"


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings")),
    reason='the docs extra is not installed (pip install ".[docs]")',
)
def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
