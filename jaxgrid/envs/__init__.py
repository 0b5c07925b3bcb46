"""The environments; importing this package registers them."""

from jaxgrid.envs import arbitrage, smartgrid, voltage

__all__ = ["arbitrage", "smartgrid", "voltage"]
