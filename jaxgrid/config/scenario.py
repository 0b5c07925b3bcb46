"""Scenario files: a registered environment and its factory's arguments, in TOML or YAML.

.. code-block:: toml

    env = "voltage33-v0"              # a registered environment (jaxgrid.list_envs())

    [episode]                         # optional: checked against the environment built
    duration_h = 24
    sampling_time_min = 15            # must divide the duration

    [params]                          # the factory's arguments; defaults where left out
    barrier = "bowl"
    abort = { min_vm_pu = [0.8, 1.2] }

    [reward]                          # optional, any environment: how objectives combine
    scalarisation = "weighted_sum"    # weighted_sum, min, product or single
    weights = { voltage = 1.0, reactive_power = 0.02 }   # by objective; others weigh 0
    cost_penalty = { voltage_band = 10.0 }  # reward -= 10 * cost (by cost name); default none
    cost_budget = { voltage_band = 0.5 }    # training keeps each cost's episode sum below
                                            # it (PPO-Lagrangian); default none

    [[observations]]                  # optional: what agents see (ETA Ctrl style)
    name = "vm_pu"                    # an entry of env.observation_names(params)
    scale_add = -1.0                  # agents see (value + scale_add) * scale_mult,
    scale_mult = 20.0                 # clipped to [low, high]
    low = -2.0
    high = 2.0

    [[observations]]
    name = "zone_vm_pu[*]"            # * matches any text

    [[actions]]                       # optional: what agents control; once one is
    name = "q_share"                  # declared, every env.action_names entry must be,
    low = -0.5                        # with bounds (agent units) or fixed = value
    high = 0.5

    [[agents]]                        # optional: devices (env.agents) grouped into agents
    name = "north"
    devices = ["pv_0", "pv_1", "pv_2"]

The ``[params]`` table is validated against the factory's signature (pydantic): unknown
keys, wrong types, NaN or infinite numbers and values outside the range of well-known
arguments (capacities, efficiencies, counts, weights, bounds) are errors; so are the
factory's own refusals (an unknown scenario, objective or abort variable); a CSV profile
source (``load_csv``, ``pv_csv``, ``price_csv``) is checked key by key; the params built
pass :func:`jaxgrid.validation.validate_params`. Every error, a file that is not text
included, is one :class:`ConfigError` naming the file, the key path and what was expected.
``[[observations]]`` and ``[[actions]]`` wrap the environment in
:class:`~jaxgrid.wrappers.declared.DeclaredSpaces`, ``[[agents]]`` in
:class:`~jaxgrid.wrappers.groups.GroupAgents`.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import jax.numpy as jnp
import numpy as np
import pydantic
from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from jaxgrid.data.csv_profiles import UNITS
from jaxgrid.registry import _REGISTRY, list_envs, make
from jaxgrid.rewards.scalarise import METHODS, Scalarisation
from jaxgrid.wrappers.declared import ActionEntry, DeclaredSpaces, ObservationEntry
from jaxgrid.wrappers.groups import GroupAgents

# value ranges of arguments that mean the same in every family
POSITIVE = {
    "load_scale", "capacity_mwh", "p_max_mw", "steps_per_day", "distflow_iterations",
    "horizon", "buildings_per_agent", "window", "vm_slack_pu",
}  # fmt: skip
NON_NEGATIVE = {
    "q_weight", "degradation_cost", "deferral_weight", "households", "offices", "schools",
    "lower", "upper", "background_share", "seed", "forecast",
}  # fmt: skip
FRACTIONS = {"efficiency": (0.0, 1.0), "initial_soc": (None, 1.0)}  # (0, 1] and [0, 1]
PROFILE_SOURCES = {"load_csv", "pv_csv", "price_csv"}  # CSV sources (ProfileSource)
ORDERED_PAIRS = {"soc_bounds", "v_band", "energy_bounds"}
SECTIONS = {"env", "episode", "params", "reward", "observations", "actions", "agents"}
STRICT = {float: StrictFloat, int: StrictInt, str: StrictStr, bool: StrictBool}
TYPE_NAMES = {"tuple", "dict", "float", "int", "str", "bool", "None"}


class ConfigError(ValueError):
    """A scenario file that cannot be built: names the file, the key path and the problem."""


class EpisodeSection(pydantic.BaseModel):
    """``[episode]``: how long an episode lasts and how long one step is."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    duration_h: Annotated[StrictFloat, Field(gt=0)]
    sampling_time_min: Annotated[StrictFloat, Field(gt=0)]

    @pydantic.model_validator(mode="after")
    def _divides(self):
        steps = self.duration_h * 60 / self.sampling_time_min
        if not math.isclose(steps, round(steps), abs_tol=1e-9):
            raise ValueError(
                f"sampling_time_min = {self.sampling_time_min:g} does not divide "
                f"duration_h = {self.duration_h:g} h ({steps:.3g} steps)"
            )
        return self

    @property
    def steps(self) -> int:
        return round(self.duration_h * 60 / self.sampling_time_min)


