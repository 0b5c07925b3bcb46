"""Lagrange multipliers of cost budgets, for constrained PPO/IPPO (PPO-Lagrangian).

The constrained problem: maximise the return subject to ``J_c <= budget`` for each
budgeted cost ``c`` (``J_c``: the cost summed over an episode, the mean over agents). Its
Lagrangian relaxation trains the policy on the advantage
``(A_r - sum_c lambda_c A_c) / (1 + sum_c lambda_c)`` (both advantages standardised over
the rollout, so a multiplier weighs a cost against the reward whatever their scales; the
cost advantages come from a critic per budgeted cost) and moves each
multiplier
``lambda_c >= 0`` against the constraint's violation ``J_c - budget`` once per update:

- **dual ascent** (Ray et al. 2019, "Benchmarking Safe Exploration in Deep RL")::

      lambda <- max(0, lambda + lr * (J_c - budget))

- **PID** (Stooke et al. 2020, "Responsive Safety in RL by PID Lagrangian Methods"), which
  damps the oscillation of dual ascent with a proportional and a derivative term::

      integral <- max(0, integral + (J_c - budget))
      lambda   <- max(0, kp * (J_c - budget) + ki * integral + kd * max(0, J_c - J_c_before))

  (dual ascent is the integral term alone, ``ki = lr``, ``kp = kd = 0``).

A budget no policy can meet (a zero budget on a cost that some steps cannot avoid) makes
the multiplier grow without end, and the reward's share of the advantage,
``1 / (1 + sum lambda)``, vanish: the policy then minimises the cost at any price in
reward. ``lagrange_max`` caps each multiplier (and the PID's integral at ``lagrange_max
/ ki``, so that it unwinds at once when the cost falls below the budget), which keeps the
reward in play at a known exchange rate.

``J_c`` is estimated from each update's rollout: the mean over the episodes that ended in
it, or, where none ended (long episodes), its mean cost per step times the horizon, so
that every update prices the constraint.

**Failed physics.** A step whose physics failed ends its episode, and with it every cost
the episode would have incurred (``info["steps_lost"]`` counts the steps cut off). Left
at that, a large multiplier makes a collapse the cheapest way to meet a budget: on
``voltage33-v0`` with a zero voltage-band budget, IPPO-Lagrangian learned to collapse the
feeder at the first step of every episode. So each budgeted cost charges a failed step
``steps_lost x ceiling_c``, with ``ceiling_c`` the largest per-step value of the cost
seen on any solved step since training began (:func:`charge_lost_steps`): a collapse
then costs at least what continuing would, as the reward's failure penalty makes it
lose at least what continuing would. That charge enters ``J_c``. The cost critics learn
from a larger one, ``ceiling / (1 - gamma)``, the discounted cost of going on at the
ceiling for ever: their values bootstrap past the horizon (an episode is a window of a
process that goes on; :mod:`jaxgrid.train.gae`), so finishing an episode costs its steps
left *and* the value beyond its end, which a failure forfeits. Charged only the steps
left, a failure in the last steps looked cheaper than finishing: on ``toy_envs.Cliff``,
with cost critics that learn accurate values (scaled, :mod:`jaxgrid.train.ppo`), 30 % of
last steps stepped off the cliff. (Bootstrapping the failed step's cost from the cost
critic instead was tried and did not stop the dodge: the critic never sees a state
beyond a failure.)

The multipliers, the PID memory and the ceilings are part of the learner's state
(:class:`LagrangeState`), so checkpoints keep them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from flax import struct

from jaxgrid.types import Array


@struct.dataclass
class LagrangeState:
    """Attributes:
    multiplier: ``(n_budgeted,)`` lambda of each budgeted cost, >= 0.
    integral: ``(n_budgeted,)`` the PID's accumulated violation (dual ascent: unused).
    last_cost: ``(n_budgeted,)`` the previous update's episode-cost estimate.
    cost_ceiling: ``(n_budgeted,)`` the largest per-step cost of a solved step so far,
        the rate a failed step is charged for each step it cuts off.
    """

    multiplier: Array
    integral: Array
    last_cost: Array
    cost_ceiling: Array

    @classmethod
    def create(cls, n_budgeted: int, initial: float, dtype) -> LagrangeState:
        zeros = jnp.zeros(n_budgeted, dtype)
        return cls(multiplier=zeros + initial, integral=zeros, last_cost=zeros, cost_ceiling=zeros)


def validate_budgets(config) -> None:
    """Raise ``ValueError`` naming what is wrong with PPO's or SAC's ``config``:
    ``cost_budgets`` (``((cost name, budget >= 0), ...)``, each name once), ``lagrange_lr``
    (> 0), ``lagrange_init`` (>= 0), ``pid_gains`` (None or three gains >= 0) or
    ``lagrange_max`` (None or >= ``lagrange_init`` and > 0)."""
    cost_budgets, lagrange_lr = config.cost_budgets, config.lagrange_lr
    lagrange_init, pid_gains, lagrange_max = (
        config.lagrange_init,
        config.pid_gains,
        config.lagrange_max,
    )
    names = [name for name, _ in cost_budgets]
    if len(set(names)) != len(names):
        raise ValueError(f"cost_budgets names a cost twice: {names}")
    for name, budget in cost_budgets:
        if not budget >= 0:
            raise ValueError(f"cost budget {name} must be >= 0, got {budget}")
    if not lagrange_lr > 0 or not lagrange_init >= 0:
        raise ValueError(
            f"need lagrange_lr > 0 and lagrange_init >= 0, got {lagrange_lr}, {lagrange_init}"
        )
    if pid_gains is not None and (len(pid_gains) != 3 or min(pid_gains) < 0):
        raise ValueError(f"pid_gains must be three gains >= 0 (kp, ki, kd), got {pid_gains}")
    if lagrange_max is not None and not (lagrange_max > 0 and lagrange_max >= lagrange_init):
        raise ValueError(
            f"lagrange_max must be > 0 and >= lagrange_init ({lagrange_init}), got {lagrange_max}"
        )


def update_multipliers(
    state: LagrangeState,
    episode_cost: Array,
    budget: Array,
    lr: float,
    pid: tuple[float, float, float] | None,
    cap: float | None = None,
) -> LagrangeState:
    """One update of the multipliers for the estimated episode costs ``episode_cost``
    ``(n_budgeted,)`` against ``budget`` ``(n_budgeted,)``: dual ascent with step ``lr``,
    or PID with gains ``pid = (kp, ki, kd)``, each multiplier at most ``cap`` (None: no
    cap) (see the module docstring)."""
    upper = jnp.inf if cap is None else cap
    violation = episode_cost - budget
    if pid is None:
        multiplier = jnp.clip(state.multiplier + lr * violation, 0.0, upper)
        return state.replace(multiplier=multiplier, last_cost=episode_cost)
    kp, ki, kd = pid
    integral_cap = jnp.inf if cap is None or ki == 0 else cap / ki
    integral = jnp.clip(state.integral + violation, 0.0, integral_cap)
    rising = jnp.maximum(episode_cost - state.last_cost, 0.0)
    multiplier = jnp.clip(kp * violation + ki * integral + kd * rising, 0.0, upper)
    return state.replace(multiplier=multiplier, integral=integral, last_cost=episode_cost)


class Charged(NamedTuple):
    """Budgeted costs ``(..., n_budgeted)`` with a failed step's charge (module docstring)."""

    episode: Array  # costs + steps_lost * ceiling: the episode's cost to its horizon
    value: Array  # a failed step costs ceiling / (1 - gamma): what the critics learn from


