"""``check_env``: the test kit every jaxgrid environment's tests call first.

It checks the environment contract (``jaxgrid.env``) end to end:

1. metadata and output structure: agent names, action and observation entry names,
   reward/objective/cost shapes, info keys,
   ``world_state``, state shapes and dtypes that never change;
2. jitted ``reset``/``step`` trace once (``chex.assert_max_traces``, on abstract values);
3. the same key gives a bit-identical trajectory, and two fresh traces give the same
   program (catching randomness drawn outside the key at trace time);
4. every observation lies in the observation space;
5. auto-reset: ``step`` equals ``step_env`` then ``reset_env`` with the documented key
   split, ``info["final_observation"]`` is the pre-reset observation, and an episode is
   truncated exactly at ``env.horizon`` unless it terminated first;
6. no NaN/inf in state, observation, reward, reward vector or costs over ``num_steps``
   steps of random, extreme (+-1e9) and non-finite (NaN/inf) actions, and the sanitising
   counters see them. Where the horizon is longer than ``num_steps`` (up to
   ``MAX_TRUNCATION_CHECK``) these runs go through a whole episode and one step, unless
   ``whole_episode=False`` (for a variant whose horizon a smaller sibling already checks);
7. every floating-point matrix product that ``reset`` and ``step`` trace asks for full
   precision (:func:`~jaxgrid.numerics.full_precision`; GPUs otherwise run float32
   products in TF32);
8. in float64 (params cast to float64 under ``jax_enable_x64``): the contract flags of
   item 5 and 6 hold for one run, and ``vmap`` over ``num_envs`` environments equals a
   Python loop over the same keys, compared on 8 rows spread over the batch
   (``_check_vmap_matches_loop`` says why float64).

A failure raises ``AssertionError`` naming the environment and the check.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Environment
from jaxgrid.validation import validate_params

ACTION_KINDS = ("random", "extreme", "nonfinite")
MAX_TRUNCATION_CHECK = 20_000  # longest horizon whose truncation is run through
_CALLS = itertools.count()


def check_env(
    env: Environment,
    params: Any = None,
    *,
    num_steps: int = 1000,
    num_envs: int = 64,
    seed: int = 0,
    whole_episode: bool = True,
) -> None:
    """Check ``env`` against the jaxgrid environment contract (see the module docstring)."""
    params = env.default_params() if params is None else params
    validate_params(env, params)
    key = jax.random.PRNGKey(seed)
    fail = functools.partial(_fail, env)

    _check_metadata(env, params, fail)
    k_trace, k_roll, k_vmap = jax.random.split(key, 3)
    _check_traces_once(env, params, k_trace, fail)

    # the rollouts run num_steps steps, or a whole episode and one step when the horizon
    # is longer, so that truncation at the horizon is seen (one compiled program for all)
    length = num_steps
    if whole_episode and num_steps <= env.horizon < MAX_TRUNCATION_CHECK:
        length = env.horizon + 1
    rollout = jax.jit(_make_rollout(env, length))
    for kind_index, kind in enumerate(ACTION_KINDS):
        run = jax.device_get(rollout(k_roll, params, kind_index))
        _check_run(env, params, run, kind, length, fail)
        if kind == "random":
            first = run

    difference = _tree_difference(first, jax.device_get(rollout(k_roll, params, 0)))
    if difference:
        fail(f"the same key gave a different trajectory ({difference})")
    if not _same_program(_make_rollout(env, 2), (k_roll, params, 0)):
        fail("two traces of the same rollout differ (randomness drawn outside the key?)")

    _check_vmap_matches_loop(env, params, k_vmap, num_steps, num_envs, fail)


# float64 round-off: batching regroups sums (a batched matrix product instead of a vector
# one), which moves float64 results by a few ulps (~1e-15 relative, 1e-13 seen over 1000
# steps); a batching bug (a wrong key, index or broadcast) moves them by O(1).
VMAP_RTOL_FLOAT64 = 1e-9
# rows of the vmapped run compared with their own unbatched run: a batching bug (a wrong
# key, index or broadcast) moves nearly every row, so the first ones, the last one and
# rows spread between catch it at an eighth of the loop's time (1-7 s an environment)
VMAP_ROWS_COMPARED = 8


def _rows_compared(num_envs: int) -> list[int]:
    """The rows of a batch of ``num_envs`` that :func:`_check_vmap_matches_loop` compares:
    all of them up to ``VMAP_ROWS_COMPARED``, else 0, 1 and rows spread evenly up to the
    last (at most ``VMAP_ROWS_COMPARED``)."""
    if num_envs <= VMAP_ROWS_COMPARED:
        return list(range(num_envs))
    spread = np.linspace(0, num_envs - 1, VMAP_ROWS_COMPARED - 1).round().astype(int)
    return sorted({1, *spread.tolist()})


def _check_vmap_matches_loop(env, params, key, num_steps, num_envs, fail) -> None:
    """``vmap`` of the rollout over ``num_envs`` keys equals a Python loop over the keys
    (over :data:`VMAP_ROWS_COMPARED` of them, first and last included).

    Run in float64 (``params``' float leaves cast, ``jax_enable_x64`` on), because the
    comparison must separate a batching bug from round-off. Batching regroups sums; in
    float32 that alone moves rewards by 2e-5 where they are differences of terms near
    100 (``arbitrage-v0``, ``voltage33-v0``), and booleans derived from thresholds flip (a
    DistFlow's ``converged`` on a few steps in a thousand), after which trajectories
    part: a float32 tolerance wide enough for that would hide real bugs. In float64 the
    same regrouping moves results by ~1e-15 (nothing flipped in 64 x 1000 steps of any
    registered environment), so floats must agree to ``VMAP_RTOL_FLOAT64`` and integers
    and booleans exactly. A step that runs an optimisation to a tolerance (a market
    cleared by an interior point method, frozen once converged) lands anywhere within
    that tolerance: such an environment states it as ``env.solver_rtol``, which then
    replaces ``VMAP_RTOL_FLOAT64`` where larger (a batching bug still moves results by
    O(1)). The float64 run also tests the contract's "float32 default,
    float64 works": its contract flags must hold (all but the auto-reset comparison,
    which the float32 runs make).
    """
    rtol = max(VMAP_RTOL_FLOAT64, env.solver_rtol or 0.0)
    with _float64():
        params = jax.tree_util.tree_map(_to_float64, params)
        rollout = jax.jit(_make_rollout(env, num_steps, autoreset=False))
        keys = jax.random.split(key, num_envs)
        try:
            batch = jax.device_get(
                jax.jit(jax.vmap(rollout, in_axes=(0, None, None)))(keys, params, 0)
            )
        except TypeError as err:  # e.g. a state leaf that stays float32
            fail(f"does not run in float64: {err}")
        for i in _rows_compared(num_envs):
            one = jax.device_get(rollout(keys[i], params, 0))
            if i == 0:
                _check_run(env, params, one, "random float64", num_steps, fail)
            row = jax.tree_util.tree_map(lambda x, i=i: x[i], batch)
            difference = _tree_difference(row, one, rtol=rtol)
            if difference:
                fail(
                    f"vmap over {num_envs} envs differs from a Python loop at env {i} "
                    f"(float64; first {difference}, batched against alone)"
                )


@contextlib.contextmanager
def _float64():
    """A block with ``jax_enable_x64`` on, so new floats default to float64.

    JAX's tracing caches are not keyed on the x64 flag (jax 0.10: an index normalised
    under float32 is reused as int32 under x64, and ``lax.add`` then meets int32 and
    int64), so they are cleared on the way in and out.
    """
    if hasattr(jax, "enable_x64"):
        enable_x64 = functools.partial(jax.enable_x64, True)
    else:  # jax < 0.6
        from jax.experimental import enable_x64
    jax.clear_caches()
    try:
        with enable_x64():
            yield
    finally:
        jax.clear_caches()


def _to_float64(leaf):
    """A float array leaf as float64 (inside :func:`_float64`); other leaves unchanged."""
    if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating):
        return jnp.asarray(leaf, jnp.float64)
    return leaf


def _same_program(fn, args) -> bool:
    """Whether two fresh traces of ``fn`` give the same program and constants.

    A pure environment traces to the same jaxpr every time; one that draws from NumPy
    or Python randomness while tracing bakes different constants into each trace.
    """
    a, b = _fresh_trace(fn, args), _fresh_trace(fn, args)
    if str(a.jaxpr) != str(b.jaxpr) or len(a.consts) != len(b.consts):
        return False
    return all(_tree_equal(x, y) for x, y in zip(a.consts, b.consts))


def _fresh_trace(fn, args):
    """``jax.make_jaxpr(fn)(*args)`` with JAX's caches cleared first: an environment's
    ``reset`` and ``step`` are jitted (:meth:`~jaxgrid.env.Environment._compiled`), and
    a cached trace would repeat the first trace's constants."""
    jax.clear_caches()
    return jax.make_jaxpr(fn)(*args)


