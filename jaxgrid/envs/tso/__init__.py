"""Unit commitment by a transmission operator on MATPOWER cases (``tso118-v0`` and
variants), with merit-order and all-on baselines and a perfect-foresight MILP oracle."""

from __future__ import annotations

import functools

import jax
import numpy as np

from jaxgrid.data.simbench import simbench_profiles
from jaxgrid.dispatch import DCOPFParams
from jaxgrid.envs.tso import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.tso.baselines import all_on, merit_order, merit_order_lookahead
from jaxgrid.envs.tso.commitment import Commitment, commit
from jaxgrid.envs.tso.continuous import TSOContinuous
from jaxgrid.envs.tso.env import TSO, TSOParams, TSOState
from jaxgrid.envs.tso.fleet import UnitParams, fleet_by_class
from jaxgrid.envs.tso.net_load import NetLoad, net_load
from jaxgrid.envs.tso.oracle import DaySchedule, day_oracle, unit_commitment_milp
from jaxgrid.envs.tso.ratings import (
    LOAD_RANGE,
    SCREENED,
    Screening,
    angle_ratings,
    case_max_angle_deg,
    screen_branches,
)
from jaxgrid.grid import network_from_matpower
from jaxgrid.registry import register, register_variant
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import at_default_precision


@functools.cache
def _screened(
    case: str, rate_mva: tuple[float, ...], max_load_factor: float, x64: bool
) -> Screening:
    """The :class:`~jaxgrid.envs.tso.ratings.Screening` of ``case`` at ``rate_mva`` for
    loads up to ``max_load_factor`` times the case's: the stored monitored branches of a
    bundled case at its own angle's ratings and :data:`LOAD_RANGE`, else screened
    (:func:`~jaxgrid.envs.tso.ratings.screen_branches`) at the current precision."""
    network = network_from_matpower(case)
    rate = np.asarray(rate_mva, float)
    stored = (
        SCREENED.get(case)
        if max_load_factor == LOAD_RANGE[1]
        and np.array_equal(rate, angle_ratings(network, case_max_angle_deg(case)))
        else None
    )
    return Screening.of(network, rate, max_load_factor, stored)


