"""Exogenous time series: profiles, episode sampling, synthetic generators."""

from jaxgrid.data.profiles import Profiles, sample_start, split_days
from jaxgrid.data.synthetic import synthetic_profiles

__all__ = ["Profiles", "sample_start", "split_days", "synthetic_profiles"]
