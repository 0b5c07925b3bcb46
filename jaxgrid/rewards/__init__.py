"""Reward objectives, their scalarisation and constraint costs."""

from jaxgrid.rewards.scalarise import MIN, PRODUCT, SINGLE, WEIGHTED_SUM, Scalarisation, scalarise

__all__ = ["MIN", "PRODUCT", "SINGLE", "WEIGHTED_SUM", "Scalarisation", "scalarise"]
