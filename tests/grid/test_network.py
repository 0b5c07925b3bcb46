"""The meshed ``Network`` from MATPOWER files: tables, Y_bus and costs against PYPOWER
(pandapower's copy of MATPOWER's functions), and one clear error for bad input."""

import jax.numpy as jnp
import numpy as np
import pandapower.pypower.idx_brch as idx_brch
import pandapower.pypower.idx_bus as idx_bus
import pytest
from conftest import x64
from pandapower.pypower.makeYbus import makeYbus
from pandapower.pypower.totcost import totcost

from jaxgrid.grid.matpower import load_case
from jaxgrid.grid.network import PIECEWISE_LINEAR, bus_admittance
from jaxgrid.grid.network_matpower import TRANSMISSION_CASES, network_from_matpower

CASE_DIR = "jaxgrid/grid/cases/transmission"


def _pypower_tables(name):
    """``mpc`` with buses renumbered 0..n-1 in row order and PYPOWER's column counts."""
    mpc = load_case(f"{CASE_DIR}/{name}.m")
    raw_bus, raw_branch = np.asarray(mpc["bus"]), np.asarray(mpc["branch"])
    bus = np.zeros((len(raw_bus), idx_bus.bus_cols))
    bus[:, :13] = raw_bus[:, :13]
    branch = np.zeros((len(raw_branch), idx_brch.branch_cols))
    branch[:, :13] = raw_branch[:, :13]
    row = {int(b): i for i, b in enumerate(bus[:, 0])}
    bus[:, 0] = np.arange(len(bus))
    branch[:, 0] = [row[int(b)] for b in branch[:, 0]]
    branch[:, 1] = [row[int(b)] for b in branch[:, 1]]
    return mpc, bus, branch


@pytest.mark.parametrize("name", TRANSMISSION_CASES[:-1])
def test_bus_admittance_is_matpowers(name):
    mpc, bus, branch = _pypower_tables(name)
    expected, _, _ = makeYbus(float(mpc["baseMVA"]), bus, branch)
    with x64():
        ours = np.asarray(bus_admittance(network_from_matpower(name)))
    np.testing.assert_allclose(ours, expected.toarray(), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["case5", "case30", "case118", "case_ACTIVSg200"])
def test_generation_cost_is_matpowers(name):
    mpc = load_case(f"{CASE_DIR}/{name}.m")
    network = network_from_matpower(name)
    rng = np.random.default_rng(0)
    pg = rng.uniform(network.pmin_mw, np.minimum(network.pmax_mw, 1e4))
    expected = totcost(np.asarray(mpc["gencost"])[: network.n_gen], pg)
    expected = np.where(network.gen_in_service, expected, 0.0)  # a stopped unit costs nothing
    with x64():
        ours = np.asarray(network.generation_cost(jnp.asarray(pg)))
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-9)


def test_piecewise_linear_cost_interpolates_between_breakpoints(tmp_path):
    rows = (
        "\t1\t1500\t0\t3\t0\t0\t100\t2000\t250\t8000;\n"  # 20, then 40 per MWh
        "\t2\t2000\t0\t3\t0.085\t1.2\t600\t0\t0\t0;\n"
        "\t2\t3000\t0\t3\t0.1225\t1\t335\t0\t0\t0;\n"
    )
    text = open(f"{CASE_DIR}/case9.m").read()
    start = text.index("mpc.gencost = [\n") + len("mpc.gencost = [\n")
    path = tmp_path / "case9pwl.m"
    path.write_text(text[:start] + rows + text[text.index("];", start) :])
    network = network_from_matpower(path)
    assert int(network.cost_model[0]) == PIECEWISE_LINEAR
    assert float(network.generation_cost(jnp.array([50.0, 0.0, 0.0]))[0]) == pytest.approx(1000.0)
    cost = float(network.generation_cost(jnp.array([200.0, 0.0, 0.0]))[0])
    assert cost == pytest.approx(2000.0 + 40.0 * 100.0)
    assert float(network.startup_cost[0]) == 1500.0


def test_tables_keep_bus_numbers_statuses_and_matpower_conventions():
    network = network_from_matpower("case300")
    assert network.n_bus == 300 and network.n_branch == 411 and network.n_gen == 69
    assert int(network.bus_ids[np.asarray(network.bus_type) == 3][0]) == 7049
    assert np.all(np.asarray(network.tap) > 0)  # a ratio of 0 in the file means 1
    case118 = network_from_matpower("case118")
    assert np.all(np.isfinite(case118.rate_mva)) or np.any(np.isinf(case118.rate_mva))
    activsg = network_from_matpower("case_ACTIVSg200")  # ANGMIN = ANGMAX = 0: no limits
    assert np.all(np.isinf(activsg.angmin_deg)) and np.all(np.isinf(activsg.angmax_deg))
    pegase = network_from_matpower("case1354pegase")  # infinite Q limits are no limit
    assert np.isinf(pegase.qmax_mvar[125]) and np.isinf(pegase.qmin_mvar[125])
    summary = network_from_matpower("case9").summary()
    assert "0.11 p² + 5 p + 150" in summary and "slack" in summary


def _edited(tmp_path, old, new, name="case9"):
    text = open(f"{CASE_DIR}/{name}.m").read()
    assert old in text
    path = tmp_path / f"{name}_edited.m"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("\t9\t4\t0.01", "\t9\t44\t0.01", r"mpc.branch row 9: T_BUS = 44 is not a bus"),
        ("\t1\t3\t0\t0", "\t1\t1\t0\t0", r"no slack bus"),
        ("\t2\t2\t0\t0", "\t1\t2\t0\t0", r"repeats bus numbers \[1\]"),
        ("\t2\t1500\t0\t3\t0.11", "\t3\t1500\t0\t3\t0.11", r"gencost row 1: MODEL = 3"),
        ("\t3\t85\t-10.95", "\t3\tNaN\t-10.95", r"mpc.gen row 3 column 2 is nan"),
    ],
)
def test_bad_input_is_one_error_naming_the_row(tmp_path, old, new, message):
    with pytest.raises(ValueError, match=message):
        network_from_matpower(_edited(tmp_path, old, new))


ADMITTANCE_FLOAT32_AFTER_FLOAT64 = """
import jax, jax.numpy as jnp, numpy as np
from jaxgrid.grid import network_from_matpower
from jaxgrid.grid.network import branch_admittances

statuses = np.ones((2, 41), bool)

def admittances(on):
    network = network_from_matpower("case30")
    return branch_admittances(network.replace(branch_in_service=on))

with jax.enable_x64(True):
    wide = jax.jit(jax.vmap(admittances))  # kept alive, as a test fixture or a notebook does
    wide(statuses[:1])
assert all(y.dtype == jnp.complex64 for y in jax.jit(jax.vmap(admittances))(statuses))
"""


def test_float32_admittances_while_a_float64_program_lives():
    """A bundled case read and traced under ``jax.enable_x64`` (kept alive), then read and
    traced in float32: the cache handed back the same NumPy arrays, jax 0.10 reused their
    float64 conversion, and the float32 program failed to lower. In a fresh process, so
    that the suite's other traces cannot hide it."""
    import subprocess
    import sys

    script = ADMITTANCE_FLOAT32_AFTER_FLOAT64
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