class RewardSection(pydantic.BaseModel):
    """``[reward]``: how the objectives become the reward (any environment)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    scalarisation: Literal["weighted_sum", "min", "product", "single"] | None = None
    weights: dict[StrictStr, Annotated[StrictFloat, Field(ge=0)]] | None = None
    cost_penalty: dict[StrictStr, Annotated[StrictFloat, Field(ge=0)]] | None = None
    cost_budget: dict[StrictStr, Annotated[StrictFloat, Field(ge=0)]] | None = None


Number = Annotated[StrictFloat, Field(allow_inf_nan=False)]


class ProfileSource(pydantic.BaseModel):
    """A CSV profile source argument (``load_csv``, ``pv_csv``, ``price_csv``): the keys of
    :mod:`jaxgrid.data.csv_profiles`, each of its type."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    path: StrictStr
    column: StrictStr
    time_column: StrictStr = "time"
    unit: Literal[tuple(UNITS)] = "pu"
    scale_mult: Number = 1.0
    scale_add: Number = 0.0


class ObservationDeclaration(pydantic.BaseModel):
    """One ``[[observations]]`` entry."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: StrictStr
    low: Number | None = None
    high: Number | None = None
    scale_add: Number = 0.0
    scale_mult: Number = 1.0


class ActionDeclaration(ObservationDeclaration):
    """One ``[[actions]]`` entry."""

    fixed: Number | None = None


class AgentDeclaration(pydantic.BaseModel):
    """One ``[[agents]]`` entry: an agent made of the environment's agents (devices)."""

    model_config = ConfigDict(extra="forbid")
    name: StrictStr
    devices: list[StrictStr]


