"""The bundled three-phase feeders and their unbalanced power flow, without OpenDSS.

Reference numbers are OpenDSS's own solutions as published in the data folder's
``REFERENCE.md`` (``reference_results.json``; dss-python 0.15.7, OpenDSS's default
tolerance, so agreement is to about 1e-4 pu): IEEE 13, 34 and 123 at the published
regulator taps, IEEE 37 at the taps of its own control solve (line-to-line voltages,
as it is a 3-wire delta feeder). The tight comparison with a live OpenDSS is in
``test_three_phase_opendss.py``.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, full_only, x64

from jaxgrid.grid.three_phase import (
    BUNDLED,
    check_feeder3,
    load_feeder3,
    unbalanced_power_flow,
)

# REFERENCE.md: losses kW, source kW, min / max line-to-neutral pu (node), min / max
# line-to-line pu
REFERENCE = {
    "ieee13": (110.4978, 3577.972, (0.974951, "611.3"), (1.068548, "rg60.3"), 0.987996, 1.065401),
    "ieee34": (270.0870, 2030.788, (0.917775, "890.1"), (1.049997, "sourcebus.2"), 0.914030, 1.049997),
    "ieee37": (152.3448, 2588.352, (0.871030, "799.1"), (1.024626, "799.2"), 0.923221, 1.029419),
    "ieee123": (95.2826, 3621.586, (0.985795, "65.1"), (1.043742, "150r.2"), 0.995575, 1.047224),
}  # fmt: skip
V_TOL = 2e-4  # pu: OpenDSS's default tolerance (1e-4) in REFERENCE.md's runs


@pytest.mark.parametrize("name", list(BUNDLED))
def test_bundled_feeders_match_published_opendss_results(name):
    loss, p_source, (vmin, vmin_node), (vmax, vmax_node), vll_min, vll_max = REFERENCE[name]
    with x64():
        feeder = load_feeder3(name)
        result = jax.jit(unbalanced_power_flow)(feeder)
    assert bool(result.converged)
    assert abs(float(result.loss_kw) - loss) < 1e-3 * loss
    assert abs(float(result.p_source_kw) - p_source) < 1e-3 * p_source
    vm = np.asarray(result.vm_pu)
    assert abs(vm.min() - vmin) < V_TOL and feeder.node_names[int(vm.argmin())] == vmin_node
    assert abs(vm.max() - vmax) < V_TOL
    vll = np.asarray(result.vll_pu)
    assert abs(vll[vll > 0].min() - vll_min) < V_TOL
    assert abs(vll.max() - vll_max) < V_TOL


def test_float32_default_is_close_to_float64():
    """float32 (the default) on IEEE 13: voltages measured within 2.3e-6 pu of OpenDSS
    (``benchmarks/three_phase_opendss.py --f32``); its losses are only good to a few per
    cent, and the larger feeders need float64 (docs/physics.md)."""
    feeder = load_feeder3("ieee13")
    result = jax.jit(unbalanced_power_flow)(feeder)
    assert result.vm_pu.dtype == jnp.float32
    assert bool(result.converged)
    with x64():
        exact = jax.jit(unbalanced_power_flow)(feeder)
    assert np.max(np.abs(np.asarray(result.vm_pu) - np.asarray(exact.vm_pu))) < 1e-5


@full_only
def test_vmap_over_load_scales_equals_single_solves_and_traces_once():
    with x64():
        feeder = load_feeder3("ieee13")

        @jax.jit
        @chex.assert_max_traces(n=1)
        def solve(scale):
            return unbalanced_power_flow(feeder, scale).vm_pu

        scales = jnp.array([0.5, 1.0, 1.3])
        batch = jax.jit(jax.vmap(lambda s: unbalanced_power_flow(feeder, s).vm_pu))(scales)
        for k, scale in enumerate(scales):  # new values, not new traces
            np.testing.assert_allclose(batch[k], solve(scale), atol=1e-12)


def test_unbalance_metrics_by_hand():
    """IEC VUF from the symmetrical components of the line-to-line voltages and the
    NEMA line voltage unbalance rate, worked in numpy at every three-phase bus."""
    with x64():
        feeder = load_feeder3("ieee13")
        result = jax.device_get(jax.jit(unbalanced_power_flow)(feeder))
    v = np.asarray(result.v_volt)
    a = np.exp(2j * np.pi / 3)
    for b, nodes in enumerate(np.asarray(feeder.bus_nodes)):
        if np.any(nodes < 0):
            assert float(result.vuf[b]) == 0 and float(result.lvur[b]) == 0
            continue
        va, vb, vc = v[nodes]
        ab, bc, ca = va - vb, vb - vc, vc - va
        v1 = (ab + a * bc + a**2 * ca) / 3
        v2 = (ab + a**2 * bc + a * ca) / 3
        assert float(result.vuf[b]) == pytest.approx(abs(v2) / abs(v1), rel=1e-9)
        mags = np.abs([ab, bc, ca])
        lvur = np.max(np.abs(mags - mags.mean())) / mags.mean()
        assert float(result.lvur[b]) == pytest.approx(lvur, rel=1e-9)
    assert float(np.max(result.vuf)) > 1e-3  # the feeder is unbalanced


def test_line_loading_is_current_over_rating():
    with x64():
        feeder = load_feeder3("ieee13")
        result = jax.device_get(jax.jit(unbalanced_power_flow)(feeder))
    i_line = np.asarray(result.i_line_a)
    np.testing.assert_allclose(
        np.asarray(result.line_loading), i_line / np.asarray(feeder.line_normamps_a)[:, None]
    )
    assert np.all(np.asarray(result.i_line_a)[np.asarray(feeder.line_cond) < 0] == 0)


def test_summary_prints_tables():
    text = load_feeder3("ieee13").summary()
    for header in ("bus", "load", "regulator", "line"):
        assert f"\n{header} " in text
    assert "671.1-671.2" in text and "delta" in text and "1.06250" in text


@pytest.mark.parametrize(
    "change,message",
    [
        ({"tap_pu": np.array([1.0, 0.0, 1.0])}, "tap_pu"),
        ({"load_p_w": np.full(17, np.nan)}, "load_p_w"),
        ({"load_vminpu": np.full(17, 1.2)}, "vlowpu < vminpu < vmaxpu"),
    ],
)
def test_check_feeder3_names_the_bad_leaf(change, message):
    feeder = load_feeder3("ieee13")
    with pytest.raises(ValueError, match=message):
        check_feeder3(feeder.replace(**change))


def test_load_feeder3_unknown_source():
    with pytest.raises(ValueError, match="expected a bundled feeder"):
        load_feeder3("ieee8500")


def test_voltage_collapse_is_reported_with_finite_numbers():
    feeder = load_feeder3("ieee13")
    result = jax.jit(unbalanced_power_flow)(feeder, 100.0)  # 100 times the load
    assert not bool(result.converged)
    for leaf in jax.tree_util.tree_leaves(result):
        assert np.all(np.isfinite(np.asarray(leaf)))


def test_float32_at_regulator_taps_is_finite_and_honest(float64_flow_ieee123_taps):
    """At these taps float32's LU of IEEE 123's nodal matrix (its regulators' admittances
    are 5e5 pu) is not finite on some CPUs and is on others: on every machine the result
    is finite, and where it says converged its line-to-line voltages are float64's (the
    voltages to ground of the nodes behind an ungrounded delta winding float32 does not
    resolve: see the module's docstring)."""
    taps, vll_float64 = float64_flow_ieee123_taps
    feeder = load_feeder3("ieee123").replace(tap_pu=taps.astype(np.float32))
    result = jax.jit(unbalanced_power_flow)(feeder, 1.0)
    for leaf in jax.tree_util.tree_leaves(result):
        assert np.all(np.isfinite(np.asarray(leaf)))
    if bool(result.converged):
        np.testing.assert_allclose(np.asarray(result.vll_pu), vll_float64, atol=3e-3)
    else:
        assert float(result.mismatch_pu) == np.finfo(np.float32).max


@pytest.fixture
def float64_flow_ieee123_taps():
    taps = 1 + 0.00625 * np.array([6, 4, 7, 5, 13, 9, 9])
    with x64():
        feeder = float64_leaves(load_feeder3("ieee123")).replace(tap_pu=taps)
        result = jax.jit(unbalanced_power_flow)(feeder, 1.0)
        assert bool(result.converged)
        return taps, np.asarray(result.vll_pu)
