"""``ders33-v0`` and ``ders141-v0``: batteries, PV, flexible loads and EVs on one feeder."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.csv_profiles import csv_profiles
from jaxgrid.data.simbench import PRICE_NAMES, simbench_profiles
from jaxgrid.devices.battery import BatteryParams
from jaxgrid.devices.ev import EVParams
from jaxgrid.devices.flexload import FlexLoadParams
from jaxgrid.devices.renewable import S_MAX_RATIO
from jaxgrid.envs.ders import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.ders.baselines import no_control, price_and_voltage_rules
from jaxgrid.envs.ders.env import TYPES, DERs, DERsParams, DERsState
from jaxgrid.envs.voltage.zones import spread_buses
from jaxgrid.grid import cases, distflow
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.registry import register
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import Scalarisation

# devices of each type, and the shares of the feeder's base load that size them
SCENARIOS = {
    "ders33": dict(case="case33bw", counts=dict(battery=2, pv=3, flexload=2, ev=2), load_scale=2.5),
    "ders141": dict(case="case141", counts=dict(battery=3, pv=4, flexload=3, ev=2), load_scale=2.5),
}
BATTERY_SHARE, PV_PENETRATION, FLEX_SHARE, EV_SHARE = 0.08, 1.5, 0.05, 0.05
THERMAL_MARGIN = 1.5  # assumed rating = 1.5 x the branch's apparent power at base load


def assumed_ratings(feeder, margin: float = THERMAL_MARGIN) -> np.ndarray:
    """Branch ratings (MVA) for a case without any: ``margin`` times the base-case flow.

    An assumption, documented as such: the bundled cases publish no line ratings.
    Ten sweeps: the base case converges to float32 round-off in them (20 gave the same
    ratings to 2e-7) and compile faster than twenty.
    """
    flow = distflow(feeder, feeder.p_load_mw, feeder.q_load_mvar, iterations=10)
    s = np.hypot(np.asarray(flow.p_branch_mw), np.asarray(flow.q_branch_mvar))
    return margin * np.maximum(s, 1e-3)


def make_ders(
    scenario: str = "ders33",
    solver: str = "distflow",
    steps_per_day: int = 48,
    window: int = 4,
    load_scale: float | None = None,
    price: str = "merit_order",
    weights: tuple[float, ...] = (0.02, 20.0, 50.0, 5.0, 1.0),
    distflow_iterations: int = 8,
    abort: dict | None = None,
    feeder: str | None = None,
    devices: dict | None = None,
    load_csv: dict | None = None,
    pv_csv: dict | None = None,
    price_csv: dict | None = None,
    power_flow_penalty: float = 10.0,
):
    """Build a DER environment on the bundled SimBench year (or your own network and data).

    Args:
        scenario: ``"ders33"`` or ``"ders141"`` (:data:`SCENARIOS`).
        solver: ``"distflow"`` or ``"lindistflow"``.
        steps_per_day: 48 (30 minutes), 24 or 96; an episode is one day.
        window: steps within which deferred flexible demand must be served.
        load_scale: multiplier of every load (default: the scenario's).
        price: the price series of the energy cost.
        weights: default weights of energy_cost, losses, voltage, discomfort, fairness
            (chosen so that each term is of order one per step).
        distflow_iterations: sweeps of the nonlinear solver, 1 to 100
            (:data:`jaxgrid.grid.distflow.MAX_ITERATIONS`: each is unrolled);
            Newton-Raphson takes over where they do not converge.
        abort: bounds that end an episode, e.g. ``{"min_battery_soc": (0.2, 1.0)}``.
        feeder: another network than the scenario's: a bundled case name, a MATPOWER
            ``.m`` or a pandapower ``.json`` file; it must be radial. Branch ratings are
            assumed as for the bundled cases.
        devices: the devices by type, one agent each: ``{"battery": [bus, ...], "pv": ...,
            "flexload": ..., "ev": ...}`` with the feeder data's bus numbers, every type
            at least once (default: the scenario's counts spread over the feeder). A type
            may instead be a table ``{"buses": [...], <size>: value}`` with the sizes of
            :data:`SIZES` (shared by the type's devices); sizes left out follow the
            feeder's base load as in the bundled scenarios.
        load_csv, pv_csv, price_csv: CSV sources of the load multiplier, the PV
            availability and the price (currency/MWh) (:mod:`jaxgrid.data.csv_profiles`),
            given together; they replace the SimBench year.
        power_flow_penalty: reward lost per agent, on a step whose power flow fails,
            for that step and for each step the episode loses (it ends there). Random
            actions average -4.85 a step on ders33-v0 and -10.4 on ders141-v0 (512
            episodes x 2 seeds), so the default 10 is above the first and about equal to
            the second; no power flow failed in 10,000 random steps of either.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown DER scenario {scenario!r}; expected one of {list(SCENARIOS)}")
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    if price not in PRICE_NAMES:
        raise ValueError(f"unknown price series {price!r}; expected one of {list(PRICE_NAMES)}")
    csv_sources = (load_csv, pv_csv, price_csv)
    if any(x is None for x in csv_sources) and any(x is not None for x in csv_sources):
        raise ValueError("load_csv, pv_csv and price_csv go together: give all three or none")
    spec = SCENARIOS[scenario]
    feeder = cases.load_feeder(feeder or spec["case"])
    feeder = feeder.replace(rate_mva=assumed_ratings(feeder))
    total = float(np.sum(feeder.p_load_mw))
    if devices is None:
        by_type, chosen = spread_by_type(feeder, spec["counts"]), {}
    else:
        by_type, chosen = placed_by_type(feeder, devices)
    n_b, n_pv, n_f, n_ev = (len(by_type[t]) for t in TYPES)
    size = {
        t: {**default, **chosen.get(t, {})} for t, default in default_sizes(total, n_pv).items()
    }
    if load_csv is None:
        profiles = simbench_profiles(steps_per_day)
        load_profile = (np.arange(feeder.n_bus) % 4 == 3).astype(np.int32)
    else:
        profiles = csv_profiles(steps_per_day, load_csv, pv=pv_csv, price=price_csv)
        load_profile = np.zeros(feeder.n_bus, np.int32)  # one load column for every bus
    full = lambda n, v: np.full(n, v, np.float64)  # noqa: E731
    p_bat, p_pv, p_ev = (size[t]["p_max_mw"] for t in ("battery", "pv", "ev"))
    flex_size = size["flexload"]["size_mw"]
    params = DERsParams(
        feeder=feeder,
        profiles=profiles,
        load_profile=load_profile,
        load_scale=np.float64(spec["load_scale"] if load_scale is None else load_scale),
        battery_bus=by_type["battery"].astype(np.int32),
        battery=BatteryParams(
            capacity_mwh=full(n_b, size["battery"]["capacity_mwh"]),
            p_max_mw=full(n_b, p_bat),
            s_max_mva=full(n_b, 1.1 * p_bat),
            eta_charge=full(n_b, 0.95),
            eta_discharge=full(n_b, 0.95),
            soc_min=full(n_b, 0.1),
            soc_max=full(n_b, 0.9),
            degradation_cost=full(n_b, 2.0),
        ),
        battery_soc0=full(n_b, 0.5),
        pv_bus=by_type["pv"].astype(np.int32),
        pv_p_max_mw=full(n_pv, p_pv),
        pv_s_max_mva=full(n_pv, S_MAX_RATIO * p_pv),
        pv_profile=(np.arange(n_pv) % profiles.pv.shape[1]).astype(np.int32),
        flex_bus=by_type["flexload"].astype(np.int32),
        flex=FlexLoadParams(
            curtail_cap_mw=full(n_f, 0.5 * flex_size), shift_cap_mw=full(n_f, 0.5 * flex_size)
        ),
        flex_size_mw=full(n_f, flex_size),
        ev_bus=by_type["ev"].astype(np.int32),
        ev=EVParams(
            battery=BatteryParams(
                capacity_mwh=full(n_ev, size["ev"]["capacity_mwh"]),
                p_max_mw=full(n_ev, p_ev),
                s_max_mva=full(n_ev, p_ev),
                eta_charge=full(n_ev, 0.92),
                eta_discharge=full(n_ev, 0.92),
                soc_min=full(n_ev, 0.0),
                soc_max=full(n_ev, 1.0),
                degradation_cost=full(n_ev, 0.0),
            ),
            target_soc=full(n_ev, 0.9),
            v2g=np.arange(n_ev) % 2 == 1,
        ),
        ev_soc0=full(n_ev, 0.3),
        # home charging points (evening arrival, overnight stay) and workplace ones (morning)
        ev_arrival_range=np.array(
            [
                [17 * steps_per_day // 24, 20 * steps_per_day // 24]
                if i % 2 == 0
                else [8 * steps_per_day // 24, 10 * steps_per_day // 24]
                for i in range(n_ev)
            ],
            np.int32,
        ),
        ev_stay_range=np.array(
            [[4 * steps_per_day // 24, 9 * steps_per_day // 24]] * n_ev, np.int32
        ),
        price_column=np.int32(PRICE_NAMES.index(price)),
        v_lower=np.float64(0.95),
        v_upper=np.float64(1.05),
        dt_h=np.float64(24.0 / steps_per_day),
        solver=np.int32(SOLVERS[solver]),
        power_flow_penalty=np.float32(power_flow_penalty),
        abort=AbortConditions.create(DERs.abort_names, **(abort or {})),
        scalarisation=Scalarisation.create(5, "weighted_sum", list(weights)),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    env = DERs(
        params,
        horizon=steps_per_day,
        window=window,
        distflow_iterations=distflow_iterations,
        name=f"{scenario}-v0",
    )
    return env, params


def spread_by_type(feeder, counts: dict[str, int]) -> dict[str, np.ndarray]:
    """Bus indices of ``counts[type]`` devices of each type, spread over the feeder and
    dealt to the types in turn (so that every type is spread over the feeder)."""
    by_type = {t: [] for t in TYPES}
    turn = 0
    for bus in spread_buses(feeder, sum(counts.values())):
        while len(by_type[TYPES[turn % len(TYPES)]]) == counts[TYPES[turn % len(TYPES)]]:
            turn += 1
        by_type[TYPES[turn % len(TYPES)]].append(bus)
        turn += 1
    return {t: np.array(v, np.int32) for t, v in by_type.items()}


def default_sizes(total_load_mw: float, n_pv: int) -> dict[str, dict[str, float]]:
    """Device sizes (MW, MWh) from the feeder's total base load, as the bundled scenarios."""
    p_bat, p_ev = BATTERY_SHARE * total_load_mw, EV_SHARE * total_load_mw
    return {
        "battery": {"p_max_mw": p_bat, "capacity_mwh": 2 * p_bat},
        "pv": {"p_max_mw": PV_PENETRATION * total_load_mw / n_pv},
        "flexload": {"size_mw": FLEX_SHARE * total_load_mw},
        "ev": {"p_max_mw": p_ev, "capacity_mwh": 4 * p_ev},
    }


SIZES = {t: tuple(v) for t, v in default_sizes(1.0, 1).items()}  # sizes a type may set


def placed_by_type(feeder, devices: dict) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """``(bus indices by type, sizes chosen by type)`` of devices placed by bus number:
    ``{type: [bus, ...]}`` or ``{type: {"buses": [...], <size>: value}}``."""
    unknown = sorted(set(devices) - set(TYPES))
    if unknown:
        raise ValueError(f"devices: unknown type {unknown[0]!r}; expected {list(TYPES)}")
    by_type, sizes = {}, {}
    for t in TYPES:
        entry = devices.get(t)
        table = dict(entry) if isinstance(entry, dict) else {"buses": entry}
        buses = table.pop("buses", None)
        extra = sorted(set(table) - set(SIZES[t]))
        if extra:
            raise ValueError(
                f"devices.{t}.{extra[0]}: unknown key; expected buses and some of {list(SIZES[t])}"
            )
        if not buses:
            raise ValueError(f"devices.{t}: expected at least one bus number")
        for key, value in table.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not np.isfinite(value) or value <= 0:
                raise ValueError(f"devices.{t}.{key}: expected a positive number, got {value!r}")
        try:
            by_type[t] = feeder.device_buses(buses)
        except ValueError as err:
            raise ValueError(f"devices.{t}: {err}") from None
        sizes[t] = {k: float(v) for k, v in table.items()}
    return by_type, sizes


def _register(scenario: str) -> None:
    def factory(**overrides):
        return make_ders(scenario, **overrides)

    signature = inspect.signature(make_ders)
    factory.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    register(f"{scenario}-v0", factory)


for _scenario in SCENARIOS:
    _register(_scenario)

__all__ = [
    "DERs",
    "DERsParams",
    "DERsState",
    "SCENARIOS",
    "assumed_ratings",
    "make_ders",
    "no_control",
    "price_and_voltage_rules",
]