def _fail(env: Environment, message: str):
    raise AssertionError(f"check_env({env.name}): {message}")


def _check_metadata(env, params, fail) -> None:
    n = env.num_agents
    if n < 1 or len(set(env.agents)) != n:
        fail(f"agents must be >= 1 distinct names, got {env.agents}")
    if len(env.agent_types) != n:
        fail(f"agent_types has {len(env.agent_types)} entries for {n} agents")
    if not env.objective_names or len(set(env.objective_names)) != len(env.objective_names):
        fail(f"objective_names must be distinct and non-empty, got {env.objective_names}")
    if len(set(env.cost_names)) != len(env.cost_names):
        fail(f"cost_names must be distinct, got {env.cost_names}")
    if not isinstance(env.horizon, int) or env.horizon < 1:
        fail(f"horizon must be a positive int, got {env.horizon!r}")
    try:
        env.scalarisation(params)
    except AttributeError:
        fail("params need a 'scalarisation' field (jaxgrid.rewards.Scalarisation)")
    for name, space in (
        ("action", env.action_space(params)),
        ("observation", env.observation_space(params)),
    ):
        leading = [s.shape[:1] for s in _leaf_spaces(space)]
        if any(shape != (n,) for shape in leading):
            fail(f"every {name} space must have the agent axis ({n}) first, got {space}")
    _check_entry_names(env, params, fail)


