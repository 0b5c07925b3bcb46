"""Automatic regulator tap control (``jaxgrid.devices.regulator``) against OpenDSS's own
``RegControl`` (``dss-python``), and by hand.

Each OpenDSS case compiles the bundled master, sets every regulator to its neutral tap
(``RegControls.TapNumber = 0``), ``Set ControlMode=Static``, tightens the tolerance to
1e-12, sets ``loadmult`` and solves: OpenDSS then alternates power flow and control
actions until no control acts. Its settled taps (``RegControls.TapNumber``) must equal
those of :func:`solve_with_regulators` from the same neutral taps, its control
iterations be one more than our rounds with a move (its last iteration finds every
control in band), and its node voltages at those taps be within 1e-6 pu of ours. The
controls' settings come from the shipped ``.npz``; OpenDSS reads its own files.

The default suite runs IEEE 13 at 0.7, 1.0 and 1.3 times its load; ``JAXGRID_VALIDATE=full``
also IEEE 34, 37 (delta windings, taps at the limit) and 123 (seven controls, one
three-phase, in series)::

    JAXGRID_VALIDATE=full python -m pytest tests/grid/test_regulator.py -p no:xdist
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FULL, x64

from jaxgrid.devices.regulator import (
    RegControlSettings,
    load_regcontrols,
    regulator_voltage,
    solve_with_regulators,
    tap_step,
)
from jaxgrid.grid.three_phase import BUNDLED, load_feeder3, save_feeder3, unbalanced_power_flow

SCALES = (0.7, 1.0, 1.3)
VM_TOL = 1e-6  # pu
SOLVE = jax.jit(solve_with_regulators, static_argnames=("n_rounds",))


def _neutral(feeder):
    return feeder.replace(tap_pu=np.ones(feeder.n_regulator))


# -- by hand ------------------------------------------------------------------------------


def _hand_settings(n=1, **overrides):
    """IEEE-13-like controls: 120 V target, 2 V band, PT 20:1 on a 2400 V winding, so one
    tap step (0.625 % of 2400 V = 15 V) is 0.75 V on the 120 V base."""
    fields = dict(
        vreg_v=120.0,
        band_v=2.0,
        pt_ratio=20.0,
        ct_primary_a=700.0,
        r_ldc_v=0.0,
        x_ldc_v=0.0,
        winding_vbase_v=2400.0,
        tap_step_pu=0.00625,
        min_tap_pu=0.9,
        max_tap_pu=1.1,
        max_tap_change=16,
        pt_node_from=0,
        pt_node_to=1,
        ct_conductor=0,
    )
    fields.update(overrides)
    arrays = {k: np.full(n, v) for k, v in fields.items()}
    for k in ("max_tap_change", "pt_node_from", "pt_node_to", "ct_conductor"):
        arrays[k] = arrays[k].astype(np.int32)
    return RegControlSettings(names=tuple(f"r{i}" for i in range(n)), **arrays)


def _steps(step):
    return np.round((np.asarray(step.tap_pu) - 1.0) / 0.00625).astype(int).tolist()


def test_tap_step_by_hand():
    settings = _hand_settings(n=6)
    # 125 V: 5 V high = 6.67 steps, rounds to 7, moves trunc(0.7 * 7) = 4 down;
    # 123 V: 4 steps wanted, 2 moved; 121.3 V: 1.73 -> 2 wanted, trunc(1.4) = 1 moved;
    # 120.9 and 119.1 V: inside the 2 V band; 117.5 V: 3.33 -> 3 wanted, 2 moved up
    v_seen = np.array([125.0, 123.0, 121.3, 120.9, 119.1, 117.5])
    step = tap_step(settings, np.ones(6), v_seen)
    assert _steps(step) == [-4, -2, -1, 0, 0, 2]
    assert np.asarray(step.moved).tolist() == [True, True, True, False, False, True]
    assert np.asarray(step.steps).tolist() == [-4, -2, -1, 0, 0, 2]


def test_tap_step_band_edge_is_inside():
    # OpenDSS acts only when |vreg - v| exceeds half the band
    step = tap_step(_hand_settings(n=2), np.ones(2), np.array([121.0, 119.0]))
    assert not np.any(np.asarray(step.moved))


def test_tap_step_limits():
    settings = _hand_settings(n=4, max_tap_change=np.array([16, 16, 16, 3]))
    taps = 1.0 + 0.00625 * np.array([16, 15, -16, 0])
    # 110 V: 13.3 -> 13 steps wanted, 9 moved; from +16 none (at the limit, no action),
    # from +15 clipped to +16; 130 V from -16: none; 135 V with maxtapchange 3: 3 down
    v_seen = np.array([110.0, 110.0, 130.0, 135.0])
    step = tap_step(settings, taps, v_seen)
    assert _steps(step) == [16, 16, -16, -3]
    assert np.asarray(step.moved).tolist() == [False, True, False, True]


def test_tap_step_stays_on_the_tap_grid_in_float32():
    """Moves up and down land on the float32 value nearest ``1 + k * 0.00625`` every time
    (no accumulated round-off); a tap off the grid moves by whole steps from where it is,
    as OpenDSS's does."""
    settings = _hand_settings(n=1)
    taps, k = jnp.ones(1, jnp.float32), 0
    for v_seen, moved in ((125.0, -4), (117.5, 2), (125.0, -4), (117.5, 2), (121.3, -1)):
        taps = tap_step(settings, taps, jnp.array([v_seen])).tap_pu
        k += moved
        assert taps.dtype == jnp.float32
        assert float(taps[0]) == float(np.float32(1 + k * 0.00625)), k
    off = tap_step(settings, jnp.array([1.003]), jnp.array([117.5])).tap_pu
    assert float(off[0]) == pytest.approx(1.003 + 2 * 0.00625, abs=1e-6)


