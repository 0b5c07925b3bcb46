"""Active voltage control environments (``voltage33-v0``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.synthetic import synthetic_profiles
from jaxgrid.devices.renewable import S_MAX_RATIO
from jaxgrid.envs.voltage.baselines import no_control, volt_var_curve, volt_var_droop
from jaxgrid.envs.voltage.env import VoltageControl
from jaxgrid.envs.voltage.types import SOLVERS, VoltageParams, VoltageState
from jaxgrid.envs.voltage.zones import voronoi_zones
from jaxgrid.grid import cases
from jaxgrid.registry import register
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.rewards.voltage_barrier import BARRIERS

# Scenario of each registered feeder: PV buses (the case's bus numbers), installed PV
# peak as a multiple of the feeder's total base load, and the load multiplier. Chosen so
# that without control about a third of the steps leave the band (evening undervoltage,
# midday overvoltage) while the inverters' reactive power can fix them.
SCENARIOS = {
    "voltage33": dict(
        case="case33bw", pv_bus_ids=(13, 18, 22, 25, 29, 33), pv_penetration=2.5, load_scale=1.3
    ),
}
STEPS_PER_DAY = 96  # 15-minute steps


def make_voltage(
    scenario: str = "voltage33",
    barrier: str = "l1",
    solver: str = "distflow",
    q_weight: float = 0.1,
    load_scale: float | None = None,
    distflow_iterations: int = 10,
    seed: int = 0,
):
    """Build a voltage control environment and its default params.

    Args:
        scenario: a key of :data:`SCENARIOS`.
        barrier: ``"l1"``, ``"l2"``, ``"bowl"`` or ``"courant_beltrami"``.
        solver: ``"distflow"`` or ``"lindistflow"``.
        q_weight: weight of the reactive-power objective in the default weighted sum.
        load_scale: multiplier of every load (default: the scenario's).
        distflow_iterations: sweeps of the nonlinear solver.
        seed: seed of the synthetic profiles.
    """
    if scenario not in SCENARIOS:
        raise ValueError(
            f"unknown voltage scenario {scenario!r}; expected one of {list(SCENARIOS)}"
        )
    if barrier not in BARRIERS:
        raise ValueError(f"unknown barrier {barrier!r}; expected one of {list(BARRIERS)}")
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    spec = SCENARIOS[scenario]
    feeder = cases.load_bundled(spec["case"])
    bus_ids = np.asarray(feeder.bus_ids)
    pv_bus = np.array([int(np.flatnonzero(bus_ids == b)[0]) for b in spec["pv_bus_ids"]], np.int32)
    n_pv = len(pv_bus)
    profiles = synthetic_profiles(steps_per_day=STEPS_PER_DAY, seed=seed)
    n_load_profiles = profiles.load.shape[1]
    p_max = np.full(n_pv, spec["pv_penetration"] * float(np.sum(feeder.p_load_mw)) / n_pv)
    zone_buses, zone_mask = voronoi_zones(feeder, pv_bus)
    params = VoltageParams(
        feeder=feeder,
        profiles=profiles,
        load_profile=(np.arange(feeder.n_bus) % n_load_profiles).astype(np.int32),
        load_scale=np.float32(spec["load_scale"] if load_scale is None else load_scale),
        pv_bus=pv_bus,
        pv_profile=np.zeros(n_pv, np.int32),
        pv_p_max_mw=p_max.astype(np.float32),
        pv_s_max_mva=(S_MAX_RATIO * p_max).astype(np.float32),
        zone_buses=zone_buses,
        zone_mask=zone_mask,
        v_ref=np.float32(1.0),
        v_lower=np.float32(0.95),
        v_upper=np.float32(1.05),
        barrier=np.int32(BARRIERS[barrier]),
        solver=np.int32(SOLVERS[solver]),
        scalarisation=Scalarisation.create(2, "weighted_sum", [1.0, q_weight]),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    env = VoltageControl(
        params,
        horizon=STEPS_PER_DAY,
        distflow_iterations=distflow_iterations,
        name=f"{scenario}-v0",
    )
    return env, params


def _voltage33(**overrides):
    return make_voltage("voltage33", **overrides)


register("voltage33-v0", _voltage33)

__all__ = [
    "SCENARIOS",
    "VoltageControl",
    "VoltageParams",
    "VoltageState",
    "make_voltage",
    "no_control",
    "volt_var_curve",
    "volt_var_droop",
]
