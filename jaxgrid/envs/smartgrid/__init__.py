"""EthicalSmartGrid in JAX: ``smartgrid-v0`` and its variants."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.envs.smartgrid import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.smartgrid.buildings import COMFORT_CURVES, PROFILES, openei_profile
from jaxgrid.envs.smartgrid.env import OBJECTIVES, SmartGrid
from jaxgrid.envs.smartgrid.observation import GLOBAL_FIELDS, LOCAL_FIELDS, OBSERVATION_FIELDS
from jaxgrid.envs.smartgrid.on_feeder import FeederParams, SmartGridOnFeeder, on_feeder
from jaxgrid.envs.smartgrid.types import (
    GENERATORS,
    RANDOM,
    REALISTIC,
    BuildingProfiles,
    EnergyGenerator,
    Schedule,
    SmartgridParams,
    SmartgridState,
)
from jaxgrid.registry import register, register_variant
from jaxgrid.rewards.argumentation import JUDGMENTS
from jaxgrid.rewards.scalarise import Scalarisation

PRESETS = {"random": (0.8, 1.2), "scarce": (0.6, 0.8), "generous": (1.0, 1.2)}
# AdaptabilityThree, as the reward, and its three terms for multi-objective use
DEFAULT_OBJECTIVES = ("adaptability_three", "equity", "over_consumption", "comfort")


def make_smartgrid(
    households: int = 20,
    offices: int = 5,
    schools: int = 1,
    period: str = "annually",
    generator: str = "random",
    lower: float | None = None,
    upper: float | None = None,
    energy_series: tuple[float, ...] | None = None,
    energy_bounds: tuple[float, float] | None = None,
    productions: dict[str, tuple[float, ...]] | None = None,
    objectives: tuple[str, ...] = DEFAULT_OBJECTIVES,
    scalarisation: str = "single",
    weights: tuple[float, ...] | None = None,
    schedule: dict | None = None,
    judgments: str | dict = "simple",
    mos_coefficients: tuple[float, float] = (0.2, 0.8),
    adaptability_steps: tuple[int, int, int, int] = (3000, 2000, 2000, 6000),
    horizon: int = 10_000,
    peer_energy_loss: bool = False,
    name: str = "smartgrid-v0",
):
    """Build a smartgrid environment and its default params.

    Args:
        households, offices, schools: agents of each stock profile (flexible, neutral
            and strict comfort; OpenEI needs), named ``Household1 ..`` in that order.
        period: ``"annually"`` (8760-hour profiles) or ``"daily"`` (one average day).
        generator: ``"random"``, ``"scarce"``, ``"generous"`` (random with preset
            proportions), ``"realistic"`` (``energy_series`` = ratios of the maximum
            total need) or ``"trace"`` (``energy_series`` = Wh per hour, from hour 0).
        lower, upper: proportions of the current total need for a random generator.
        energy_bounds: ``(low, high)`` Wh mapped to [0, 1] in the ``available_energy``
            observation (default: the generator's possible range).
        productions: ``{profile: (T,) Wh}`` explicit production series instead of
            drawing them from the reset key.
        objectives: names from :data:`OBJECTIVES`, in reward-list order.
        scalarisation: ``"single"`` (the first active objective with a non-zero weight),
            ``"weighted_sum"``, ``"min"`` or ``"product"``.
        weights: scalarisation weights (default: equal weights, so ``single`` takes the
            first active objective, as EthicalSmartGrid's SingleRewardAggregator).
        schedule: ``{objective: {"start": int, "end": int, "agents": [names]}}``
            activation windows and agent sets (EthicalSmartGrid's reward constraints).
        judgments: judgment function of the argumentation rewards, one name from
            ``simple``, ``diff``, ``ratio``, ``grad``, ``offset`` or a dict by objective.
        mos_coefficients: weights of comfort and over-consumption in the
            multi-objective sums.
        adaptability_steps: switch steps of AdaptabilityOne, Two and Three (two).
        horizon: hours per episode.
        peer_energy_loss: report EthicalSmartGrid's ``energy_loss`` (always 0).
        name: the environment's name.
    """
    counts = {"Household": households, "Office": offices, "School": schools}
    if any(c < 0 for c in counts.values()) or sum(counts.values()) < 1:
        raise ValueError(f"need at least one agent and no negative counts, got {counts}")
    used = [p for p in PROFILES if counts[p] > 0]
    data = {p: openei_profile(p, period) for p in used}
    length = max(len(d["needs"]) for d in data.values())
    needs = np.zeros((len(used), length))
    production_table = np.zeros((len(used), length))
    productions = productions or {}
    unknown = set(productions) - set(used)
    if unknown:
        raise ValueError(f"productions given for profiles without agents: {sorted(unknown)}")
    for i, p in enumerate(used):
        needs[i, : len(data[p]["needs"])] = data[p]["needs"]
        if p in productions:
            series = np.asarray(productions[p], np.float64)
            if series.shape != data[p]["needs"].shape or not np.all(np.isfinite(series)):
                raise ValueError(
                    f"productions[{p!r}] must be {len(data[p]['needs'])} finite values, got "
                    f"shape {series.shape}"
                )
            production_table[i, : len(series)] = series
    if productions and set(productions) != set(used):
        raise ValueError(f"give explicit productions for every profile in use: {used}")
    agent_profile = np.concatenate([np.full(counts[p], i) for i, p in enumerate(used)]).astype(
        np.int32
    )
    agents = tuple(f"{p}{k + 1}" for p in used for k in range(counts[p]))
    agent_types = tuple(p for p in used for _ in range(counts[p]))
    capacity = np.array([data[p]["max_storage"] for p in used])
    max_need = float(sum(counts[p] * data[p]["needs"].max() for p in used))

    kind = generator if generator not in PRESETS else "random"
    if kind not in GENERATORS:
        raise ValueError(
            f"unknown generator {generator!r}; expected one of {list(PRESETS) + ['realistic', 'trace']}"
        )
    lo, hi = PRESETS.get(generator, PRESETS["random"])
    lo = lo if lower is None else lower
    hi = hi if upper is None else upper
    if not 0 <= lo <= hi:
        raise ValueError(f"generator proportions need 0 <= lower <= upper, got {lo}, {hi}")
    if kind == "random":
        series = np.zeros(1)
        bounds = (int(lo * 0), int(hi * max_need))
    else:
        if energy_series is None:
            raise ValueError(f"the {kind!r} generator needs energy_series")
        series = np.asarray(energy_series, np.float64)
        if (
            series.ndim != 1
            or len(series) == 0
            or not np.all(np.isfinite(series))
            or np.any(series < 0)
        ):
            raise ValueError("energy_series must be a non-empty 1-D array of finite values >= 0")
        if kind == "realistic":
            bounds = (int(series.min() * max_need), int(series.max() * max_need))
        else:
            bounds = (float(series.min()), float(series.max()))
    if energy_bounds is not None:
        bounds = tuple(energy_bounds)
    if not bounds[0] < bounds[1]:
        raise ValueError(f"energy bounds need low < high, got {bounds}")

    objectives = tuple(objectives)
    unknown = [o for o in objectives if o not in OBJECTIVES]
    if unknown or not objectives or len(set(objectives)) != len(objectives):
        raise ValueError(
            f"objectives must be distinct names from {list(OBJECTIVES)}, got {objectives}"
        )
    n_obj, n = len(objectives), len(agents)
    start = np.zeros(n_obj, np.int64)
    end = np.full(n_obj, np.iinfo(np.int32).max, np.int64)
    allowed = np.ones((n_obj, n), bool)
    for obj, rule in (schedule or {}).items():
        if obj not in objectives:
            raise ValueError(
                f"schedule for {obj!r}, which is not among the objectives {objectives}"
            )
        extra = set(rule) - {"start", "end", "agents"}
        if extra:
            raise ValueError(f"schedule[{obj!r}] has unknown keys {sorted(extra)}")
        k = objectives.index(obj)
        start[k] = rule.get("start") or 0
        end[k] = rule["end"] if rule.get("end") is not None else end[k]
        if "agents" in rule:
            missing = set(rule["agents"]) - set(agents)
            if missing:
                raise ValueError(f"schedule[{obj!r}] names unknown agents {sorted(missing)}")
            allowed[k] = [a in rule["agents"] for a in agents]
    if isinstance(judgments, str):
        judgments = dict.fromkeys(
            ("affordability", "environmental_sustainability", "inclusiveness", "supply_security"),
            judgments,
        )
    order = ("affordability", "environmental_sustainability", "inclusiveness", "supply_security")
    bad = {k: v for k, v in judgments.items() if k not in order or v not in JUDGMENTS}
    if bad:
        raise ValueError(f"judgments must map {order} to one of {list(JUDGMENTS)}, got {bad}")

    dtype = jnp.zeros(()).dtype
    params = SmartgridParams(
        profiles=BuildingProfiles(
            needs=needs,
            length=np.array([len(data[p]["needs"]) for p in used], np.int32),
            productions=production_table,
            production_high=np.array([int(0.1 * data[p]["max_storage"]) for p in used], np.float64),
        ),
        agent_profile=agent_profile,
        capacity=capacity[agent_profile],
        action_limit=np.array([data[p]["action_limit"] for p in used])[agent_profile],
        comfort=np.array([COMFORT_CURVES[PROFILES[p][1]] for p in used])[agent_profile],
        max_need=np.float64(max_need),
        is_school=np.array([t == "School" for t in agent_types]),
        generator=EnergyGenerator(
            kind=np.int32(GENERATORS[kind]),
            lower=np.float64(lo),
            upper=np.float64(hi),
            series=series,
            bounds=np.array(bounds, np.float64),
        ),
        explicit_production=np.bool_(bool(productions)),
        mos_coefficients=np.array(mos_coefficients, np.float64),
        adaptability_steps=np.array(adaptability_steps, np.int32),
        judgments=np.array([JUDGMENTS[judgments.get(o, "simple")] for o in order], np.int32),
        schedule=Schedule(start=start.astype(np.int32), end=end.astype(np.int32), agents=allowed),
        peer_energy_loss=np.bool_(peer_energy_loss),
        scalarisation=Scalarisation.create(n_obj, scalarisation, weights),
    )
    params = jax.tree_util.tree_map(
        lambda x: (
            jnp.asarray(x, dtype)
            if np.issubdtype(np.asarray(x).dtype, np.floating)
            else jnp.asarray(x)
        ),
        params,
    )
    env = SmartGrid(params, agents, agent_types, objectives, horizon, name=name)
    return env, params


register_variant("smartgrid-v0", make_smartgrid)
register_variant("smartgrid-scarce-v0", make_smartgrid, generator="scarce")
register_variant("smartgrid-generous-v0", make_smartgrid, generator="generous")
register_variant("smartgrid-daily-v0", make_smartgrid, period="daily")
register_variant("smartgrid-medium-v0", make_smartgrid, households=80, offices=19)


def make_smartgrid33(
    buildings_per_agent: float = 6.0,
    background_share: float = 0.5,
    abort: dict | None = None,
    feeder: str = "case33bw",
    agent_buses: tuple[int, ...] | None = None,
    power_flow_penalty: float = 0.05,
    solver: str = "distflow",
    distflow_iterations: int = 5,
    **society,
):
    """``smartgrid-v0``'s society on case33bw or your ``feeder``, agents at ``agent_buses``
    (see :func:`.on_feeder.on_feeder`); ``abort`` bounds the bus voltages;
    ``power_flow_penalty`` is the reward lost per agent and lost step when a power flow
    fails; ``solver`` ``"distflow"`` (``distflow_iterations`` sweeps, Newton-Raphson where
    they do not converge) or ``"lindistflow"``; ``society`` takes :func:`make_smartgrid`'s
    arguments."""
    env, params = make_smartgrid(**{"name": "smartgrid-v0", **society})
    return on_feeder(
        env,
        params,
        buildings_per_agent,
        background_share,
        abort,
        feeder,
        agent_buses,
        power_flow_penalty,
        solver,
        distflow_iterations,
    )


# the society's arguments are part of smartgrid33's signature (make() checks overrides)
_own = list(inspect.signature(make_smartgrid33).parameters.values())[:-1]
_society = [p for n, p in inspect.signature(make_smartgrid).parameters.items() if n != "name"]
make_smartgrid33.__signature__ = inspect.Signature(_own + _society)
register("smartgrid33-v0", make_smartgrid33)

__all__ = [
    "DEFAULT_OBJECTIVES",
    "GLOBAL_FIELDS",
    "LOCAL_FIELDS",
    "OBJECTIVES",
    "OBSERVATION_FIELDS",
    "PRESETS",
    "RANDOM",
    "REALISTIC",
    "FeederParams",
    "SmartGrid",
    "SmartGridOnFeeder",
    "SmartgridParams",
    "SmartgridState",
    "make_smartgrid",
    "make_smartgrid33",
    "on_feeder",
]
