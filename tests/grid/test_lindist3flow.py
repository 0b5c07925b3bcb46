"""LinDist3Flow (``jaxgrid.grid.three_phase.lindist3flow``).

- By hand: a two-bus three-phase line of known phase impedance matrix with one load (a
  single-phase wye load, then a delta load), the voltages worked in the test from
  LinDist3Flow's formula (Sankur et al. 2016, balanced angles); the feeder is compiled
  from an OpenDSS script, so the model never sees the expected numbers.
- Its inherent error against the exact float64 ``unbalanced_power_flow`` on the same
  feeder with constant-power loads: below bounds measured with
  ``benchmarks/lindist3flow_error.py`` plus margin, and larger at 1.3 times the load than
  at 0.7 (a flat profile fails both). IEEE 13 by default; ``JAXGRID_VALIDATE=full`` adds
  IEEE 123, IEEE 34 and IEEE 37 (line-to-line, a 3-wire delta feeder).
- PV on several phases and between two phases: the voltage rise it causes against the
  exact solver's.
- ``grounded`` marks the floating delta sections (IEEE 123's bus 610, IEEE 37).
- ``vmap`` over load scalings and injections equals one solve at a time; float32 under
  ``jit`` is close to float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FULL, x64

from jaxgrid.grid.three_phase import (
    constant_power_loads,
    lindist3flow,
    lindist3flow_model,
    load_feeder3,
    unbalanced_power_flow,
)

ALPHA = np.exp(-2j * np.pi / 3)

# phase impedance matrix of the hand case, ohm (IEEE 13's configuration 601, one mile)
R_OHM = np.array([[0.3465, 0.1560, 0.1580], [0.1560, 0.3375, 0.1535], [0.1580, 0.1535, 0.3414]])
X_OHM = np.array([[1.0179, 0.5017, 0.4236], [0.5017, 1.0478, 0.3849], [0.4236, 0.3849, 1.0348]])
KV_LL = 4.16


def _matrix(m):
    return "(" + " | ".join(" ".join(f"{v}" for v in m[i, : i + 1]) for i in range(3)) + ")"


def _two_bus(tmp_path, load):
    """A stiff 4.16 kV source, one 1 km line of impedance ``R_OHM + j X_OHM`` ohm
    without capacitance, and ``load`` (an OpenDSS ``New Load`` tail)."""
    dss = pytest.importorskip("dss")  # noqa: F841
    from jaxgrid.grid.three_phase import from_opendss

    master = tmp_path / "two_bus.dss"
    master.write_text(
        "clear\n"
        f"new circuit.two_bus basekv={KV_LL} pu=1.0 angle=0 phases=3 bus1=src "
        "r1=1e-6 x1=1e-6 r0=1e-6 x0=1e-6\n"
        "new line.l1 bus1=src bus2=far phases=3 length=1 units=km "
        f"rmatrix={_matrix(R_OHM)} xmatrix={_matrix(X_OHM)} cmatrix=(0 | 0 0 | 0 0 0)\n"
        f"new load.l {load}\n"
        f"set voltagebases=[{KV_LL}]\n"
        "calcvoltagebases\n"
    )
    return from_opendss(master)


def _lindist3flow_by_hand(s_phase_va):
    """Squared magnitudes (pu) of the far bus, phases a, b, c: LinDist3Flow's
    ``v_n = v_m - 2 Re[(Gamma * conj(Z)) S]`` with ``Gamma[phi, psi] = alpha^(phi - psi)``,
    ``v_m = 1`` at the stiff source, ``S`` the per-phase power (VA) through the line."""
    vbase = KV_LL * 1e3 / np.sqrt(3)
    z = R_OHM + 1j * X_OHM
    gamma = ALPHA ** (np.arange(3)[:, None] - np.arange(3)[None, :])
    drop = 2 * np.real((gamma * np.conj(z)) @ s_phase_va)
    return 1.0 - drop / vbase**2


def test_two_bus_single_phase_load_by_hand(tmp_path):
    feeder = _two_bus(tmp_path, "bus1=far.2 phases=1 kv=2.4018 kw=400 kvar=150 model=1")
    s = np.array([0.0, 400e3 + 150e3j, 0.0])
    expected = np.sqrt(_lindist3flow_by_hand(s))
    with x64():
        result = lindist3flow(lindist3flow_model(feeder))
    far = [feeder.node_names.index(f"far.{k}") for k in (1, 2, 3)]
    np.testing.assert_allclose(np.asarray(result.vm_pu)[far], expected, atol=1e-6)
    # the mutual impedances move the unloaded phases too (the cross terms are tested)
    assert np.all(np.abs(expected - 1.0) > 1e-3)


def test_two_bus_delta_load_by_hand(tmp_path):
    """A delta load ``S_ab`` between phases a and b: with balanced angles it takes
    ``S_ab / (1 - alpha)`` from phase a and ``-S_ab alpha / (1 - alpha)`` from phase b
    (``V_a / V_ab`` and ``-V_b / V_ab``)."""
    feeder = _two_bus(tmp_path, "bus1=far.1.2 phases=1 conn=delta kv=4.16 kw=500 kvar=200 model=1")
    s_ab = 500e3 + 200e3j
    s = np.array([s_ab / (1 - ALPHA), -s_ab * ALPHA / (1 - ALPHA), 0.0])
    expected = np.sqrt(_lindist3flow_by_hand(s))
    with x64():
        result = lindist3flow(lindist3flow_model(feeder))
    far = [feeder.node_names.index(f"far.{k}") for k in (1, 2, 3)]
    np.testing.assert_allclose(np.asarray(result.vm_pu)[far], expected, atol=1e-6)


# largest error (pu) at x0.7 and x1.3, no PV, measured with benchmarks/lindist3flow_error.py
# (LN over grounded nodes but the source's; LL on IEEE 37), and the bound asserted
MEASURED = {
    "ieee13": ((5.6e-3, 2.0e-2), (8e-3, 2.8e-2)),
    "ieee34": ((2.3e-2, 1.4e-1), (3.2e-2, 2.0e-1)),
    "ieee37": ((5.5e-3, 2.5e-2), (8e-3, 3.5e-2)),
    "ieee123": ((4.1e-3, 1.4e-2), (6e-3, 2e-2)),
}


def _max_error(name, scale):
    with x64():
        feeder = load_feeder3(name)
        model = lindist3flow_model(feeder)
        lin = jax.jit(lindist3flow)(model, scale)
        exact = jax.jit(unbalanced_power_flow)(constant_power_loads(feeder), scale)
    assert bool(exact.converged)
    if name == "ieee37":
        present = np.asarray(exact.vll_pu) > 0
        return np.max(np.abs(np.asarray(lin.vll_pu) - np.asarray(exact.vll_pu))[present])
    grounded = np.asarray(model.grounded).copy()
    grounded[np.asarray(feeder.source_nodes)] = False
    return np.max(np.abs(np.asarray(lin.vm_pu) - np.asarray(exact.vm_pu))[grounded])


@pytest.mark.parametrize("name", ["ieee13"] + (["ieee34", "ieee37", "ieee123"] if FULL else []))
def test_error_against_exact_solver_is_bounded_and_grows_with_load(name):
    (_, _), (bound_low, bound_high) = MEASURED[name]
    low, high = _max_error(name, 0.7), _max_error(name, 1.3)
    assert low < bound_low and high < bound_high
    assert low < high


def test_pv_injections_against_exact_solver():
    """Single-phase PV on three phases to ground and one between phases (IEEE 13, x0.7,
    0.2 kvar per kW): the voltages stay within the bound measured with
    ``benchmarks/lindist3flow_error.py`` (4.7e-3 pu), and the rise the PV causes matches
    the exact solver's within 20 % (measured 13 % line to neutral, 10 % line to line: the
    model's sensitivities are those of no load; a model deaf to the PV misses by 100 %)."""
    with x64():
        feeder = load_feeder3("ieee13")
        model = lindist3flow_model(feeder)
        p = np.zeros(feeder.n_node)
        for node, kw in {"675.1": 300.0, "680.2": 150.0, "611.3": 100.0}.items():
            p[feeder.node_names.index(node)] = kw
        p_ll = np.zeros((feeder.n_bus, 3))
        p_ll[feeder.bus_names.index("671"), 0] = 200.0
        pv = (p, 0.2 * p, p_ll, 0.2 * p_ll)
        lin, lin0 = lindist3flow(model, 0.7, *pv), lindist3flow(model, 0.7)
        exact = unbalanced_power_flow(constant_power_loads(feeder), 0.7, *pv)
        exact0 = unbalanced_power_flow(constant_power_loads(feeder), 0.7)
    assert bool(exact.converged) and bool(exact0.converged)
    grounded = np.asarray(model.grounded).copy()
    grounded[np.asarray(feeder.source_nodes)] = False
    assert np.max(np.abs(np.asarray(lin.vm_pu - exact.vm_pu))[grounded]) < 7e-3
    for field in ("vm_pu", "vll_pu"):
        rise = np.asarray(getattr(lin, field) - getattr(lin0, field))
        rise_exact = np.asarray(getattr(exact, field) - getattr(exact0, field))
        if field == "vm_pu":
            rise, rise_exact = rise[grounded], rise_exact[grounded]
        assert np.max(rise_exact) > 5e-3  # the PV matters
        assert np.max(np.abs(rise - rise_exact)) < 0.2 * np.max(np.abs(rise_exact))


