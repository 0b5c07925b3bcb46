"""The unbalanced power flow of the IEEE feeders against OpenDSS itself (``dss-python``).

Each case compiles the bundled master with OpenDSS, fixes the regulator taps to those of
the bundled feeder (``RegControl``s off), tightens OpenDSS's tolerance to 1e-12, sets
``loadmult`` and, for the PV cases, adds single-phase constant-power ``Generator``s on
several phases, phase to ground and phase to phase (``model=1`` with a 0.5-1.5 pu band,
so they stay constant power), then
compares every node voltage (magnitude and angle), the line-to-line voltages (the
comparison that matters on the 3-wire delta IEEE 37), the total losses, the source power
and every line's phase currents. ``from_opendss`` extracts, OpenDSS solves: the solver
under test never sees OpenDSS's solution.

The default suite runs IEEE 13 at 0.7, 1.0 and 1.3 times its load and with PV, and the
other feeders at base load; ``JAXGRID_VALIDATE=full`` every feeder at every loading with
and without PV::

    JAXGRID_VALIDATE=full python -m pytest tests/grid/test_three_phase_opendss.py -p no:xdist
"""

import os

import jax
import numpy as np
import pytest
from conftest import FULL, x64

dss = pytest.importorskip("dss")

from opendss_reference import line_to_line, opendss_solution, pv_arrays  # noqa: E402

from jaxgrid.grid.three_phase import (  # noqa: E402
    BUNDLED,
    bundled_master,
    element_admittances,
    from_opendss,
    load_feeder3,
    tap_commands,
    unbalanced_power_flow,
)
from jaxgrid.grid.three_phase.opendss import dss_engine  # noqa: E402

VM_TOL, VA_TOL, LOSS_RTOL = 1e-6, 1e-4, 1e-4  # pu, degrees, relative (issue 20)
SCALES = (0.7, 1.0, 1.3)


def _cases():
    out = []
    for name in BUNDLED:
        for scale in SCALES:
            for pv in (False, True):
                default = name == "ieee13" or (scale == 1.0 and not pv)
                if FULL or default:
                    out.append((name, scale, pv))
    return out


@pytest.mark.parametrize("name,scale,pv", _cases())
def test_matches_opendss(name, scale, pv):
    with x64():
        feeder = load_feeder3(name)
        v_ref, loss_ref, (p_ref, q_ref), i_ref = opendss_solution(name, feeder, scale, pv)
        gen = pv_arrays(name, feeder) if pv else (None,) * 4
        result = jax.jit(unbalanced_power_flow)(feeder, scale, *gen)
        assert bool(result.converged)
        vbase = np.asarray(feeder.vbase_v)
        vm_ref = np.abs(v_ref) / vbase
        assert np.max(np.abs(np.asarray(result.vm_pu) - vm_ref)) < VM_TOL
        v = np.asarray(result.v_volt)
        assert np.max(np.abs(np.angle(v / v_ref, deg=True))) < VA_TOL
        ll_ref, pair = line_to_line(feeder, v_ref)
        base_ll = np.sqrt(3) * vbase[np.max(np.asarray(feeder.bus_nodes), axis=1)]
        vll_ref = np.where(pair, np.abs(ll_ref) / base_ll[:, None], 0)
        assert np.max(np.abs(np.asarray(result.vll_pu) - vll_ref)) < VM_TOL
        assert abs(float(result.loss_kw) - loss_ref) < LOSS_RTOL * loss_ref
        assert abs(float(result.p_source_kw) - p_ref) < 1e-6 * abs(p_ref)
        assert abs(float(result.q_source_kvar) - q_ref) < 1e-5 * abs(p_ref)
        np.testing.assert_allclose(np.asarray(result.i_line_a), i_ref, rtol=1e-6, atol=1e-4)


def test_load_band_switching_is_exercised():
    """The cases above reach OpenDSS's load-model switching: IEEE 34 at neutral taps has
    loads below ``vminpu`` (0.95) and OpenDSS agrees there too."""
    with x64():
        feeder = load_feeder3("ieee34")
        feeder = feeder.replace(tap_pu=np.ones(feeder.n_regulator))
        v_ref, loss_ref, _, _ = opendss_solution("ieee34", feeder, 1.0, False)
        result = jax.jit(unbalanced_power_flow)(feeder)
        vm_ref = np.abs(v_ref) / np.asarray(feeder.vbase_v)
        assert vm_ref.min() < 0.8  # deep in the interpolated region of constant-P loads
        assert np.max(np.abs(np.asarray(result.vm_pu) - vm_ref)) < VM_TOL
        assert abs(float(result.loss_kw) - loss_ref) < LOSS_RTOL * loss_ref


