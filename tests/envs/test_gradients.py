"""Differentiable environments: ``jax.grad`` through ``env.step_env`` with respect to the
action and to every float leaf of ``params`` equals central finite differences in float64.

The differentiated scalar is a fixed random weighting of everything a step returns (the
new state's and observation's float leaves, the reward and the costs), so no output's
derivative can hide behind another's. Points are chosen where the model is smooth:
actions inside their box, away from the devices' clips (where a gradient is zero on one
side, see docs/control.md), and, in the feeder environments, a slack voltage of 1.002 pu
instead of 1.0, because the L1 voltage barrier ``|v - 1|`` has a kink exactly at the slack
bus when its voltage is 1.0 (there JAX gives the subgradient 0 and the two one-sided
derivatives differ).

Relative error is the largest absolute difference over the largest finite difference of
the compared set (the action's entries; one leaf's directional derivative). A leaf's
derivative is compared to ``REL_TOL`` of itself plus what central differences cannot
resolve (the rounding of the scalar, ``16 eps |f| / EPS``, about 4e-9 of it): a leaf
whose derivatives both lie below that (``voll`` of gencos5, 1e-10 by the gradient, round
off by the differences) is not read by the step.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import x64

import jaxgrid

FULL = os.environ.get("JAXGRID_VALIDATE") == "full"

REL_TOL = 1e-5
EPS = 1e-6  # relative step of the central differences


def _is_float(x) -> bool:
    return jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)


# steps taken (with the test's action) before the checked step, where the first step of
# an episode would not exercise the model: evfleet33's vehicles arrive in the evening,
# 6-10 steps after the episode's noon start
WARMUP = {"evfleet33-v0": 10}


def _smooth_point(name, env, params):
    """Params and a state (a few steps into an episode) at a smooth point of the model."""
    if hasattr(params, "feeder") and hasattr(params.feeder, "vm_slack_pu"):
        params = params.replace(feeder=params.feeder.replace(vm_slack_pu=jnp.float64(1.002)))
    _, state = env.reset(jax.random.PRNGKey(3), params)
    if WARMUP.get(name):
        action, step = _action(name, env, params), jax.jit(env.step_env)
        for k in range(WARMUP[name]):
            state = step(jax.random.PRNGKey(100 + k), state, action, params)[1]
    return params, state


def _action(name, env, params):
    """An action inside the box, away from its bounds (and small where a flexible load's
    request would exceed its demand: dso33's curtailment and shift; the commitment half
    of tso14-continuous's action is +0.5, every unit on as at reset, away from the sign
    that switches a unit)."""
    space = env.action_space(params)
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float64), space.shape)
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float64), space.shape)
    u = jax.random.uniform(jax.random.PRNGKey(1), space.shape, jnp.float64, 0.2, 0.5)
    if name == "dso33-v0":
        u = u * 0.1
    action = low + u * (high - low)
    if name.startswith("tso") and name.endswith("continuous-v0"):
        action = action.at[:, : env.n_gen].set(0.5)
    return action


def _outputs(env, state, action, params):
    """The float leaves of everything a step returns: new state, observation, reward, costs."""
    obs, new_state, reward, _, _, info = env.step_env(jax.random.PRNGKey(5), state, action, params)
    leaves = [x for x in jax.tree_util.tree_leaves((new_state, obs)) if _is_float(x)]
    return leaves + [reward, info["costs"]]


def _weighted_outputs(env, state, action, params):
    """A fixed random weighting of the step's outputs, each leaf divided by its size at
    ``(action, params)`` (at least 1).

    Without that division the scalar would be dominated by the largest outputs
    (smartgrid's energies, tens of thousands of Wh, sum to about 1e5), and its central
    differences would carry a rounding error of ``1e-16 * 1e5 / EPS = 1e-5`` absolute, as
    large as the derivatives of the outputs that do move. The division changes only the
    weights, which are constants of the differentiated function.
    """
    key = jax.random.PRNGKey(7)
    sizes = [
        float(jnp.max(jnp.abs(x), initial=1.0))
        for x in jax.jit(lambda a, p: _outputs(env, state, a, p))(action, params)
    ]

    def scalar(action, params):
        total = 0.0
        for i, x in enumerate(_outputs(env, state, action, params)):
            w = jax.random.normal(jax.random.fold_in(key, i), jnp.shape(x), jnp.float64)
            total = total + jnp.sum(w * x) / sizes[i]
        return total

    return jax.jit(scalar)


# the default suite samples one battery and one feeder environment; each costs one
# float64 gradient program of the whole step (measured on CI's two cores: 25-150 s each,
# none under 15 s), so JAXGRID_VALIDATE=full checks the rest; docs/control.md lists the
# environments left out and why (tso14-continuous-v0: at the points tried the dispatch
# does not move with the action; evfleet33-v0: a kink in soc_min at the point)
ENVS = ["arbitrage-v0", "dso33-v0"] + (
    [
        "voltage33-v0",
        "ders33-v0",
        "smartgrid33-v0",
        "smartgrid-v0",
        "dcmg-v0",
        "gencos5-v0",
        "opf14-v0",
        "voltage13-v0",
    ]
    if FULL
    else []
)


@pytest.mark.parametrize("name", ENVS)
def test_step_gradients_equal_central_differences(name):
    with x64():
        env, params = jaxgrid.make(name)
        params = jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, jnp.float64) if _is_float(x) else x, params
        )
        params, state = _smooth_point(name, env, params)
        action = _action(name, env, params)
        f = _weighted_outputs(env, state, action, params)

        leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
        differentiable = [
            i for i, (_, x) in enumerate(leaves) if _is_float(x) and np.all(np.isfinite(x))
        ]

        def with_leaves(values):
            xs = [x for _, x in leaves]
            for i, v in zip(differentiable, values):
                xs[i] = v
            return jax.tree_util.tree_unflatten(treedef, xs)

        # one gradient program for the action and the params' leaves (each compile of a
        # feeder's float64 gradient takes tens of seconds on CI's cores)
        base = [leaves[i][1] for i in differentiable]
        grad_action, grads = jax.grad(lambda a, vs: f(a, with_leaves(vs)), argnums=(0, 1))(
            action, base
        )
        # what the differences cannot resolve: the rounding of f(+) - f(-), each known to
        # about eps |f|, over the step 2 EPS, with a margin of 16 (about 4e-9 |f|)
        noise = 16 * np.finfo(np.float64).eps * max(abs(float(f(action, params))), 1.0) / EPS
        grad_action = np.asarray(grad_action).ravel()
        flat = np.asarray(action).ravel()
        steps = EPS * np.maximum(np.abs(flat), 1.0)  # smartgrid's actions are in Wh
        numeric = []
        for i in range(flat.size):
            e = np.zeros_like(flat)
            e[i] = steps[i]
            up, down = (jnp.asarray((flat + s * e).reshape(action.shape)) for s in (1, -1))
            numeric.append(float(f(up, params) - f(down, params)) / (2 * steps[i]))
        error = np.max(np.abs(grad_action - np.asarray(numeric)))
        assert error <= REL_TOL * np.max(np.abs(numeric)) + noise, (grad_action, numeric)
        assert np.max(np.abs(numeric)) > noise, f"{name}: the action moves no output"

        checked = 0
        for j, i in enumerate(differentiable):
            path, x = leaves[i]
            d = jax.random.normal(jax.random.PRNGKey(i), jnp.shape(x), jnp.float64)
            d = d * (jnp.abs(x) + 1e-3)  # a step relative to the leaf's size
            analytic = float(jnp.sum(grads[j] * d))
            moved = [
                [b + s * EPS * d if k == j else b for k, b in enumerate(base)] for s in (1, -1)
            ]
            numeric = float(f(action, with_leaves(moved[0])) - f(action, with_leaves(moved[1])))
            numeric /= 2 * EPS
            if abs(analytic) <= noise and abs(numeric) <= noise:
                continue  # the step does not read this leaf (or only through a clip)
            checked += 1
            assert abs(analytic - numeric) <= REL_TOL * abs(numeric) + noise, (
                jax.tree_util.keystr(path),
                analytic,
                numeric,
            )
        assert checked >= 3, f"{name}: too few params leaves with a gradient ({checked})"
