"""Exogenous time series: measured and synthetic profiles, prices, episode sampling."""

from jaxgrid.data.prices import merit_order_price, time_of_use
from jaxgrid.data.profiles import Profiles, resample, sample_start, split_days, start_from_bits
from jaxgrid.data.simbench import simbench_profiles
from jaxgrid.data.synthetic import synthetic_profiles

__all__ = [
    "Profiles",
    "merit_order_price",
    "resample",
    "sample_start",
    "simbench_profiles",
    "split_days",
    "start_from_bits",
    "synthetic_profiles",
    "time_of_use",
]
