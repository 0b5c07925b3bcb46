"""Wrappers: episode logging, a centralised single-agent view, observation normalisation
and flattening, a fixed reward scalarisation, declared observations and actions, devices grouped into
agents, Sauté safety budgets, forecasts of the exogenous series, residual actions on a baseline."""

from jaxgrid.wrappers.base import Wrapper
from jaxgrid.wrappers.centralised import CentralisedWrapper
from jaxgrid.wrappers.declared import ActionEntry, DeclaredSpaces, ObservationEntry
from jaxgrid.wrappers.flatten import FlattenObservation
from jaxgrid.wrappers.forecast import Forecast, ForecastParams
from jaxgrid.wrappers.groups import GroupAgents
from jaxgrid.wrappers.log import LogState, LogWrapper
from jaxgrid.wrappers.normalize import NormalizeObservation, NormalizeState
from jaxgrid.wrappers.residual import ResidualAction
from jaxgrid.wrappers.saute import Saute, SauteParams, SauteState
from jaxgrid.wrappers.scalarise import ScalariseReward

__all__ = [
    "ActionEntry",
    "CentralisedWrapper",
    "DeclaredSpaces",
    "FlattenObservation",
    "Forecast",
    "ForecastParams",
    "GroupAgents",
    "LogState",
    "LogWrapper",
    "NormalizeObservation",
    "NormalizeState",
    "ObservationEntry",
    "ResidualAction",
    "Saute",
    "SauteParams",
    "SauteState",
    "ScalariseReward",
    "Wrapper",
]
