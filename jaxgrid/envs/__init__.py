"""The environments; importing this package registers them."""

from jaxgrid.envs import voltage

__all__ = ["voltage"]
