"""Generation companies bidding into a nodal market (``gencos5-v0``), with the market's
ε-Nash and cost metrics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.simbench import LOAD_NAMES, simbench_profiles
from jaxgrid.envs.gencos import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.gencos.baselines import constant_share
from jaxgrid.envs.gencos.env import GenCos, GenCosParams, GenCosState
from jaxgrid.envs.gencos.market import (
    Settlement,
    clear_market,
    offer_curves,
    rising_marginal_costs,
    true_cost,
)
from jaxgrid.envs.gencos.metrics import DeviationCheck, deviation_gains, market_outcome
from jaxgrid.grid import TRANSMISSION_CASES, network_from_matpower
from jaxgrid.registry import register
from jaxgrid.rewards.scalarise import Scalarisation


def make_gencos(
    case: str = "case5",
    steps_per_day: int = 48,
    load_scale: float = 1.0,
    base_share: float = 0.5,
    marginal_cost_rise: float = 0.1,
    markup_range: tuple[float, float] = (0.0, 2.0),
    voll: float = 10_000.0,
    power_flow_penalty: float = 1_000.0,
    name: str = "gencos5-v0",
):
    """Build a generation-company market on a bundled MATPOWER case and its default params.

    Args:
        case: a bundled transmission case (:data:`jaxgrid.grid.TRANSMISSION_CASES`); one
            company per generator.
        steps_per_day: market clearings a day (48: every 30 minutes); an episode is a day.
        load_scale: multiplier of the case's bus loads (their value at the profile's peak).
        base_share: share of each bus's load that is flat; the rest follows its SimBench
            profile (the loaded buses take the household, commerce and business profiles in
            turn).
        marginal_cost_rise: how much each unit's marginal cost climbs from zero to full
            output, a share of the case's linear cost (adds ``c2 = rise * c1 / (2 pmax)``).
        markup_range: ``(markup_min, markup_max)`` every company may bid; 0 is truthful, 2
            offers three times the true marginal cost (PowerZooJax's default range).
        voll: value of lost load, currency/MWh; it must exceed every possible offer.
        power_flow_penalty: reward lost per company for a clearing that does not converge
            and each step the episode loses (it ends there), currency.
    """
    if case not in TRANSMISSION_CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {list(TRANSMISSION_CASES)}")
    lo, hi = markup_range
    if not -1 < lo <= hi:
        raise ValueError(f"markup_range must satisfy -1 < min <= max, got {markup_range}")
    if not 0 <= base_share <= 1 or marginal_cost_rise < 0 or load_scale <= 0:
        raise ValueError(
            "need 0 <= base_share <= 1, marginal_cost_rise >= 0 and load_scale > 0, got "
            f"{base_share}, {marginal_cost_rise}, {load_scale}"
        )
    network = network_from_matpower(case)
    n_bus, n_gen = network.n_bus, network.n_gen
    pmax = np.asarray(network.pmax_mw, np.float64)
    cost_poly = rising_marginal_costs(network.cost_poly, pmax, marginal_cost_rise)
    highest_offer = (1 + hi) * np.max(2 * cost_poly[:, 0] * pmax + cost_poly[:, 1])
    if highest_offer >= voll:
        raise ValueError(
            f"voll = {voll:g} must exceed the highest possible offer, {highest_offer:g} "
            "currency/MWh, or shedding load would be cheaper than buying it"
        )
    pd = np.asarray(network.pd_mw, np.float64) * load_scale
    loaded = np.flatnonzero(pd > 0)
    load_profile = np.zeros(n_bus, np.int32)
    load_profile[loaded] = np.arange(len(loaded)) % len(LOAD_NAMES)
    params = GenCosParams(
        profiles=simbench_profiles(steps_per_day),
        pd_mw=pd,
        load_profile=load_profile,
        base_share=np.float64(base_share),
        cost_poly=cost_poly,
        pmax_mw=pmax,
        rate_mva=np.asarray(network.rate_mva, np.float64),
        markup_min=np.full(n_gen, lo, np.float64),
        markup_max=np.full(n_gen, hi, np.float64),
        voll=np.float64(voll),
        dt_h=np.float64(24.0 / steps_per_day),
        power_flow_penalty=np.float64(power_flow_penalty),
        scalarisation=Scalarisation.create(1, "weighted_sum", [1.0]),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    return GenCos(params, case=case, horizon=steps_per_day, name=name), params


register("gencos5-v0", make_gencos)

__all__ = [
    "DeviationCheck",
    "GenCos",
    "GenCosParams",
    "GenCosState",
    "Settlement",
    "clear_market",
    "constant_share",
    "deviation_gains",
    "make_gencos",
    "market_outcome",
    "offer_curves",
    "true_cost",
]
