"""The registry of named environments: ``make``, ``register``, ``list_envs``.

A registered id carries a version (``voltage33-v0``) that goes up whenever the dynamics
change, so published results stay reproducible.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from jaxgrid.env import Environment
from jaxgrid.validation import validate_params

EnvFactory = Callable[..., tuple[Environment, Any]]
_REGISTRY: dict[str, EnvFactory] = {}


def register(name: str, factory: EnvFactory, *, overwrite: bool = False) -> None:
    """Register ``factory(**overrides) -> (env, params)`` under ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"environment name must be a non-empty string, got {name!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"environment {name!r} is already registered (pass overwrite=True)")
    _REGISTRY[name] = factory


def register_variant(name: str, factory: EnvFactory, **preset: Any) -> None:
    """Register ``factory`` under ``name`` with ``preset`` arguments (and ``name=name``).

    The registered factory's signature shows the variant's own defaults, so scenario
    files list them and ``make`` checks overrides against them.
    """

    def variant(**overrides):
        return factory(**{**preset, **overrides, "name": name})

    signature = inspect.signature(factory)
    variant.__signature__ = signature.replace(
        parameters=[
            p.replace(default=preset.get(n, p.default))
            for n, p in signature.parameters.items()
            if n != "name"
        ]
    )
    register(name, variant)


def make(name: str, **overrides: Any) -> tuple[Environment, Any]:
    """Build a registered environment and its default params.

    ``overrides`` are the keyword arguments the environment's factory accepts (its
    docstring lists them); an unknown one is an error, never silently ignored. The params
    are validated (:func:`jaxgrid.validation.validate_params`) before they are returned.
    An environment whose factory gave it no name takes ``name`` (``env.name``: the id
    that evaluation records, logs and error messages show).
    """
    check_registered(name)
    factory = _REGISTRY[name]
    signature = inspect.signature(factory)
    try:
        signature.bind(**overrides)
    except TypeError as err:
        accepted = [p for p in signature.parameters if not p.startswith("_")]
        raise ValueError(f"make({name!r}): {err}; accepted overrides: {accepted}") from None
    env, params = factory(**overrides)
    if getattr(env, "_name", None) is None:
        env._name = name
    validate_params(env, params)
    return env, params


def check_registered(name: str) -> None:
    """Raise ``ValueError`` naming the closest registered ids when ``name`` is not one."""
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown environment {name!r}{hint} (see jaxgrid.list_envs())")


def list_envs() -> list[str]:
    """The registered environment ids, sorted."""
    return sorted(_REGISTRY)
