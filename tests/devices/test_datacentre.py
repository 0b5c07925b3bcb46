"""The data-centre device against hand-worked numbers and an independent ODE solution."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from jaxgrid.devices.datacentre import (
    DataCentreParams,
    DataCentreState,
    cop,
    datacentre_step,
    it_power,
)


def params(**kw):
    base = dict(
        n_gpus=100.0,
        p_idle_mw=0.3,
        p_peak_mw=1.0,
        deadline_steps=np.array([8, 2], np.int32),
        c_mwh_per_k=0.5,
        ua_mw_per_k=0.05,
        q_max_mw=2.0,
        t_set_min=18.0,
        t_set_max=27.0,
        t_max=21.0,
        cop_ref=5.0,
        cop_slope=0.1,
        cop_min=2.0,
        t_ref=20.0,
    )
    base.update(kw)
    return DataCentreParams(**{k: jnp.asarray(v) for k, v in base.items()})


def state(backlog=(30.0, 10.0), t_hall=22.0):
    return DataCentreState(
        backlog_gpu_h=jnp.array(backlog), ahead_gpu_h=jnp.zeros(2), t_hall=jnp.asarray(t_hall)
    )


def step(st, shares, setpoint, t_out=30.0, due=(35.0, 0.0), dt=0.5, p=None):
    return datacentre_step(
        st,
        jnp.array(shares),
        setpoint,
        jnp.array([10.0, 10.0]),
        jnp.array(due),
        t_out,
        dt,
        params() if p is None else p,
    )


def test_shares_above_one_are_scaled_and_the_queue_limits_service():
    out = step(state(), [0.6, 0.5], 21.0)
    # 100 GPUs for 0.5 h = 50 GPU-h; shares 0.6 + 0.5 = 1.1 scale to 6/11 and 5/11:
    # training gets 300/11 = 27.27 GPU-h of its 40 waiting, fine-tuning 250/11 = 22.73
    # but only 20 wait -> 20
    np.testing.assert_allclose(out.served_gpu_h, [300 / 11, 20.0], rtol=1e-6)
    np.testing.assert_allclose(out.state.backlog_gpu_h, [40 - 300 / 11, 0.0], atol=1e-5)
    np.testing.assert_allclose(out.share_excess, 0.1, rtol=1e-5)
    # utilisation 47.27 / 50 = 0.94545; IT power 0.3 + 0.7 * 0.94545 = 0.96182 MW
    np.testing.assert_allclose(out.utilisation, (300 / 11 + 20) / 50, rtol=1e-6)
    np.testing.assert_allclose(out.p_it_mw, 0.3 + 0.7 * (300 / 11 + 20) / 50, rtol=1e-6)
    # due 35 GPU-h of training, 27.27 served: 7.73 late; nothing of fine-tuning due
    np.testing.assert_allclose(out.late_gpu_h, [35 - 300 / 11, 0.0], atol=1e-5)
    # next step: all training GPUs, 10 more GPU-h arrive, nothing newly due: the 22.73
    # GPU-h waiting are served, the 7.73 late are cleared and 15 GPU-h are served early
    out = step(out.state, [1.0, 0.0], 21.0, due=(0.0, 0.0))
    np.testing.assert_allclose(out.served_gpu_h, [50 - 300 / 11, 0.0], rtol=1e-5)
    np.testing.assert_allclose(out.late_gpu_h, [0.0, 0.0])
    np.testing.assert_allclose(out.state.ahead_gpu_h, [15.0, 20.0], rtol=1e-5)


def test_cooling_to_the_setpoint_within_its_capacity():
    # a = exp(-0.05 * 0.5 / 0.5) = exp(-0.05) = 0.951229, g = (1 - a) / 0.05 = 0.975412 K/MW
    a = math.exp(-0.05)
    g = (1 - a) / 0.05
    drift = a * 22 + (1 - a) * 30  # 22.39017 °C with no heat input
    p_it = 0.3 + 0.7 * (300 / 11 + 20) / 50
    # reaching 21 °C needs q = p_it + (drift - 21) / g = 2.387 MW > 2 MW: the capacity binds
    out = step(state(), [0.6, 0.5], 21.0)
    np.testing.assert_allclose(out.q_cool_mw, 2.0, rtol=1e-6)
    t_next = drift + g * (p_it - 2.0)  # 21.3775 °C
    np.testing.assert_allclose(out.state.t_hall, t_next, rtol=1e-6)
    np.testing.assert_allclose(out.overheat_k, t_next - 21.0, rtol=1e-4)
    # COP at 30 °C outdoors: 5 - 0.1 * (30 - 20) = 4 -> 0.5 MW of chiller power
    np.testing.assert_allclose(out.p_cool_mw, 0.5, rtol=1e-6)
    np.testing.assert_allclose(out.p_mw, p_it + 0.5, rtol=1e-6)
    # a reachable setpoint (22 °C): q = p_it + (drift - 22) / g, and the hall ends at 22
    out = step(state(), [0.6, 0.5], 22.0)
    np.testing.assert_allclose(out.q_cool_mw, p_it + (drift - 22) / g, rtol=1e-5)
    np.testing.assert_allclose(out.state.t_hall, 22.0, rtol=1e-6)
    assert float(out.overheat_k) > 0  # 22 > t_max = 21


def test_hall_temperature_matches_an_ode_solver():
    # C dT/dt = p_it - q + UA (t_out - T), inputs held over the step (scipy's RK45)
    p = params(ua_mw_per_k=0.2, c_mwh_per_k=0.3, t_max=40.0)
    out = step(state(t_hall=24.0), [0.2, 0.1], 19.0, t_out=5.0, p=p)
    q, p_it = float(out.q_cool_mw), float(out.p_it_mw)
    assert 0 < q < 2  # the setpoint is reachable
    ode = solve_ivp(
        lambda t, T: [(p_it - q + 0.2 * (5.0 - T[0])) / 0.3],
        (0, 0.5),
        [24.0],
        rtol=1e-10,
        atol=1e-10,
    )
    np.testing.assert_allclose(out.state.t_hall, ode.y[0, -1], atol=1e-4)
    np.testing.assert_allclose(ode.y[0, -1], 19.0, atol=1e-4)


def test_no_cooling_when_the_hall_is_below_its_setpoint():
    out = step(state(t_hall=18.0), [0.0, 0.0], 27.0, t_out=10.0)
    assert float(out.q_cool_mw) == 0 and float(out.p_cool_mw) == 0
    # idle IT power only: 0.3 MW heats the hall from 18 °C
    a = math.exp(-0.05)
    g = (1 - a) / 0.05
    np.testing.assert_allclose(out.state.t_hall, a * 18 + (1 - a) * 10 + g * 0.3, rtol=1e-6)


@pytest.mark.parametrize(("t_out", "expected"), [(20.0, 5.0), (25.0, 4.5), (60.0, 2.0)])
def test_cop_falls_with_outdoor_temperature_to_its_floor(t_out, expected):
    np.testing.assert_allclose(cop(t_out, params()), expected, rtol=1e-6)


def test_it_power_is_linear_in_utilisation():
    np.testing.assert_allclose(it_power(jnp.array([0.0, 0.5, 1.0]), params()), [0.3, 0.65, 1.0])
