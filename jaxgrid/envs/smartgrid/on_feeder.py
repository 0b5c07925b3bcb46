"""The smartgrid prosumers placed on a radial feeder (``smartgrid33-v0``).

Each agent of :class:`SmartGrid` stands for ``buildings_per_agent`` identical buildings
at one bus of the feeder. Their net draw from the network in an hour,
``grid_consumption + store_energy + buy_energy - give_energy - sell_energy`` (Wh over one
hour, i.e. W), becomes an active load at that bus (reactive at ``power_factor``), on top
of a constant background share of the feeder's base load; the feeder is solved every
step (DistFlow, Newton-Raphson where its sweep does not converge; the reset's idle feeder
by Newton-Raphson alone). The observation gains
the agent's bus voltage (12 columns); the costs ``voltage_band`` and ``thermal`` (assumed
ratings where the case has none) join the ethical objectives, which are unchanged.

A power flow with no solution (voltage collapse) ends the episode with the reward
``-power_flow_penalty`` for the failed step and every step it cuts off (default 0.05 a
step; over 8 random episodes of 10,000 steps, 58 % of the steps' rewards are above it),
``info["power_flow_failed"]`` and the ``power_flow`` cost; the state keeps the last
solved voltages.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.devices.prosumer import BUY, GIVE, GRID, SELL, STORE
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.smartgrid.env import SmartGrid
from jaxgrid.envs.smartgrid.types import SmartgridParams, SmartgridState
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.limits import branch_loading, voltage_violation_pu
from jaxgrid.grid.solvers import SOLVERS, hold_failed, solve_feeder, solve_feeder_by_newton
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.types import Array
from jaxgrid.validation import validate_params


@struct.dataclass
class FeederState:
    society: SmartgridState
    vm_pu: Array  # (n_bus,) voltages of the last power flow
    start_failed: Array  # () bool: the reset's power flow failed (vm_pu 1.0); step 1 says so


@struct.dataclass
class FeederParams:
    """Attributes:
    society: the smartgrid params (profiles, generator, objectives...).
    feeder: the network, with (assumed) branch ratings.
    agent_bus: ``(n,)`` int32 bus of each agent.
    buildings_per_agent: ``()`` buildings each agent stands for.
    background_share: ``()`` share of the feeder's base load drawn besides the agents.
    power_factor: ``()`` of the buildings' draw.
    v_lower, v_upper: ``()`` voltage band, pu.
    power_flow_penalty: ``()`` reward lost per agent and step lost when a power flow fails.
    solver: ``()`` int32 ``DISTFLOW`` or ``LINDISTFLOW``
        (:data:`jaxgrid.grid.solvers.SOLVERS`).
    abort: bounds on the lowest and highest bus voltage (off by default).
    """

    society: SmartgridParams
    feeder: Feeder
    agent_bus: Array
    buildings_per_agent: Array
    background_share: Array
    power_factor: Array
    v_lower: Array
    v_upper: Array
    power_flow_penalty: Array
    solver: Array
    abort: AbortConditions


class SmartGridOnFeeder(Environment):
    """EthicalSmartGrid's society on a feeder (see the module docstring)."""

    cost_names = ("voltage_band", "thermal", "power_flow")
    abort_names = ("min_vm_pu", "max_vm_pu")

    def __init__(
        self,
        society: SmartGrid,
        default_params: FeederParams,
        distflow_iterations: int = 5,
        name: str = "smartgrid33-v0",
    ):
        self.society = society
        self.agents = society.agents
        self.agent_types = society.agent_types
        self.objective_names = society.objective_names
        self.action_names = society.action_names
        self.horizon = society.horizon
        self.distflow_iterations = int(distflow_iterations)
        self._default_params = default_params
        self._name = name

    def scalarisation(self, params: FeederParams):
        return params.society.scalarisation

    def with_scalarisation(self, params: FeederParams, scalarisation) -> FeederParams:
        params = params.replace(society=params.society.replace(scalarisation=scalarisation))
        validate_params(self, params)
        return params

    def device_buses(self, params: FeederParams) -> dict:
        """Buses of the prosumer buildings, for pictures."""
        return {"prosumers (agent)": np.asarray(params.agent_bus)}

    def action_space(self, params: FeederParams):
        return self.society.action_space(params.society)

    def observation_names(self, params: FeederParams) -> tuple[str, ...]:
        return (*self.society.observation_names(params.society), "vm_pu")

    def observation_space(self, params: FeederParams):
        return spaces.Box(0.0, 2.0, (self.num_agents, 12))

    def bus_loads(self, enacted: Array, params: FeederParams):
        """Bus loads (MW, Mvar) from the agents' enacted actions ``(6, n)``, Wh per hour."""
        draw_w = enacted[GRID] + enacted[STORE] + enacted[BUY] - enacted[GIVE] - enacted[SELL]
        p_agents = draw_w * 1e-6 * params.buildings_per_agent
        f = params.feeder
        dtype = enacted.dtype
        p = params.background_share * f.p_load_mw + jnp.zeros(f.n_bus, dtype).at[
            params.agent_bus
        ].add(p_agents)
        tan_phi = jnp.sqrt(1.0 - params.power_factor**2) / params.power_factor
        q = params.background_share * f.q_load_mvar + jnp.zeros(f.n_bus, dtype).at[
            params.agent_bus
        ].add(p_agents * tan_phi)
        return p.astype(dtype), q.astype(dtype)

    def steps_lost(self, state: FeederState, params: FeederParams):
        """The failed step and each step the episode loses (the society keeps the time)."""
        return self.horizon - state.society.time

    def power_flow(self, enacted: Array, params: FeederParams):
        """The feeder solved for the bus loads of the agents' enacted actions."""
        p, q = self.bus_loads(enacted, params)
        return solve_feeder(params.feeder, p, q, params.solver, self.distflow_iterations)

    def idle_power_flow(self, dtype, params: FeederParams):
        """The feeder with every agent idle (its background load only): the reset's,
        the same for every environment of a batch (params only), so solved by
        :func:`~jaxgrid.grid.solvers.solve_feeder_by_newton`."""
        p, q = self.bus_loads(jnp.zeros((6, self.num_agents), dtype), params)
        return solve_feeder_by_newton(params.feeder, p, q, params.solver)

    def observe(self, state: FeederState, params: FeederParams):
        inner = self.society.observe(state.society, params.society)
        return jnp.concatenate(
            [inner, state.vm_pu[params.agent_bus][:, None].astype(inner.dtype)], axis=1
        )

    def reset_env(self, key, params: FeederParams):
        _, society = self.society.reset_env(key, params.society)
        flow = hold_failed(self.idle_power_flow(society.buildings.storage.dtype, params), 1.0)
        state = FeederState(society=society, vm_pu=flow.vm_pu, start_failed=~flow.converged)
        return self.observe(state, params), state

    def transition(self, key, state: FeederState, action, params: FeederParams) -> Transition:
        inner = self.society.transition(key, state.society, action, params.society)
        enacted = inner.info["enacted_action"].T  # (6, n)
        flow = hold_failed(self.power_flow(enacted, params), state.vm_pu)
        violation = jnp.sum(voltage_violation_pu(flow.vm_pu, params.v_lower, params.v_upper))
        overload = jnp.sum(jnp.maximum(branch_loading(params.feeder, flow) - 1.0, 0.0))
        new_state = FeederState(
            society=inner.state, vm_pu=flow.vm_pu, start_failed=jnp.zeros((), bool)
        )
        n = self.num_agents
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=inner.reward_vector,
            costs=jnp.broadcast_to(jnp.stack([violation, overload, 0.0]), (n, 3)),
            terminated=inner.terminated,
            truncated=inner.truncated,
            info={
                **inner.info,
                "vm_pu": flow.vm_pu,
                "loss_mw": flow.loss_mw,
            },
            objective_mask=inner.objective_mask,
            failed=~flow.converged | state.start_failed,
        )

    def abort_values(self, state, params):
        """Lowest and highest bus voltage of the last power flow, pu."""
        return jnp.stack([jnp.min(state.vm_pu), jnp.max(state.vm_pu)])

    def world_state(self, state: FeederState, params: FeederParams):
        return jnp.concatenate(
            [self.society.world_state(state.society, params.society), state.vm_pu]
        )

    def baselines(self, params: FeederParams) -> dict:
        return self.society.baselines(params.society)


