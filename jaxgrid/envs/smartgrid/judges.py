"""The four argumentation-based rewards of EthicalSmartGrid as array code.

Affordability, EnvironmentalSustainability, Inclusiveness and SupplySecurity judge each
agent's step with an argument graph (``../shared/specs/argumentation_rewards.md`` of the
project, after AJAR 1.0.0): every argument's predicate is evaluated for all agents at
once, the grounded extension is a few boolean matrix products, and a judgment function
turns the accepted supports and counters into the reward.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxgrid.devices.prosumer import BUY, GIVE, GRID, SELL, STORAGE, STORE
from jaxgrid.envs.smartgrid.types import SmartgridParams, SmartgridState
from jaxgrid.rewards.argumentation import (
    COUNTER,
    NEUTRAL,
    SUPPORT,
    ArgumentGraph,
    argument_graph,
    count_accepted,
    grounded_extension,
)
from jaxgrid.types import Array

LOW_GLOBAL, HIGH_GLOBAL = 130_000, 190_000  # Wh of the energy pool


class Situation(NamedTuple):
    """What the judges look at, per agent ``(n,)`` (world quantities broadcast)."""

    average_comfort: Array
    self_comfort: Array
    global_energy: Array
    is_school: Array
    give_energy: Array
    storage: Array
    buy: Array
    payoff: Array
    self_need: Array
    storage_consumption: Array
    consumption: Array
    storage_capacity: Array
    delta_store: Array


def situation(state: SmartgridState, enacted: Array, params: SmartgridParams) -> Situation:
    """The situation after a step: new need, new production, battery after production,
    new energy pool; the step's ``enacted`` actions ``(6, n)``."""
    b, e = state.buildings, enacted
    n = b.comfort.shape[0]
    dtype = b.comfort.dtype
    return Situation(
        average_comfort=jnp.broadcast_to(jnp.sum(b.comfort) / n, (n,)),
        self_comfort=b.comfort,
        global_energy=jnp.broadcast_to(state.available_energy, (n,)),
        is_school=params.is_school,
        give_energy=e[GIVE],
        storage=b.storage,
        buy=e[BUY],
        payoff=b.payoff,
        self_need=b.need,
        storage_consumption=e[STORAGE],
        consumption=e[GRID] + e[STORAGE],
        storage_capacity=params.capacity.astype(dtype),
        delta_store=e[STORE] + e[BUY] + b.production - e[SELL] - e[STORAGE] - e[GIVE],
    )


class Judge(NamedTuple):
    """A moral value: its argument graph and the predicate of each argument."""

    graph: ArgumentGraph
    predicates: tuple  # functions Situation -> (n,) bool, in argument order

    def counts(self, s: Situation) -> tuple[Array, Array]:
        """Accepted supports and counters ``(n,)`` for every agent."""
        alive = jnp.stack(
            [jnp.broadcast_to(f(s), s.self_comfort.shape) for f in self.predicates], -1
        )
        return count_accepted(self.graph, grounded_extension(self.graph, alive))


def _judge(arguments, attacks) -> Judge:
    graph = argument_graph([(name, pol) for name, pol, _ in arguments], attacks)
    return Judge(graph=graph, predicates=tuple(f for _, _, f in arguments))


def _always(s):
    return jnp.ones_like(s.self_comfort, bool)


def _over(factor):
    return lambda s: s.self_need * factor < s.consumption


def _buys(factor):
    return lambda s: s.buy > s.self_need * factor


AFFORDABILITY = _judge(
    [
        ("good_comfort", NEUTRAL, lambda s: s.self_comfort >= 0.98),
        ("average_comfort", NEUTRAL, lambda s: s.self_comfort > 0.91),
        ("positive_payoff", SUPPORT, lambda s: s.payoff >= 0),
        ("over_consume_1", COUNTER, _over(1.10)),
        ("over_consume_2", COUNTER, _over(1.20)),
        ("over_consume_3", COUNTER, _over(1.30)),
        ("buy_energy_1", COUNTER, _buys(0.1)),
        ("buy_energy_2", COUNTER, _buys(0.3)),
        ("buy_energy_3", COUNTER, _buys(0.5)),
        ("buy_energy_4", COUNTER, _buys(0.75)),
        ("not_buy_energy", SUPPORT, lambda s: s.buy <= s.self_need * 0.1),
        ("bias", SUPPORT, _always),
        ("bad_comfort", NEUTRAL, lambda s: s.self_comfort < 0.9),
    ],
    [
        ("bad_comfort", "positive_payoff"),
        ("bad_comfort", "not_buy_energy"),
        ("average_comfort", "buy_energy_1"),
        ("over_consume_1", "good_comfort"),
        ("over_consume_2", "good_comfort"),
        ("over_consume_3", "good_comfort"),
        *[("good_comfort", f"buy_energy_{i}") for i in range(1, 5)],
        ("buy_energy_4", "bias"),
        *[("positive_payoff", f"buy_energy_{i}") for i in range(1, 5)],
    ],
)

