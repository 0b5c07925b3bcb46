"""The environments; importing this package registers them."""

from jaxgrid.envs import smartgrid, voltage

__all__ = ["smartgrid", "voltage"]
