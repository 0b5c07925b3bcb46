"""The diesel generator: start-up time and cost, minimum load, ramps and fuel, by hand."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid.devices.diesel import DieselParams, diesel_off, diesel_step, fuel_litres


def params(**kw):
    base = dict(
        p_max_mw=1.0,
        p_min_mw=0.3,
        ramp_mw_per_h=0.6,
        start_steps=np.int32(2),
        start_cost=50.0,
        fuel_noload_l_per_mwh=80.0,
        fuel_l_per_mwh=250.0,
        fuel_price=1.5,
        emission_t_per_l=0.00268,
    )
    base.update(kw)
    return DieselParams(**{k: jnp.asarray(v) for k, v in base.items()})


def run(requests, p, dt=0.25):
    state, out = diesel_off(), []
    for r in requests:
        step = diesel_step(state, jnp.asarray(r), dt, p)
        state = step.state
        out.append(step)
    return out


def test_start_up_takes_its_steps_then_ramps_from_minimum_load():
    steps = run([0.8, 0.8, 0.8, 0.8, 0.8, 0.1, 0.0, 0.5], params())
    # a start costs 50 at step 0 and takes 2 steps; it runs from step 2 at min(max(0.3,
    # 0.6 * 0.25), 1) = 0.3 MW, then ramps 0.15 MW a step: 0.45, 0.6; asked for 0.1 it
    # ramps down to max(0.3, 0.6 - 0.15) = 0.45; a request of 0 stops it at once
    np.testing.assert_allclose([float(s.p_mw) for s in steps], [0, 0, 0.3, 0.45, 0.6, 0.45, 0, 0])
    assert [bool(s.started) for s in steps] == [
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        True,
    ]
    assert [bool(s.producing) for s in steps] == [
        False,
        False,
        True,
        True,
        True,
        True,
        False,
        False,
    ]
    np.testing.assert_allclose(float(steps[0].cost), 50.0)
    assert float(steps[1].fuel_l) == 0
    # at 0.3 MW for 0.25 h: (80 * 1 + 250 * 0.3) * 0.25 = 38.75 L, at 1.5 per litre
    np.testing.assert_allclose(float(steps[2].fuel_l), 38.75, rtol=1e-6)
    np.testing.assert_allclose(float(steps[2].cost), 38.75 * 1.5, rtol=1e-6)
    np.testing.assert_allclose(float(steps[2].emissions_t), 38.75 * 0.00268, rtol=1e-6)
    np.testing.assert_allclose(float(steps[2].clipped_mw), 0.5, rtol=1e-6)


def test_a_start_without_delay_runs_the_same_step_and_an_aborted_start_is_paid_again():
    steps = run([0.2, 0.9], params(start_steps=np.int32(0), ramp_mw_per_h=4.0))
    # runs at once, lifted to the 0.3 MW minimum; then a 1 MW ramp a step allows 0.9
    np.testing.assert_allclose([float(s.p_mw) for s in steps], [0.3, 0.9], rtol=1e-6)
    steps = run([0.5, 0.0, 0.5, 0.5, 0.5], params())
    assert [bool(s.started) for s in steps] == [True, False, True, False, False]
    np.testing.assert_allclose(sum(float(s.cost) for s in steps[:4]), 100.0)
    np.testing.assert_allclose(float(steps[4].p_mw), 0.3, rtol=1e-6)


@pytest.mark.parametrize(
    ("loading", "litres_per_mwh"), [(1.0, 330.0), (0.5, 410.0), (0.3, 155 / 0.3)]
)
def test_fuel_per_mwh_falls_with_loading(loading, litres_per_mwh):
    # HOMER: F0 * rating + F1 * p litres per hour; per MWh that is F0 / loading + F1
    litres = fuel_litres(jnp.asarray(loading), jnp.asarray(True), 1.0, params())
    np.testing.assert_allclose(float(litres) / loading, litres_per_mwh, rtol=1e-6)