def make_tso(
    case: str = "case118",
    steps_per_day: int = 48,
    wind_share: float = 0.2,
    pv_share: float = 0.05,
    demand_floor: float = 0.4,
    reserve_margin: float = 0.05,
    voll: float = 10_000.0,
    spill_price: float = 1_000.0,
    reserve_shortfall_price: float = 1_000.0,
    slack_price_rise: float = 0.01,
    bias_max: float = 10.0,
    forecast: int = 16,
    iterations: int = 30,
    binding_lines: bool = True,
    power_flow_penalty: float = 1_000.0,
    max_angle_deg: float | None = None,
    rate_mva: tuple[float, ...] | None = None,
    max_load_factor: float = LOAD_RANGE[1],
    interior_most: int | None = None,
    name: str = "tso118-v0",
    _kind: type = TSO,
):
    """Build a unit-commitment environment on a bundled MATPOWER case and its default params.

    The demand shape is the mean of the bundled SimBench load profiles (2016, ODbL) as a
    share of its annual peak, the case's total load being the peak demand
    (:mod:`.net_load`); wind is the mean of SimBench's wind profiles and PV of its PV
    profiles, with capacities that give ``wind_share`` and ``pv_share`` of the year's
    demand energy; the net load is spread over the buses in proportion to the case's
    loads. Units get the size-class data of :mod:`.fleet`, unrated branches the angle
    ratings of :mod:`.ratings`.

    Args:
        case: a bundled MATPOWER case (``case118``, ``case14``, ``case300``); a negative
            load (case300 has eight, -322 MW: injections from neighbouring systems)
            follows the profile like the others, and output there may be spilled.
        steps_per_day: 48 (half-hourly), 24 or 96; an episode is one day.
        wind_share, pv_share: must-take renewable energy, share of annual demand energy.
        demand_floor: demand at the profile's minimum, share of the peak.
        reserve_margin: reserve requirement, share of the net load.
        voll, spill_price, reserve_shortfall_price: currency/MWh.
        slack_price_rise: rise of the dispatch's prices of shed and spill across each
            bus's range (:class:`~jaxgrid.dispatch.DCOPFParams`), so that the shed is
            split uniquely, in proportion to the buses' loads, and the flows of the
            branches the dispatch does not monitor are determined; the costs and the
            reward count shed and spill at ``voll`` and ``spill_price``.
        bias_max: largest dispatch adjustment of a marginal cost, currency/MWh.
        forecast: steps of future net load observed.
        iterations: interior point iterations of each step's DC-OPF.
        binding_lines: whether the DC-OPF searches the lines that bind before the
            interior point (:func:`~jaxgrid.dispatch.dcopf_with_fallback`). Off for case14,
            whose interior point is cheap: there the search cost more than it saved
            (``tso14-v0`` stepped 1.14-1.82x faster without it at 1-1024 environments,
            random actions and the merit order, and compiled in about half the time:
            ``benchmarks/transmission_compile.py``).
        power_flow_penalty: reward lost per step an episode loses to a failed dispatch.
        max_angle_deg: the angle difference, degrees, at which unrated branches are
            rated (:func:`~jaxgrid.envs.tso.ratings.angle_ratings`); default the case's
            (:func:`~jaxgrid.envs.tso.ratings.case_max_angle_deg`: 20 for case300, whose
            network cannot serve its load at 10, else 10).
        rate_mva: ``(n_branch,)`` the branches' ratings, MVA, in place of the case's and
            the angle's: the lowest a sweep will pass in params, since the dispatch
            monitors the branches that can overload at these
            (:class:`~jaxgrid.envs.tso.ratings.Screening` refuses lower ones where a
            branch is left out).
        max_load_factor: the largest multiple of the case's loads the branches are
            screened for (default :data:`~jaxgrid.envs.tso.ratings.LOAD_RANGE`'s 1.2):
            raise it to pass a higher ``peak_demand_mw`` in params (more branches may
            then be monitored).
        interior_most: on a CPU, the most problems of a batch the DC-OPF's interior point
            takes a round (:func:`~jaxgrid.dispatch.fallback.capped_capacity`); ``None``
            (the default) a sixty-fourth of the batch. 4 for case14, where 1.2 % of the
            problems reach it: its step compiled a sixth faster at 1024 environments,
            stepping at 0.99x there and 0.93-0.95x at 4096.
        _kind: the environment class (:class:`TSO`, or :class:`TSOContinuous` for the
            variants with a Box action).
    """
    network = network_from_matpower(case)
    pd = np.asarray(network.pd_mw, float)
    dt_h = 24.0 / steps_per_day
    profiles = simbench_profiles(steps_per_day)
    shape = profiles.load.mean(axis=1)
    shape = shape / shape.max()
    wind, pv = profiles.wind.mean(axis=1), profiles.pv.mean(axis=1)
    peak = pd.sum()
    mean_demand = peak * (demand_floor + (1 - demand_floor) * shape.mean())
    if max_angle_deg is None:
        max_angle_deg = case_max_angle_deg(case)
    rate = angle_ratings(network, max_angle_deg) if rate_mva is None else rate_mva
    rate = np.asarray(rate, float)
    if not max_load_factor > 0:
        raise ValueError(
            f"max_load_factor: expected a multiple of the case's loads > 0, got {max_load_factor}"
        )
    if rate.shape != (network.n_branch,) or not np.all(rate > 0):
        raise ValueError(
            f"rate_mva: expected {network.n_branch} positive ratings (MVA) of {case}'s "
            f"branches, got shape {rate.shape}"
            + ("" if rate.shape != (network.n_branch,) else f", smallest {rate.min():.6g}")
        )
    params = TSOParams(
        profiles=profiles.replace(load=shape[:, None], wind=wind[:, None], pv=pv[:, None]),
        units=fleet_by_class(network, dt_h),
        rate_mva=rate,
        load_share=pd / peak,
        peak_demand_mw=np.float64(peak),
        demand_floor=np.float64(demand_floor),
        wind_mw=np.float64(wind_share * mean_demand / wind.mean()),
        pv_mw=np.float64(pv_share * mean_demand / pv.mean()),
        reserve_margin=np.float64(reserve_margin),
        dispatch=DCOPFParams(
            voll=np.float64(voll),
            spill_price=np.float64(spill_price),
            reserve_shortfall_price=np.float64(reserve_shortfall_price),
            slack_price_rise=np.float64(slack_price_rise),
        ),
        bias_max=np.float64(bias_max),
        dt_h=np.float64(dt_h),
        power_flow_penalty=np.float64(power_flow_penalty),
        scalarisation=Scalarisation.create(2, "weighted_sum", [1.0, 1.0]),
    )
    params = at_default_precision(params)
    env = _kind(
        network,
        params,
        horizon=steps_per_day,
        forecast=forecast,
        screening=_screened(
            case, tuple(rate.tolist()), float(max_load_factor), bool(jax.config.jax_enable_x64)
        ),
        iterations=iterations,
        binding_lines=binding_lines,
        interior_most=interior_most,
        name=name,
    )
    return env, params


register("tso118-v0", make_tso)
register_variant("tso118-continuous-v0", make_tso, _kind=TSOContinuous)
register_variant("tso14-v0", make_tso, case="case14", binding_lines=False, interior_most=4)
register_variant(
    "tso14-continuous-v0",
    make_tso,
    case="case14",
    binding_lines=False,
    interior_most=4,
    _kind=TSOContinuous,
)
register_variant("tso300-v0", make_tso, case="case300")
register_variant("tso300-continuous-v0", make_tso, case="case300", _kind=TSOContinuous)

__all__ = [
    "TSO",
    "Commitment",
    "DaySchedule",
    "NetLoad",
    "TSOContinuous",
    "TSOParams",
    "Screening",
    "TSOState",
    "UnitParams",
    "all_on",
    "angle_ratings",
    "case_max_angle_deg",
    "commit",
    "day_oracle",
    "fleet_by_class",
    "make_tso",
    "merit_order",
    "merit_order_lookahead",
    "net_load",
    "screen_branches",
    "unit_commitment_milp",
]
