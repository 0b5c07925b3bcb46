"""Scenario files (TOML or YAML) that build registered environments with validated arguments."""

from jaxgrid.config.scenario import (
    ConfigError,
    Scenario,
    cost_penalty_weights,
    declared,
    is_scenario_file,
    load_scenario,
    make_from_config,
    params_model,
    run_fields,
    scenario_toml,
)

__all__ = [
    "ConfigError",
    "Scenario",
    "cost_penalty_weights",
    "declared",
    "is_scenario_file",
    "load_scenario",
    "make_from_config",
    "params_model",
    "run_fields",
    "scenario_toml",
]
