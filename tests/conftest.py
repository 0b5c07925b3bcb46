"""Shared helpers for the test suite."""

from __future__ import annotations

import contextlib
import getpass
import os
import tempfile
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

# One persistent compilation cache for every test worker (and the notebooks and
# subprocesses they start): environments and variants of equal shapes compile to the same
# programs. Keyed by the program, JAX version and flags, so it is never stale.
_CACHE = Path(tempfile.gettempdir()) / f"jaxgrid-test-jax-cache-{getpass.getuser()}"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update(
    "jax_persistent_cache_min_compile_time_secs",
    float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
)

# The suite compiles far more than it runs (a cold run: most of its time in XLA's
# compiler), so its programs are compiled without LLVM's optimisation passes, which cut
# a sample of its heaviest tests from 166 to 128 s here; set the flag yourself to
# override. Set before JAX starts its backend; subprocesses inherit it.
_OPT_FLAG = "--xla_backend_optimization_level"
if _OPT_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_OPT_FLAG}=0".strip()


# The default suite (the README's test command, CI) keeps every fast test and a sample of
# the compile-heavy ones, to stay within 15 minutes cold on 2 cores; the validation
# command ``JAXGRID_VALIDATE=full python -m pytest`` runs them all (README, Development).
FULL = os.environ.get("JAXGRID_VALIDATE") == "full"
full_only = pytest.mark.skipif(
    not FULL, reason="sampled out of the default suite: JAXGRID_VALIDATE=full runs it"
)


def jaxpr_equations(jaxpr) -> list:
    """Every equation of ``jaxpr`` (a ``jax.make_jaxpr(...).jaxpr``), those of nested
    jaxprs (loop bodies, branches, calls) included, outer ones first."""
    from jax.extend import core as jax_core

    found = []
    for eqn in jaxpr.eqns:
        found.append(eqn)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(sub, jax_core.ClosedJaxpr):
                    found += jaxpr_equations(sub.jaxpr)
                elif isinstance(sub, jax_core.Jaxpr):
                    found += jaxpr_equations(sub)
    return found


def jaxpr_loops(jaxpr) -> list:
    """``(primitive, scan length or None)`` of every ``scan`` and ``while`` loop in
    ``jaxpr``, nested ones included."""
    return [
        (e.primitive.name, e.params.get("length"))
        for e in jaxpr_equations(jaxpr)
        if e.primitive.name in ("scan", "while")
    ]


def sampled(values, keep):
    """``values`` as ``pytest.mark.parametrize`` arguments, those not in ``keep`` marked
    :data:`full_only` (run by the validation command only)."""
    return [
        v if v in keep else pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=full_only)
        for v in values
    ]


@contextlib.contextmanager
def x64():
    """Run the block with ``jax_enable_x64`` on (float64 by default)."""
    if hasattr(jax, "enable_x64"):
        with jax.enable_x64(True):
            yield
    else:  # jax < 0.6
        from jax.experimental import enable_x64

        with enable_x64():
            yield


@pytest.fixture
def float64():
    with x64():
        yield


def run_ac(net):
    """pandapower's Newton-Raphson AC power flow, solved tightly; returns the net."""
    pp = pytest.importorskip("pandapower")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.runpp(net, tolerance_mva=1e-9, numba=False, max_iteration=50)
    return net


def float64_leaves(tree):
    """``tree`` with every floating leaf cast to float64 (integer and boolean leaves as
    they are); call it under :func:`x64`."""
    return jax.tree_util.tree_map(
        lambda x: (
            jnp.asarray(x, jnp.float64) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x
        ),
        tree,
    )


def reset_on_days(env, params, days, key):
    """The states ``env`` resets to from ``key`` with its episodes drawn from one profile
    day each of ``days`` ``(n,)`` (stacked on a leading axis): a test whose premise holds
    on particular days names them rather than rely on the days a seed draws."""

    def reset(day):
        only = params.profiles.replace(days=jnp.reshape(day, (1,)))
        return env.reset(key, params.replace(profiles=only))[1]

    return jax.vmap(reset)(jnp.asarray(days, jnp.int32))


def assert_tree_finite(tree, what: str = "tree"):
    for leaf in jax.tree_util.tree_leaves(tree):
        arr = np.asarray(leaf)
        if np.issubdtype(arr.dtype, np.floating):
            assert np.all(np.isfinite(arr)), f"{what} has non-finite values"


def ac_network(feeder):
    """``feeder`` as a pandapower network with one load per bus, in bus order."""
    from jaxgrid.grid import to_pandapower

    ones = np.ones(feeder.n_bus)
    return to_pandapower(feeder, ones, ones)


def ac_loadability(feeder, p_mw, q_mvar, tolerance: float = 1e-3, net=None) -> tuple[float, object]:
    """``(share, net)``: the largest share ``s <= 1`` of the bus loads ``p_mw``, ``q_mvar``
    ``(n_bus,)`` at which pandapower's Newton-Raphson converges on ``feeder``, followed
    from no load by load continuation (each solve starts from the last), and the solved
    pandapower network; the share is 1.0 when the full loading has an AC solution. The
    judge of whether a power flow that failed had a solution to find. ``net``: the
    network of :func:`ac_network` to reuse (its loads and results are overwritten;
    building one takes longer than solving it)."""
    pp = pytest.importorskip("pandapower")
    net = ac_network(feeder) if net is None else net
    p_mw, q_mvar = np.asarray(p_mw, float), np.asarray(q_mvar, float)

    def solves(share, init):
        net.load["p_mw"], net.load["q_mvar"] = share * p_mw, share * q_mvar
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pp.runpp(net, init=init, max_iteration=30, tolerance_mva=1e-9, numba=False)
            return True
        except pp.LoadflowNotConverged:
            return False

    if solves(1.0, "flat"):
        return 1.0, net
    reached, step = 0.0, 0.25
    solves(0.0, "flat")
    while step > tolerance:
        if solves(min(1.0, reached + step), "results"):
            reached = min(1.0, reached + step)
            if reached == 1.0:
                return 1.0, net
        else:
            solves(reached, "flat" if reached == 0.0 else "results")  # back to the last solution
            step /= 2
    return reached, net
