"""The oracle: the AC optimal power flow of every step of a day.

Each step is independent (no ramps, no storage), so the best the generators can do is
the AC-OPF of the step's loads (:func:`jaxgrid.dispatch.acopf`, MATPOWER's problem:
least generation cost within voltage, thermal, active and reactive limits), and its
setpoints (active outputs and generator-bus voltages) stepped through the environment's
power flow reproduce it. :func:`day_oracle` solves a day's steps in one ``vmap``-ped
program in float64 on the host (the reference precision of the solver; its float32
cost agrees to 2e-6). It takes about 6 s a day on case14 and 100 s on case118 (compiling
included, on a 2-core CPU).
"""

from __future__ import annotations

import contextlib
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.dispatch.acopf import acopf


class DayOPF(NamedTuple):
    """The AC-OPF of each of a day's ``T`` steps (``G`` generators).

    Attributes:
        cost_per_h: ``(T,)`` generation cost, currency/h.
        pg_mw: ``(T, G)`` active outputs, MW.
        vg_pu: ``(T, G)`` voltage at each generator's bus, pu.
        converged: ``(T,)`` bool, the interior point method converged.
    """

    cost_per_h: np.ndarray
    pg_mw: np.ndarray
    vg_pu: np.ndarray
    converged: np.ndarray


@contextlib.contextmanager
def _float64():
    """``jax_enable_x64`` on, with JAX's tracing caches cleared on the way in and out
    (they are not keyed on the flag; see :func:`jaxgrid.testing.check_env`)."""
    enable = (
        functools.partial(jax.enable_x64, True)
        if hasattr(jax, "enable_x64")
        else __import__("jax.experimental", fromlist=["enable_x64"]).enable_x64
    )
    already = bool(jax.config.jax_enable_x64)
    if not already:
        jax.clear_caches()
    try:
        with enable():
            yield
    finally:
        if not already:
            jax.clear_caches()


def _to_numpy64(tree):
    """Every float leaf as a float64 NumPy array (a network of its own precision)."""

    def convert(x):
        x = np.asarray(x)
        return x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x

    return jax.tree_util.tree_map(convert, tree)


def day_loads(env, params, start: int) -> tuple[np.ndarray, np.ndarray]:
    """``(p_mw, q_mvar)``, ``(horizon, n_bus)`` each, the loads of the day's steps from
    profile row ``start`` (float64, on the host; :meth:`OPF.bus_loads`)."""
    p = _to_numpy64(params)
    rows = (start + np.arange(env.horizon)) % p.profiles.load.shape[0]
    shapes = p.profiles.load[rows]
    factor = p.demand_floor + (1.0 - p.demand_floor) * shapes @ p.load_weights.T
    return factor * p.pd_mw, factor * p.qd_mvar


def day_oracle(env, params, start: int, iterations: int = 100) -> DayOPF:
    """The AC-OPF of every step of the day from profile row ``start`` (float64)."""
    p_mw, q_mvar = day_loads(env, params, start)
    network = _to_numpy64(env.network_of(params))
    gen_bus = np.asarray(env.network.gen_bus)
    with _float64():
        solve = jax.jit(jax.vmap(lambda p, q: acopf(network, p, q, iterations=iterations)))
        r = jax.device_get(solve(jnp.asarray(p_mw), jnp.asarray(q_mvar)))
    return DayOPF(
        cost_per_h=np.asarray(r.cost, float),
        pg_mw=np.asarray(r.pg_mw, float),
        vg_pu=np.asarray(r.vm_pu, float)[:, gen_bus],
        converged=np.asarray(r.converged),
    )
