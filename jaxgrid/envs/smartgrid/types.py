"""State and params of the smartgrid environments."""

from __future__ import annotations

from flax import struct

from jaxgrid.devices.prosumer import ProsumerState
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array

RANDOM, REALISTIC, TRACE = 0, 1, 2
GENERATORS = {"random": RANDOM, "realistic": REALISTIC, "trace": TRACE}


@struct.dataclass
class BuildingProfiles:
    """Hourly tables of each building profile (Household, Office, School, ...).

    Attributes:
        needs: ``(n_profiles, T)`` energy needed per hour, Wh (rows padded to ``T``).
        length: ``(n_profiles,)`` int32 hours before a profile repeats (8760 or 24).
        productions: ``(n_profiles, T)`` explicit productions per hour, Wh, used when
            ``SmartgridParams.explicit_production`` is set.
        production_high: ``(n_profiles,)`` drawn productions are uniform integers in
            ``[0, production_high]`` (EthicalSmartGrid: ``int(0.1 * capacity)``).
    """

    needs: Array
    length: Array
    productions: Array
    production_high: Array


@struct.dataclass
class EnergyGenerator:
    """The local energy pool made available each hour.

    Attributes:
        kind: ``RANDOM`` (uniform integer in ``[int(lower * need), int(upper * need)]`` of
            the current total need), ``REALISTIC`` (``int(series[t] * max_need)``) or
            ``TRACE`` (``series[t]`` Wh, to replay a recorded run).
        lower, upper: proportions of the current total need (``RANDOM``).
        series: ``(L,)`` ratios (``REALISTIC``) or energies in Wh (``TRACE``), indexed
            by ``t % L``.
        bounds: ``(2,)`` Wh range mapped to [0, 1] in the ``available_energy`` observation.
    """

    kind: Array
    lower: Array
    upper: Array
    series: Array
    bounds: Array


@struct.dataclass
class Schedule:
    """When and for whom each objective is active (EthicalSmartGrid's reward constraints).

    Attributes:
        start, end: ``(n_objectives,)`` int32, active while ``start <= t < end``.
        agents: ``(n_objectives, n_agents)`` bool, the agents the objective rewards.
    """

    start: Array
    end: Array
    agents: Array


@struct.dataclass
class SmartgridParams:
    """Everything a smartgrid scenario may vary.

    Attributes:
        profiles: per-profile hourly tables.
        agent_profile: ``(n,)`` int32 profile of each agent.
        capacity: ``(n,)`` battery capacity, Wh.
        action_limit: ``(n,)`` upper bound of every action component, Wh.
        comfort: ``(n, 4)`` Richards curve ``(q, b, v, m)`` of each agent.
        max_need: ``()`` sum over agents of their profile's largest hourly need, Wh.
        is_school: ``(n,)`` bool, agents of the School profile (argumentation rewards).
        generator: the local energy pool.
        explicit_production: ``()`` bool, use ``profiles.productions`` instead of drawing.
        mos_coefficients: ``(2,)`` weights of comfort and over-consumption in the
            multi-objective sums (EthicalSmartGrid: 0.2, 0.8).
        adaptability_steps: ``(4,)`` int32 switch steps of AdaptabilityOne (3000), Two
            (2000) and Three (2000, 6000).
        judgments: ``(4,)`` int32 judgment function of Affordability,
            EnvironmentalSustainability, Inclusiveness, SupplySecurity
            (:data:`jaxgrid.rewards.argumentation.JUDGMENTS`).
        schedule: activation of each objective.
        peer_energy_loss: ``()`` bool, report EthicalSmartGrid's ``energy_loss`` (always 0)
            instead of the unused share of the energy pool.
        scalarisation: how the objectives become the reward.
    """

    profiles: BuildingProfiles
    agent_profile: Array
    capacity: Array
    action_limit: Array
    comfort: Array
    max_need: Array
    is_school: Array
    generator: EnergyGenerator
    explicit_production: Array
    mos_coefficients: Array
    adaptability_steps: Array
    judgments: Array
    schedule: Schedule
    peer_energy_loss: Array
    scalarisation: Scalarisation


@struct.dataclass
class SmartgridState:
    """Attributes:
    time: ``()`` int32 hours since the episode started (EthicalSmartGrid's ``current_step``).
    buildings: each agent's battery, need, production, comfort and payoff.
    available_energy: ``()`` the energy pool of the current hour, Wh.
    production_key: key from which this episode's productions are drawn.
    ratio_max: ``()`` running maximum of the ``ratio`` judgment.
    measures: ``(8,)`` the global observation of this state, computed once per step
        (every agent's observation repeats it; a stored value is broadcast cheaply,
        whereas a recomputed one would be fused into every copy).
    """

    time: Array
    buildings: ProsumerState
    available_energy: Array
    production_key: Array
    ratio_max: Array
    measures: Array