def test_vmap_over_taps_and_loads_matches_opendss():
    """One batched solve over regulator taps and load scalings equals OpenDSS's solve of
    each member."""
    with x64():
        feeder = load_feeder3("ieee13")
        taps = np.array([[1.0625, 1.05, 1.06875], [1.0, 1.0, 1.0], [1.1, 0.95, 1.025]])
        scales = np.array([1.0, 1.3, 0.7])

        def solve(tap, scale):
            return unbalanced_power_flow(feeder.replace(tap_pu=tap), scale).vm_pu

        vm = np.asarray(jax.jit(jax.vmap(solve))(taps, scales))
        for b in range(len(scales)):
            member = feeder.replace(tap_pu=taps[b])
            v_ref, _, _, _ = opendss_solution("ieee13", member, scales[b], False)
            vm_ref = np.abs(v_ref) / np.asarray(feeder.vbase_v)
            assert np.max(np.abs(vm[b] - vm_ref)) < VM_TOL


@pytest.mark.parametrize("name", ["ieee13", "ieee37", "ieee123"])
def test_regulator_yprim_as_a_function_of_tap(name):
    """``Yprim(t) = D(t) A D(t) + B`` equals OpenDSS's ``Yprim`` of each regulator at taps
    other than the two the builder read (1.0 and 1.1)."""
    with x64():
        feeder = load_feeder3(name)
        engine = dss_engine()
        engine.Text.Command = "clear"
        engine.Text.Command = f'compile "{bundled_master(name)}"'
        circuit, element = engine.ActiveCircuit, engine.ActiveCircuit.ActiveCktElement
        for tap in (0.9, 0.95625, 1.0375, 1.09375):
            taps = dict.fromkeys(feeder.regulator_names, tap)
            for command in tap_commands(taps):
                engine.Text.Command = command
            circuit.Solution.BuildYMatrix(0, False)
            ours = np.asarray(
                element_admittances(feeder.replace(tap_pu=np.full(feeder.n_regulator, tap)))
            )
            for e in np.asarray(feeder.reg_elem):
                circuit.SetActiveElement(feeder.element_names[e])
                flat = np.asarray(element.Yprim)
                size = int(round(np.sqrt(flat.size // 2)))
                y = (flat[0::2] + 1j * flat[1::2]).reshape(size, size)
                kept = [i for i, node in enumerate(element.NodeOrder) if node != 0]
                y = y[np.ix_(kept, kept)]
                np.testing.assert_allclose(
                    ours[e][: len(kept), : len(kept)], y, rtol=1e-12, atol=1e-9
                )


@pytest.mark.parametrize("name", list(BUNDLED) if FULL else ["ieee13"])
def test_bundled_extract_is_current(name):
    """The shipped ``.npz`` is what ``from_opendss`` extracts from the shipped files."""
    from jaxgrid.grid.three_phase.opendss import published_taps

    fresh = from_opendss(
        bundled_master(name), commands=tap_commands(published_taps(name)), name=name
    )
    shipped = load_feeder3(name)
    for field in shipped.__dataclass_fields__:
        a, b = getattr(fresh, field), getattr(shipped, field)
        if isinstance(a, (str, tuple, int)):
            assert a == b, field
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, err_msg=field)


def test_unsupported_elements_are_named():
    commands = [
        "new generator.g1 bus1=675.1 kV=2.4 kW=10",
        "new pvsystem.p1 bus1=680 kV=4.16 kVA=10 Pmpp=10",
    ]
    with pytest.raises(ValueError, match=r"Generator\.g1.*PVSystem\.p1"):
        from_opendss(bundled_master("ieee13"), commands=commands)


def test_unsupported_load_model_is_named():
    with pytest.raises(ValueError, match=r"671 \(model 3\)"):
        from_opendss(bundled_master("ieee13"), commands=["load.671.model=3"])


def test_missing_master_file():
    with pytest.raises(ValueError, match="does not exist"):
        from_opendss("no/such/master.dss")


def test_joined_switches_stay_within_tolerance():
    """Joining closed switches (float32's default) leaves out their 1e-6 ohm: on IEEE 123
    (eight switches, one carrying the whole feeder) voltages stay within 1e-6 pu of
    OpenDSS and the losses within the switches' own couple of watts."""
    with x64():
        feeder = load_feeder3("ieee123")
        v_ref, loss_ref, _, _ = opendss_solution("ieee123", feeder, 1.0, False)
        result = jax.jit(unbalanced_power_flow, static_argnames="join_switches")(
            feeder, join_switches=True
        )
        vm_ref = np.abs(v_ref) / np.asarray(feeder.vbase_v)
        error = np.max(np.abs(np.asarray(result.vm_pu) - vm_ref))
        assert 1e-8 < error < VM_TOL  # joined: no longer exact, still within tolerance
        assert abs(float(result.loss_kw) - loss_ref) < 2e-3  # kW


def test_building_from_opendss_leaves_the_working_directory_alone():
    # OpenDSS's compile moves the process into the compiled file's folder unless told not
    # to; relative paths opened afterwards (the suite's MATPOWER cases) then broke
    here = os.getcwd()
    from_opendss(bundled_master("ieee13"))
    engine = dss_engine()
    engine.Text.Command = f'compile "{bundled_master("ieee37")}"'
    assert os.getcwd() == here