def test_tap_step_jit_vmap_float64():
    settings = _hand_settings(n=1)
    v_seen = jnp.array([[125.0], [120.0], [117.5]])
    step = jax.jit(jax.vmap(tap_step, in_axes=(None, None, 0)))(settings, jnp.ones(1), v_seen)
    assert np.round((np.asarray(step.tap_pu)[:, 0] - 1) / 0.00625).tolist() == [-4, 0, 2]
    with x64():
        step = jax.jit(tap_step)(settings, jnp.ones(1), jnp.array([125.0]))
        assert step.tap_pu.dtype == jnp.float64
        assert float(step.tap_pu[0]) == pytest.approx(1.0 - 4 * 0.00625, abs=1e-15)


# -- against OpenDSS ----------------------------------------------------------------------


def _opendss_static(name, scale, commands=(), max_control_iter=100):
    """OpenDSS's static control solve from neutral taps: tap numbers, node voltages (V,
    OpenDSS's node order), control iterations."""
    pytest.importorskip("dss")
    from jaxgrid.grid.three_phase import bundled_master
    from jaxgrid.grid.three_phase.opendss import dss_engine

    engine = dss_engine()
    engine.Text.Command = "clear"
    engine.Text.Command = f'compile "{bundled_master(name)}"'
    circuit = engine.ActiveCircuit
    for command in commands:
        engine.Text.Command = command
    for control in circuit.RegControls:
        control.TapNumber = 0
    for command in (
        "set controlmode=static",
        "set tolerance=1e-12",
        "set maxiterations=500",
        f"set maxcontroliter={max_control_iter}",
        f"set loadmult={scale}",
    ):
        engine.Text.Command = command
    try:
        engine.Text.Command = "solve"
    except Exception as err:  # a solve cut short by maxcontroliter warns (#485)
        if "Max Control Iterations" not in str(err):
            raise
    assert circuit.Solution.Converged
    taps = [control.TapNumber for control in circuit.RegControls]
    volts = np.asarray(circuit.AllBusVolts)
    return taps, volts[0::2] + 1j * volts[1::2], circuit.Solution.ControlIterations


def _cases():
    return [(name, scale) for name in BUNDLED for scale in SCALES if FULL or name == "ieee13"]


@pytest.mark.parametrize("name,scale", _cases())
def test_settled_taps_match_opendss(name, scale):
    with x64():
        feeder, settings = load_feeder3(name), load_regcontrols(name)
        taps_ref, v_ref, iterations = _opendss_static(name, scale)
        out = SOLVE(_neutral(feeder), settings, scale)
        assert bool(out.settled)
        assert np.asarray(out.tap_steps).tolist() == taps_ref
        assert int(out.rounds_moving) == iterations - 1
        assert bool(out.power_flow.converged)
        vm_ref = np.abs(v_ref) / np.asarray(feeder.vbase_v)
        assert np.max(np.abs(np.asarray(out.power_flow.vm_pu) - vm_ref)) < VM_TOL