def test_grounded_marks_the_floating_delta_sections():
    feeder = load_feeder3("ieee123")
    floating = np.flatnonzero(~np.asarray(lindist3flow_model(feeder).grounded))
    assert {feeder.node_names[i] for i in floating} == {"610.1", "610.2", "610.3"}  # XFM1
    # IEEE 37: everything below the delta-delta substation transformer
    feeder = load_feeder3("ieee37")
    grounded = np.flatnonzero(np.asarray(lindist3flow_model(feeder).grounded))
    assert {feeder.node_names[i] for i in grounded} == {f"sourcebus.{k}" for k in (1, 2, 3)}


def test_vmap_equals_one_by_one():
    with x64():
        feeder = load_feeder3("ieee13")
        model = lindist3flow_model(feeder)
        scales = jnp.array([0.5, 1.0, 1.3])
        p_gen = (
            jnp.zeros((3, feeder.n_node))
            .at[:, feeder.node_names.index("675.1")]
            .set(jnp.array([0.0, 200.0, 400.0]))
        )
        p_ll = (
            jnp.zeros((3, feeder.n_bus, 3))
            .at[:, feeder.bus_names.index("671"), 0]
            .set(jnp.array([100.0, 0.0, 50.0]))
        )

        def solve(scale, p, p_pair):
            return lindist3flow(model, scale, p, 0.2 * p, p_pair, 0.2 * p_pair)

        batch = jax.jit(jax.vmap(solve))(scales, p_gen, p_ll)
        for k in range(3):
            one = jax.jit(solve)(scales[k], p_gen[k], p_ll[k])
            np.testing.assert_allclose(batch.vm_pu[k], one.vm_pu, atol=1e-12)
            np.testing.assert_allclose(batch.vll_pu[k], one.vll_pu, atol=1e-12)
    assert not np.allclose(batch.vm_pu[0], batch.vm_pu[2])  # the batch members differ


def test_absent_injections_cost_no_products():
    """Without PV only the load columns are multiplied: products with zero injections
    of a model closed over by ``jit`` are constants XLA folds, 10-14 s each on IEEE 123
    (measured before this was so)."""
    model = lindist3flow_model(load_feeder3("ieee123"))
    n_lp = model.load_p_kw.shape[0]
    jaxpr = jax.make_jaxpr(lambda s: lindist3flow(model, s))(1.0)
    widths = [e.invars[0].aval.shape[-1] for e in jaxpr.eqns if e.primitive.name == "dot_general"]
    assert widths and max(widths) == n_lp


def test_float32_jit_is_close_to_float64():
    feeder = load_feeder3("ieee123")
    model32 = lindist3flow_model(feeder)
    result32 = jax.jit(lindist3flow)(model32, 1.3)
    assert result32.vm_pu.dtype == jnp.float32
    with x64():
        result64 = jax.jit(lindist3flow)(lindist3flow_model(feeder), 1.3)
    assert result64.vm_pu.dtype == jnp.float64
    np.testing.assert_allclose(result32.vm_pu, result64.vm_pu, atol=2e-6)
    np.testing.assert_allclose(result32.vll_pu, result64.vll_pu, atol=2e-6)