def _check_entry_names(env, params, fail) -> None:
    """Where the environment names its action and observation entries, one distinct
    name per entry of the last axis (per choice, for one discrete choice per agent)."""
    try:
        observation_names = env.observation_names(params)
    except NotImplementedError:
        observation_names = None
    observation = env.observation_space(params)
    if isinstance(observation, spaces.Dict):
        observation = observation["observation"]
    for what, names, space in (
        ("action_names", env.action_names, env.action_space(params)),
        ("observation_names", observation_names, observation),
    ):
        if names is None or isinstance(space, spaces.Dict):
            continue
        if isinstance(space, spaces.MultiDiscrete) and len(space.shape) == 1:
            width = int(np.max(space.nvec))  # one choice per agent: the choices are named
        else:
            width = space.shape[-1] if len(space.shape) > 1 else 1
        if len(names) != width or len(set(names)) != len(names):
            fail(f"{what} must name the {width} entries once each, got {names}")


def _leaf_spaces(space):
    if isinstance(space, spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in _leaf_spaces(sub)]
    return [space]


def _traced_once(fn, name: str):
    """``jax.jit(fn)`` guarded by ``chex.assert_max_traces(n=1)``.

    chex counts traces per function footprint (source and name); a unique name per
    call keeps repeated ``check_env`` calls from sharing one counter.
    """
    fn.__name__ = f"{name}_{next(_CALLS)}"
    return jax.jit(chex.assert_max_traces(fn, n=1))