class Declarations(pydantic.BaseModel):
    """The ``[[observations]]``, ``[[actions]]`` and ``[[agents]]`` arrays of tables."""

    model_config = ConfigDict(extra="forbid")
    observations: list[ObservationDeclaration] = []
    actions: list[ActionDeclaration] = []
    agents: list[AgentDeclaration] = []


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A validated scenario file: the environment's name, its factory's arguments, the
    optional sections (``None`` or empty where left out)."""

    env: str
    params: dict[str, Any]
    episode: EpisodeSection | None
    reward: RewardSection | None
    observations: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    agents: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def declared(env, params, observations: list[dict], actions: list[dict], agents: list[dict] = ()):
    """``env`` with its declared observations and actions (per device:
    :class:`DeclaredSpaces`, entries as dicts of :class:`ObservationEntry` /
    :class:`ActionEntry` fields), then its devices grouped into the declared agents
    (:class:`GroupAgents`, entries ``{"name", "devices"}``)."""
    if observations or actions:
        env = DeclaredSpaces(
            env,
            [ObservationEntry(**entry) for entry in observations],
            [ActionEntry(**entry) for entry in actions],
            params,
        )
    if agents:
        groups = {}
        for i, entry in enumerate(agents):
            if entry["name"] in groups:
                raise ValueError(f"agents[{i}].name: {entry['name']!r} names two agents")
            groups[entry["name"]] = entry["devices"]
        env = GroupAgents(env, groups, label="agents")
    return env


def _strict(annotation):
    """``annotation`` with strict scalars inside (``"0.1"`` is not a float here), lists
    accepted where tuples are expected (TOML and YAML have no tuples)."""
    if annotation in STRICT:
        return STRICT[annotation]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is None or not args:
        return annotation
    if origin is tuple:
        return tuple[tuple(_strict(a) if a is not Ellipsis else a for a in args)]
    if origin is dict:
        return dict[_strict(args[0]), _strict(args[1])]
    return Union[tuple(_strict(a) for a in args)]  # noqa: UP007 (built from a tuple)


def _field(name: str, annotation):
    """The pydantic type of factory argument ``name``, with its range where it is known."""
    if name in PROFILE_SOURCES:
        return ProfileSource | None
    if name in POSITIVE:
        return Annotated[annotation, Field(gt=0)]
    if name in NON_NEGATIVE:
        return Annotated[annotation, Field(ge=0)]
    if name in FRACTIONS:
        low, high = FRACTIONS[name]
        return Annotated[
            annotation, Field(gt=low, le=high) if low is not None else Field(ge=0, le=high)
        ]
    return annotation


def params_model(env_name: str) -> type[pydantic.BaseModel]:
    """The pydantic model of ``env_name``'s factory arguments."""
    factory = _REGISTRY[env_name]
    fields: dict[str, Any] = {}
    for name, p in inspect.signature(factory).parameters.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD or name == "name" or name.startswith("_"):
            continue  # "_" arguments are the factory's own (a variant's class), not a file's
        annotation = p.annotation
        if isinstance(annotation, str):  # postponed annotations: builtin types only
            annotation = eval(annotation, {"__builtins__": {}}, {t: eval(t) for t in TYPE_NAMES})  # noqa: S307
        fields[name] = (_field(name, _strict(annotation)), p.default)
    config = ConfigDict(extra="forbid", allow_inf_nan=False)
    return pydantic.create_model(f"{env_name} params", __config__=config, **fields)


def _check_pairs(params: dict[str, Any]) -> list[tuple[tuple, str]]:
    """Range checks that span entries: ordered bounds, non-negative weights, abort bounds."""
    problems = []
    for key in ORDERED_PAIRS & set(params):
        pair = params[key]
        if pair is not None and pair[0] > pair[1]:
            problems.append(((key,), f"expected (low, high) with low <= high, got {list(pair)}"))
    for key in ("weights", "mos_coefficients"):
        values = params.get(key)
        if values is not None and any(v < 0 for v in values):
            problems.append(((key,), f"expected non-negative weights, got {list(values)}"))
    for variable, bounds in (params.get("abort") or {}).items():
        ok = (
            isinstance(bounds, (list, tuple))
            and len(bounds) == 2
            and all(isinstance(b, (int, float)) and not math.isnan(b) for b in bounds)
        )
        if not ok:
            problems.append((("abort", variable), f"expected [low, high] numbers, got {bounds!r}"))
        elif bounds[0] > bounds[1]:
            problems.append((("abort", variable), f"expected low <= high, got {list(bounds)}"))
    return problems


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: no such scenario file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not a text file (byte {err.start} is not UTF-8); expected TOML or YAML"
        ) from None
    try:
        if path.suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise ConfigError(f"{path}: expected a .toml, .yaml or .yml scenario file")
    except ConfigError:
        raise
    except Exception as err:  # the parser's own message says where the syntax breaks
        raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table at the top level, got {type(data).__name__}")
    return data


def _fail(path: Path, loc: tuple, message: str):
    key = ".".join(str(part) for part in loc) or "(top level)"
    raise ConfigError(f"{path}: {key}: {message}")


