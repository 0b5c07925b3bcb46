"""The environments; importing this package registers them."""

from jaxgrid.envs import arbitrage, dso, smartgrid, voltage

__all__ = ["arbitrage", "dso", "smartgrid", "voltage"]
