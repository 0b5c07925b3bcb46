"""DC power flow, PTDF and LODF against PYPOWER (pandapower's copy of MATPOWER's
``makeBdc``, ``dcpf``, ``makePTDF``, ``makeLODF``) on the same tables, with branches taken
out of service; bridges checked against a graph search."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandapower.pypower.idx_brch as idx_brch
import pandapower.pypower.idx_bus as idx_bus
import pandapower.pypower.idx_gen as idx_gen
import pytest
from conftest import float64_leaves, sampled, x64
from pandapower.pypower.dcpf import dcpf as pypower_dcpf
from pandapower.pypower.makeBdc import makeBdc
from pandapower.pypower.makeLODF import makeLODF
from pandapower.pypower.makePTDF import makePTDF
from pandapower.pypower.makeSbus import makeSbus
from test_network import _pypower_tables
from topology import bridges

from jaxgrid.grid import dcpf, lodf, network_from_matpower, ptdf, shift_flow_mw
from jaxgrid.grid.network_matpower import TRANSMISSION_CASES

# case1354pegase's comparisons take 34 of this file's ~110 worker-seconds: validation only
LARGEST_SAMPLED_OUT = sampled(TRANSMISSION_CASES, keep=set(TRANSMISSION_CASES) - {"case1354pegase"})


def _outages(network, rng, count=3):
    """``network`` with up to ``count`` random non-bridge branches out of service (one at
    a time, so the network stays connected)."""
    on = np.asarray(network.branch_in_service).copy()
    for _ in range(count):
        candidates = np.flatnonzero(on & ~bridges(network, on))
        if candidates.size:
            on[rng.choice(candidates)] = False
    return network.replace(branch_in_service=on)


def _pypower(name, network):
    """PYPOWER's tables of case ``name`` with ``network``'s branch statuses."""
    mpc, bus, branch = _pypower_tables(name)
    branch[:, idx_brch.BR_STATUS] = np.asarray(network.branch_in_service)
    gen = np.zeros((len(mpc["gen"]), idx_gen.gen_cols))
    raw = np.asarray(mpc["gen"])
    gen[:, : raw.shape[1]] = raw[:, : idx_gen.gen_cols]
    row = {int(b): i for i, b in enumerate(np.asarray(mpc["bus"])[:, 0])}
    gen[:, idx_gen.GEN_BUS] = [row[int(b)] for b in gen[:, idx_gen.GEN_BUS]]
    gen[:, idx_gen.GEN_STATUS] = np.asarray(network.gen_in_service)
    return float(mpc["baseMVA"]), bus, branch, gen


@pytest.mark.parametrize("name", LARGEST_SAMPLED_OUT)
def test_dc_power_flow_is_pypowers(name):
    network = _outages(network_from_matpower(name), np.random.default_rng(1))
    base, bus, branch, gen = _pypower(name, network)
    b_bus, b_f, p_bus_shift, p_f_shift = makeBdc(bus, branch)[:4]
    ref = int(np.flatnonzero(bus[:, idx_bus.BUS_TYPE] == 3)[0])
    pvpq = np.flatnonzero(bus[:, idx_bus.BUS_TYPE] != 3)
    p = np.real(makeSbus(base, bus, gen)) - p_bus_shift - bus[:, idx_bus.GS] / base
    va0 = np.deg2rad(bus[:, idx_bus.VA])
    va = pypower_dcpf(b_bus, p, va0, np.array([ref]), pvpq[:0], pvpq)
    flow = (b_f @ va + p_f_shift) * base
    with x64():
        # float64 leaves: jax 0.10's jit cache does not key on the x64 flag, and a float32
        # leaf met a program cached by an earlier test for float64 (RuntimeProgramInputMismatch)
        network = float64_leaves(network)
        result = jax.jit(dcpf)(network)
        assert bool(result.converged)
        np.testing.assert_allclose(result.va_deg, np.rad2deg(va), atol=1e-9)
        np.testing.assert_allclose(result.p_branch_mw, flow, atol=1e-8)
        # the slack takes up the imbalance: injections sum to zero, flows balance them
        assert abs(float(jnp.sum(result.p_injection_mw))) < 1e-8
        h = ptdf(network)
        inj = result.p_injection_mw
        np.testing.assert_allclose(h @ inj + shift_flow_mw(network), result.p_branch_mw, atol=1e-7)


@pytest.mark.parametrize("name", LARGEST_SAMPLED_OUT)
def test_ptdf_and_lodf_are_pypowers(name):
    network = _outages(network_from_matpower(name), np.random.default_rng(2))
    base, bus, branch, _ = _pypower(name, network)
    slack = int(np.flatnonzero(bus[:, idx_bus.BUS_TYPE] == 3)[0])
    expected_ptdf = makePTDF(base, bus, branch, slack)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PYPOWER divides by zero for bridges
        expected_lodf = makeLODF(branch, expected_ptdf)
    with x64():
        network = float64_leaves(network)  # as in test_dc_power_flow_is_pypowers
        h = np.asarray(jax.jit(ptdf)(network))
        factors, bridge = (np.asarray(a) for a in jax.jit(lodf)(network))
    np.testing.assert_allclose(h, expected_ptdf, atol=1e-9)
    assert np.all(h[:, slack] == 0)
    # the same functions on the host (NumPy), as the DC-OPF computes its constant PTDF
    host = ptdf(network, xp=np)
    assert isinstance(host, np.ndarray)
    np.testing.assert_allclose(host, expected_ptdf, atol=1e-9)
    np.testing.assert_array_equal(bridge, bridges(network))
    assert np.all(np.isfinite(factors))
    ok = ~bridge
    np.testing.assert_allclose(factors[:, ok], expected_lodf[:, ok], atol=1e-8)
    np.testing.assert_array_equal(np.diagonal(factors), -1.0)
    assert np.all(factors[:, bridge] * (1 - np.eye(len(bridge)))[:, bridge] == 0)


def test_lodf_predicts_the_flows_after_an_outage():
    with x64():
        network = network_from_matpower("case118")
        before = dcpf(network).p_branch_mw
        factors, bridge = lodf(network)
        for k in np.flatnonzero(~np.asarray(bridge))[:20]:
            on = np.asarray(network.branch_in_service).copy()
            on[k] = False
            after = dcpf(network.replace(branch_in_service=on)).p_branch_mw
            np.testing.assert_allclose(before + factors[:, k] * before[k], after, atol=1e-8)


def test_contingencies_vmap_and_an_island_is_not_converged():
    network = network_from_matpower("case30")
    bridge = bridges(network)
    loaded = np.asarray(network.pd_mw)[np.asarray(network.branch_to)] > 0
    k_mesh, k_bridge = np.flatnonzero(~bridge)[0], np.flatnonzero(bridge & loaded)[0]
    statuses = np.ones((3, network.n_branch), bool)
    statuses[1, k_mesh] = False
    statuses[2, k_bridge] = False  # the cut-off bus keeps its load: no DC solution
    result = jax.jit(jax.vmap(lambda on: dcpf(network.replace(branch_in_service=on))))(statuses)
    assert result.va_deg.shape == (3, network.n_bus)
    assert result.va_deg.dtype == jnp.float32  # float32 by default
    np.testing.assert_array_equal(result.converged, [True, True, False])
    assert float(result.p_branch_mw[1, k_mesh]) == 0.0
    # float32 against the float64 solution
    with x64():
        exact = dcpf(network)
    np.testing.assert_allclose(result.p_branch_mw[0], exact.p_branch_mw, atol=1e-3)