def test_vmap_over_loads_and_targets_matches_opendss():
    """One batched solve over load scalings and target voltages (a settings leaf) equals
    OpenDSS's static solve of each member."""
    with x64():
        feeder, settings = load_feeder3("ieee13"), load_regcontrols("ieee13")
        scales = np.array([1.3, 0.7, 1.0])
        vregs = np.array([118.0, 124.0, 121.0])

        def solve(scale, vreg):
            member = settings.replace(vreg_v=jnp.full(settings.n_reg, vreg))
            return solve_with_regulators(_neutral(feeder), member, scale)

        out = jax.jit(jax.vmap(solve))(scales, vregs)
        assert np.all(np.asarray(out.settled))
        for b in range(len(scales)):
            commands = [f"regcontrol.{n}.vreg={vregs[b]}" for n in settings.names]
            taps_ref, v_ref, _ = _opendss_static("ieee13", scales[b], commands)
            assert np.asarray(out.tap_steps[b]).tolist() == taps_ref
            vm_ref = np.abs(v_ref) / np.asarray(feeder.vbase_v)
            assert np.max(np.abs(np.asarray(out.power_flow.vm_pu[b]) - vm_ref)) < VM_TOL


def test_too_few_rounds_is_not_settled_and_matches_opendss_cut_short():
    """One round from neutral is OpenDSS's first action (its ``maxcontroliter=2``: solve,
    act, solve) and has not settled."""
    with x64():
        feeder, settings = load_feeder3("ieee13"), load_regcontrols("ieee13")
        taps_ref, _, _ = _opendss_static("ieee13", 1.0, max_control_iter=2)
        out = SOLVE(_neutral(feeder), settings, 1.0, n_rounds=1)
        assert not bool(out.settled)
        assert np.asarray(out.tap_steps).tolist() == taps_ref
        assert taps_ref != [0, 0, 0]


def test_float32_ieee13_settles_on_opendss_taps():
    """In float32 (the default) IEEE 13's power flow is good to about 2e-6 pu, and its
    controls settle where OpenDSS's do."""
    feeder, settings = load_feeder3("ieee13"), load_regcontrols("ieee13")
    out = SOLVE(_neutral(feeder), settings, 1.0)
    assert out.tap_pu.dtype == jnp.float32
    assert bool(out.settled)
    assert np.asarray(out.tap_steps).tolist() == [9, 6, 9]  # OpenDSS's, test above


@pytest.mark.parametrize("name", list(BUNDLED) if FULL else ["ieee13"])
def test_regulator_voltage_is_opendss_pt_and_ldc(name):
    """The voltage each control sees equals the PT and line-drop compensation formula
    applied to OpenDSS's own solution: the winding voltage from its node voltages, the CT
    current from its transformer's terminal currents (``CktElement.Currents``)."""
    pytest.importorskip("dss")
    from jaxgrid.grid.three_phase import bundled_master, tap_commands
    from jaxgrid.grid.three_phase.opendss import dss_engine

    with x64():
        feeder, settings = load_feeder3(name), load_regcontrols(name)
        seen = jax.jit(lambda f: regulator_voltage(settings, f, unbalanced_power_flow(f)))
        ours = np.asarray(seen(feeder))
        engine = dss_engine()
        engine.Text.Command = "clear"
        engine.Text.Command = f'compile "{bundled_master(name)}"'
        taps = dict(zip(feeder.regulator_names, np.asarray(feeder.tap_pu).tolist()))
        for command in [*tap_commands(taps), "set tolerance=1e-12", "solve"]:
            engine.Text.Command = command
        circuit = engine.ActiveCircuit
        names = [n.lower() for n in circuit.AllNodeNames]
        volts = np.asarray(circuit.AllBusVolts)
        v = dict(zip(names, volts[0::2] + 1j * volts[1::2]))
        expected = []
        for control in circuit.RegControls:
            circuit.SetActiveElement(f"transformer.{control.Transformer}")
            element = circuit.ActiveCktElement
            wdg, conductors = control.Winding, element.NumConductors
            buses = [b.split(".")[0].lower() for b in element.BusNames]
            order = list(element.NodeOrder)[(wdg - 1) * conductors : wdg * conductors]
            bus = buses[wdg - 1]
            # PT on phase 1 of the winding: to the winding's neutral, its conductor after
            # the phases (wye), or to the next phase (delta; a single-phase winding's
            # second conductor); OpenDSS node 0 is ground
            circuit.Transformers.Name = control.Transformer
            circuit.Transformers.Wdg = wdg
            phases = element.NumPhases
            other = (1 % phases if phases > 2 else 1) if circuit.Transformers.IsDelta else phases
            v_phase = v[f"{bus}.{order[0]}"]
            v_other = 0.0 if order[other] == 0 else v[f"{bus}.{order[other]}"]
            currents = np.asarray(element.Currents)
            i_ct = currents[0::2] + 1j * currents[1::2]
            i_ct = i_ct[(wdg - 1) * conductors]
            v_pt = (v_phase - v_other) / control.PTratio
            ldc = (control.ForwardR + 1j * control.ForwardX) * i_ct / control.CTPrimary
            expected.append(abs(v_pt + ldc))
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5)  # V on 120 V


