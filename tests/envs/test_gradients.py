"""Differentiable environments: ``jax.grad`` through ``env.step_env`` with respect to the
action and to every float leaf of ``params`` equals central finite differences in float64.

The differentiated scalar is a fixed random weighting of everything a step returns (the
new state's and observation's float leaves, the reward and the costs), so no output's
derivative can hide behind another's. Points are chosen where the model is smooth:
actions inside their box, away from the devices' clips (where a gradient is zero on one
side, see docs/control.md), no device at a state-of-charge limit (evfleet33), units
inside their ramp windows (tso14-continuous), and, in the feeder environments, a slack
voltage of 1.002 pu instead of 1.0, because the L1 voltage barrier ``|v - 1|`` has a kink
exactly at the slack bus when its voltage is 1.0 (there JAX gives the subgradient 0 and
the two one-sided derivatives differ).

Relative error is the largest absolute difference over the largest finite difference of
the compared set (the action's entries; one leaf's directional derivative). A leaf's
derivative is compared to ``REL_TOL`` of itself plus what central differences cannot
resolve (the rounding of the scalar, ``16 eps |f| / EPS``, about 4e-9 of it, and where
a solver stops at a tolerance the spread of its stopping point, ``RESOLUTION``): a leaf
whose derivatives both lie below that (``voll`` of gencos5, 1e-10 by the gradient, round
off by the differences) is not read by the step.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, sampled, x64

import jaxgrid
from jaxgrid.devices.ev import connected

REL_TOL = 1e-5
EPS = 1e-6  # relative step of the central differences

# larger steps where a solver stops at a tolerance: tso14-continuous's DC-OPF interior
# point stops once its duality gap is below 2e-11 of the cost (5e-8 currency/h), and
# neighbouring problems stop at different iterations (12 or 15-16 at the test's point),
# so their dispatches differ from the exact QP's by up to 1.2e-7 MW: over a step of
# 1e-6 that is a tenth of a derivative (differences 3e-4 off the gradient, which agrees
# with differences of step 1e-7 to 4e-9, where both sides stop at iteration 12, and of
# 1e-3 to 3e-7). The outputs are piecewise quadratic in the inputs (a QP's solution is
# linear while its active set holds, the costs quadratic in it), so central
# differences of 1e-3 are exact up to rounding, and the units stay 5 MW inside their
# windows. The spread of the stopping point is also what the differences cannot
# resolve (besides rounding): up to 5e-10 of the test's weighted sum, from the
# load_share differences above, taken as 1e-9 (so derivatives below 1e-6 are not read)
STEP = {"tso14-continuous-v0": 1e-3}
RESOLUTION = {"tso14-continuous-v0": 1e-9}


def _is_float(x) -> bool:
    return jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)


# steps taken (with the test's action) before the checked step, where the first step of
# an episode would not exercise the model: evfleet33's vehicles arrive in the evening,
# 6-10 steps after the episode's noon start
WARMUP = {"evfleet33-v0": 10, "tso14-continuous-v0": 2}

# tso14-continuous: with every unit on, as at reset, the units' minimum outputs (133, 42,
# 20, 20 and 20 MW) exceed the net load of the test's first hours (81-96 MW): every unit
# sits at the bottom of its ramp window, 150 MW are spilled, and the dispatch does not
# move with the action. The test's action stops the two large units in the first
# warm-up step (allowed: they run at their minimum, within their shut-down ramp) and
# keeps them off; the three 100 MW units share the load, all inside their windows at
# the checked step (25-37 MW of 20-100, no line at its rating, no reserve shortfall),
# with dispatch adjustments of -0.06..0 (a spread of 0.6 per MWh in marginal cost moves
# the units 15 MW apart, not to their limits), so the DC-OPF's KKT gradients carry the
# action and the costs into the dispatch.
TSO14_ON = (False, False, True, True, True)

# evfleet33's test action is -0.6..0 of the charger rating before this shift: every
# vehicle discharges, and one that arrives at step 5 with a state of charge of 0.215 is
# empty (soc = soc_min = 0) by step 10. There the discharge limit
# ``max(soc - soc_min, 0) * capacity`` is at its kink in ``soc_min``: raising
# ``soc_min`` leaves it at 0, lowering it lets the vehicle give power, so the enacted
# power's one-sided derivatives differ (JAX takes their mean, 10 % off the differences
# of the whole step). Shifted to -0.15..0.45 no vehicle can empty or fill in the 10
# warm-up steps (at most 10 x 0.15 x 11 kW x 0.5 h / 0.92 = 9 kWh of a 60 kWh battery
# leaves, and vehicles arrive with 20-60 %; at most 10 x 0.45 x 11 x 0.5 x 0.92 = 23 kWh
# comes in), and the test asserts it; the actions of both signs are exercised.
EVFLEET_SHIFT = 0.45


def _smooth_point(name, env, params):
    """Params and a state (a few steps into an episode) at a smooth point of the model."""
    if hasattr(params, "feeder") and hasattr(params.feeder, "vm_slack_pu"):
        params = params.replace(feeder=params.feeder.replace(vm_slack_pu=jnp.float64(1.002)))
    _, state = env.reset(jax.random.PRNGKey(3), params)
    if WARMUP.get(name):
        action, step = _action(name, env, params), jax.jit(env.step_env)
        for k in range(WARMUP[name]):
            state = step(jax.random.PRNGKey(100 + k), state, action, params)[1]
    if name == "evfleet33-v0":  # no plugged-in vehicle at a state-of-charge limit
        b = params.ev.battery
        plugged = connected(state.time, state.arrival, state.departure)
        room = jnp.minimum(state.soc - b.soc_min, b.soc_max - state.soc)
        assert bool(jnp.any(plugged)) and float(jnp.min(jnp.where(plugged, room, 1.0))) > 0.01
    if name == "tso14-continuous-v0":  # three units on, each inside its ramp window
        c, _, r = jax.jit(env.dispatch)(state, *env.request(_action(name, env, params)), params)
        inside = jnp.minimum(r.pg_mw - c.p_low_mw, c.p_high_mw - r.pg_mw)
        assert int(jnp.sum(c.status)) == 3 and float(jnp.min(jnp.where(c.status, inside, 9.0))) > 1
    return params, state


def _action(name, env, params):
    """An action inside the box, away from its bounds (and small where a flexible load's
    request would exceed its demand: dso33's curtailment and shift; tso14-continuous's
    commitment half is +-0.5 (``TSO14_ON``), away from the sign that switches a unit,
    and its dispatch adjustments a tenth of the others' (-0.06..0); evfleet33's shares are moved up by 0.45, to -0.15..0.45 of the
    charger rating, see ``EVFLEET_SHIFT``)."""
    space = env.action_space(params)
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float64), space.shape)
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float64), space.shape)
    u = jax.random.uniform(jax.random.PRNGKey(1), space.shape, jnp.float64, 0.2, 0.5)
    if name == "dso33-v0":
        u = u * 0.1
    action = low + u * (high - low)
    if name == "evfleet33-v0":
        action = action + EVFLEET_SHIFT
    if name == "tso14-continuous-v0":
        action = action.at[:, : env.n_gen].set(jnp.where(jnp.asarray(TSO14_ON), 0.5, -0.5))
        action = action.at[:, env.n_gen :].multiply(0.1)
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


# the default suite samples one battery environment; each costs one float64 gradient
# program of the whole step (measured on CI's two cores: 25-150 s each, none under 15 s),
# so JAXGRID_VALIDATE=full checks the rest; docs/control.md lists the environments left
# out (larger siblings of these) and how tso14-continuous-v0's and evfleet33-v0's points
# were chosen (TSO14_ON, EVFLEET_SHIFT)
ENVS = [
    "arbitrage-v0",
    "dso33-v0",
    "voltage33-v0",
    "ders33-v0",
    "smartgrid33-v0",
    "smartgrid-v0",
    "dcmg-v0",
    "gencos5-v0",
    "opf14-v0",
    "voltage13-v0",
    "evfleet33-v0",
    "tso14-continuous-v0",
]


@pytest.mark.parametrize("name", sampled(ENVS, keep=("arbitrage-v0",)))
def test_step_gradients_equal_central_differences(name):
    with x64():
        env, params = jaxgrid.make(name)
        params = float64_leaves(params)
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
        # about eps |f|, over the step 2 EPS, with a margin of 16 (about 4e-9 |f|), and a
        # solver's stopping point (RESOLUTION)
        eps = STEP.get(name, EPS)
        rounding = 16 * np.finfo(np.float64).eps * max(abs(float(f(action, params))), 1.0)
        noise = (rounding + RESOLUTION.get(name, 0.0)) / eps
        grad_action = np.asarray(grad_action).ravel()
        flat = np.asarray(action).ravel()
        steps = eps * np.maximum(np.abs(flat), 1.0)  # smartgrid's actions are in Wh
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
                [b + s * eps * d if k == j else b for k, b in enumerate(base)] for s in (1, -1)
            ]
            numeric = float(f(action, with_leaves(moved[0])) - f(action, with_leaves(moved[1])))
            numeric /= 2 * eps
            if abs(analytic) <= noise and abs(numeric) <= noise:
                continue  # the step does not read this leaf (or only through a clip)
            checked += 1
            assert abs(analytic - numeric) <= REL_TOL * abs(numeric) + noise, (
                jax.tree_util.keystr(path),
                analytic,
                numeric,
            )
        assert checked >= 3, f"{name}: too few params leaves with a gradient ({checked})"
