"""``dso33-v0``: a distribution system operator dispatching six flexible loads on case33bw."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.csv_profiles import csv_profiles
from jaxgrid.data.simbench import simbench_profiles
from jaxgrid.devices.flexload import FlexLoadParams
from jaxgrid.envs.dso import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.dso.baselines import evening_shift, no_control
from jaxgrid.envs.dso.env import DSO, DSOParams, DSOState
from jaxgrid.grid import cases
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.registry import register
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import Scalarisation

# PowerZoo's DSO task: (bus number, curtailment and shift capacity in MW)
FLEX_LOADS = ((6, 0.165), (14, 0.110), (18, 0.110), (22, 0.088), (28, 0.132), (33, 0.110))


def make_dso(
    solver: str = "distflow",
    steps_per_day: int = 48,
    window: int = 4,
    load_scale: float = 3.0,
    vm_slack_pu: float = 1.045,
    v_band: tuple[float, float] = (0.94, 1.06),
    deferral_weight: float = 0.1,
    distflow_iterations: int = 8,
    abort: dict | None = None,
    power_flow_penalty: float = 0.15,
    name: str = "dso33-v0",
    feeder: str | None = None,
    flex_loads: tuple[tuple[int, float], ...] | None = None,
    load_csv: dict | None = None,
):
    """Build the DSO environment on case33bw and the bundled SimBench year (or your own
    network and data).

    Args:
        solver: ``"distflow"`` or ``"lindistflow"``.
        steps_per_day: 48 (30 minutes, as PowerZoo), 24 or 96.
        window: steps within which deferred demand must be served.
        load_scale: multiplier of every load (SimBench profiles peak at 1 and average
            0.15-0.35 of the case's base load).
        vm_slack_pu: substation voltage.
        v_band: voltage band of the cost, pu.
        deferral_weight: weight of the deferral objective in the default reward.
        distflow_iterations: sweeps of the nonlinear solver, 1 to 100
            (:data:`jaxgrid.grid.distflow.MAX_ITERATIONS`: each is unrolled);
            Newton-Raphson takes over where they do not converge.
        abort: bounds that end an episode, e.g. ``{"min_vm_pu": (0.85, inf)}``.
        power_flow_penalty: reward lost on a step whose power flow fails, for that step
            and each step the episode loses (it ends there): more than the mean reward of
            random actions, -0.11 a step.
        feeder: another network than case33bw: a bundled case name, a MATPOWER ``.m`` or a
            pandapower ``.json`` file; it must be radial.
        flex_loads: ``((bus number, capacity MW), ...)``: the flexible loads, with the
            curtailment and shift capacity of each (default: PowerZoo's six,
            :data:`FLEX_LOADS`; needed with another feeder).
        load_csv: a CSV source of the load multiplier (:mod:`jaxgrid.data.csv_profiles`),
            for every bus; it replaces the SimBench year.
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    if window < 1:
        raise ValueError(f"window must be >= 1 step, got {window}")
    if feeder is not None and flex_loads is None:
        raise ValueError("flex_loads: give the flexible loads' buses and capacities of your feeder")
    flex_loads = FLEX_LOADS if flex_loads is None else flex_loads
    if len(flex_loads) == 0:
        raise ValueError("flex_loads: expected at least one (bus number, capacity MW)")
    caps = np.array([c for _, c in flex_loads], np.float64)
    if not np.all(np.isfinite(caps) & (caps > 0)):
        raise ValueError(f"flex_loads: capacities must be positive MW, got {caps.tolist()}")
    feeder = cases.load_feeder(feeder or "case33bw").replace(vm_slack_pu=np.float64(vm_slack_pu))
    try:
        flex_bus = feeder.device_buses([b for b, _ in flex_loads])
    except ValueError as err:
        raise ValueError(f"flex_loads: {err}") from None
    if load_csv is None:
        profiles = simbench_profiles(steps_per_day)
        load_profile = (np.arange(feeder.n_bus) % 4 == 3).astype(np.int32)
    else:
        profiles = csv_profiles(steps_per_day, load_csv)
        load_profile = np.zeros(feeder.n_bus, np.int32)  # one load column for every bus
    params = DSOParams(
        feeder=feeder,
        profiles=profiles,
        load_profile=load_profile,
        load_scale=np.float64(load_scale),
        flex_bus=flex_bus,
        flex=FlexLoadParams(curtail_cap_mw=caps, shift_cap_mw=caps),
        v_lower=np.float64(v_band[0]),
        v_upper=np.float64(v_band[1]),
        dt_h=np.float64(24.0 / steps_per_day),
        solver=np.int32(SOLVERS[solver]),
        power_flow_penalty=np.float32(power_flow_penalty),
        abort=AbortConditions.create(DSO.abort_names, **(abort or {})),
        scalarisation=Scalarisation.create(3, "weighted_sum", [1.0, 1.0, deferral_weight]),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    env = DSO(
        params,
        horizon=steps_per_day,
        window=window,
        distflow_iterations=distflow_iterations,
        name=name,
    )
    return env, params


register("dso33-v0", make_dso)

__all__ = ["DSO", "DSOParams", "DSOState", "evening_shift", "make_dso", "no_control"]
