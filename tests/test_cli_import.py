"""``jaxgrid --import MODULE``: the command line runs environments a user's module registers."""

import sys

import pytest

from jaxgrid import registry
from jaxgrid.cli import main

MODULE = """
import jaxgrid
from jaxgrid.envs.arbitrage import make_arbitrage

jaxgrid.register("my-battery-v0", lambda **kwargs: make_arbitrage(steps_per_day=4, name="my-battery-v0", **kwargs))
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_battery.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield "my_battery"
    registry._REGISTRY.pop("my-battery-v0", None)
    sys.modules.pop("my_battery", None)


def test_an_imported_module_s_environment_is_listed_and_run(user_module, capsys):
    assert main(["--import", user_module, "list"]) == 0
    assert "my-battery-v0" in capsys.readouterr().out.split()
    assert main(["--import", user_module, "demo", "--env", "my-battery-v0", "--envs", "2"]) == 0
    assert "my-battery-v0" in capsys.readouterr().out


def test_without_the_import_the_name_is_unknown(user_module, capsys):
    assert main(["demo", "--env", "my-battery-v0"]) == 2
    assert "unknown environment 'my-battery-v0'" in capsys.readouterr().err


def test_a_module_that_does_not_import_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--import", "no_such_module_here", "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxgrid: error: --import no_such_module_here: No module named")
    assert err.count("\n") == 1
