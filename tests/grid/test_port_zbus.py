"""The port Z-bus power flow against OpenDSS itself (``dss-python``), in float64 and in
the default float32, at the taps it was built at and at others.

``JAXGRID_VALIDATE=full`` runs every feeder at every loading with and without PV::

    JAXGRID_VALIDATE=full python -m pytest tests/grid/test_port_zbus.py -p no:xdist
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FULL, full_only, jaxpr_equations, jaxpr_loops, x64

pytest.importorskip("dss")

from opendss_reference import (  # noqa: E402
    PAIRS,
    PV,
    PV_KVAR,
    PV_LL,
    line_to_line,
    opendss_solution,
)

from jaxgrid.grid.three_phase import BUNDLED, load_feeder3  # noqa: E402
from jaxgrid.grid.three_phase.port_zbus import build_port_zbus, port_power_flow  # noqa: E402

VM_TOL, VA_TOL, LOSS_RTOL = 1e-6, 1e-4, 1e-4  # pu, degrees, relative (issue 20)
I_TOL = (1e-6, 1e-4)  # line currents: relative, amperes (float64, as the LU solver's test)
# float32: the line currents come from float64 maps of the injections (a line's current
# as its admittance times a float32 voltage difference was off by 7 A of 710 on IEEE 123)
I_TOL32 = (1e-5, 1e-3)


def _cases():
    out = []
    for name in BUNDLED:
        for scale in (0.7, 1.0, 1.3):
            for pv in (False, True):
                default = (name == "ieee13" and pv and scale != 1.0) or (
                    name == "ieee123" and pv and scale == 1.0
                )
                if FULL or default:
                    out.append((name, scale, pv))
    return out


def _model(name, feeder):
    """The port model with the PV of ``opendss_reference`` as its generators, and their
    ``(p_kw, q_kvar)``."""
    nodes = [feeder.node_names.index(node) for node in PV[name]]
    pairs = []
    for bus, pair in PV_LL[name]:
        a, b = PAIRS[pair]
        pairs.append((feeder.node_names.index(f"{bus}.{a}"), feeder.node_names.index(f"{bus}.{b}")))
    p = np.array([*PV[name].values(), *PV_LL[name].values()])
    return build_port_zbus(feeder, gen_nodes=nodes, gen_pairs=pairs), p, PV_KVAR * p


def _check(result, feeder, reference, vm_tol=VM_TOL, va_tol=VA_TOL, i_tol=I_TOL):
    """Every node's voltage, the line-to-line voltages, the losses, the source's power
    and every line's phase currents against OpenDSS's solution ``reference``."""
    v_ref, loss_ref, (p_ref, q_ref), i_ref = reference
    vbase = np.asarray(feeder.vbase_v, np.float64)
    assert bool(result.converged)
    assert np.max(np.abs(np.asarray(result.vm_pu, np.float64) - np.abs(v_ref) / vbase)) < vm_tol
    angle = np.angle(np.asarray(result.v_volt, np.complex128) / v_ref, deg=True)
    assert np.max(np.abs(angle)) < va_tol
    ll_ref, pair = line_to_line(feeder, v_ref)
    base_ll = np.sqrt(3) * vbase[np.max(np.asarray(feeder.bus_nodes), axis=1)]
    vll_ref = np.where(pair, np.abs(ll_ref) / base_ll[:, None], 0)
    assert np.max(np.abs(np.asarray(result.vll_pu, np.float64) - vll_ref)) < vm_tol
    assert abs(float(result.loss_kw) - loss_ref) < LOSS_RTOL * loss_ref
    assert abs(float(result.p_source_kw) - p_ref) < 1e-6 * abs(p_ref)
    assert abs(float(result.q_source_kvar) - q_ref) < 1e-5 * abs(p_ref)
    rtol, atol = i_tol
    np.testing.assert_allclose(np.asarray(result.i_line_a, np.float64), i_ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,scale,pv", _cases())
def test_float64_matches_opendss(name, scale, pv):
    with x64():
        feeder = load_feeder3(name)
        reference = opendss_solution(name, feeder, scale, pv)
        zbus, p, q = _model(name, feeder)
        gen = (p, q) if pv else (None, None)
        _check(jax.jit(port_power_flow)(zbus, feeder, scale, *gen), feeder, reference)


@pytest.mark.parametrize("name", ["ieee13", "ieee123"] + (["ieee34", "ieee37"] if FULL else []))
def test_float32_matches_opendss(name):
    """The default precision is within OpenDSS-level accuracy: the float64 network
    inverse is computed on the host, float32 only multiplies it. On IEEE 37, a 3-wire
    delta feeder whose nodes float to ground on the lines' capacitance alone, this
    holds since every node's voltage is taken from the devices' currents through
    float64 maps (``N' Z N`` and ``Z N``): through float32 port injections, where the
    delta currents cancel, it was 4.7e-6 pu and 2.4e-4 degrees off."""
    feeder = load_feeder3(name)
    zbus, p, q = _model(name, feeder)
    result = jax.jit(port_power_flow)(zbus, feeder, 1.3, p, q)
    assert result.vm_pu.dtype == jnp.float32
    with x64():
        reference = opendss_solution(name, load_feeder3(name), 1.3, True)
    _check(result, feeder, reference, i_tol=I_TOL32)


@pytest.mark.parametrize("name", ["ieee13", "ieee123"])
def test_taps_under_vmap_match_opendss_in_float32(name):
    """Taps other than the build's, batched with loads, in float32. IEEE 123's regulators
    have 5e5 pu series admittances: written as a difference of two ``Yprim``s a tap change
    cost float32 up to 5e-3 pu there; as a voltage source on the winding it stays exact."""
    feeder = load_feeder3(name)
    zbus = build_port_zbus(feeder)
    rng = np.random.default_rng(7)
    steps = rng.integers(-8, 9, (3, feeder.n_regulator))
    taps = np.asarray(feeder.tap_pu) + 0.00625 * steps
    scales = np.array([0.7, 1.0, 1.3])

    def solve(tap, scale):
        return port_power_flow(zbus, feeder.replace(tap_pu=tap), scale)

    results = jax.jit(jax.vmap(solve))(jnp.asarray(taps, jnp.float32), jnp.asarray(scales))
    for b in range(len(scales)):
        member = jax.tree.map(lambda x, b=b: x[b], results)
        with x64():
            shifted = load_feeder3(name).replace(tap_pu=taps[b])
            reference = opendss_solution(name, shifted, scales[b], False)
        _check(member, feeder, reference, i_tol=I_TOL32)


def test_collapse_is_reported_and_finite():
    feeder = load_feeder3("ieee13")
    result = jax.jit(port_power_flow)(build_port_zbus(feeder), feeder, 12.0)
    assert not bool(result.converged)
    for leaf in jax.tree.leaves(result):
        assert np.all(np.isfinite(np.asarray(leaf)))


@full_only
def test_batched_solves_compile_once_and_equal_single_solves():
    feeder = load_feeder3("ieee13")
    zbus = build_port_zbus(feeder, gen_nodes=[feeder.node_names.index("675.1")])

    @jax.jit
    @chex.assert_max_traces(n=1)
    def solve(scale, p):
        return port_power_flow(zbus, feeder, scale, p).vm_pu

    scales, p = jnp.array([0.8, 1.1]), jnp.array([[0.0], [250.0]])
    batched = jax.vmap(solve)(scales, p)
    jax.vmap(solve)(scales + 0.1, p)  # new values, same shapes: no retrace
    for b in range(2):
        np.testing.assert_allclose(
            batched[b], port_power_flow(zbus, feeder, scales[b], p[b]).vm_pu, atol=2e-7
        )


def test_generator_node_out_of_range_is_named():
    feeder = load_feeder3("ieee13")
    with pytest.raises(ValueError, match=r"generator node 999 is not a node of ieee13"):
        build_port_zbus(feeder, gen_nodes=[999])


def test_the_fixed_point_is_iterated_once_and_ends_when_settled():
    """One loop of at most ``n_iter`` sweeps per solve, which ends once the last sweep
    moved no device's voltage by a tenth of the tolerance: the voltages and the mismatch
    were once read from two runs of the same loop (every solve's time doubled), and the
    loop then always ran its whole budget, where IEEE 13 at its load settles in 6-7."""
    feeder = load_feeder3("ieee13")
    zbus = build_port_zbus(feeder)
    jaxpr = jax.make_jaxpr(lambda s: port_power_flow(zbus, feeder, s, n_iter=37))(1.0)
    loops = jaxpr_loops(jaxpr.jaxpr)
    assert [kind for kind, _ in loops].count("while") == 1 and ("scan", 37) not in loops
    # Anderson's history is carried as its last differences, not as stacks of the last
    # two shifted every sweep (copies: a tenth of an IEEE 123 sweep)
    (loop,) = [e for e in jaxpr_equations(jaxpr.jaxpr) if e.primitive.name == "while"]
    n_dev = feeder.n_load_phase
    assert all(v.aval.shape in ((), (n_dev,)) for v in loop.outvars)
    result = jax.jit(lambda s: port_power_flow(zbus, feeder, s, n_iter=37))(1.0)
    assert bool(result.converged) and 4 <= int(result.iterations) < 10
    assert float(result.mismatch_pu) < 1e-6  # a tenth of float32's tolerance


def test_a_batch_at_the_build_taps_skips_the_tap_terms():
    """At the taps the model was built at the tap terms of a sweep are zero: a batch
    decides once (a ``cond`` in the loop) whether any member's taps moved and skips them
    if none did, a fifth of an IEEE 123 sweep, whether it shares its taps or has its own.
    Shared, own at the build's and own moved taps give each member's single solve (to a
    few float32 ulp)."""
    feeder = load_feeder3("ieee123")
    zbus = build_port_zbus(feeder)
    scales = jnp.array([0.7, 1.0, 1.3])
    at_t0 = jnp.broadcast_to(feeder.tap_pu, (3, feeder.n_regulator))
    moved = at_t0.at[1, 0].add(0.0125)

    def solve(scale, tap):
        return port_power_flow(zbus, feeder.replace(tap_pu=tap), scale).vm_pu

    shared, own = jax.vmap(solve, in_axes=(0, None)), jax.vmap(solve)
    for batched, taps in ((shared, feeder.tap_pu), (own, at_t0)):
        jaxpr = jax.make_jaxpr(batched)(scales, taps).jaxpr
        (loop,) = [e for e in jaxpr_equations(jaxpr) if e.primitive.name == "while"]
        body = jaxpr_equations(loop.params["body_jaxpr"].jaxpr)
        assert "cond" in [e.primitive.name for e in body]
    for batched, taps in ((shared, feeder.tap_pu), (own, at_t0), (own, moved)):
        out = jax.jit(batched)(scales, taps)
        for b in range(3):
            tap = taps if taps.ndim == 1 else taps[b]
            np.testing.assert_allclose(out[b], jax.jit(solve)(scales[b], tap), atol=5e-7)


# OpenDSS's CVR loads (model 4: P ~ |V|^cvrwatts, Q ~ |V|^cvrvars in the voltage band) on
# IEEE 13's three-phase delta load 671 and its wye phase 634a
CVR = (
    "load.671.model=4",
    "load.671.cvrwatts=0.8",
    "load.671.cvrvars=3",
    "load.634a.model=4",
    "load.634a.cvrwatts=1.5",
    "load.634a.cvrvars=2.5",
)


def test_cvr_loads_match_opendss_and_need_their_own_model():
    """The port model built from a feeder with CVR loads evaluates their exponents
    (float64 and float32 against OpenDSS; the constant-power form would be 1e-3 pu off
    at 671); one built without them (whose sweeps skip the exponentials) refuses it."""
    from jaxgrid.grid.three_phase import bundled_master, from_opendss

    with x64():
        feeder = from_opendss(bundled_master("ieee13"), CVR, name="ieee13")
        reference = opendss_solution("ieee13", feeder, 1.0, False, CVR)
        zbus = build_port_zbus(feeder)
        assert zbus.cvr and not build_port_zbus(load_feeder3("ieee13")).cvr
        _check(jax.jit(port_power_flow)(zbus, feeder, 1.0), feeder, reference)
        plain = opendss_solution("ieee13", feeder, 1.0, False)
        vbase = np.asarray(feeder.vbase_v)
        assert np.max(np.abs(np.abs(plain[0]) - np.abs(reference[0])) / vbase) > 1e-3
    feeder = from_opendss(bundled_master("ieee13"), CVR, name="ieee13")
    result = jax.jit(port_power_flow)(build_port_zbus(feeder), feeder, 1.0)
    _check(result, feeder, reference, i_tol=I_TOL32)
    with pytest.raises(ValueError, match="ieee13's loads have CVR exponents"):
        port_power_flow(build_port_zbus(load_feeder3("ieee13")), feeder, 1.0)
