"""Time series that drive an environment, and episode sampling by day.

A :class:`Profiles` holds a year (or any number of days) of exogenous series on one
fixed time step: load multipliers of the feeder's base loads, PV and wind availability
(share of rated power) and prices. Days are split into training and held-out test days,
so evaluation runs on days the agent never trained on: pass
``params.replace(profiles=profiles.for_testing())``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.numerics import index_from_bits, one_hot_take
from jaxgrid.types import Array, PRNGKey, float_dtype


@struct.dataclass
class Profiles:
    """Exogenous series, one row per time step.

    Attributes:
        load: ``(T, n_load_profiles)`` multiplier of base load (1 = the feeder's base load).
        pv: ``(T, n_pv_profiles)`` available PV power, share of rated power.
        wind: ``(T, n_wind_profiles)`` available wind power, share of rated power.
        price: ``(T, n_price_series)`` energy price, currency/MWh (column 0: time of use,
            column 1: dynamic).
        days: ``(n_days,)`` int32 days episodes start on (the training days by default).
        held_out: ``(n_held_out,)`` int32 days kept for evaluation.
    """

    load: Array
    pv: Array
    wind: Array
    price: Array
    days: Array
    held_out: Array

    @property
    def n_steps(self) -> int:
        return self.load.shape[-2]

    def for_testing(self) -> Profiles:
        """The same series with episodes drawn from the held-out days."""
        return self.replace(days=self.held_out, held_out=self.days)


def split_days(n_days: int, every: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Hold out every ``every``-th day (days ``every-1, 2*every-1, ...``) across the year.

    Spreading held-out days over the year keeps every season in both sets.
    """
    days = np.arange(n_days, dtype=np.int32)
    test = days % every == every - 1
    return days[~test], days[test]


def resample(series: np.ndarray, factor: int) -> np.ndarray:
    """Average ``factor`` consecutive rows (e.g. 15-minute to hourly with ``factor=4``)."""
    series = np.asarray(series)
    if factor < 1 or len(series) % factor:
        raise ValueError(f"cannot resample {len(series)} rows by a factor of {factor}")
    return series.reshape(len(series) // factor, factor, *series.shape[1:]).mean(axis=1)


def sample_start(key: PRNGKey, days: Array, steps_per_day: int) -> Array:
    """First time step of an episode starting on a day drawn uniformly from ``days``."""
    return start_from_bits(jax.random.bits(key, (), jnp.uint32), days, steps_per_day)


def start_from_bits(bits: Array, days: Array, steps_per_day) -> Array:
    """:func:`sample_start` from ``()`` uint32 random ``bits``, which a reset may draw
    with its other random numbers in one draw (:func:`~jaxgrid.numerics.index_from_bits`)."""
    day = jnp.asarray(days)[index_from_bits(bits, days.shape[0])]
    return (day * steps_per_day).astype(jnp.int32)


def feeder_loads(profiles: Profiles, row, load_profile: Array, load_scale, feeder):
    """Bus loads ``(p_mw, q_mvar)`` ``(n_bus,)`` at profile ``row`` (wrapped around the
    series): each bus's base load times ``load_scale`` times the value of its profile
    column ``load_profile`` ``(n_bus,)``, in the default float precision."""
    row = row % profiles.load.shape[0]
    scale = load_scale * one_hot_take(profiles.load[row], load_profile)
    dtype = float_dtype()
    return (scale * feeder.p_load_mw).astype(dtype), (scale * feeder.q_load_mvar).astype(dtype)
