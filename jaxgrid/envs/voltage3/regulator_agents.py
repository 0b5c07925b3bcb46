"""Three-phase voltage control with the regulators as agents beside the PV inverters.

:class:`~jaxgrid.envs.voltage3.env.Voltage3Control` with one more agent per voltage
regulator (``reg_<transformer>``, type ``"regulator"``); the regulators' own controls are
off (``params.tap_control`` False): the agents set the taps.

**Action.** ``(n_pv + n_reg, 1)`` in [-1, 1]. An inverter's row is its share of reactive
headroom, as in the base environment. A regulator's row moves its tap by
``round(a * max_tap_steps)`` steps of ``params.regcontrol.tap_step_pu`` (0.00625 pu on
the IEEE feeders), clipped to the control's tap range, before the step's power flow: the
new taps hold for this step and the next ones until moved again. With
``params.tap_smoothing_steps > 0`` the rounding and the clip are smooth surrogates
(:func:`jaxgrid.devices.regulator.move_taps`): the taps move with the action between
whole steps, for gradients; 0 (the default) is the exact model.

**Observation.** ``(n_pv + n_reg, 10)``: the base environment's nine columns and
``tap_pu``. An inverter's row is the base one with ``tap_pu`` 0. A regulator's row holds
the line-to-neutral voltages of the bus its potential transformer measures
(``vm_pu[a..c]``, pu), the phases it regulates (``phase[a..c]``, 1 on the monitored
phase), ``p_pv_kw`` and ``q_kvar`` 0, ``vm_own_pu`` the monitored node's voltage (pu) and
its tap (``tap_pu``, pu).

Objectives, costs, episode and info are the base environment's.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid import spaces
from jaxgrid.devices.regulator import move_taps
from jaxgrid.envs.voltage3.env import Voltage3Control
from jaxgrid.envs.voltage3.types import Voltage3Params, Voltage3State

MAX_TAP_STEPS = 4  # a regulator moves at most this many tap steps in a 15-minute step


class Voltage3RegulatorAgents(Voltage3Control):
    """Three-phase voltage control with regulator agents (see the module docstring)."""

    def __init__(
        self,
        default_params: Voltage3Params,
        horizon: int,
        pv_agents: tuple[str, ...],
        regulator_agents: tuple[str, ...],
        max_tap_steps: int = MAX_TAP_STEPS,
        **kwargs,
    ):
        super().__init__(default_params, horizon, agents=(*pv_agents, *regulator_agents), **kwargs)
        self.n_pv = len(pv_agents)
        self.agent_types = ("pv",) * self.n_pv + ("regulator",) * len(regulator_agents)
        self.max_tap_steps = int(max_tap_steps)

    def observation_names(self, params: Voltage3Params) -> tuple[str, ...]:
        return (*super().observation_names(params), "tap_pu")

    def observation_space(self, params: Voltage3Params) -> spaces.Box:
        base = super().observation_space(params)
        low = jnp.append(base.low, 0.0)
        high = jnp.append(base.high, 2.0)
        return spaces.Box(low, high, (self.num_agents, 10))

    def observe(self, state: Voltage3State, params: Voltage3Params):
        pv = super().observe(state, params)
        feeder, control = params.feeder, params.regcontrol
        monitored = control.pt_node_from
        nodes = feeder.bus_nodes[feeder.node_bus[monitored]]  # (n_reg, 3)
        vm_bus = jnp.where(nodes >= 0, state.vm_pu[jnp.maximum(nodes, 0)], 0.0)
        phase = (nodes == monitored[:, None]).astype(pv.dtype)
        zeros = jnp.zeros_like(state.tap_pu)
        regulators = jnp.concatenate(
            [
                vm_bus,
                phase,
                jnp.stack([zeros, zeros, state.vm_pu[monitored], state.tap_pu], axis=1),
            ],
            axis=1,
        )
        pv = jnp.concatenate([pv, jnp.zeros((self.n_pv, 1), pv.dtype)], axis=1)
        return jnp.concatenate([pv, regulators.astype(pv.dtype)])

    def transition(self, key, state: Voltage3State, action, params: Voltage3Params):
        steps = action[self.n_pv :, 0] * self.max_tap_steps
        taps = move_taps(params.regcontrol, state.tap_pu, steps, params.tap_smoothing_steps)
        taps = taps.astype(state.tap_pu.dtype)
        return super().transition(key, state.replace(tap_pu=taps), action[: self.n_pv], params)

    def baselines(self, params: Voltage3Params) -> dict:
        """Random actions; no control (no reactive power, taps held); droop on the
        inverters with the taps held."""
        base = super().baselines(params)
        n_reg = self.num_agents - self.n_pv

        def hold_taps(policy):
            def combined(key, obs):
                pv = policy(key, obs[: self.n_pv, :-1])
                return jnp.concatenate([pv, jnp.zeros((n_reg, 1), pv.dtype)])

            return combined

        return {
            "random": base["random"],
            "no_control": hold_taps(base["no_control"]),
            "droop": hold_taps(base["droop"]),
        }
