"""Reference policies for dcmg: ``policy(key, obs) -> action`` on observations ``(1, n)``.

Both read the observation only (entries by name, :meth:`Dcmg.observation_names`) and know
the sizes of the devices from ``params``.

- :func:`rule_based`, after PowerZooJax's DCMG rule-based baseline: run the batch work in
  the solar hours, keep the battery for the evening, and call the diesel when the grid
  import hits its cap. PowerZooJax forces urgent jobs to run; here the fluid queue has no
  jobs, so outside the solar window the rule serves each class at the rate that clears its
  backlog within half its deadline (full speed when work is late). Fixed cooling setpoint
  (24 °C).
- :func:`greedy`: serve all work at once, cool as little as allowed (highest setpoint),
  use the battery for self-consumption (charge from PV surplus, discharge to cover the
  load) and the diesel only above the import cap.

Both run the diesel for what the last step would have imported above the cap without it,
so they react a step late.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.devices.battery import power_limits

SOLAR_HOURS = (9.0, 16.0)  # the rule-based policy's solar window
EVENING_HOURS = (17.0, 22.0)  # ... and when it discharges the battery


def _entries(env, params):
    names = env.observation_names(params)
    return {n: i for i, n in enumerate(names)}


def _hour(obs, at):
    """Hour of the day from the observed sine and cosine of the time."""
    angle = jnp.arctan2(obs[0, at["sin_time"]], obs[0, at["cos_time"]])
    return (angle % (2 * jnp.pi)) * 24.0 / (2 * jnp.pi)


def _full_speed(obs, at, dt):
    """Shares that serve each class's whole backlog (plus room for new arrivals) this step,
    split by backlog when together they need more than the cluster."""
    backlog = jnp.stack([obs[0, at["backlog_train"]], obs[0, at["backlog_finetune"]]])
    return backlog / dt + 0.2  # backlog in cluster-hours -> shares of one step


def _battery(obs, at, params, p_mw):
    """The battery action for ``p_mw`` (MW, charge > 0), within what its charge allows."""
    low, high = power_limits(obs[0, at["soc"]][None], params.dt_h, params.battery)
    return jnp.clip(p_mw, low[0], high[0]) / params.battery.p_max_mw[0]


def _diesel_for_cap(obs, at, params):
    """Ask the diesel for what the last step would have imported above the cap without it
    (off when that is nothing), so a running unit stays on while it is needed."""
    need = obs[0, at["p_grid"]] + obs[0, at["p_diesel"]] - params.import_cap_mw
    return jnp.where(need > 0, need / params.diesel.p_max_mw, -1.0)


def rule_based(env, params, setpoint_c: float = 24.0):
    """PowerZooJax-style rules (see the module docstring)."""
    at = _entries(env, params)
    dc = params.datacentre
    dt = params.dt_h
    setpoint = (setpoint_c - dc.t_set_min) / (dc.t_set_max - dc.t_set_min)

    def policy(key, obs):
        hour = _hour(obs, at)
        solar = (hour >= SOLAR_HOURS[0]) & (hour < SOLAR_HOURS[1])
        evening = (hour >= EVENING_HOURS[0]) & (hour < EVENING_HOURS[1])
        backlog = jnp.stack([obs[0, at["backlog_train"]], obs[0, at["backlog_finetune"]]])
        # backlog in cluster-hours; clear it within the deadline (hours), as shares
        # (half the deadline: work keeps arriving behind the backlog); full speed when late
        pace = backlog / (0.5 * dc.deadline_steps * dt)
        late = (obs[0, at["ahead_train"]] < 0) | (obs[0, at["ahead_finetune"]] < 0)
        shares = jnp.where(solar | late, _full_speed(obs, at, dt), jnp.clip(pace, 0.0, 1.0))
        p_max = params.battery.p_max_mw[0]
        battery = _battery(
            obs, at, params, jnp.where(solar, p_max, jnp.where(evening, -p_max, 0.0))
        )
        action = jnp.stack([shares[0], shares[1], setpoint * jnp.ones(()), battery,
                            _diesel_for_cap(obs, at, params)])  # fmt: skip
        return action[None].astype(obs.dtype)

    return policy


def greedy(env, params):
    """Work first, least cooling, battery self-consumption (see the module docstring)."""
    at = _entries(env, params)
    dt = params.dt_h

    def policy(key, obs):
        shares = _full_speed(obs, at, dt)
        surplus = obs[0, at["pv"]] - obs[0, at["p_dc"]]
        battery = _battery(obs, at, params, surplus)
        action = jnp.stack([shares[0], shares[1], jnp.ones(()), battery,
                            _diesel_for_cap(obs, at, params)])  # fmt: skip
        return action[None].astype(obs.dtype)

    return policy