def _section(path: Path, data: dict, name: str, model: type[pydantic.BaseModel]):
    """The validated table ``name`` of a scenario, or ``None`` where it is left out."""
    if name not in data:
        return None
    try:
        return model.model_validate(data[name])
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] != "value_error":
            message += f" (got {first['input']!r})"
        _fail(path, (name, *first["loc"]), message)


def load_scenario(path: str | Path) -> Scenario:
    """The validated :class:`Scenario` of a scenario file."""
    path = Path(path)
    data = _read(path)
    unknown = sorted(set(data) - SECTIONS)
    if unknown:
        _fail(path, (unknown[0],),
              f"unknown key; expected some of {sorted(SECTIONS)}")  # fmt: skip
    if "env" not in data:
        _fail(path, ("env",), "missing; expected the name of a registered environment")
    env_name = data["env"]
    if not isinstance(env_name, str):
        _fail(path, ("env",), f"expected the name of a registered environment, got {env_name!r}")
    if env_name not in _REGISTRY:
        _fail(path, ("env",), f"expected one of {list_envs()}, got {env_name!r}")
    episode = _section(path, data, "episode", EpisodeSection)
    reward = _section(path, data, "reward", RewardSection)
    declarations = _declarations(path, data)
    raw = data.get("params", {})
    if not isinstance(raw, dict):
        _fail(path, ("params",), f"expected a table of {env_name}'s arguments")
    try:
        params = params_model(env_name).model_validate(raw)
    except pydantic.ValidationError as err:
        errors = err.errors()  # an unknown key first: it often explains a missing one
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        expected = first["msg"]
        if first["type"] == "missing" and isinstance(first["loc"][-1], int):
            expected = f"too few entries: entry {first['loc'][-1]} is missing"
            first["loc"] = first["loc"][:-1]
        elif first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            accepted = sorted(params_model(env_name).model_fields)
            expected = f"unknown argument of {env_name}; expected one of {accepted}"
        elif first["type"] == "extra_forbidden":  # inside a profile source
            expected = f"unknown key; expected some of {list(ProfileSource.model_fields)}"
        _fail(path, ("params", *first["loc"]), f"{expected} (got {first['input']!r})")
    given = {k: _plain(getattr(params, k)) for k in raw}
    for loc, message in _check_pairs(given):
        _fail(path, ("params", *loc), message)
    return Scenario(
        env_name,
        _beside(given, path.parent),
        episode,
        reward,
        [d.model_dump() for d in declarations.observations],
        [d.model_dump() for d in declarations.actions],
        [d.model_dump() for d in declarations.agents],
    )


