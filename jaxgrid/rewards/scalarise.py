"""Scalarisation of a reward vector ``(num_agents, n_objectives)`` into ``(num_agents,)``.

The method is a params leaf (an integer), so one ``vmap`` over ``Scalarisation`` values
compares weighted sums, the worst objective and products in a single compiled run.
Only *active* objectives take part (``objective_mask``): an objective switched off by a
schedule is left out, not counted as 0. With no active objective the reward is 0.

Methods, after the reward aggregators of EthicalSmartGrid:

- ``WEIGHTED_SUM``: ``sum_i w_i r_i`` over active objectives (one-hot ``w`` = a single objective);
- ``MIN``: ``min_i r_i`` over active objectives with ``w_i != 0``;
- ``PRODUCT``: ``prod_i r_i`` over active objectives with ``w_i != 0`` (meant for rewards in [0, 1]);
- ``SINGLE``: the first active objective with ``w_i != 0``, unweighted.

Costs stay out of the reward unless ``cost_weights`` is set: then the reward is the
scalarisation minus the cost penalty ``sum_c w_c cost_c`` (a fixed Lagrangian, the way
PowerZoo's penalty mode turns a constrained task into an unconstrained one; sweepable like
every params leaf).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.types import Array

WEIGHTED_SUM, MIN, PRODUCT, SINGLE = 0, 1, 2, 3
METHODS = {"weighted_sum": WEIGHTED_SUM, "min": MIN, "product": PRODUCT, "single": SINGLE}


@struct.dataclass
class Scalarisation:
    """How a reward vector becomes a scalar reward.

    Attributes:
        method: ``WEIGHTED_SUM``, ``MIN``, ``PRODUCT`` or ``SINGLE`` (int32 scalar).
        weights: ``(n_objectives,)`` weights of the weighted sum; for the other methods a
            non-zero weight selects the objective.
        cost_weights: ``(n_costs,)`` penalty per unit of each cost, or ``None`` (costs
            never enter the reward).
    """

    method: Array
    weights: Array
    cost_weights: Array | None = None

    @classmethod
    def create(
        cls, n_objectives: int, method: str = "weighted_sum", weights=None, cost_weights=None
    ):
        """A scalarisation by name; default weights are ``1 / n_objectives`` (the mean)."""
        if method not in METHODS:
            raise ValueError(
                f"unknown scalarisation method {method!r}; expected one of {list(METHODS)}"
            )
        if weights is None:
            weights = np.full(n_objectives, 1.0 / n_objectives)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (n_objectives,):
            raise ValueError(
                f"scalarisation weights must have shape ({n_objectives},), got {weights.shape}"
            )
        if not np.all(np.isfinite(weights)):
            raise ValueError(f"scalarisation weights must be finite, got {weights.tolist()}")
        if cost_weights is not None:
            cost_weights = np.asarray(cost_weights, dtype=np.float64)
            if cost_weights.ndim != 1 or not np.all(
                np.isfinite(cost_weights) & (cost_weights >= 0)
            ):
                raise ValueError(
                    f"cost weights must be a vector of finite numbers >= 0, got {cost_weights.tolist()}"
                )
        return cls(method=np.int32(METHODS[method]), weights=weights, cost_weights=cost_weights)


def scalarise(reward_vector: Array, objective_mask: Array, scalarisation: Scalarisation) -> Array:
    """Reward ``(num_agents,)`` from ``reward_vector`` and ``objective_mask`` ``(num_agents, n_obj)``.

    Every method is computed and one is selected: a few fused elementwise terms, cheaper
    on a CPU than a ``lax.switch`` whose branches cannot fuse with their neighbours.
    """
    w = jnp.asarray(scalarisation.weights, reward_vector.dtype)
    selected = objective_mask & (w != 0)
    any_selected = jnp.any(selected, axis=-1)
    weighted_sum = jnp.sum(jnp.where(objective_mask, w * reward_vector, 0.0), axis=-1)
    worst = jnp.min(jnp.where(selected, reward_vector, jnp.inf), axis=-1)
    product = jnp.prod(jnp.where(selected, reward_vector, 1.0), axis=-1)
    first = jnp.zeros_like(weighted_sum)
    for k in reversed(range(reward_vector.shape[-1])):  # the first selected objective wins
        first = jnp.where(selected[..., k], reward_vector[..., k], first)
    worst = jnp.where(any_selected, worst, 0.0)
    product = jnp.where(any_selected, product, 0.0)
    method = jnp.asarray(scalarisation.method)
    return jnp.select(
        [method == MIN, method == PRODUCT, method == SINGLE], [worst, product, first], weighted_sum
    )


def cost_penalty(costs: Array, scalarisation: Scalarisation) -> Array:
    """``(num_agents,)`` penalty ``costs @ cost_weights`` (``costs`` ``(num_agents, n_costs)``)."""
    w = jnp.asarray(scalarisation.cost_weights, costs.dtype)
    return jnp.sum(costs * w, axis=-1)
