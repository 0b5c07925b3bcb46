"""Reference policies for unit commitment: ``policy(key, obs) -> action``.

- :func:`all_on`: every unit requested on, plain economic dispatch (the rules still keep
  units in their ramp windows);
- :func:`merit_order`: a priority list, the classic heuristic of unit commitment: units
  ranked by their average cost at full output (cost curve plus no-load cost, per MWh), the
  cheapest committed until their ratings cover the step's net load plus the reserve
  margin; plain economic dispatch. It looks no further than the step, so minimum times
  and ramps may refuse its requests.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxgrid.envs.tso.env import GW


def all_on(env):
    """Every unit on, no dispatch adjustment."""

    def policy(key, obs):
        n = env.n_gen
        return env.encode(jnp.ones(n, bool), jnp.zeros(n))

    return policy


def merit_order(env, params):
    """The priority list of ``params``' fleet (module docstring), read from the
    observation's ``net_load_gw`` entry."""
    u = params.units
    pmax = np.asarray(u.pmax_mw, float)
    poly = np.asarray(u.cost_poly, float)
    full_load = poly[:, 0] * pmax**2 + poly[:, 1] * pmax + poly[:, 2] + np.asarray(u.no_load_cost)
    order = np.argsort(full_load / pmax, kind="stable")
    before = np.zeros_like(pmax)
    before[order] = np.cumsum(pmax[order]) - pmax[order]  # capacity ranked ahead of each unit
    column = env.observation_names(params).index("net_load_gw")
    margin = float(params.reserve_margin)

    def policy(key, obs):
        need = obs[0, column] * GW * (1.0 + margin)
        return env.encode(jnp.asarray(before) < need, jnp.zeros(env.n_gen))

    return policy
