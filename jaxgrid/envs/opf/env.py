"""Generators as agents of an optimal power flow: each sets its output and its voltage.

After PowerZoo's ``marl_opf`` task: the AC-OPF of a transmission network, split among
its generators, solved step by step by reinforcement learning instead of an optimiser.

**Agents.** One per generator of the network (``gen_<g>@bus<b>``, the data's bus
number), all of type ``generator``. The generator at the slack bus takes the network's
balance (load plus losses less everyone else's output), so its active power entry is
ignored (its agent sets only its voltage; ``info`` and the ``active_limit`` cost show
what the balance asked of it).

**State.** Step within the day, the day's first profile row, and the last solved
operating point: every generator's active and reactive output and every bus voltage
(the case data's before the first step of a day).

**Action.** ``(n_gen, 2)`` in [-1, 1]: column 0 the active power setpoint,
``p = pmin + (a + 1) / 2 (pmax - pmin)`` MW; column 1 the voltage setpoint of the
generator's bus, ``vm = vmin + (a + 1) / 2 (vmax - vmin)`` pu, within the bus's voltage
limits (0 is the middle of the band, 1.0 pu on the bundled cases).

**Transition.** The step's bus loads (:meth:`OPF.bus_loads`: each bus's peak load from
the case times a SimBench profile class's shape) are served by the AC power flow
(:func:`jaxgrid.grid.acpf`, fast-decoupled, a fixed number of iterations) with the
generators' setpoints: PV buses hold the voltage setpoints, the slack generator takes
the balance. Reactive limits are *not* enforced by switching buses to PQ: a generator
that would have to leave its reactive range to hold its setpoint is charged the excess
as the ``reactive_limit`` cost, as the AC-OPF (the oracle) treats its reactive range as
a constraint rather than a rule of the power flow; a switch would silently override the
agent's voltage setpoint. A power flow that does not converge is the contract's failed
physics: the episode terminates, the only cost is ``power_flow`` = 1 and the reward is
``-power_flow_penalty`` for the step and each step it cuts off.

**Observation.** ``(n_gen, 14 + n_class)`` per generator: its last active and reactive
output (``p_pu``, ``q_pu``, pu of ``base_mva``), its bus's last voltage (``vm_pu``), its
active and reactive ranges (``pmin_pu``, ``pmax_pu``, ``qmin_pu``, ``qmax_pu``), its marginal cost at its last output
(``marginal_cost``, hundreds of currency/MWh), the active load at its bus in the step
about to be served (``bus_load_pu``), ``is_slack`` (1 for the slack generator); then, the
same for all, the step's total load as a share of the case's (``load_factor``), each
profile class's shape in the step (``load_class[k]``, share of its annual peak), the
time of day of the step (``sin_time``, ``cos_time``), and the last step's generation
cost (``last_cost``, thousands of currency/h).

**Objective** (thousands of currency, minus a cost). ``generation_cost``: the cost curves
of all generators at their outputs over the step, ``sum_g c_g(p_g) dt``, charged to
every agent (a team reward). Default reward: that objective.

**Costs** (charged to every agent: they concern the whole network). ``voltage``: the
sum over buses of the excursion beyond ``[vmin, vmax]``, pu; ``thermal``: the sum over
branches of apparent power above the rating at the more loaded end, MVA;
``reactive_limit``: the sum over generators of reactive output beyond
``[qmin, qmax]``, Mvar; ``active_limit``: the slack generator's output beyond
``[pmin, pmax]``, MW; ``power_flow``: 1 on a failed step. Each is counted only where it
exceeds the params' tolerance (``*_tol``: round-off of a float32 power flow, so that the
AC-OPF's own setpoints, which sit on their limits, cost nothing).

**Episode.** ``horizon`` steps (a day) from midnight of a day drawn from
``profiles.days``; then it terminates. The oracle is the AC-OPF of each step's loads
(:mod:`.oracle`): the operating point of least cost within every limit, which an
agent's setpoints reproduce exactly.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, sample_start
from jaxgrid.env import POWER_FLOW, Environment, Transition
from jaxgrid.grid.acpf import acpf, fast_decoupled_matrices
from jaxgrid.grid.network import REF, Network
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array, float_dtype

KILO = 1000.0  # objectives and observed costs are in thousands of currency
PRICE_SCALE = 100.0  # observed marginal costs are divided by this
# the "mpc" baseline's horizon (steps), Adam iterations, step size and cost weight, from
# benchmarks/mpc_baselines.py on held-out days of opf14-v0
MPC_SETTINGS = (1, 50, 0.1, 3.0)


@struct.dataclass
class OPFState:
    time: Array  # () int32 steps since the episode started
    start: Array  # () int32 profile row of the first step
    pg_mw: Array  # (n_gen,) active output in the last step, MW
    qg_mvar: Array  # (n_gen,) reactive output in the last step, Mvar
    vm_pu: Array  # (n_bus,) bus voltages in the last step, pu
    cost: Array  # () generation cost in the last step, currency/h


@struct.dataclass
class OPFParams:
    """Attributes:
    profiles: load shapes ``load`` ``(T, n_class)`` (each class's share of its annual
        peak) and the episode days.
    pd_mw, qd_mvar: ``(n_bus,)`` each bus's peak load, MW and Mvar.
    load_weights: ``(n_bus, n_class)`` how each bus's load follows the classes (rows sum
        to 1; one-hot by default).
    demand_floor: ``()`` a bus's load at a shape of 0, share of its peak.
    cost_poly: ``(n_gen, 3)`` cost curves ``c2 p^2 + c1 p + c0`` (currency/MW²h,
        currency/MWh, currency/h).
    pmin_mw, pmax_mw: ``(n_gen,)`` active power limits, MW.
    qmin_mvar, qmax_mvar: ``(n_gen,)`` reactive power limits, Mvar.
    vmin_pu, vmax_pu: ``(n_bus,)`` voltage limits, pu (also the voltage setpoints' range).
    rate_mva: ``(n_branch,)`` branch ratings, MVA.
    vm_tol_pu, flow_tol_mva, q_tol_mvar, p_tol_mw: ``()`` excursions up to these are not
        counted as violations.
    dt_h: ``()`` step length, hours.
    power_flow_penalty: ``()`` reward lost per step an episode loses to a failed power
        flow (thousands of currency).
    scalarisation: how the objective becomes the reward.
    """

    profiles: Profiles
    pd_mw: Array
    qd_mvar: Array
    load_weights: Array
    demand_floor: Array
    cost_poly: Array
    pmin_mw: Array
    pmax_mw: Array
    qmin_mvar: Array
    qmax_mvar: Array
    vmin_pu: Array
    vmax_pu: Array
    rate_mva: Array
    vm_tol_pu: Array
    flow_tol_mva: Array
    q_tol_mvar: Array
    p_tol_mw: Array
    dt_h: Array
    power_flow_penalty: Array
    scalarisation: Scalarisation


class OPF(Environment):
    """Generators set their output and voltage; the AC power flow serves the load (see
    the module docstring).

    Args:
        network: the transmission network (topology, impedances, shunts, generator buses;
            loads, limits, costs and ratings come from params).
        default_params: the default scenario.
        horizon: steps per episode.
        iterations: static fast-decoupled iterations of each step's power flow; ``None``:
            :func:`~jaxgrid.grid.acpf.default_iterations` of the dtype (12 in float32).
        acopf_baseline: static, offer the AC-OPF of each step as the ``acopf`` baseline
            (jitted; cheap on case14, seconds a step on case118).
        name: the registered name.
    """

    objective_names = ("generation_cost",)
    cost_names = ("voltage", "thermal", "reactive_limit", "active_limit", POWER_FLOW)
    action_names = ("p_setpoint", "vm_setpoint")

    def __init__(
        self,
        network: Network,
        default_params: OPFParams,
        horizon: int,
        iterations: int | None,
        acopf_baseline: bool,
        name: str,
    ):
        self.network = network
        self.horizon = int(horizon)
        self.iterations = None if iterations is None else int(iterations)
        self.acopf_baseline = bool(acopf_baseline)
        ids = np.asarray(network.bus_ids)
        gen_bus = np.asarray(network.gen_bus)
        if not np.all(np.asarray(network.gen_in_service)):
            raise ValueError("every generator of the network must be in service (one agent each)")
        self.agents = tuple(f"gen_{g}@bus{ids[b]}" for g, b in enumerate(gen_bus))
        self.agent_types = ("generator",) * len(self.agents)
        slack = np.asarray(network.bus_type)[gen_bus] == REF
        # the first generator at each slack bus takes the balance (acpf's rule)
        first = np.zeros_like(slack)
        for b in np.unique(gen_bus[slack]):
            first[np.flatnonzero(gen_bus == b)[0]] = True
        self.slack = tuple(bool(s) for s in first)
        self.n_class = int(np.shape(default_params.profiles.load)[-1])
        self._matrices = fast_decoupled_matrices(network)
        self._default_params = default_params
        self._name = name

    @property
    def n_gen(self) -> int:
        return self.network.n_gen

    def observation_names(self, params) -> tuple[str, ...]:
        own = (
            "p_pu",
            "q_pu",
            "vm_pu",
            "pmin_pu",
            "pmax_pu",
            "qmin_pu",
            "qmax_pu",
            "marginal_cost",
            "bus_load_pu",
            "is_slack",
        )
        system = ("load_factor",) + tuple(f"load_class[{k}]" for k in range(self.n_class))
        return own + system + ("sin_time", "cos_time", "last_cost")

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (self.n_gen, 14 + self.n_class))

    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (self.n_gen, 2))

    def baselines(self, params: OPFParams) -> dict:
        """Random, proportional dispatch at nominal voltage, the network-blind economic
        dispatch, ``mpc`` (each step's setpoints optimised by gradient on this
        environment's own AC power flow, :mod:`jaxgrid.control.mpc`; a step's reward
        depends only on its own action, so a one-step horizon is the whole problem) and
        (``acopf_baseline``) the AC-OPF of each step (:mod:`.baselines`)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs
        from jaxgrid.envs.opf.baselines import acopf_policy, economic_dispatch, proportional

        out = {
            **super().baselines(params),
            "proportional": proportional(self, params),
            "economic_dispatch": economic_dispatch(self, params),
            "mpc": mpc_controller(self, params, MPCConfig(*MPC_SETTINGS)),
        }
        if self.acopf_baseline:
            out["acopf"] = acopf_policy(self, params)
        return out

    def oracle_return(self, params: OPFParams, state: OPFState) -> float:
        """The day's return under the AC-OPF of every step (float64, on the host;
        :func:`~jaxgrid.envs.opf.oracle.day_oracle`), for the default objective weight.
        Cost penalties (``cost_weights``) leave it unchanged: the AC-OPF violates no
        limit, so it pays none."""
        from jaxgrid.envs.opf.oracle import day_oracle

        if not np.allclose(np.asarray(params.scalarisation.weights), 1.0):
            raise ValueError("the AC-OPF oracle knows only the default objective weight")
        day = day_oracle(self, params, int(state.start))
        if not np.all(day.converged):
            raise ValueError(
                f"{self.name}: the AC-OPF did not converge at steps "
                f"{np.flatnonzero(~day.converged).tolist()} of the day from row {int(state.start)}"
            )
        return -float(np.sum(day.cost_per_h)) * float(params.dt_h) / KILO

    # -- the model -------------------------------------------------------------------

    def class_shapes(self, row: Array, params: OPFParams) -> Array:
        """``(..., n_class)`` each profile class's shape at profile rows ``row``."""
        load = params.profiles.load
        return load[row % load.shape[0]].astype(float_dtype())

    def bus_loads(self, shapes: Array, params: OPFParams) -> tuple[Array, Array]:
        """``(p_mw, q_mvar)``, ``(n_bus,)`` each, the bus loads at class shapes ``shapes``
        ``(n_class,)``: ``peak * (floor + (1 - floor) * load_weights @ shapes)`` (a constant
        power factor per bus)."""
        factor = params.demand_floor + (1.0 - params.demand_floor) * (params.load_weights @ shapes)
        return params.pd_mw * factor, params.qd_mvar * factor

    def setpoints(self, action: Array, params: OPFParams) -> tuple[Array, Array]:
        """``(pg_mw, vg_pu)`` ``(n_gen,)`` of a sanitised action (module docstring)."""
        gen_bus = self.network.gen_bus
        share = (action + 1.0) / 2.0
        pg = params.pmin_mw + share[:, 0] * (params.pmax_mw - params.pmin_mw)
        vmin, vmax = params.vmin_pu[gen_bus], params.vmax_pu[gen_bus]
        return pg, vmin + share[:, 1] * (vmax - vmin)

    def encode(self, pg_mw: Array, vg_pu: Array, params: OPFParams) -> Array:
        """The action ``(n_gen, 2)`` whose setpoints under ``params`` are ``pg_mw``,
        ``vg_pu`` ``(n_gen,)`` (clipped to the ranges; the inverse of :meth:`setpoints`)."""
        gen_bus = self.network.gen_bus
        span_p = jnp.maximum(params.pmax_mw - params.pmin_mw, 1e-9)
        vmin, vmax = params.vmin_pu[gen_bus], params.vmax_pu[gen_bus]
        a_p = 2.0 * (pg_mw - params.pmin_mw) / span_p - 1.0
        a_v = 2.0 * (vg_pu - vmin) / jnp.maximum(vmax - vmin, 1e-9) - 1.0
        return jnp.clip(jnp.stack([a_p, a_v], axis=-1), -1.0, 1.0).astype(float_dtype())

    def network_of(self, params: OPFParams) -> Network:
        """The network with ``params``' limits, costs and ratings."""
        return self.network.replace(
            cost_poly=params.cost_poly,
            pmin_mw=params.pmin_mw,
            pmax_mw=params.pmax_mw,
            qmin_mvar=params.qmin_mvar,
            qmax_mvar=params.qmax_mvar,
            vmin_pu=params.vmin_pu,
            vmax_pu=params.vmax_pu,
            rate_mva=params.rate_mva,
        )

    def observe(self, state: OPFState, params: OPFParams):
        # A Python float, not the network's numpy float64 scalar: a numpy
        # constant traced once under float32 is cached by JAX as float32 and
        # met float64 arrays in `lax.div` after `jax_enable_x64` was turned on
        # in the same process (check_env's float64 pass).
        base = float(self.network.base_mva)
        row = state.start + state.time
        shapes = self.class_shapes(row, params)
        p_load, _ = self.bus_loads(shapes, params)
        gen_bus = self.network.gen_bus
        c2, c1 = params.cost_poly[:, 0], params.cost_poly[:, 1]
        n = self.n_gen
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        own = jnp.stack(
            [
                state.pg_mw / base,
                state.qg_mvar / base,
                state.vm_pu[gen_bus],
                params.pmin_mw / base,
                params.pmax_mw / base,
                params.qmin_mvar / base,
                params.qmax_mvar / base,
                (2.0 * c2 * state.pg_mw + c1) / PRICE_SCALE,
                p_load[gen_bus] / base,
                jnp.asarray(self.slack, float_dtype()),
            ],
            axis=1,
        )
        system = jnp.concatenate(
            [
                (jnp.sum(p_load) / jnp.sum(params.pd_mw))[None],
                shapes,
                jnp.stack([jnp.sin(phase), jnp.cos(phase), state.cost / KILO]),
            ]
        )
        return jnp.concatenate(
            [own, jnp.broadcast_to(system, (n, system.shape[0]))], axis=1
        ).astype(float_dtype())

    def reset_env(self, key, params: OPFParams):
        net = self.network
        start = sample_start(key, params.profiles.days, self.horizon)
        dtype = float_dtype()
        state = OPFState(
            time=jnp.zeros((), jnp.int32),
            start=start,
            pg_mw=jnp.asarray(net.pg_mw, dtype),
            qg_mvar=jnp.asarray(net.qg_mvar, dtype),
            vm_pu=jnp.asarray(net.vm_pu, dtype),
            cost=jnp.zeros((), dtype),
        )
        return self.observe(state, params), state

    def power_flow(self, state: OPFState, action: Array, params: OPFParams):
        """``(p_mw, q_mvar, result)``: the step's bus loads and the
        :class:`~jaxgrid.grid.acpf.ACPowerFlowResult` of ``action``'s setpoints."""
        p_load, q_load = self.bus_loads(self.class_shapes(state.start + state.time, params), params)
        pg, vg = self.setpoints(action, params)
        result = acpf(
            self.network,
            p_load,
            q_load,
            pg_mw=pg,
            vg_pu=vg,
            iterations=self.iterations,
            matrices=self._matrices,
        )
        return p_load, q_load, result

    def violations(self, result, params: OPFParams) -> Array:
        """``(4,)`` the costs of a solved step before ``power_flow``: voltage (pu),
        thermal (MVA), reactive limit (Mvar), active limit of the slack (MW), each
        excursion counted beyond its tolerance."""

        def beyond(x, lo, hi, tol):
            excess = jnp.maximum(jnp.maximum(x - hi, lo - x), 0.0)
            return jnp.sum(jnp.where(excess > tol, excess, 0.0))

        s_from = jnp.hypot(result.p_from_mw, result.q_from_mvar)
        s_to = jnp.hypot(result.p_to_mw, result.q_to_mvar)
        flow = jnp.maximum(s_from, s_to)
        slack = jnp.asarray(self.slack)
        p_excess = jnp.where(
            slack,
            jnp.maximum(
                jnp.maximum(result.gen_p_mw - params.pmax_mw, params.pmin_mw - result.gen_p_mw),
                0.0,
            ),
            0.0,
        )
        return jnp.stack(
            [
                beyond(result.vm_pu, params.vmin_pu, params.vmax_pu, params.vm_tol_pu),
                beyond(flow, -jnp.inf, params.rate_mva, params.flow_tol_mva),
                beyond(result.gen_q_mvar, params.qmin_mvar, params.qmax_mvar, params.q_tol_mvar),
                jnp.sum(jnp.where(p_excess > params.p_tol_mw, p_excess, 0.0)),
            ]
        )

    def transition(self, key, state: OPFState, action, params: OPFParams) -> Transition:
        p_load, _, r = self.power_flow(state, action, params)
        failed = ~r.converged
        dtype = state.pg_mw.dtype
        pg = jnp.where(failed, state.pg_mw, r.gen_p_mw).astype(dtype)
        qg = jnp.where(failed, state.qg_mvar, r.gen_q_mvar).astype(dtype)
        vm = jnp.where(failed, state.vm_pu, r.vm_pu).astype(dtype)
        cost_h = jnp.sum(self.network_of(params).generation_cost(pg))
        violations = self.violations(r, params)
        costs = jnp.concatenate([violations, jnp.zeros((1,), violations.dtype)])
        new_state = state.replace(
            time=state.time + 1, pg_mw=pg, qg_mvar=qg, vm_pu=vm, cost=cost_h.astype(dtype)
        )
        n = self.n_gen
        reward = -cost_h * params.dt_h / KILO
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.broadcast_to(reward, (n, 1)),
            costs=jnp.broadcast_to(costs, (n, costs.shape[0])),
            terminated=new_state.time >= self.horizon,
            truncated=jnp.zeros((), bool),
            info={
                "pg_mw": pg,
                "qg_mvar": qg,
                "vm_pu": vm,
                "generation_cost_per_h": cost_h,
                "load_mw": jnp.sum(p_load),
                "loss_mw": jnp.where(failed, 0.0, r.loss_mw),
                "min_vm_pu": jnp.min(vm),
                "max_vm_pu": jnp.max(vm),
                "power_flow_iterations": r.iterations,
            },
            failed=failed,
        )
