"""Evaluate a policy on held-out days, beside the environment's baselines.

:func:`evaluate` runs one full episode in each of ``episodes`` environments (on the
held-out days of ``params.profiles`` when there are some) and reports, averaged over
episodes, the episode return (mean over agents), every objective summed over the
episode, every cost summed over the episode (a violation's magnitude), the share of
steps with any cost above 0 (``violation_rate``) and, per cost, the share of steps on which
it is above 0 for some agent (``cost_rates``: PowerZooJax's ``thermal_violation_rate`` is
``thermal_overload``'s), and the episode mean of every per-step
scalar in ``info`` (for instance ``controllable``, whose mean is the controllable ratio).
In feeder environments a step whose power flow failed ends the episode and adds to no
physical figure: ``power_flow_failed`` is the share of all evaluated steps that failed
(pooled over episodes: an episode that fails at once counts as one step), every other
scalar is the episode mean over the steps whose power flow was solved.

:func:`compare` evaluates the policy and every baseline of ``env.baselines(params)`` on
the same episodes (same keys, so the same days), adds the perfect-foresight optimum
where the environment has one (:meth:`~jaxgrid.env.Environment.oracle_return`), and
scores the policy between a reference (no control, else random: 0) and the best of the
oracle and the baselines (1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.env import Environment
from jaxgrid.rollout import OneOf, act, is_controller, start_memory

NOT_METRICS = {
    "final_observation",
    "action_clipped",
    "action_nonfinite",
    "abort_reason",
    "steps_lost",  # bookkeeping for cost budgets, 0 on every solved step
}
FAILED = "power_flow_failed"  # a metric over all steps; the others over the solved ones
REFERENCES = ("no_control", "idle", "truthful", "random")  # score 0: the first an env has


def held_out(params: Any) -> Any:
    """``params`` with episodes drawn from the held-out days, when its profiles have a
    train/test split (:class:`~jaxgrid.data.Profiles`); else ``params`` itself."""
    profiles = getattr(params, "profiles", None)
    if not hasattr(profiles, "for_testing"):
        return params
    return params.replace(profiles=profiles.for_testing())


def _episode_keys(key, episodes: int):
    """``(reset keys, run keys)`` of each episode: shared by every policy compared."""
    keys = jax.vmap(jax.random.split)(jax.random.split(key, episodes))
    return keys[:, 0], keys[:, 1]


def episode_totals(policy: Callable, env: Environment, params: Any, k_reset, k_run) -> dict:
    """Sums over one episode (traceable): return, objectives, costs, steps, info scalars."""
    obs, state = env.reset(k_reset, params)

    def body(carry, key):
        obs, state, alive, memory = carry
        k_act, k_step = jax.random.split(key)
        action, memory = act(policy, k_act, obs, state, memory)
        obs, state, reward, terminated, truncated, info = env.step_env(
            k_step, state, action, params
        )
        live = alive.astype(reward.dtype)
        failed = jnp.asarray(info.get("power_flow_failed", False), reward.dtype)
        active = jnp.where(info["objective_mask"], info["reward_vector"], 0.0)
        scalars = {
            k: jnp.asarray(v, reward.dtype) * (1.0 if k == FAILED else 1.0 - failed)
            for k, v in info.items()
            if k not in NOT_METRICS and jnp.ndim(v) == 0
        }
        out = {
            "return": jnp.mean(reward),
            "objectives": jnp.mean(active, axis=0),
            "costs": jnp.mean(info["costs"], axis=0),
            "violation_steps": jnp.any(info["costs"] > 0).astype(reward.dtype),
            "cost_steps": jnp.any(info["costs"] > 0, axis=0).astype(reward.dtype),
            "steps": jnp.ones_like(live),
            "solved_steps": 1.0 - failed,
            "metrics": scalars,
        }
        out = jax.tree_util.tree_map(lambda x: x * live, out)
        return (obs, state, alive & ~(terminated | truncated), memory), out

    run_keys = jax.random.split(k_run, env.horizon)
    carry = (obs, state, jnp.array(True), start_memory(policy, state))
    _, per_step = jax.lax.scan(body, carry, run_keys)
    return jax.tree_util.tree_map(lambda x: jnp.sum(x, axis=0), per_step)


def batch_totals(policy: Callable, env: Environment, params: Any, key, episodes: int) -> dict:
    """:func:`episode_totals` of ``episodes`` episodes, stacked (traceable)."""
    return jax.vmap(lambda a, b: episode_totals(policy, env, params, a, b))(
        *_episode_keys(key, episodes)
    )


def summarise(totals: dict, env: Environment) -> dict:
    """Means over episodes of stacked :func:`episode_totals` (on the host)."""
    totals = jax.device_get(totals)
    steps = np.maximum(totals["steps"], 1)
    solved = np.maximum(totals["solved_steps"], 1)
    mean = lambda x: np.mean(x, axis=0).tolist()  # noqa: E731  over episodes
    return {
        "episodes": int(np.size(totals["return"])),
        "return": float(np.mean(totals["return"])),
        "objectives": dict(zip(env.objective_names, mean(totals["objectives"]), strict=True)),
        "costs": dict(zip(env.cost_names, mean(totals["costs"]), strict=True)),
        # the share of all evaluated steps with some cost above 0 (pooled over episodes)
        "violation_rate": float(np.sum(totals["violation_steps"]) / np.sum(steps)),
        "cost_rates": dict(
            zip(env.cost_names, (np.sum(totals["cost_steps"], axis=0) / np.sum(steps)).tolist())
        ),
        "metrics": {
            k: float(np.sum(v) / np.sum(steps)) if k == FAILED else float(np.mean(v / solved))
            for k, v in totals["metrics"].items()
        },
    }


def evaluate(
    policy: Callable,
    env: Environment,
    params: Any,
    key,
    episodes: int = 32,
    test_days: bool = True,
) -> dict:
    """Mean results of ``policy(key, obs) -> action`` (or a
    :class:`~jaxgrid.rollout.Controller`) over ``episodes`` episodes."""
    params = held_out(params) if test_days else params
    run = jax.jit(lambda key: batch_totals(policy, env, params, key, episodes))
    return summarise(run(key), env)


def oracle(
    env: Environment,
    params: Any,
    key,
    episodes: int = 32,
    test_days: bool = True,
    progress: Callable[[int, int], None] | None = None,
):
    """Mean perfect-foresight return over the episodes :func:`evaluate` runs, or ``None``;
    each distinct initial state solved once (``tso118-v0``'s 32 held-out episodes start on
    25 days, each a MILP of one to several minutes), ``progress(solved, distinct)`` called
    after each."""
    params = held_out(params) if test_days else params
    starts = jax.device_get(
        jax.vmap(env.reset, (0, None))(_episode_keys(key, episodes)[0], params)[1]
    )
    states = [jax.tree_util.tree_map(lambda x, i=i: x[i], starts) for i in range(episodes)]
    same = [tuple(np.asarray(x).tobytes() for x in jax.tree_util.tree_leaves(s)) for s in states]
    first = {}  # episodes that start in the same state share their optimum
    for state, k in zip(states, same, strict=True):
        first.setdefault(k, state)
    best = {}
    for solved, (k, state) in enumerate(first.items(), 1):
        best[k] = env.oracle_return(params, state)
        if best[k] is None:
            return None
        if progress is not None:
            progress(solved, len(first))
    return float(np.mean([best[k] for k in same]))


def compare(policy: Callable, env: Environment, params: Any, key, episodes: int = 32) -> dict:
    """The policy, every baseline and the oracle on the same held-out episodes, with a score."""
    results = {"policy": evaluate(policy, env, params, key, episodes)}
    results.update(evaluate_baselines(env, params, key, episodes))
    report = score({"policy": results.pop("policy")}, results, oracle(env, params, key, episodes))
    report["score"] = report["scores"]["policy"]
    return report


def evaluate_baselines(
    env: Environment,
    params: Any,
    key,
    episodes: int = 32,
    test_days: bool = True,
    controllers: bool = True,
) -> dict:
    """:func:`evaluate` of every baseline of ``env``, by name: one compiled program for
    all of them, the baseline chosen by an argument (:class:`~jaxgrid.rollout.OneOf`).
    ``controllers=False`` leaves out the baselines that plan on the state (MPC), which
    on the larger feeders take far longer than the rest together."""
    baselines = env.baselines(params)
    if not controllers:
        baselines = {n: p for n, p in baselines.items() if not is_controller(p)}
    params = held_out(params) if test_days else params
    run = jax.jit(
        lambda key, index: batch_totals(
            OneOf(baselines.values(), index), env, params, key, episodes
        )
    )
    return {
        name: summarise(run(key, jnp.asarray(i, jnp.int32)), env)
        for i, name in enumerate(baselines)
    }


def score(policies: dict, baselines: dict, best_possible: float | None) -> dict:
    """Each policy's return between the reference baseline (0) and the best of the baselines
    and the oracle (1), beside all results; ``None`` where the reference is the best (an
    env whose only baseline is random)."""
    reference_name = next(n for n in REFERENCES if n in baselines)
    reference = baselines[reference_name]["return"]
    candidates = {n: r["return"] for n, r in baselines.items()}
    if best_possible is not None:
        candidates["oracle"] = best_possible
    best_name = max(candidates, key=candidates.get)
    span = candidates[best_name] - reference
    scores = {
        n: (r["return"] - reference) / span if span > 0 else None for n, r in policies.items()
    }
    return {
        "results": {**policies, **baselines},
        "oracle_return": best_possible,
        "scores": scores,
        "score_reference": reference_name,
        "score_best": best_name,
    }