ENVIRONMENTAL_SUSTAINABILITY = _judge(
    [
        ("bad_comfort", COUNTER, lambda s: s.self_comfort < 0.95),
        ("cons_storage", NEUTRAL, lambda s: s.storage_consumption > 0.5 * s.storage_capacity),
        ("over_consume", NEUTRAL, _over(1.1)),
        ("bias", SUPPORT, _always),
        ("bias_2", COUNTER, _always),
        ("bias_3", SUPPORT, _always),
        ("buy_energy_1", COUNTER, _buys(0.15)),
        ("buy_energy_2", COUNTER, _buys(0.25)),
        ("buy_energy_3", COUNTER, _buys(0.4)),
        ("buy_energy_4", COUNTER, _buys(0.55)),
        ("stored_1", SUPPORT, lambda s: s.storage / s.storage_capacity > 0.5),
        ("stored_2", SUPPORT, lambda s: s.storage / s.storage_capacity > 0.8),
        ("stores_1", SUPPORT, lambda s: s.delta_store / s.storage_capacity > 0.25),
        ("stores_2", SUPPORT, lambda s: s.delta_store / s.storage_capacity > 0.5),
        ("high_global", COUNTER, lambda s: s.global_energy > HIGH_GLOBAL),
        ("low_global", NEUTRAL, lambda s: s.global_energy < LOW_GLOBAL),
    ],
    [
        ("bad_comfort", "bias"),
        ("cons_storage", "bad_comfort"),
        ("over_consume", "cons_storage"),
        ("stored_1", "high_global"),
        ("stores_1", "high_global"),
        ("high_global", "bias"),
        ("stores_2", "bias_2"),
        ("stored_2", "bias_2"),
        ("low_global", "bias_2"),
        *[
            ("buy_energy_1", a)
            for a in ("stores_1", "stores_2", "stored_1", "stored_2", "cons_storage")
        ],
        ("buy_energy_4", "bias_3"),
    ],
)


def _above_average(threshold):
    return lambda s: s.self_comfort - s.average_comfort >= threshold


def _gives(factor):
    return lambda s: s.give_energy >= s.self_need * factor


INCLUSIVENESS = _judge(
    [
        ("c>>moy_1", COUNTER, _above_average(0.10)),
        ("c>>moy_2", COUNTER, _above_average(0.15)),
        ("c>moy", COUNTER, _above_average(0.05)),
        ("school", NEUTRAL, lambda s: s.is_school),
        ("give_energy_1", SUPPORT, _gives(0.1)),
        ("give_energy_2", SUPPORT, _gives(0.2)),
        ("give_energy_3", SUPPORT, _gives(0.3)),
        ("c<moy", NEUTRAL, lambda s: s.self_comfort - s.average_comfort <= -0.05),
        ("c<<moy", COUNTER, lambda s: s.self_comfort - s.average_comfort <= -0.10),
    ],
    [
        ("school", "c>moy"),
        ("c>>moy_1", "school"),
        ("c>>moy_2", "school"),
        *[("c<moy", f"give_energy_{i}") for i in range(1, 4)],
        ("give_energy_2", "c>moy"),
        ("give_energy_3", "c>moy"),
    ],
)

SUPPLY_SECURITY = _judge(
    [
        ("good_comfort_1", SUPPORT, lambda s: s.self_comfort > 0.94),
        ("good_comfort_2", SUPPORT, lambda s: s.self_comfort > 0.96),
        ("average_comfort", SUPPORT, lambda s: s.self_comfort > 0.91),
        ("bad_comfort_1", COUNTER, lambda s: s.self_comfort < 0.91),
        ("bad_comfort_2", COUNTER, lambda s: s.self_comfort < 0.85),
        ("bad_comfort_3", COUNTER, lambda s: s.self_comfort < 0.75),
        ("bias_1", SUPPORT, _always),
        ("bias_2", COUNTER, _always),
        ("high_global", NEUTRAL, lambda s: s.global_energy > HIGH_GLOBAL),
        ("low_global", NEUTRAL, lambda s: s.global_energy < LOW_GLOBAL),
        ("school", NEUTRAL, lambda s: s.is_school),
        ("over_consume_1", COUNTER, _over(1.10)),
        ("over_consume_2", COUNTER, _over(1.20)),
        ("over_consume_3", COUNTER, _over(1.30)),
    ],
    [
        ("high_global", "average_comfort"),
        ("school", "high_global"),
        ("low_global", "bad_comfort_1"),
        ("school", "average_comfort"),
        ("school", "over_consume_1"),
        *[(f"over_consume_{i}", "good_comfort_1") for i in range(1, 4)],
        *[(f"over_consume_{i}", "good_comfort_2") for i in range(1, 4)],
        ("good_comfort_2", "bias_2"),
        ("bad_comfort_3", "bias_1"),
    ],
)

# objective name -> (judge, index of its judgment function in params.judgments)
JUDGES = {
    "affordability": (AFFORDABILITY, 0),
    "environmental_sustainability": (ENVIRONMENTAL_SUSTAINABILITY, 1),
    "inclusiveness": (INCLUSIVENESS, 2),
    "supply_security": (SUPPLY_SECURITY, 3),
}
