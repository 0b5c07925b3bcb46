"""Generation companies bidding markups into a nodal electricity market.

After PowerZooJax's GenCos task (case5, one bidder per generator, 48 half-hour market
clearings a day), so the two can be compared.

**Agents.** One generation company per generator of the network (``gen_0`` ...
``gen_4`` on case5), all of type ``genco``.

**State.** Step within the day, the day's first profile row, and the outcome of the
last clearing: the LMP of every bus, each generator's dispatch, markup and profit
(zeros before the first clearing of the day).

**Action.** ``(n, 1)`` in [0, 1]: the share of the markup range
``[markup_min, markup_max]`` each company bids, ``markup = markup_min + a (markup_max -
markup_min)``; with the default range [0, 2], 0 bids the true cost curve and 1 three
times it.

**Transition.** The bus loads of the step are the network's loads scaled by the day's
profile (:meth:`GenCos.demand_mw`); each company offers its true cost curve times
``1 + markup``; the market is cleared by the DC-OPF of the offers (least offered cost
within generator limits and branch ratings, load shed at ``voll`` where it cannot be
served) and each company is paid the LMP of its bus for its dispatch
(:mod:`jaxgrid.envs.gencos.market`).

**Observation.** ``(n, 11)`` per company: time of day of the step about to clear (sine,
cosine), the demand of that step and of the next (perfect forecast, share of the
scenario's base load), last clearing's mean LMP and own-bus LMP (hundreds of
currency/MWh), own last dispatch (share of capacity), markup and profit (thousands of
currency), own marginal cost at zero output (hundreds of currency/MWh) and capacity
(share of the fleet's).

**Objective.** ``profit``: the company's revenue less its true cost over the step,
``(lmp_bus * pg - cost(pg)) * dt`` (currency). Default reward: the profit.

**Costs.** ``load_shed``: load the market could not serve, MWh (shared);
``power_flow``: 1 on a step whose clearing did not converge.

**Episode.** ``horizon`` steps (a day) from midnight of a day drawn from
``profiles.days``; truncated at the horizon (the market goes on the next day). A clearing
that does not converge terminates the episode with the reward ``-power_flow_penalty`` for
that step and each step it cuts off, and ``info["power_flow_failed"]``; the state keeps
the last cleared outcome.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, sample_start
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.gencos.baselines import constant_share
from jaxgrid.envs.gencos.market import clear_market
from jaxgrid.envs.gencos.metrics import deviation_gains, market_outcome
from jaxgrid.grid import network_from_matpower
from jaxgrid.grid.network import Network
from jaxgrid.numerics import one_hot_take
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array, float_dtype

PRICE_SCALE = 100.0  # observed prices and marginal costs are divided by this
PROFIT_SCALE = 1000.0  # observed profits are divided by this
CLEARING_ITERATIONS = 25  # interior point budget: 9-19 reached the tolerance on case5


@struct.dataclass
class GenCosState:
    time: Array  # () int32 steps since the episode started
    start: Array  # () int32 profile row of the first step
    lmp: Array  # (n_bus,) last clearing's LMPs, currency/MWh
    pg_mw: Array  # (n_gen,) last dispatch, MW
    markup: Array  # (n_gen,) last markups
    profit: Array  # (n_gen,) last step's profits, currency


@struct.dataclass
class GenCosParams:
    """Attributes:
    profiles: the load profiles (``profiles.load``) and the episode days.
    pd_mw: ``(n_bus,)`` base load of each bus, MW.
    load_profile: ``(n_bus,)`` int32 profile column each bus's load follows.
    base_share: ``()`` share of each bus's base load that is flat; the rest follows the
        profile: ``pd * (base_share + (1 - base_share) * profile)``.
    cost_poly: ``(n_gen, 3)`` true cost curves ``(c2, c1, c0)``, currency/MW²h,
        currency/MWh, currency/h.
    pmax_mw: ``(n_gen,)`` generator capacities, MW.
    rate_mva: ``(n_branch,)`` branch ratings, MVA (``inf``: none).
    markup_min, markup_max: ``(n_gen,)`` the range of markups each company may bid
        (0: truthful; 1: twice the true marginal cost).
    voll: ``()`` value of lost load: the price of load shed, currency/MWh.
    dt_h: ``()`` step length, hours.
    power_flow_penalty: ``()`` reward lost per company for a failed clearing and each
        step the episode loses, currency.
    scalarisation: how the objective becomes the reward.
    """

    profiles: Profiles
    pd_mw: Array
    load_profile: Array
    base_share: Array
    cost_poly: Array
    pmax_mw: Array
    rate_mva: Array
    markup_min: Array
    markup_max: Array
    voll: Array
    dt_h: Array
    power_flow_penalty: Array
    scalarisation: Scalarisation


class GenCos(Environment):
    """Generation companies bidding markups into a nodal market (see the module docstring)."""

    objective_names = ("profit",)
    cost_names = ("load_shed", "power_flow")
    action_names = ("markup_share",)
    # the clearing's interior point stops within its tolerance, and a unit at zero output
    # sits within ~1e-5 MW of it: over 64 x 1000 float64 steps, batched and single runs
    # differed by up to 7e-8 of a profit, and by 2.3e-4 currency in a profit near zero
    solver_rtol = 1e-3

    def __init__(self, default_params: GenCosParams, case: str, horizon: int, name: str):
        self.case = case
        n_gen = int(default_params.pmax_mw.shape[0])
        self.agents = tuple(f"gen_{g}" for g in range(n_gen))
        self.agent_types = ("genco",) * n_gen
        self.horizon = int(horizon)
        self._default_params = default_params
        self._name = name

    def network(self, params: GenCosParams) -> Network:
        """The network in the current precision (one object per precision, see
        :class:`~jaxgrid.grid.Network`) with the capacities of ``params``."""
        return network_from_matpower(self.case).replace(pmax_mw=params.pmax_mw)

    def action_space(self, params):
        return spaces.Box(0.0, 1.0, (self.num_agents, 1))

    def observation_names(self, params) -> tuple[str, ...]:
        return (
            "sin_time",
            "cos_time",
            "demand",
            "demand[+1]",
            "lmp_mean",
            "lmp_own",
            "pg_share",
            "markup",
            "profit",
            "marginal_cost",
            "capacity_share",
        )

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (self.num_agents, 11))

    def baselines(self, params: GenCosParams) -> dict:
        """Random, truthful (markup 0), uniform mid markup and maximum markup (the fixed
        bidding strategies of PowerZooJax's GenCos task)."""
        lo, hi = np.asarray(params.markup_min), np.asarray(params.markup_max)
        truthful = np.clip(-lo / np.maximum(hi - lo, 1e-12), 0.0, 1.0)
        return {
            **super().baselines(params),
            "truthful": constant_share(truthful),
            "uniform_mid": constant_share(np.full(self.num_agents, 0.5)),
            "max_markup": constant_share(np.ones(self.num_agents)),
        }

    def policy_metrics(self, policy, params: GenCosParams, key, episodes: int) -> dict:
        """The ε-Nash check of ``policy`` (:func:`~jaxgrid.envs.gencos.metrics.deviation_gains`)
        and its market against truthful bidding's on the same held-out days: generation
        cost and consumer payment as ratios to truthful's."""
        check = deviation_gains(self, params, policy, key, episodes)
        ours = market_outcome(self, params, policy, key, episodes)
        truthful = market_outcome(self, params, self.baselines(params)["truthful"], key, episodes)
        return {
            "epsilon": check.epsilon,
            "deviation_gain": check.gain.tolist(),
            "best_deviation_share": check.best_share.tolist(),
            "generation_cost_vs_truthful": float(
                ours["generation_cost"] / truthful["generation_cost"]
            ),
            "consumer_payment_vs_truthful": float(
                ours["consumer_payment"] / truthful["consumer_payment"]
            ),
        }

    def markup(self, action: Array, params: GenCosParams) -> Array:
        """``(n,)`` markups bid by the action ``(n, 1)`` (shares of the markup range)."""
        return params.markup_min + action[:, 0] * (params.markup_max - params.markup_min)

    def demand_mw(self, row, params: GenCosParams) -> Array:
        """``(n_bus,)`` bus loads of profile row ``row`` (wrapping around the year), MW."""
        load = params.profiles.load
        profile = one_hot_take(load[row % load.shape[0]], params.load_profile)
        share = params.base_share + (1.0 - params.base_share) * profile
        return (params.pd_mw * share).astype(float_dtype())

    def reset_env(self, key, params: GenCosParams):
        dtype = float_dtype()
        n_bus, n_gen = params.pd_mw.shape[0], self.num_agents
        state = GenCosState(
            time=jnp.zeros((), jnp.int32),
            start=sample_start(key, params.profiles.days, self.horizon),
            lmp=jnp.zeros(n_bus, dtype),
            pg_mw=jnp.zeros(n_gen, dtype),
            markup=jnp.zeros(n_gen, dtype),
            profit=jnp.zeros(n_gen, dtype),
        )
        return self.observe(state, params), state

    def transition(self, key, state: GenCosState, action, params: GenCosParams) -> Transition:
        dtype = float_dtype()
        demand = self.demand_mw(state.start + state.time, params)
        markup = self.markup(action, params).astype(dtype)
        cleared = clear_market(
            self.network(params),
            demand,
            params.cost_poly.astype(dtype),
            markup,
            params.rate_mva.astype(dtype),
            params.voll.astype(dtype),
            CLEARING_ITERATIONS,
        )
        dispatch = cleared.dispatch
        failed = ~dispatch.converged
        profit = cleared.profit * params.dt_h
        hold = lambda new, old: jnp.where(failed, old, new.astype(old.dtype))  # noqa: E731
        new_state = state.replace(
            time=state.time + 1,
            lmp=hold(dispatch.lmp, state.lmp),
            pg_mw=hold(dispatch.pg_mw, state.pg_mw),
            markup=hold(markup, state.markup),
            profit=hold(profit, state.profit),
        )
        # an interior point leaves every shed variable slightly above 0: count shed load
        # only where the clearing reports some (above 1e-3 MW)
        shed_mwh = jnp.where(dispatch.infeasible, jnp.sum(dispatch.shed_mw), 0.0) * params.dt_h
        n = self.num_agents
        costs = jnp.stack([shed_mwh, jnp.zeros((), dtype)])
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=profit[:, None].astype(dtype),
            costs=jnp.broadcast_to(costs, (n, 2)).astype(dtype),
            terminated=jnp.zeros((), bool),
            truncated=new_state.time >= self.horizon,
            info={
                "lmp": dispatch.lmp,
                "pg_mw": dispatch.pg_mw,
                "markup": markup,
                "demand_mw": jnp.sum(demand),
                "mean_lmp": jnp.mean(dispatch.lmp),
                "generation_cost": jnp.sum(cleared.true_cost) * params.dt_h,
                "consumer_payment": jnp.sum(dispatch.lmp * demand) * params.dt_h,
                "congested_lines": jnp.sum(dispatch.line_at_limit).astype(dtype),
            },
            failed=failed,
        )

    def observe(self, state: GenCosState, params: GenCosParams):
        dtype = float_dtype()
        n = self.num_agents
        row = state.start + state.time
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        base = jnp.sum(params.pd_mw)
        rows = row + jnp.arange(2)  # the step about to clear and the next
        demand = jax.vmap(lambda r: jnp.sum(self.demand_mw(r, params)))(rows) / base
        shared = jnp.concatenate(
            [
                jnp.stack([jnp.sin(phase), jnp.cos(phase)]).astype(dtype),
                demand,
                jnp.mean(state.lmp)[None] / PRICE_SCALE,
            ]
        )
        gen_bus = self.network(params).gen_bus
        pmax = params.pmax_mw.astype(dtype)
        own = jnp.stack(
            [
                state.lmp[gen_bus] / PRICE_SCALE,
                state.pg_mw / jnp.maximum(pmax, 1e-9),
                state.markup,
                state.profit / PROFIT_SCALE,
                params.cost_poly[:, 1].astype(dtype) / PRICE_SCALE,
                pmax / jnp.maximum(jnp.sum(pmax), 1e-9),
            ],
            axis=1,
        )
        return jnp.concatenate([jnp.broadcast_to(shared, (n, 5)), own], axis=1)

    def world_state(self, state: GenCosState, params: GenCosParams):
        """The shared features once, then every company's own features."""
        obs = self.observe(state, params)
        return jnp.concatenate([obs[0, :5], obs[:, 5:].reshape(-1)])