def _check_traces_once(env, params, key, fail) -> None:
    """Jitted ``reset`` and ``step`` trace once over a reset, six steps fed their own state
    and a second reset; the output structure, shapes and dtypes are those of the contract.

    Checked on abstract values: ``jax.eval_shape`` of a jitted function traces through
    ``jit``'s cache (keyed on shapes, dtypes and weak types, as a call is) without
    compiling, which saved 6 s of an environment's check here; the values are checked
    by the rollouts.
    """
    reset = _traced_once(lambda k, p: env.reset(k, p), f"{env.name}_reset")
    step = _traced_once(lambda k, s, a, p: env.step(k, s, a, p), f"{env.name}_step")
    n = env.num_agents
    n_obj, n_cost = len(env.objective_names), len(env.cost_names)
    try:
        obs, state = jax.eval_shape(reset, key, params)
        first_state = state
        action = jax.eval_shape(env.action_space(params).sample, key)
        for i in range(6):
            obs, state, reward, terminated, truncated, info = jax.eval_shape(
                step, key, state, action, params
            )
            if i == 2:
                obs, state = jax.eval_shape(reset, key, params)
        world = jax.eval_shape(env.world_state, state, params)
        # the same arguments again: jit's cache gives the traced programs, no new trace
        below = products_below_full_precision(reset.trace(key, params).jaxpr.jaxpr)
        below += products_below_full_precision(step.trace(key, state, action, params).jaxpr.jaxpr)
    except AssertionError as err:
        fail(
            "jitted reset/step traced more than once (a state leaf changes shape, dtype "
            f"or weak type?): {err}"
        )
    except TypeError as err:
        fail(str(err))
    if below:
        fail(
            f"{len(below)} matrix products of reset/step run below full precision (TF32 on "
            f"GPUs), e.g. {below[0]}: trace them under jaxgrid.numerics.full_precision"
        )
    if jax.tree_util.tree_structure(state) != jax.tree_util.tree_structure(first_state) or any(
        (a.shape, a.dtype) != (b.shape, b.dtype)
        for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(first_state))
    ):
        fail("the state changes structure, shape or dtype across steps")
    expected = {
        "reward_vector": ((n, n_obj), jnp.floating),
        "objective_mask": ((n, n_obj), jnp.bool_),
        "costs": ((n, n_cost), jnp.floating),
        "action_clipped": ((n,), jnp.integer),
        "action_nonfinite": ((n,), jnp.integer),
    }
    for name, (shape, kind) in expected.items():
        if name not in info:
            fail(f"info lacks {name!r}")
        if info[name].shape != shape or not jnp.issubdtype(info[name].dtype, kind):
            fail(
                f"info[{name!r}] must be {kind.__name__} {shape}, got {info[name].dtype} {info[name].shape}"
            )
    if jax.tree_util.tree_structure(info.get("final_observation")) != jax.tree_util.tree_structure(
        obs
    ):
        fail("info['final_observation'] must have the observation's structure")
    if reward.shape != (n,) or not jnp.issubdtype(reward.dtype, jnp.floating):
        fail(f"reward must be float ({n},), got {reward.dtype} {reward.shape}")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if flag.shape != () or flag.dtype != jnp.bool_:
            fail(f"{name} must be a scalar bool, got {flag.dtype} {flag.shape}")
    if len(world.shape) != 1 or not jnp.issubdtype(world.dtype, jnp.floating):
        fail(f"world_state must be a 1-D float array, got {world.dtype} {world.shape}")


def products_below_full_precision(jaxpr) -> list[str]:
    """The floating-point ``dot_general`` products of ``jaxpr`` (sub-programs included)
    that do not ask for ``HIGHEST`` precision, each described by its operand types."""
    found = []
    highest = jax.lax.Precision.HIGHEST
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            precision = eqn.params["precision"]
            operands = [v.aval for v in eqn.invars]
            floating = any(jnp.issubdtype(a.dtype, jnp.inexact) for a in operands)
            if floating and (precision is None or any(q != highest for q in precision)):
                found.append(" x ".join(a.str_short() for a in operands))
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found.extend(products_below_full_precision(inner))
    return found