def _plain(value):
    """A validated argument as the factory takes it (a profile source as a dict)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(exclude_unset=True)
    return value


def _declarations(path: Path, data: dict) -> Declarations:
    """``[[observations]]`` and ``[[actions]]``, each entry's fields checked (names are
    checked against the environment once it is built)."""
    tables = {k: data[k] for k in ("observations", "actions", "agents") if k in data}
    try:
        return Declarations.model_validate(tables)
    except pydantic.ValidationError as err:
        errors = err.errors()  # an unknown key first: it often explains a missing one
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        if len(first["loc"]) == 1:
            kind = first["loc"][0]
            _fail(path, (kind,), f"expected an array of tables ([[{kind}]] entries)")
        kind, index, *rest = first["loc"]
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            fields = {
                "observations": ObservationDeclaration,
                "actions": ActionDeclaration,
                "agents": AgentDeclaration,
            }[kind]
            message = f"unknown key; expected some of {list(fields.model_fields)}"
        elif first["type"] != "value_error":
            message += f" (got {first['input']!r})"
        _fail(path, (f"{kind}[{index}]", *rest), message)


def _beside(params: dict[str, Any], base: Path) -> dict[str, Any]:
    """Relative file paths of a scenario (a ``feeder`` or ``grid_file`` file, a profile
    source's ``path``) taken from the scenario file's folder."""

    def resolve(value: str) -> str:
        return value if Path(value).is_absolute() else str(base / value)

    out = dict(params)
    feeder = out.get("feeder")
    if isinstance(feeder, str) and Path(feeder).suffix in (".m", ".json"):
        out["feeder"] = resolve(feeder)
    grid_file = out.get("grid_file")
    if isinstance(grid_file, str) and Path(grid_file).suffix == ".txt":
        out["grid_file"] = resolve(grid_file)
    for key, value in out.items():
        if isinstance(value, dict) and isinstance(value.get("path"), str):
            out[key] = {**value, "path": resolve(value["path"])}
    return out


def _episode_kwargs(path: Path, env_name: str, kwargs: dict, episode) -> dict[str, Any]:
    """The factory arguments with ``[episode]`` turned into its ``steps_per_day`` or
    ``horizon`` where it takes one."""
    factory_args = inspect.signature(_REGISTRY[env_name]).parameters
    kwargs = dict(kwargs)
    if episode is not None and "steps_per_day" in factory_args:
        if not math.isclose(episode.duration_h, 24):
            _fail(path, ("episode", "duration_h"), f"{env_name} episodes last one day (24 h)")
        kwargs.setdefault("steps_per_day", episode.steps)
    if episode is not None and "horizon" in factory_args:
        kwargs.setdefault("horizon", episode.steps)
    return kwargs


def _build(path: Path):
    """``(env, params, env name, factory arguments, reward)`` of a scenario file, every check
    done; ``params`` without the ``[reward]`` section applied."""
    scenario = load_scenario(path)
    env_name, episode, reward = scenario.env, scenario.episode, scenario.reward
    kwargs = _episode_kwargs(path, env_name, scenario.params, episode)
    try:
        env, params = make(env_name, **kwargs)
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: params: {err}") from None
    if episode is not None and env.horizon != episode.steps:
        _fail(
            path,
            ("episode",),
            f"{env_name} runs {env.horizon} steps per episode; [episode] gives {episode.steps}",
        )
    if reward is not None and reward.weights is not None:
        unknown = [n for n in reward.weights if n not in env.objective_names]
        if unknown:
            _fail(path, ("reward", "weights", unknown[0]),
                  f"not an objective of {env.name}; expected some of {list(env.objective_names)}")  # fmt: skip
    for key in ("cost_penalty", "cost_budget"):
        given = None if reward is None else getattr(reward, key)
        unknown = [n for n in given or {} if n not in env.cost_names]
        if unknown:
            _fail(path, ("reward", key, unknown[0]),
                  f"not a cost of {env.name}; expected some of {list(env.cost_names)}")  # fmt: skip
    try:
        env = declared(env, params, scenario.observations, scenario.actions, scenario.agents)
    except ValueError as err:
        raise ConfigError(f"{path}: {err}") from None
    return env, params, scenario, kwargs


def make_from_config(path: str | Path):
    """Build ``(env, params)`` from a scenario file (see the module docstring)."""
    env, params, scenario, _ = _build(Path(path))
    reward = scenario.reward
    if reward is None:
        return env, params
    current = env.scalarisation(params)
    method = reward.scalarisation or _method_name(current)
    weights = np.asarray(current.weights) if reward.weights is None else _weights(env, reward)
    cost_weights = current.cost_weights
    if reward.cost_penalty is not None:
        cost_weights = cost_penalty_weights(env, reward.cost_penalty)
    new = Scalarisation.create(len(env.objective_names), method, weights, cost_weights)
    dtype = jnp.asarray(current.weights).dtype
    new = new.replace(
        method=jnp.asarray(new.method, jnp.asarray(current.method).dtype),
        weights=jnp.asarray(new.weights, dtype),
        cost_weights=None if cost_weights is None else jnp.asarray(new.cost_weights, dtype),
    )
    return env, env.with_scalarisation(params, new)


def cost_penalty_weights(env, penalty: dict[str, float]) -> list[float]:
    """``{cost name: weight}`` as one weight per cost of ``env`` (unnamed ones: 0)."""
    return [float(penalty.get(name, 0.0)) for name in env.cost_names]


def run_fields(path: str | Path, settings: str = "ppo") -> dict[str, Any]:
    """The :class:`~jaxgrid.train.run.RunConfig` fields of training on a scenario file:
    ``env``, ``env_kwargs``, the declared ``observations`` and ``actions`` and, from
    ``[reward]``, one reward weighting (a run sweeps weightings of the environment's own
    scalarisation method) and the cost budgets, in the algorithm's ``settings`` field
    (``"ppo"`` or ``"sac"``)."""
    path = Path(path)
    env, params, scenario, kwargs = _build(path)
    env_name, reward = scenario.env, scenario.reward
    fields: dict[str, Any] = {"env": env_name, "env_kwargs": kwargs}
    if scenario.observations:
        fields["observations"] = scenario.observations
    if scenario.actions:
        fields["actions"] = scenario.actions
    if scenario.agents:
        fields["agents"] = scenario.agents
    if reward is None:
        return fields
    method = _method_name(env.scalarisation(params))
    if reward.scalarisation not in (None, method):
        _fail(path, ("reward", "scalarisation"),
              f"a training run keeps {env_name}'s method ({method!r}); build other methods with "
              "jaxgrid.make_from_config")  # fmt: skip
    if reward.weights is not None:
        fields["weights"] = [_weights(env, reward)]
    if reward.cost_penalty is not None:
        fields["cost_penalty"] = dict(reward.cost_penalty)
    if reward.cost_budget is not None:
        fields.setdefault(settings, {})["cost_budgets"] = [
            [n, b] for n, b in reward.cost_budget.items()
        ]
    return fields


def _method_name(scalarisation) -> str:
    return next(name for name, code in METHODS.items() if code == int(scalarisation.method))


def _weights(env, reward: RewardSection) -> list[float]:
    """``[reward] weights`` as one weight per objective of ``env`` (unnamed ones: 0)."""
    return [reward.weights.get(name, 0.0) for name in env.objective_names]


def is_scenario_file(path: str | Path) -> bool:
    """Whether ``path`` holds a scenario (an ``env`` name and at most the scenario
    sections) rather than a training run's config (JSON, or TOML
    with the run's fields)."""
    path = Path(path)
    if path.suffix not in (".toml", ".yaml", ".yml"):
        return False
    data = _read(path)
    return isinstance(data.get("env"), str) and set(data) <= SECTIONS


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return (
            repr(value)
            if not isinstance(value, float) or math.isfinite(value)
            else ("inf" if value > 0 else "-inf")
        )
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} to TOML")


def scenario_toml(env_name: str) -> str:
    """A scenario file (TOML) that builds ``env_name`` exactly as registered: every argument
    of its factory with its default (unset ones left out), and its episode."""
    if env_name not in _REGISTRY:
        raise ValueError(f"unknown environment {env_name!r}; expected one of {list_envs()}")
    factory_args = inspect.signature(_REGISTRY[env_name]).parameters
    env, _ = make(env_name)
    if "horizon" in factory_args:  # hourly steps (EthicalSmartGrid)
        duration_h, sampling = float(env.horizon), 60.0
    else:  # one-day episodes
        duration_h, sampling = 24.0, 24 * 60 / env.horizon
    lines = [
        f"# {env_name}: the registered scenario, argument by argument",
        f'env = "{env_name}"',
        "",
        "[episode]",
        f"duration_h = {duration_h:g}",
        f"sampling_time_min = {sampling:g}",
        "",
        "[params]",
    ]
    for name, p in factory_args.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD or name == "name" or p.default is None:
            continue
        lines.append(f"{name} = {_toml_value(p.default)}")
    return "\n".join(lines) + "\n"
