"""Devices: every clipping rule and every cost, with hand-worked numbers."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid.devices import (
    BatteryParams,
    EVParams,
    FlexLoadParams,
    battery_step,
    connected,
    ev_step,
    flexload_step,
    inverter_output,
    power_limits,
    sample_schedule,
)


def battery(n=1, dtype=jnp.float32, **kw):
    base = dict(
        capacity_mwh=2.0,
        p_max_mw=1.0,
        s_max_mva=1.25,
        eta_charge=0.9,
        eta_discharge=0.8,
        soc_min=0.1,
        soc_max=0.9,
        degradation_cost=5.0,
    )
    base.update(kw)
    return BatteryParams(**{k: jnp.full(n, v, dtype) for k, v in base.items()})


def test_battery_charges_with_efficiency_and_pays_degradation():
    out = battery_step(jnp.array([0.5]), jnp.array([0.5]), jnp.array([0.0]), 1.0, battery())
    # 0.5 MW for 1 h at 90 %: +0.45 MWh of 2 MWh -> soc 0.725; degradation 5 * 0.5
    np.testing.assert_allclose(out.soc, [0.725], rtol=1e-6)
    np.testing.assert_allclose(out.degradation, [2.5], rtol=1e-6)
    assert float(out.clipped_mw[0]) == 0


def test_battery_clips_power_rating_then_energy():
    # half an hour: the 1 MW rating binds (the energy room would allow 0.8 / (0.9 * 0.5) MW)
    out = battery_step(jnp.array([0.5]), jnp.array([3.0]), jnp.array([0.0]), 0.5, battery())
    np.testing.assert_allclose(
        [out.p_mw[0], out.soc[0], out.clipped_mw[0]], [1.0, 0.725, 2.0], rtol=1e-6
    )
    # one hour: the energy room binds, 0.8 MWh / 0.9 = 0.889 MW, and the battery ends full
    out = battery_step(jnp.array([0.5]), jnp.array([3.0]), jnp.array([0.0]), 1.0, battery())
    np.testing.assert_allclose(out.p_mw, [0.8 / 0.9], rtol=1e-6)
    np.testing.assert_allclose(out.soc, [0.9], rtol=1e-6)
    np.testing.assert_allclose(out.clipped_mw, [3.0 - 0.8 / 0.9], rtol=1e-6)
    # discharge: stored above soc_min 0.2 * 2 = 0.4 MWh at 80 % -> 0.32 MW over 1 h
    out = battery_step(jnp.array([0.3]), jnp.array([-1.0]), jnp.array([0.0]), 1.0, battery())
    np.testing.assert_allclose(out.p_mw, [-0.32], rtol=1e-6)
    np.testing.assert_allclose(out.soc, [0.1], rtol=1e-6)
    lo, hi = power_limits(jnp.array([0.5]), 1.0, battery())
    np.testing.assert_allclose([float(lo[0]), float(hi[0])], [-0.64, 0.4 * 2 / 0.9], rtol=1e-6)


def test_battery_reactive_power_within_apparent_rating():
    out = battery_step(jnp.array([0.5]), jnp.array([1.0]), jnp.array([-2.0]), 0.1, battery())
    # p = 1 MW, s = 1.25 MVA -> |q| <= 0.75 Mvar
    np.testing.assert_allclose(out.q_mvar, [-0.75], rtol=1e-6)
    np.testing.assert_allclose(out.clipped_mvar, [1.25], rtol=1e-6)


def test_ev_is_masked_while_away_and_charges_the_missing_energy_at_departure():
    params = EVParams(
        battery=battery(3, soc_min=0.0, soc_max=1.0),
        target_soc=jnp.full(3, 0.8),
        v2g=jnp.array([False, True, False]),
    )
    arrival, departure = jnp.array([2, 2, 0]), jnp.array([5, 5, 4])
    soc = jnp.array([0.5, 0.5, 0.2])
    np.testing.assert_array_equal(connected(1, arrival, departure), [False, False, True])
    # t = 1: EVs 0 and 1 are away, EV 2 charges 1 MW for 1 h at 90 %
    out = ev_step(
        soc, jnp.array([1.0, -1.0, 1.0]), jnp.zeros(3), 1, arrival, departure, 1.0, params
    )
    np.testing.assert_allclose(out.p_mw, [0, 0, 1.0])
    np.testing.assert_allclose(out.soc, [0.5, 0.5, 0.2 + 0.9 / 2], rtol=1e-6)
    # t = 3: EV 2 leaves after this step, 0.5 short of its 0.8 target
    out = ev_step(
        jnp.array([0.5, 0.5, 0.3]),
        jnp.array([-1.0, -1.0, 0.0]),
        jnp.zeros(3),
        3,
        arrival,
        departure,
        1.0,
        params,
    )
    # no V2G for EV 0 (its whole request is clipped); EV 1 discharges what 1 MWh stored
    # gives at 80 %: 0.8 MW of the 1 MW asked
    np.testing.assert_allclose(out.p_mw, [0.0, -0.8, 0.0], rtol=1e-6)
    np.testing.assert_allclose(out.clipped_mw, [1.0, 0.2, 0.0], atol=1e-6)
    np.testing.assert_allclose(out.unmet_mwh, [0, 0, (0.8 - 0.3) * 2], rtol=1e-6)


def test_ev_schedule_sampling_respects_ranges():
    import jax

    arrival, departure = sample_schedule(jax.random.PRNGKey(0), 500, (10, 20), (5, 30), 40)
    assert int(arrival.min()) >= 10 and int(arrival.max()) <= 20
    stay = np.asarray(departure - arrival)
    assert stay.min() >= 0 and int(departure.max()) <= 40
    assert np.all((stay >= 5) | (np.asarray(departure) == 40))


def test_flexload_curtails_defers_and_serves_oldest_first():
    params = FlexLoadParams(curtail_cap_mw=jnp.array([0.2]), shift_cap_mw=jnp.array([0.5]))
    buffer = jnp.zeros((1, 3))
    # demand 1 MW: curtail 50 % of cap (0.1), defer 100 % of cap (0.5) over 0.5 h
    out = flexload_step(buffer, jnp.array([1.0]), jnp.array([0.5]), jnp.array([1.0]), 0.5, params)
    np.testing.assert_allclose(
        [out.curtailed_mw[0], out.deferred_mw[0], out.p_mw[0]], [0.1, 0.5, 0.4], rtol=1e-6
    )
    np.testing.assert_allclose(out.buffer, [[0.25, 0.0, 0.0]], rtol=1e-6)
    # next step: defer again, then recover 0.3 MW (0.15 MWh) of the older energy
    out = flexload_step(
        out.buffer, jnp.array([1.0]), jnp.array([0.0]), jnp.array([1.0]), 0.5, params
    )
    buffer = out.buffer  # [[0.25, 0.25, 0]]
    out = flexload_step(buffer, jnp.array([1.0]), jnp.array([0.0]), jnp.array([-0.6]), 0.5, params)
    np.testing.assert_allclose(out.buffer, [[0.0, 0.25, 0.10]], rtol=1e-6)  # oldest slot lost 0.15
    np.testing.assert_allclose(out.served_mw, [0.3], rtol=1e-6)
    np.testing.assert_allclose(out.p_mw, [1.3], rtol=1e-6)


def test_flexload_serves_everything_within_the_window():
    params = FlexLoadParams(curtail_cap_mw=jnp.array([0.0]), shift_cap_mw=jnp.array([1.0]))
    buffer = jnp.zeros((1, 2))
    total_demand, total_drawn = 0.0, 0.0
    demands = [1.0, 1.0, 0.5, 0.0, 0.0, 0.0]
    shifts = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]  # always defer, never recover
    for d, s in zip(demands, shifts, strict=True):
        out = flexload_step(buffer, jnp.array([d]), jnp.array([0.0]), jnp.array([s]), 1.0, params)
        buffer = out.buffer
        total_demand += d
        total_drawn += float(out.p_mw[0])
    assert float(jnp.sum(buffer)) == 0.0  # all deferred demand was forced out
    assert total_drawn == pytest.approx(total_demand)


def test_inverter_curtails_first_then_sets_reactive_power():
    out = inverter_output(
        jnp.array([0.8, 1.0, 0.0]),
        jnp.array([0.25, 0.0, 0.0]),
        jnp.array([1.0, -0.5, 1.0]),
        jnp.full(3, 1.2),
    )
    np.testing.assert_allclose(out.p_mw, [0.6, 1.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(out.curtailed_mw, [0.2, 0.0, 0.0], atol=1e-7)
    np.testing.assert_allclose(
        out.q_mvar, [np.sqrt(1.44 - 0.36), -0.5 * np.sqrt(1.44 - 1.0), 1.2], rtol=1e-6
    )
