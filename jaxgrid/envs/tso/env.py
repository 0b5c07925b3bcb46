"""Unit commitment by a transmission operator: commit and dispatch a fleet over a day.

**Agent.** One transmission system operator (``operator``).

**State.** Step within the day, the day's first profile row, each unit's status, steps
since its last switch and output, and the last step's energy price.

**Action.** A dict: ``"commit"`` ``(1, n_gen)`` int32 in {0, 1}, the requested status of
each unit, and ``"dispatch"`` ``(1, n_gen)`` in [-1, 1], a dispatch adjustment: it shifts
each unit's marginal cost by ``dispatch * bias_max`` (currency/MWh) in the DC-OPF, so
the operator can hold a unit down or push it up (e.g. to prepare a ramp); 0 is plain
economic dispatch. The rules of :mod:`.commitment` (minimum up/down times, shut-down
ramp) refuse what a unit cannot do, and each unit's output stays in its ramp window.

**Transition.** The committed units are dispatched by the DC-OPF
(:func:`jaxgrid.dispatch.dcopf_with_fallback`: exact on a copper plate where no
monitored line binds, by the binding lines' prices where a few do (``binding_lines``;
off for case14, whose interior point is cheap), the interior point for the rest) for the
step's net load (:mod:`.net_load`) within their
ramp windows, the branch ratings and a reserve requirement of ``reserve_margin`` times
the net load (headroom within the ramp window); load that cannot be served is shed at
the value of lost load, output that cannot be absorbed is spilled, reserve not held is
short, each at its price (``params.dispatch``). A dispatch that does not converge ends
the episode (the contract's failed physics, cost ``power_flow``).

**Observation.** ``(1, 3 n_gen + 6 + H)``: per unit its status, output as a share of
its rating and the hours until it may switch (minimum up/down time); then the step's
net load, demand and must-take renewables (GW), the last energy price (hundreds of
currency/MWh), time of day as sine and cosine, and the next ``H`` steps' net load (GW,
a perfect forecast).

**Objectives** (thousands of currency, minus a cost). ``operating_cost``: generation
(cost curves), no-load and start-up costs; ``security_cost``: shed load, spilled output
and reserve shortfall at their prices. Default reward: their sum, the objective of the
perfect-foresight oracle (:mod:`.oracle`).

**Costs.** ``thermal_overload`` (flow above rating summed over all branches, MW: the
DC-OPF enforces only the monitored branches), ``load_shed``, ``over_generation``,
``reserve_shortfall`` (MW), ``ramp`` (output above the shut-down ramp of units whose stop
was refused, MW), ``min_up_down`` (switches refused by the minimum times, count) and
``power_flow`` (1 when the dispatch failed). The MW costs count what lies beyond the
dispatch's accuracy (:func:`~jaxgrid.dispatch.dcopf.tolerance_mw` of the rating, or of
the net load): its interior point leaves remnants where the exact solution has none (a
line at its rating 1e-4 MW over it). Counted from 0, they made violations of 15 % of
the merit order's steps on ``tso118-v0`` in float32 (16 days: 76 % of steps with a
cost against 61 % beyond the tolerance; thermal overload in 171 steps against 13).

**Episode.** ``horizon`` steps from midnight of a day drawn from ``profiles.days``; then
it terminates. Every day starts with all units on, free to switch, each at the same share
of its rating that serves the first step's net load (clipped to its output range).
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, sample_start
from jaxgrid.dispatch import DCOPFParams, dcopf_with_fallback
from jaxgrid.dispatch.dcopf import tolerance_mw
from jaxgrid.dispatch.fallback import capped_capacity
from jaxgrid.env import POWER_FLOW, Environment, Transition
from jaxgrid.envs.tso.commitment import commit, next_time_in_state
from jaxgrid.envs.tso.fleet import UnitParams
from jaxgrid.envs.tso.net_load import net_load
from jaxgrid.envs.tso.ratings import Screening
from jaxgrid.grid.network import Network
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array, float_dtype

GW = 1000.0  # observed powers are in GW
PRICE_SCALE = 100.0  # observed prices are divided by this
KILO = 1000.0  # objectives are in thousands of currency


@struct.dataclass
class TSOState:
    time: Array  # () int32 steps since the episode started
    start: Array  # () int32 profile row of the first step
    status: Array  # (n_gen,) bool units on line in the last step
    time_in_state: Array  # (n_gen,) int32 steps since each unit's last switch
    pg_mw: Array  # (n_gen,) output in the last step, MW
    price: Array  # () energy price (at the slack bus) in the last step, currency/MWh


@struct.dataclass
class TSOParams:
    """Attributes:
    profiles: demand shape (``load[:, 0]``, share of its annual peak), wind and PV
        (``wind[:, 0]``, ``pv[:, 0]``, shares of rated power) and the episode days.
    units: the fleet's unit-commitment data, ``(n_gen,)`` fields.
    rate_mva: ``(n_branch,)`` branch ratings, MVA.
    load_share: ``(n_bus,)`` share of the system's net load at each bus (sums to 1;
        negative at a bus whose case load is negative: an injection scaled likewise).
    peak_demand_mw: ``()`` demand at the profile's peak, MW.
    demand_floor: ``()`` demand at a profile value of 0, share of the peak.
    wind_mw, pv_mw: ``()`` must-take wind and PV capacity, MW.
    reserve_margin: ``()`` reserve requirement, share of the net load.
    dispatch: prices of shed load, spilled output and reserve shortfall, currency/MWh.
    bias_max: ``()`` largest dispatch adjustment of a marginal cost, currency/MWh.
    dt_h: ``()`` step length, hours.
    power_flow_penalty: ``()`` reward lost per step an episode loses to a failed
        dispatch (thousands of currency).
    scalarisation: how the objectives become the reward.
    """

    profiles: Profiles
    units: UnitParams
    rate_mva: Array
    load_share: Array
    peak_demand_mw: Array
    demand_floor: Array
    wind_mw: Array
    pv_mw: Array
    reserve_margin: Array
    dispatch: DCOPFParams
    bias_max: Array
    dt_h: Array
    power_flow_penalty: Array
    scalarisation: Scalarisation


class TSO(Environment):
    """A transmission operator commits and dispatches a fleet (see the module docstring).

    Args:
        network: the transmission network (topology and reactances; ratings, loads and
            the fleet's data come from params).
        default_params: the default scenario.
        horizon: steps per episode.
        forecast: ``H``, future steps of net load observed.
        screening: what the branches were screened for
            (:class:`~jaxgrid.envs.tso.ratings.Screening`): its ``monitored`` branches'
            ratings the DC-OPF enforces, and params outside it are refused
            (:attr:`params_rules`).
        iterations: static interior point iterations of the DC-OPF.
        binding_lines: whether the DC-OPF searches the binding lines before its interior
            point (:func:`~jaxgrid.dispatch.dcopf_with_fallback`).
        name: the registered name.
        interior_most: on a CPU, the most problems of a batch the interior point takes
            a round (:func:`~jaxgrid.dispatch.fallback.capped_capacity`); ``None``, the
            default share of the batch.
    """

    agents = ("operator",)
    agent_types = ("operator",)
    objective_names = ("operating_cost", "security_cost")
    cost_names = (
        "thermal_overload",
        "load_shed",
        "over_generation",
        "reserve_shortfall",
        "ramp",
        "min_up_down",
        POWER_FLOW,
    )
    # the dispatch's interior point stops within its tolerance, and a batch's solve and a
    # single one stop at different points: over 4 x 96 float64 random steps of tso300-v0
    # (check_env's keys) they differed by up to 4e-8 of a unit's output, and by 1.1e-6
    # of a step's spilled output (2.6e-5 in 23 MW: the split of spill over the buses is
    # held only by the rise of its price, ``slack_price_rise``, a weak curvature); with
    # the 156 branches that can overload monitored, by 2.3e-5 of a step's ramp cost
    # (127.595 against 127.598 MW of output above refused stops' ramps, 25 steps in,
    # where each step's outputs bound the next one's ramp windows)
    solver_rtol = 1e-4

    def __init__(
        self,
        network: Network,
        default_params: TSOParams,
        horizon: int,
        forecast: int,
        screening: Screening,
        iterations: int,
        name: str,
        binding_lines: bool = True,
        interior_most: int | None = None,
    ):
        self.network = network
        self.horizon = int(horizon)
        self.forecast = int(forecast)
        self.screening = screening
        self.monitored = screening.monitored
        # the screening's rule, checked by jaxgrid.validation wherever TSOParams appear
        self.params_rules = {TSOParams: (screening,)}
        self.iterations = int(iterations)
        self.binding_lines = bool(binding_lines)
        if interior_most is not None and int(interior_most) < 1:
            raise ValueError(
                f"interior_most (the interior point's problems a round) must be at least 1, "
                f"got {interior_most}"
            )
        self.interior_most = None if interior_most is None else int(interior_most)
        share = np.asarray(default_params.load_share)
        self.shed_at = tuple(int(b) for b in np.flatnonzero(share > 0))
        # output may be spilled where units are, and at buses whose negative load (an
        # injection that follows the profile, as case300's) the system cannot absorb
        self.spill_at = tuple(
            int(b) for b in np.union1d(np.asarray(network.gen_bus), np.flatnonzero(share < 0))
        )
        self.time_cap = int(
            max(
                np.max(default_params.units.min_up_steps),
                np.max(default_params.units.min_down_steps),
            )
        )
        self._default_params = default_params
        self._name = name

    @property
    def n_gen(self) -> int:
        return self.network.n_gen

    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(f"{kind}[{g}]" for kind in ("commit", "dispatch") for g in range(self.n_gen))

    def action_space(self, params):
        n = self.n_gen
        return spaces.Dict(
            {
                "commit": spaces.MultiDiscrete(np.full((1, n), 2)),
                "dispatch": spaces.Box(-1.0, 1.0, (1, n)),
            }
        )

    def request(self, action) -> tuple[Array, Array]:
        """``(commit, adjust)``: the requested status ``(n_gen,)`` bool and the dispatch
        adjustment ``(n_gen,)`` in [-1, 1] of a sanitised action."""
        return action["commit"][0] > 0, action["dispatch"][0]

    def encode(self, request: Array, adjust: Array):
        """The action that requests status ``request`` ``(n_gen,)`` bool with dispatch
        adjustment ``adjust`` ``(n_gen,)`` (the inverse of :meth:`request`)."""
        return {
            "commit": request.astype(jnp.int32)[None],
            "dispatch": jnp.asarray(adjust, float_dtype())[None],
        }

    def observation_names(self, params) -> tuple[str, ...]:
        units = tuple(
            f"{kind}[{g}]" for kind in ("status", "p_share", "locked_h") for g in range(self.n_gen)
        )
        system = ("net_load_gw", "demand_gw", "renewable_gw", "price", "sin_time", "cos_time")
        ahead = tuple(f"net_load_gw[+{h}]" for h in range(1, 1 + self.forecast))
        return units + system + ahead

    def observation_space(self, params):
        n = 3 * self.n_gen + 6 + self.forecast
        return spaces.Box(-jnp.inf, jnp.inf, (1, n))

    def baselines(self, params: TSOParams) -> dict:
        """Random, all units on, and a merit-order (priority-list) commitment for the step
        and for the forecast's peak."""
        from jaxgrid.envs.tso.baselines import all_on, merit_order, merit_order_lookahead

        return {
            **super().baselines(params),
            "all_on": all_on(self),
            "merit_order": merit_order(self, params),
            "merit_order_lookahead": merit_order_lookahead(self, params),
        }

    def oracle_return(self, params: TSOParams, state: TSOState) -> float:
        """The perfect-foresight optimum of the day from ``state`` (an unbatched reset
        state), for the default reward (both objectives, equal weights): the
        unit-commitment MILP of :mod:`.oracle`."""
        from jaxgrid.envs.tso.oracle import MIP_REL_GAP, day_oracle

        weights = np.asarray(params.scalarisation.weights)
        if not np.allclose(weights, 1.0) or params.scalarisation.cost_weights is not None:
            raise ValueError("the unit-commitment oracle knows only the default reward")
        day = day_oracle(self, params, int(state.start))
        if day.mip_gap > MIP_REL_GAP:
            above = (
                f"{100 * day.mip_gap:.1f} % above its proven bound"
                if np.isfinite(day.mip_gap)
                else "with no bound proven"
            )
            warnings.warn(
                f"the unit-commitment oracle of the day from profile row {int(state.start)} "
                f"stopped at its time limit {above}",
                stacklevel=2,
            )
        return -day.total_cost / KILO

    def observe(self, state: TSOState, params: TSOParams):
        u = params.units
        row = state.start + state.time
        now = net_load(row, params)
        ahead = net_load(row + 1 + jnp.arange(self.forecast), params).net_load_mw
        min_time = jnp.where(state.status, u.min_up_steps, u.min_down_steps)
        locked_h = jnp.maximum(min_time - state.time_in_state, 0) * params.dt_h
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        system = jnp.stack(
            [
                now.net_load_mw / GW,
                now.demand_mw / GW,
                now.renewable_mw / GW,
                state.price / PRICE_SCALE,
                jnp.sin(phase),
                jnp.cos(phase),
            ]
        )
        parts = [state.status, state.pg_mw / u.pmax_mw, locked_h, system, ahead / GW]
        return jnp.concatenate([jnp.asarray(x, float_dtype()) for x in parts])[None]

    def reset_env(self, key, params: TSOParams):
        u = params.units
        start = sample_start(key, params.profiles.days, self.horizon)
        share = net_load(start, params).net_load_mw / jnp.sum(u.pmax_mw)
        state = TSOState(
            time=jnp.zeros((), jnp.int32),
            start=start,
            status=jnp.ones(self.n_gen, bool),
            time_in_state=jnp.full(self.n_gen, self.time_cap, jnp.int32),
            pg_mw=jnp.clip(share * u.pmax_mw, u.pmin_mw, u.pmax_mw).astype(float_dtype()),
            price=jnp.zeros((), float_dtype()),
        )
        return self.observe(state, params), state

    def dispatch_problem(self, state: TSOState, request: Array, adjust: Array, params: TSOParams):
        """``(commitment, net, network, pd_mw, options)``: the rules' outcome
        (:class:`~jaxgrid.envs.tso.commitment.Commitment`) for ``request``, the step's
        :class:`~jaxgrid.envs.tso.net_load.NetLoad`, and the DC-OPF it poses: the
        network within the committed units' ramp windows, the loads ``(n_bus,)`` MW and
        the keywords of :func:`~jaxgrid.dispatch.dcopf` (costs shifted by ``adjust``,
        commitment, reserve, prices, the screened branches) bar ``iterations``."""
        u = params.units
        c = commit(request, state.status, state.time_in_state, state.pg_mw, u)
        net = net_load(state.start + state.time, params)
        network = self.network.replace(
            pmin_mw=c.p_low_mw, pmax_mw=c.p_high_mw, rate_mva=params.rate_mva
        )
        options = dict(
            cost_poly=u.cost_poly.at[:, 1].add(params.bias_max * adjust),
            commitment=c.status,
            reserve_mw=params.reserve_margin * net.net_load_mw,
            params=params.dispatch,
            monitored=self.monitored,
            shed_at=self.shed_at,
            spill_at=self.spill_at,
        )
        return c, net, network, params.load_share * net.net_load_mw, options

    def dispatch(self, state: TSOState, request: Array, adjust: Array, params: TSOParams):
        """``(commitment, net, result)``: :meth:`dispatch_problem`'s commitment and net
        load, and the :class:`~jaxgrid.dispatch.DispatchResult` of its DC-OPF."""
        c, net, network, pd_mw, options = self.dispatch_problem(state, request, adjust, params)
        result = dcopf_with_fallback(
            network,
            pd_mw,
            iterations=self.iterations,
            binding_lines=self.binding_lines,
            capacity=None if self.interior_most is None else capped_capacity(self.interior_most),
            **options,
        )
        return c, net, result

    def transition(self, key, state: TSOState, action, params: TSOParams) -> Transition:
        u, d = params.units, params.dispatch
        request, adjust = self.request(action)
        c, net, r = self.dispatch(state, request, adjust, params)
        failed = ~r.converged
        pg = jnp.where(failed, state.pg_mw, r.pg_mw)
        c2, c1, c0 = u.cost_poly[:, 0], u.cost_poly[:, 1], u.cost_poly[:, 2]
        generation = jnp.sum(jnp.where(c.status, c2 * pg**2 + c1 * pg + c0 + u.no_load_cost, 0.0))
        startup = jnp.sum(jnp.where(c.started, u.startup_cost, 0.0))
        operating = generation * params.dt_h + startup
        shed, spill = jnp.sum(r.shed_mw), jnp.sum(r.spill_mw)
        security = params.dt_h * (
            d.voll * shed
            + d.spill_price * spill
            + d.reserve_shortfall_price * r.reserve_shortfall_mw
        )
        rating = params.rate_mva
        overload = jnp.sum(jnp.maximum(jnp.abs(r.p_branch_mw) - rating - tolerance_mw(rating), 0.0))
        beyond = tolerance_mw(net.net_load_mw)
        costs = jnp.stack(
            [
                overload,
                jnp.maximum(shed - beyond, 0.0),
                jnp.maximum(spill - beyond, 0.0),
                jnp.maximum(r.reserve_shortfall_mw - beyond, 0.0),
                jnp.sum(c.refused_ramp_mw),
                jnp.sum(c.refused_min_up_down).astype(overload.dtype),
                jnp.zeros_like(overload),
            ]
        )
        new_state = state.replace(
            time=state.time + 1,
            status=c.status,
            time_in_state=next_time_in_state(
                state.time_in_state, state.status, c.status, self.time_cap
            ),
            pg_mw=pg.astype(state.pg_mw.dtype),
            price=jnp.where(failed, state.price, r.lmp_energy).astype(state.price.dtype),
        )
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=-jnp.stack([operating, security])[None] / KILO,
            costs=costs[None],
            terminated=new_state.time >= self.horizon,
            truncated=jnp.zeros((), bool),
            info={
                "pg_mw": pg,
                "status": c.status,
                "lmp": r.lmp,
                "generation_cost": generation * params.dt_h,
                "startup_cost": startup,
                "net_load_mw": net.net_load_mw,
                "curtailed_mw": net.curtailed_mw,
                "dispatch_iterations": r.iterations,
            },
            failed=failed,
        )