def on_feeder(
    society: SmartGrid,
    params: SmartgridParams,
    buildings_per_agent: float = 6.0,
    background_share: float = 0.5,
    abort: dict | None = None,
    feeder: str = "case33bw",
    agent_buses: tuple[int, ...] | None = None,
    power_flow_penalty: float = 0.05,
    solver: str = "distflow",
    distflow_iterations: int = 5,
):
    """Place a smartgrid society on ``feeder`` (a bundled case name, a MATPOWER ``.m`` or a
    pandapower ``.json`` file): agent ``i`` at ``agent_buses[i]`` (the feeder data's bus
    numbers), by default at the ``i``-th load bus; the power flow by ``solver``
    (``"distflow"``, ``distflow_iterations`` sweeps then Newton-Raphson where they do not
    converge, or ``"lindistflow"``)."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    import numpy as np

    from jaxgrid.envs.ders import assumed_ratings
    from jaxgrid.grid import cases

    network = cases.load_feeder(feeder)
    network = network.replace(rate_mva=assumed_ratings(network))
    n = society.num_agents
    if agent_buses is None:
        load_buses = np.flatnonzero(np.asarray(network.p_load_mw) > 0)
        if n > len(load_buses):
            raise ValueError(f"{feeder} has {len(load_buses)} load buses for {n} agents")
        agent_bus = load_buses[:n]
    else:
        if len(agent_buses) != n:
            raise ValueError(
                f"agent_buses: expected one bus per agent ({n}), got {len(agent_buses)}"
            )
        agent_bus = network.device_buses(agent_buses)
    fp = FeederParams(
        society=params,
        feeder=network,
        agent_bus=agent_bus.astype(np.int32),
        buildings_per_agent=np.float64(buildings_per_agent),
        background_share=np.float64(background_share),
        power_factor=np.float64(0.95),
        v_lower=np.float64(0.95),
        v_upper=np.float64(1.05),
        power_flow_penalty=np.float64(power_flow_penalty),
        solver=np.int32(SOLVERS[solver]),
        abort=AbortConditions.create(SmartGridOnFeeder.abort_names, **(abort or {})),
    )
    fp = jax.tree_util.tree_map(jnp.asarray, fp)
    return SmartGridOnFeeder(society, fp, distflow_iterations), fp