# -- extraction ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUNDLED) if FULL else ["ieee13", "ieee37"])
def test_bundled_regcontrols_are_current(name):
    """The shipped settings are what the reader extracts from the shipped files, and each
    control drives the regulator of the same position in the feeder."""
    pytest.importorskip("dss")
    from jaxgrid.devices.regulator import regcontrols_from_master
    from jaxgrid.grid.three_phase import bundled_master

    fresh, shipped = regcontrols_from_master(bundled_master(name)), load_regcontrols(name)
    assert fresh.names == shipped.names
    for field in shipped.__dataclass_fields__:
        if field != "names":
            np.testing.assert_array_equal(getattr(fresh, field), getattr(shipped, field), field)
    feeder = load_feeder3(name)
    assert len(shipped.names) == feeder.n_regulator
    # the CT conductor and the PT's first node are the same node: the monitored phase
    reg_nodes = np.asarray(feeder.elem_nodes)[np.asarray(feeder.reg_elem)]
    ct_nodes = reg_nodes[np.arange(feeder.n_regulator), np.asarray(shipped.ct_conductor)]
    np.testing.assert_array_equal(ct_nodes, shipped.pt_node_from)


def test_ieee13_settings_are_the_files():
    """IEEE 13's three controls as written in IEEE13Nodeckt.dss (``vreg=122 band=2
    ptratio=20 ctprim=700 R=3 X=9`` on 2.4 kV single-phase windings, default taps)."""
    s = load_regcontrols("ieee13")
    assert s.names == ("reg1", "reg2", "reg3")
    for field, value in dict(
        vreg_v=122, band_v=2, pt_ratio=20, ct_primary_a=700, r_ldc_v=3, x_ldc_v=9
    ).items():
        np.testing.assert_array_equal(getattr(s, field), value, field)
    np.testing.assert_allclose(s.winding_vbase_v, 2400.0)
    np.testing.assert_allclose(s.tap_step_pu, 0.2 / 32, rtol=1e-12)
    np.testing.assert_array_equal(s.max_tap_change, 16)
    feeder = load_feeder3("ieee13")
    assert [feeder.node_names[i] for i in s.pt_node_from] == ["rg60.1", "rg60.2", "rg60.3"]
    assert np.all(np.asarray(s.pt_node_to) == feeder.n_node)  # to ground


def test_feeder_saved_without_controls_still_loads(tmp_path):
    """An ``.npz`` written before the controls were shipped loads as a feeder; asking it
    for controls says what is missing."""
    feeder = load_feeder3("ieee13")
    path = tmp_path / "old.npz"
    save_feeder3(feeder, path)
    again = load_feeder3(str(path))
    np.testing.assert_array_equal(again.tap_pu, feeder.tap_pu)
    with pytest.raises(ValueError, match="no regulator controls"):
        load_regcontrols(str(path))
    save_feeder3(feeder, tmp_path / "new.npz", regcontrols=_arrays(load_regcontrols("ieee13")))
    assert load_regcontrols(str(tmp_path / "new.npz")).names == ("reg1", "reg2", "reg3")


def _arrays(settings):
    out = {"names": settings.names}
    out.update({f: np.asarray(getattr(settings, f)) for f in settings.__dataclass_fields__})
    out["names"] = settings.names
    return out


def test_unsupported_controls_are_named():
    pytest.importorskip("dss")
    from jaxgrid.devices.regulator import regcontrols_from_master
    from jaxgrid.grid.three_phase import bundled_master

    commands = ["regcontrol.reg2.vlimit=125", "regcontrol.reg3.reversible=yes"]
    with pytest.raises(ValueError, match=r"reg2 \(vlimit\).*reg3 \(reversible"):
        regcontrols_from_master(bundled_master("ieee13"), commands)
    with pytest.raises(ValueError, match="delays"):
        regcontrols_from_master(bundled_master("ieee13"), ["regcontrol.reg1.delay=30"])


def test_failed_power_flow_moves_no_tap():
    """At five times its load IEEE 13 has no power-flow solution; the controls do not act
    on the stand-in voltages (which are low, and would raise every tap)."""
    with x64():
        feeder, settings = load_feeder3("ieee13"), load_regcontrols("ieee13")
        out = SOLVE(_neutral(feeder), settings, 5.0)
        assert not bool(out.power_flow.converged)
        assert not bool(out.settled)
        assert np.asarray(out.tap_steps).tolist() == [0, 0, 0]
        assert int(out.rounds_moving) == 0
        assert np.all(np.asarray(out.v_seen) < settings.vreg_v - settings.band_v / 2)