def charge_lost_steps(
    state: LagrangeState, costs: Array, steps_lost: Array, gamma: float
) -> tuple[LagrangeState, Charged]:
    """Costs with the steps a failure cut off charged (see the module docstring).

    Args:
        state: its ``cost_ceiling`` is raised to the largest cost of the solved steps here.
        costs: ``(..., n_budgeted)`` budgeted costs of each step.
        steps_lost: ``(...)`` int, ``info["steps_lost"]`` (0 on steps that did not fail).
        gamma: the critics' discount.

    Returns:
        The new state and the charged costs, for the episode costs and for the critics.
    """
    solved = (steps_lost == 0)[..., None]
    seen = jnp.max(jnp.where(solved, costs, 0.0).reshape(-1, costs.shape[-1]), axis=0)
    ceiling = jnp.maximum(state.cost_ceiling, seen.astype(state.cost_ceiling.dtype))
    rate = ceiling.astype(costs.dtype)
    episode = costs + steps_lost[..., None].astype(costs.dtype) * rate
    value = jnp.where(solved, costs, rate / (1.0 - gamma))
    return state.replace(cost_ceiling=ceiling), Charged(episode, value)


def dual_step(
    state: LagrangeState,
    ended: dict,
    costs: Array,
    budget_index,
    horizon: int,
    config,
    charged: Array | None = None,
) -> tuple[LagrangeState, Array]:
    """One update's multiplier step of PPO's or SAC's ``config`` (its ``cost_budgets``,
    ``lagrange_lr``, ``pid_gains``, ``lagrange_max``): the episode cost of each budgeted
    cost estimated from ``ended`` (the episode sums of the update, ``episodes`` and ``episode_costs``
    ``(n_costs,)``), else, where no episode ended, the mean of ``costs`` ``(..., n_budgeted)``
    per step times ``horizon``; returns the new state and that ``(n_budgeted,)``
    estimate. With ``charged`` (:func:`charge_lost_steps`' ``Charged.episode``), the
    charges count in the ended episodes' costs (mean over agents) and the per-step
    fallback uses the charged costs."""
    if charged is not None:
        charges = jnp.sum(jnp.mean(charged - costs, axis=-2), axis=tuple(range(costs.ndim - 2)))
        total = ended["episode_costs"].at[budget_index].add(charges.astype(costs.dtype))
        ended, costs = dict(ended, episode_costs=total), charged

    episode_cost = jnp.where(
        ended["episodes"] > 0,
        ended["episode_costs"][budget_index] / jnp.maximum(ended["episodes"], 1),
        jnp.mean(costs.reshape(-1, costs.shape[-1]), axis=0) * horizon,
    ).astype(costs.dtype)
    budget = jnp.asarray([b for _, b in config.cost_budgets], episode_cost.dtype)
    state = update_multipliers(
        state, episode_cost, budget, config.lagrange_lr, config.pid_gains, config.lagrange_max
    )
    return state, episode_cost


def budget_metrics(state: LagrangeState, episode_cost: Array, budget_index, n_costs: int):
    """``{"lagrange", "cost_estimate"}``, ``(n_costs,)`` each, for the training log: the
    multipliers and the estimated episode costs by cost name (0 for costs without a
    budget)."""
    by_cost = jnp.zeros(n_costs, episode_cost.dtype)
    return {
        "lagrange": by_cost.at[budget_index].set(state.multiplier),
        "cost_estimate": by_cost.at[budget_index].set(episode_cost),
    }


def combine_advantages(reward_advantage: Array, cost_advantages: Array, multiplier: Array):
    """``(A_r - sum_c lambda_c A_c) / (1 + sum_c lambda_c)``: ``reward_advantage`` ``(...)``,
    ``cost_advantages`` ``(..., n_budgeted)``, ``multiplier`` ``(n_budgeted,)``."""
    penalty = jnp.sum(cost_advantages * multiplier, axis=-1)
    return (reward_advantage - penalty) / (1.0 + jnp.sum(multiplier))
