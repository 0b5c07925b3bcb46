"""Property tests of the solvers on the bundled feeders (hypothesis)."""

import jax
import numpy as np
import pytest
from conftest import x64
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from jaxgrid.grid import case33bw, case69, case141, distflow, lindistflow

FEEDERS = {"case33bw": case33bw, "case69": case69, "case141": case141}
DISTFLOW = jax.jit(distflow, static_argnames="iterations")
LINDISTFLOW = jax.jit(lindistflow)


def loads(feeder, p_scale, q_scale):
    return np.asarray(feeder.p_load_mw) * p_scale, np.asarray(feeder.q_load_mvar) * q_scale


def scale_arrays(n, low, high):
    return arrays(np.float64, n, elements=st.floats(low, high, allow_nan=False, width=64))


@pytest.mark.parametrize("name", list(FEEDERS))
def test_power_balance(name):
    """Substation import = total load + losses, for consumption and generation alike."""
    feeder = FEEDERS[name]()

    @settings(max_examples=25, deadline=None)
    @given(
        p_scale=scale_arrays(feeder.n_bus, -1.5, 2.0), q_scale=scale_arrays(feeder.n_bus, -1.5, 2.0)
    )
    def check(p_scale, q_scale):
        p, q = loads(feeder, p_scale, q_scale)
        with x64():
            res = DISTFLOW(feeder, p, q, iterations=25)
        assert bool(res.converged)
        assert float(res.p_import_mw) == pytest.approx(p.sum() + float(res.loss_mw), abs=1e-8)
        # reactive losses x I^2 recomputed from the reported flows and voltages
        base = float(feeder.base_mva)
        v_from = np.asarray(res.vm_pu)[np.asarray(feeder.branch_from)] ** 2
        ell = (
            (np.asarray(res.p_branch_mw) ** 2 + np.asarray(res.q_branch_mvar) ** 2)
            / base**2
            / v_from
        )
        q_loss = float(np.sum(np.asarray(feeder.x_pu) * ell)) * base
        assert float(res.q_import_mvar) == pytest.approx(q.sum() + q_loss, abs=1e-8)
        assert float(res.loss_mw) >= 0

    check()


@pytest.mark.parametrize("name", list(FEEDERS))
def test_consumption_voltage_profile(name):
    """Under pure consumption voltages never rise along a path, and LinDistFlow reads high."""
    feeder = FEEDERS[name]()
    parent = np.asarray(feeder.parent)
    child = np.flatnonzero(parent >= 0)

    @settings(max_examples=25, deadline=None)
    @given(
        p_scale=scale_arrays(feeder.n_bus, 0.0, 2.0), q_scale=scale_arrays(feeder.n_bus, 0.0, 2.0)
    )
    def check(p_scale, q_scale):
        p, q = loads(feeder, p_scale, q_scale)
        with x64():
            exact = DISTFLOW(feeder, p, q, iterations=25)
            linear = LINDISTFLOW(feeder, p, q)
        vm = np.asarray(exact.vm_pu)
        assert np.all(vm[child] <= vm[parent[child]] + 1e-12)
        assert np.all(np.asarray(linear.vm_pu) >= vm - 1e-12)

    check()
