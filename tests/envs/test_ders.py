"""ders33-v0 and ders141-v0: heterogeneous agents on one feeder."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgrid
from jaxgrid.devices import battery_step, inverter_output
from jaxgrid.grid import distflow
from jaxgrid.validation import validate_params

KEY = jax.random.PRNGKey(0)


def test_agents_types_and_masks():
    env, params = jaxgrid.make("ders141-v0")
    assert env.num_agents == 12
    assert env.agent_types.count("battery") == 3 and env.agent_types.count("ev") == 2
    mask = np.asarray(env.action_mask)
    space = env.action_space(params)
    ev = [i for i, t in enumerate(env.agent_types) if t == "ev"]
    assert not mask[ev, 1].any() and mask[:, 0].all()
    np.testing.assert_array_equal(np.asarray(space.low)[ev, 1], 0.0)
    np.testing.assert_array_equal(np.asarray(space.high)[ev, 1], 0.0)
    buses = np.asarray(env.buses(params))
    assert len(set(buses.tolist())) == len(buses)  # one device per bus


def test_step_solves_the_feeder_with_every_device():
    env, params = jaxgrid.make("ders33-v0")
    _, state = env.reset(KEY, params)
    state = state.replace(
        ev_arrival=jnp.zeros(2, jnp.int32), ev_departure=jnp.full(2, 40, jnp.int32)
    )
    action = jnp.array(
        [
            [0.5, -0.2],
            [-1.0, 0.3],
            [0.1, 0.5],
            [0.0, -1.0],
            [0.3, 1.0],
            [0.2, 0.4],
            [0.0, -0.5],
            [1.0, 0.0],
            [0.5, 0.0],
        ]
    )
    _, new_state, _, _, _, info = env.step_env(KEY, state, action, params)
    # rebuild the bus injections by hand from the device models
    s = env.slices
    row = int(state.start)
    prof = params.profiles
    scale = float(params.load_scale) * np.asarray(prof.load)[row][np.asarray(params.load_profile)]
    p = scale * np.asarray(params.feeder.p_load_mw)
    q = scale * np.asarray(params.feeder.q_load_mvar)
    b = params.battery
    bat = battery_step(
        state.battery_soc,
        action[s["battery"], 0] * b.p_max_mw,
        action[s["battery"], 1] * b.s_max_mva,
        0.5,
        b,
    )
    avail = np.asarray(params.pv_p_max_mw) * np.asarray(prof.pv)[row][np.asarray(params.pv_profile)]
    pv = inverter_output(
        jnp.asarray(avail), action[s["pv"], 0], action[s["pv"], 1], params.pv_s_max_mva
    )
    demand = np.asarray(params.flex_size_mw) * float(prof.load[row, 0])
    flex_p = demand - np.minimum(
        np.asarray(action[s["flexload"], 0]) * np.asarray(params.flex.curtail_cap_mw), demand
    )
    flex_p = flex_p - np.minimum(
        np.maximum(np.asarray(action[s["flexload"], 1]), 0) * np.asarray(params.flex.shift_cap_mw),
        flex_p,
    )
    ev_p = np.where(
        np.asarray(params.ev.v2g),
        np.asarray(action[s["ev"], 0]),
        np.maximum(np.asarray(action[s["ev"], 0]), 0),
    ) * np.asarray(params.ev.battery.p_max_mw)
    for bus, add_p, add_q in (
        (params.battery_bus, np.asarray(bat.p_mw), np.asarray(bat.q_mvar)),
        (params.pv_bus, -np.asarray(pv.p_mw), -np.asarray(pv.q_mvar)),
        (params.flex_bus, flex_p, 0.0),
        (params.ev_bus, ev_p, 0.0),
    ):
        np.add.at(p, np.asarray(bus), add_p)
        np.add.at(q, np.asarray(bus), add_q)
    expected = distflow(
        params.feeder, jnp.asarray(p, jnp.float32), jnp.asarray(q, jnp.float32), iterations=5
    )
    np.testing.assert_allclose(info["vm_pu"], expected.vm_pu, atol=2e-5)
    np.testing.assert_allclose(float(info["import_mw"]), float(expected.p_import_mw), rtol=1e-4)
    price = float(prof.price[row, 1])
    rv = np.asarray(info["reward_vector"])
    np.testing.assert_allclose(rv[0, 0], -price * float(expected.p_import_mw) * 0.5, rtol=1e-4)
    np.testing.assert_allclose(rv[:, 0], rv[0, 0])  # shared objectives


def test_ev_misses_its_target_when_it_never_charges():
    env, params = jaxgrid.make("ders33-v0")
    _, state = env.reset(KEY, params)
    state = state.replace(
        ev_arrival=jnp.array([0, 0], jnp.int32), ev_departure=jnp.array([1, 1], jnp.int32)
    )
    _, _, _, _, _, info = env.step_env(KEY, state, jnp.zeros((9, 2)), params)
    # both leave after this step with soc 0.3 of a 0.9 target: 0.6 x capacity unmet
    missing = 2 * 0.6 * float(params.ev.battery.capacity_mwh[0])
    np.testing.assert_allclose(-float(info["reward_vector"][0, 3]), missing, rtol=1e-5)


def test_reset_draws_each_ev_session_within_its_ranges():
    """Arrival and stay are drawn (one draw of bits for both) uniformly from each EV's
    inclusive ranges: every value of a short range turns up, none outside, the departure
    is the arrival plus the stay within the day, and a range beyond what the draw serves
    is refused before it is traced."""
    env, params = jaxgrid.make("ders33-v0")
    arrival_range = np.array([[10, 13], [30, 30]], np.int32)  # EV 0: as many values as its stay
    stay_range = np.array([[0, 3], [10, 11]], np.int32)  # within the 48-step day
    params = params.replace(ev_arrival_range=arrival_range, ev_stay_range=stay_range)
    keys = jax.random.split(KEY, 400)
    _, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    arrival = np.asarray(states.ev_arrival)
    stay = np.asarray(states.ev_departure) - arrival
    for ev in range(2):
        low, high = arrival_range[ev]
        assert set(arrival[:, ev].tolist()) == set(range(low, high + 1))
        low, high = stay_range[ev]
        assert set(stay[:, ev].tolist()) == set(range(low, high + 1))
    # two draws, not one: with equal spans the same bits would give arrival - 10 == stay
    assert np.mean(arrival[:, 0] - 10 == stay[:, 0]) < 0.4
    too_long = params.replace(ev_stay_range=np.array([[0, 3], [0, 70_000]], np.int32))
    with pytest.raises(ValueError, match="ev_stay_range"):
        validate_params(env, too_long)
