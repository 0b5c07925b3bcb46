"""Three-phase active voltage control: ``voltage13-v0`` on the IEEE 13 node feeder,
``voltage123-v0`` on the IEEE 123 node feeder, and ``voltage123-reg-v0`` with its
regulators as agents too."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.simbench import simbench_profiles
from jaxgrid.devices.regulator import load_regcontrols
from jaxgrid.devices.renewable import S_MAX_RATIO
from jaxgrid.envs.voltage3 import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.voltage3.baselines import no_control, volt_var_droop3
from jaxgrid.envs.voltage3.env import N_ITER, Voltage3Control
from jaxgrid.envs.voltage3.regulator_agents import MAX_TAP_STEPS, Voltage3RegulatorAgents
from jaxgrid.envs.voltage3.types import Voltage3Params, Voltage3State
from jaxgrid.grid.three_phase import build_port_zbus, load_feeder3
from jaxgrid.registry import register
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.rewards.voltage_barrier import BARRIERS

# Scenario of each registered feeder: the bundled feeder; the inverters as bus -> phases
# (three-phase ones on the main trunk's ends, single-phase ones on laterals of each
# phase); installed PV peak as a multiple of the feeder's total nominal load, shared per
# connected phase; the load multiplier (the SimBench load profiles peak at 1); the
# nodes left out of the voltage objective and band (the transmission source and the
# substation's secondary, held by the source); whether the regulators' own controls move
# their taps (default: fixed). Every episode starts at neutral taps (1.0): at the
# published taps (up to +6.9 %, set for the nominal load) every node is above 1.05 pu
# whenever the load is light, which no inverter can correct.
SCENARIOS = {
    "voltage13": dict(
        feeder="ieee13",
        pv={"675": "abc", "680": "abc", "633": "abc", "611": "c", "652": "a", "646": "b"},
        pv_penetration=4.0,
        load_scale=1.0,
        unmonitored=("sourcebus", "650"),
    ),
    # four three-phase inverters at the ends of the trunk's branches and twelve
    # single-phase ones, four per phase, on the laterals of that phase
    "voltage123": dict(
        feeder="ieee123",
        pv={
            **{bus: "abc" for bus in ("48", "65", "83", "108")},
            **{bus: "a" for bus in ("11", "33", "70", "114")},
            **{bus: "b" for bus in ("22", "39", "59", "107")},
            **{bus: "c" for bus in ("6", "17", "75", "104")},
        },
        pv_penetration=3.0,
        load_scale=1.0,
        unmonitored=("150", "150r"),
        tap_control=True,
    ),
}
STEPS_PER_DAY = 96  # 15-minute steps
COMMERCIAL_EVERY = 4  # every fourth load follows a commercial load profile, the rest households
PHASES = "abc"


def make_voltage3(
    scenario: str = "voltage13",
    barrier: str = "l1",
    q_weight: float = 0.1,
    load_scale: float | None = None,
    pv_penetration: float | None = None,
    taps: str | None = None,
    tap_control: bool | None = None,
    n_iter: int = N_ITER,
    power_flow_penalty: float = 0.1,
):
    """Build a three-phase voltage control environment and its default params.

    Args:
        scenario: a key of :data:`SCENARIOS`.
        barrier: ``"l1"``, ``"l2"``, ``"bowl"`` or ``"courant_beltrami"``.
        q_weight: weight of the reactive-power objective in the default weighted sum.
        load_scale: multiplier of every load (default: the scenario's).
        pv_penetration: installed PV peak over the feeder's nominal load (default: the
            scenario's).
        taps: the regulators' taps at reset: ``"neutral"`` (every regulator at 1.0) or
            ``"published"`` (the taps OpenDSS's regulator controls reach on the
            published feeder at its nominal load); default: the scenario's.
        tap_control: the regulators' own controls move their taps once a step
            (default: the scenario's).
        n_iter: fixed-point iterations of the power flow per step, 1 to 100.
        power_flow_penalty: reward lost per agent, on a step whose power flow fails, for
            that step and each step the episode loses (it ends there).
    """
    if scenario not in SCENARIOS:
        raise ValueError(
            f"unknown voltage3 scenario {scenario!r}; expected one of {list(SCENARIOS)}"
        )
    if barrier not in BARRIERS:
        raise ValueError(f"unknown barrier {barrier!r}; expected one of {list(BARRIERS)}")
    spec = SCENARIOS.get(scenario, {})
    taps = spec.get("taps", "neutral") if taps is None else taps
    tap_control = spec.get("tap_control", False) if tap_control is None else bool(tap_control)
    if taps not in ("neutral", "published"):
        raise ValueError(f"unknown taps {taps!r}; expected 'neutral' or 'published'")
    if not 1 <= int(n_iter) <= 100:
        raise ValueError(f"n_iter = {n_iter}: expected 1 to 100 iterations")
    spec = SCENARIOS[scenario]
    feeder = load_feeder3(spec["feeder"])
    if taps == "neutral":
        feeder = feeder.replace(tap_pu=np.ones_like(np.asarray(feeder.tap_pu)))
    bus_nodes = np.asarray(feeder.bus_nodes)
    bus_index = {name: i for i, name in enumerate(feeder.bus_names)}
    pv_nodes = np.zeros((len(spec["pv"]), 3), np.int32)
    pv_phases = np.zeros((len(spec["pv"]), 3), bool)
    for k, (bus, phases) in enumerate(spec["pv"].items()):
        for p in phases:
            node = bus_nodes[bus_index[bus], PHASES.index(p)]
            pv_nodes[k, PHASES.index(p)] = node
            pv_phases[k, PHASES.index(p)] = node >= 0
    penetration = spec["pv_penetration"] if pv_penetration is None else pv_penetration
    total_kw = float(np.sum(np.asarray(feeder.load_p_w))) / 1e3
    p_max = penetration * total_kw * pv_phases.sum(axis=1) / pv_phases.sum()
    data = simbench_profiles(STEPS_PER_DAY)
    n_pv = len(spec["pv"])
    monitored = np.array(
        [feeder.bus_names[b] not in spec["unmonitored"] for b in np.asarray(feeder.node_bus)]
    )
    commercial = np.asarray(feeder.load_id) % COMMERCIAL_EVERY == COMMERCIAL_EVERY - 1
    params = Voltage3Params(
        feeder=feeder,
        zbus=build_port_zbus(feeder, gen_nodes=np.unique(pv_nodes[pv_phases])),
        regcontrol=load_regcontrols(spec["feeder"]),
        tap_control=np.bool_(tap_control),
        profiles=data,
        load_profile=commercial.astype(np.int32),  # column 0 households, 1 commerce
        load_scale=np.float32(spec["load_scale"] if load_scale is None else load_scale),
        pv_nodes=pv_nodes,
        pv_phases=pv_phases,
        pv_profile=(np.arange(n_pv) % data.pv.shape[1]).astype(np.int32),
        pv_p_max_kw=p_max.astype(np.float32),
        pv_s_max_kva=(S_MAX_RATIO * p_max).astype(np.float32),
        monitored=monitored,
        v_ref=np.float32(1.0),
        v_lower=np.float32(0.95),
        v_upper=np.float32(1.05),
        vuf_limit=np.float32(0.02),
        barrier=np.int32(BARRIERS[barrier]),
        power_flow_penalty=np.float32(power_flow_penalty),
        scalarisation=Scalarisation.create(2, "weighted_sum", [1.0, q_weight]),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    env = Voltage3Control(
        params,
        horizon=STEPS_PER_DAY,
        agents=tuple(f"pv_{bus}" for bus in spec["pv"]),
        n_iter=n_iter,
        name=f"{scenario}-v0",
    )
    return env, params


def make_voltage3_regulators(
    scenario: str = "voltage123", max_tap_steps: int = MAX_TAP_STEPS, **kwargs
):
    """:func:`make_voltage3` with the regulators as agents beside the inverters
    (:class:`Voltage3RegulatorAgents`; their own controls off).

    Args:
        scenario: a key of :data:`SCENARIOS`.
        max_tap_steps: tap steps a regulator agent moves at most in one step, 1 to 16.
        **kwargs: :func:`make_voltage3`'s arguments but ``tap_control``.
    """
    if not 1 <= int(max_tap_steps) <= 16:
        raise ValueError(f"max_tap_steps = {max_tap_steps}: expected 1 to 16")
    if "tap_control" in kwargs:
        raise ValueError("the regulators are agents here: tap_control is not an argument")
    env, params = make_voltage3(scenario, tap_control=False, **kwargs)
    agents = Voltage3RegulatorAgents(
        params,
        horizon=env.horizon,
        pv_agents=env.agents,
        regulator_agents=tuple(f"reg_{name}" for name in params.feeder.regulator_names),
        max_tap_steps=max_tap_steps,
        n_iter=env.n_iter,
        name=f"{scenario}-reg-v0",
    )
    return agents, params


def _register_regulator_agents(scenario: str) -> None:
    def factory(**overrides):
        return make_voltage3_regulators(scenario, **overrides)

    base = [
        p
        for p in list(inspect.signature(make_voltage3).parameters.values())[1:]
        if p.name != "tap_control"
    ]
    extra = inspect.signature(make_voltage3_regulators).parameters["max_tap_steps"]
    factory.__signature__ = inspect.Signature([extra, *base])
    register(f"{scenario}-reg-v0", factory)


def _register(scenario: str) -> None:
    def factory(**overrides):
        return make_voltage3(scenario, **overrides)

    factory.__signature__ = inspect.signature(make_voltage3).replace(
        parameters=list(inspect.signature(make_voltage3).parameters.values())[1:]
    )
    register(f"{scenario}-v0", factory)


for _scenario in SCENARIOS:
    _register(_scenario)
_register_regulator_agents("voltage123")

__all__ = [
    "SCENARIOS",
    "Voltage3Control",
    "Voltage3Params",
    "Voltage3RegulatorAgents",
    "Voltage3State",
    "make_voltage3",
    "make_voltage3_regulators",
    "no_control",
    "volt_var_droop3",
]
