"""Wrappers: episode logging and a centralised single-agent view."""

from jaxgrid.wrappers.base import Wrapper
from jaxgrid.wrappers.centralised import CentralisedWrapper
from jaxgrid.wrappers.log import LogState, LogWrapper

__all__ = ["CentralisedWrapper", "LogState", "LogWrapper", "Wrapper"]
