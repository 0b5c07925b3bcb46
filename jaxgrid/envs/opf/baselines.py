"""Reference policies for the generators: ``policy(key, obs) -> action``.

- :func:`proportional`: every generator produces the same share of its rating, the
  share that serves the step's total load (the slack generator takes the losses and any
  rounding), at a voltage setpoint of ``vm_pu`` (nominal, 1.0 pu, by default);
- :func:`economic_dispatch`: the network-blind economic dispatch: outputs at equal
  marginal cost serving the step's total load (bisection on the marginal cost, within
  the active limits; losses and the network ignored, the slack takes the losses), at
  ``vm_pu``;
- :func:`acopf_policy`: the AC-OPF of the step's loads (float32, jitted): its outputs
  and generator-bus voltages as setpoints. It reads every bus's load from the
  observation's profile-class shapes, which is exact for the environment's load model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.dispatch.acopf import acopf

BISECTION_STEPS = 40


def _system(env, params, obs):
    """``(load_factor, shapes)`` of the step about to be served, from any agent's row."""
    names = env.observation_names(params)
    k = names.index("load_class[0]")
    return obs[0, names.index("load_factor")], obs[0, k : k + env.n_class]


def proportional(env, params, vm_pu: float = 1.0):
    """The same share of every rating, at ``vm_pu`` (module docstring)."""

    def policy(key, obs):
        load_factor, _ = _system(env, params, obs)
        total = load_factor * jnp.sum(params.pd_mw)
        share = jnp.clip(total / jnp.sum(params.pmax_mw), 0.0, 1.0)
        pg = params.pmin_mw + share * (params.pmax_mw - params.pmin_mw)
        return env.encode(pg, jnp.full(env.n_gen, vm_pu), params)

    return policy


def equal_marginal_cost(total_mw, cost_poly, pmin_mw, pmax_mw):
    """``(n_gen,)`` outputs at one marginal cost ``lambda`` summing to ``total_mw`` within
    the limits (bisection; a generator with ``c2 = 0`` goes to a limit, or to the
    remainder when it is marginal)."""
    c2 = jnp.maximum(cost_poly[:, 0], 1e-6)
    c1 = cost_poly[:, 1]

    def output(lam):
        return jnp.clip((lam - c1) / (2 * c2), pmin_mw, pmax_mw)

    lo = jnp.min(c1 + 2 * c2 * pmin_mw) - 1.0
    hi = jnp.max(c1 + 2 * c2 * pmax_mw) + 1.0

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        short = jnp.sum(output(mid)) < total_mw
        return jnp.where(short, mid, lo), jnp.where(short, hi, mid)

    lo, hi = jax.lax.fori_loop(0, BISECTION_STEPS, body, (lo, hi))
    return output(0.5 * (lo + hi))


def economic_dispatch(env, params, vm_pu: float = 1.0):
    """Outputs at equal marginal cost for the step's total load, at ``vm_pu``."""

    def policy(key, obs):
        load_factor, _ = _system(env, params, obs)
        total = load_factor * jnp.sum(params.pd_mw)
        pg = equal_marginal_cost(total, params.cost_poly, params.pmin_mw, params.pmax_mw)
        return env.encode(pg, jnp.full(env.n_gen, vm_pu), params)

    return policy


def acopf_policy(env, params, iterations: int = 60):
    """The AC-OPF of the step's loads, as setpoints (module docstring)."""
    network = env.network_of(params)

    def policy(key, obs):
        _, shapes = _system(env, params, obs)
        p_mw, q_mvar = env.bus_loads(shapes, params)
        r = acopf(network, p_mw, q_mvar, iterations=iterations)
        return env.encode(r.pg_mw, r.vm_pu[env.network.gen_bus], params)

    return policy
