"""The numeric reward functions of EthicalSmartGrid as objectives, ``(n,)`` per step.

*Differentiated* rewards compare the world with a hypothetical one where the judged agent
did not act (difference rewards); *per-agent* rewards look at the agent alone. All are
computed from the state after the step (enacted actions, new comforts, new pool), at the
step count after the step, as in EthicalSmartGrid.

=========================== ============================================================
objective                   value for agent ``j``
=========================== ============================================================
equity                      ``(1 - H(all comforts)) - (1 - H(comforts without j))``
over_consumption            ``1 - O / T - (O - taken_j) / T`` with ``O`` the energy taken
                            beyond the pool and the gifts, ``T`` all energy taken
comfort                     ``comfort_j``
multi_objective_sum         ``w_c * comfort + w_o * over_consumption``
multi_objective_product     ``comfort * (over_consumption + 1) / 2``
adaptability_one            equity before the first switch (3000), then multi_objective_sum
adaptability_two            equity before 2000, then (equity + over_consumption) / 2
adaptability_three          equity before 2000, (equity + over_consumption) / 2 before
                            6000, then (equity + over_consumption + comfort) / 3
equity_per_agent            ``1 - H(all comforts)``
over_consumption_per_agent  ``1 - taken_j / T``
multi_objective_sum_per_agent, adaptability_*_per_agent: the same with per-agent terms
=========================== ============================================================
"""

from __future__ import annotations

import functools

import jax.numpy as jnp

from jaxgrid.devices.prosumer import GIVE, GRID, STORE
from jaxgrid.envs.smartgrid.types import SmartgridParams, SmartgridState
from jaxgrid.numerics import div_tiny, interp_unit
from jaxgrid.rewards.equity import hoover, hoover_without_each
from jaxgrid.types import Array


class Judged:
    """What the reward functions look at after a step (the post-step ``state`` and the
    step's ``enacted`` actions ``(6, n)``); each quantity computed once."""

    def __init__(self, state: SmartgridState, enacted: Array, params: SmartgridParams):
        self.state = state
        self.params = params
        self.t = state.time
        self.comfort = state.buildings.comfort
        e = enacted
        self.taken = e[GRID] + e[STORE]
        self.sum_taken = jnp.sum(self.taken)
        self.sum_given = jnp.sum(e[GIVE])

    @functools.cached_property
    def equity(self):
        actual = 1.0 - hoover(self.comfort)
        hypothetical = 1.0 - hoover_without_each(self.comfort)
        return actual - hypothetical

    @functools.cached_property
    def equity_per_agent(self):
        return jnp.broadcast_to(1.0 - hoover(self.comfort), self.comfort.shape)

    @functools.cached_property
    def over_consumption(self):
        over = jnp.maximum(0.0, self.sum_taken - self.sum_given - self.state.available_energy)
        global_reward = 1.0 - div_tiny(over, self.sum_taken)
        local_reward = div_tiny(over - self.taken, self.sum_taken)
        return global_reward - local_reward

    @functools.cached_property
    def over_consumption_per_agent(self):
        return 1.0 - div_tiny(self.taken, self.sum_taken)

    def weighted(self, over):
        """The multi-objective sum: ``w_comfort * comfort + w_over * over``."""
        w = self.params.mos_coefficients.astype(self.comfort.dtype)
        return w[0] * self.comfort + w[1] * over

    def adaptability(self, kind: str, equity, over):
        """AdaptabilityOne, Two or Three (``kind``): which terms count changes at the
        switch steps (``params.adaptability_steps``)."""
        steps = self.params.adaptability_steps
        if kind == "one":
            return jnp.where(self.t < steps[0], equity, self.weighted(over))
        if kind == "two":
            return jnp.where(self.t < steps[1], equity, (equity + over) / 2)
        three = jnp.where(
            self.t < steps[3], (equity + over) / 2, (equity + over + self.comfort) / 3
        )
        return jnp.where(self.t < steps[2], equity, three)


NUMERIC_OBJECTIVES = {
    "equity": lambda j: j.equity,
    "over_consumption": lambda j: j.over_consumption,
    "comfort": lambda j: j.comfort,
    "multi_objective_sum": lambda j: j.weighted(j.over_consumption),
    "multi_objective_product": lambda j: j.comfort * interp_unit(j.over_consumption, -1.0, 1.0),
    "adaptability_one": lambda j: j.adaptability("one", j.equity, j.over_consumption),
    "adaptability_two": lambda j: j.adaptability("two", j.equity, j.over_consumption),
    "adaptability_three": lambda j: j.adaptability("three", j.equity, j.over_consumption),
    "equity_per_agent": lambda j: j.equity_per_agent,
    "over_consumption_per_agent": lambda j: j.over_consumption_per_agent,
    "multi_objective_sum_per_agent": lambda j: j.weighted(j.over_consumption_per_agent),
    "adaptability_one_per_agent": lambda j: j.adaptability(
        "one", j.equity_per_agent, j.over_consumption_per_agent
    ),
    "adaptability_two_per_agent": lambda j: j.adaptability(
        "two", j.equity_per_agent, j.over_consumption_per_agent
    ),
    "adaptability_three_per_agent": lambda j: j.adaptability(
        "three", j.equity_per_agent, j.over_consumption_per_agent
    ),
}