def _action(space: spaces.Space, kind, key):
    """A float action of ``space``'s shape: random, extreme (+-1e9) or non-finite."""
    if isinstance(space, spaces.Dict):
        keys = jax.random.split(key, len(space.spaces))
        return {k: _action(s, kind, kk) for kk, (k, s) in zip(keys, space.spaces.items())}
    k_sample, k_sign, k_pick = jax.random.split(key, 3)
    dtype = space.dtype if jnp.issubdtype(space.dtype, jnp.floating) else jnp.float32
    random = space.sample(k_sample).astype(dtype)
    sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, space.shape), 1.0, -1.0)
    extreme = (sign * 1e9).astype(dtype)
    choices = jnp.array([jnp.nan, jnp.inf, -jnp.inf, 0.0], dtype)
    nonfinite = choices[jax.random.randint(k_pick, space.shape, 0, 4)]
    nonfinite = jnp.where(nonfinite == 0.0, random, nonfinite)
    return jnp.select([kind == 1, kind == 2], [extreme, nonfinite], random)


def _tree_where(done, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(done, x, y), a, b)


def _all_equal(a, b):
    """Leafwise equality: exact for integers and booleans, within float round-off otherwise.

    The two sides are the same computation traced twice in one program; XLA may fuse
    (and so round) the copies differently, so floats get a normwise relative tolerance of
    1e-5: ``max|x - y| <= 1e-5 (1 + max|y|)`` over each leaf. Normwise, not elementwise,
    because round-off scales with the largest numbers a result is computed from: one
    company's profit near zero is a difference of revenues and costs as large as its
    neighbours' profits (gencos5's profit leaf, at XLA's optimisation level 0, differed by
    2e-5 at 0.44 beside profits of 9,000).
    """

    def same(x, y):
        if jnp.issubdtype(x.dtype, jnp.inexact):
            return jnp.max(jnp.abs(x - y), initial=0.0) <= 1e-5 * (
                1.0 + jnp.max(jnp.abs(y), initial=0.0)
            )
        return jnp.all(x == y)

    leaves = [
        same(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _all_finite(*trees):
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree_util.tree_leaves(trees)
        if jnp.issubdtype(x.dtype, jnp.inexact)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _make_rollout(env: Environment, length: int, autoreset: bool = True):
    """``rollout(key, params, kind)``: ``length`` auto-reset steps with per-step contract
    flags; without ``autoreset``, no comparison of ``step`` with ``step_env`` and
    ``reset_env`` (a program half the size, for the float64 comparison)."""

    def rollout(key, params, kind):
        k_reset, k_run = jax.random.split(key)
        obs, state = env.reset(k_reset, params)
        obs_space = env.observation_space(params)
        act_space = env.action_space(params)

        def body(carry, key):
            obs, state, t = carry
            k_act, k_step = jax.random.split(key)
            action = _action(act_space, kind, k_act)
            obs_next, state_next, reward, terminated, truncated, info = env.step(
                k_step, state, action, params
            )
            done = terminated | truncated
            t = t + 1
            final_obs = info["final_observation"]
            flags = dict(
                truncation=(~truncated | (t == env.horizon)) & ((t != env.horizon) | done),
                finite=_all_finite(
                    obs_next,
                    state_next,
                    reward,
                    final_obs,
                    info["reward_vector"],
                    info["costs"],
                    env.world_state(state_next, params),
                ),
                in_space=obs_space.contains(obs_next) & obs_space.contains(final_obs),
            )
            if autoreset:
                k_s, k_r = jax.random.split(k_step)
                obs_s, state_s, reward_s, term_s, trunc_s, _ = env.step_env(
                    k_s, state, action, params
                )
                obs_r, state_r = env.reset_env(k_r, params)
                flags["autoreset"] = (
                    _all_equal(state_next, _tree_where(done, state_r, state_s))
                    & _all_equal(obs_next, _tree_where(done, obs_r, obs_s))
                    & _all_equal(final_obs, obs_s)
                    & _all_equal((reward, terminated, truncated), (reward_s, term_s, trunc_s))
                )
            out = dict(
                reward=reward,
                objectives=jnp.sum(info["reward_vector"], axis=0),
                costs=jnp.sum(info["costs"], axis=0),
                terminated=terminated,
                truncated=truncated,
                clipped=jnp.sum(info["action_clipped"]),
                nonfinite=jnp.sum(info["action_nonfinite"]),
                **flags,
            )
            return (obs_next, state_next, jnp.where(done, 0, t)), out

        reset_in_space = obs_space.contains(obs)
        carry = (obs, state, jnp.zeros((), jnp.int32))
        (obs, state, _), outs = jax.lax.scan(body, carry, jax.random.split(k_run, length))
        return dict(final_obs=obs, final_state=state, reset_in_space=reset_in_space, **outs)

    return rollout


def _first_bad(flags) -> int:
    return int(np.flatnonzero(~np.asarray(flags))[0])


def _check_run(env, params, out, kind, length, fail) -> None:
    if not out["reset_in_space"]:
        fail("the reset observation is outside the observation space")
    for flag, what in (
        ("finite", "NaN or inf in state, observation, world_state, reward or costs"),
        ("in_space", "an observation outside the observation space"),
        ("autoreset", "step differs from step_env + reset_env (auto-reset / final_observation)"),
        ("truncation", f"truncation not exactly at the horizon ({env.horizon} steps)"),
    ):
        if flag in out and not np.all(out[flag]):
            fail(f"{what} at step {_first_bad(out[flag])} with {kind} actions")
    if length > env.horizon and not np.any(out["terminated"] | out["truncated"]):
        fail(f"no episode ended within {length} steps (horizon {env.horizon})")
    if kind == "nonfinite" and not np.any(out["nonfinite"] > 0):
        fail("info['action_nonfinite'] never counted the NaN/inf actions")
    bounded = all(
        not isinstance(s, spaces.Box) or np.all(np.abs(np.asarray(s.high)) < 1e9)
        for s in _leaf_spaces(env.action_space(params))
    )
    if kind == "extreme" and bounded and not np.any(out["clipped"] > 0):
        fail("info['action_clipped'] never counted the out-of-range actions")


def _tree_equal(a, b, rtol: float = 0.0) -> bool:
    """Same structure, shapes and values: floats within ``rtol * (1 + |b|)`` (exactly,
    NaN equal to NaN, when ``rtol`` is 0), integers and booleans exactly."""
    return _tree_difference(a, b, rtol) is None


def _tree_difference(a, b, rtol: float = 0.0) -> str | None:
    """``None`` where :func:`_tree_equal`, else the first difference in words: the
    leaf's path and the first index where it differs, with both values."""
    if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
        return "the trees' structures differ"
    leaves = jax.tree_util.tree_leaves_with_path(a)
    for (path, x), y in zip(leaves, jax.tree_util.tree_leaves(b), strict=True):
        x, y, name = np.asarray(x), np.asarray(y), jax.tree_util.keystr(path)
        if x.shape != y.shape:
            return f"{name}: shape {x.shape} against {y.shape}"
        if rtol == 0.0 or not np.issubdtype(x.dtype, np.inexact):
            same = (x == y) | (
                np.isnan(x) & np.isnan(y) if np.issubdtype(x.dtype, np.inexact) else False
            )
        else:
            same = np.isclose(x, y, rtol=rtol, atol=rtol, equal_nan=True)
        if not np.all(same):
            at = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0]) if x.ndim else ()
            return f"{name}{list(at) if at else ''}: {x[at]} against {y[at]}"
    return None
