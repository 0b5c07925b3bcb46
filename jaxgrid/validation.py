"""Host-side validation of params, before they reach a compiled program.

Inside ``jit`` a bad number does not fail, it spreads: one NaN time slot of a load profile
poisons every later voltage, ``v_upper = NaN`` silently stops charging over-voltage, a
price of 1e39 is ``inf`` in float32. So :func:`validate_params` checks a params pytree on
the host, and :func:`jaxgrid.make`, :func:`jaxgrid.make_from_config`,
:meth:`Environment.with_scalarisation <jaxgrid.env.Environment.with_scalarisation>`, the
trainer (:func:`jaxgrid.train.ppo.make_train`) and :func:`jaxgrid.testing.check_env` run it:

- every float leaf is finite: NaN never passes, an infinity only where a rule declares
  that it means "no limit" (a branch without a thermal rating, an abort bound left off);
- without ``jax_enable_x64`` (jaxgrid's float32 default) every float fits in float32;
- the rules declared for a params class hold wherever that class appears in the tree:
  :class:`Range` (an interval, with its unit), :class:`Ordered` (the ends of a band in
  order), :class:`Index` (integers that index a bus, a profile column or a code table);
- the rules an environment binds to what it fixed when it was made (``env.params_rules``,
  a params class to its rules: a TSO environment's branches screened for its ratings and
  loads, :class:`~jaxgrid.envs.tso.ratings.Screening`) hold like the declared ones;
- sizes unrolled into the compiled program are bounded: ``distflow_iterations`` runs
  1 to :data:`MAX_DISTFLOW_ITERATIONS` sweeps (100 sweeps already take about 9 s to
  compile one ``voltage33-v0`` step; 3-5 reach 1e-6 pu on case33bw).

A refusal is one :class:`ParamsError` (a ``ValueError``) naming the environment, each
leaf at fault with the index of its first bad entry (``params.profiles.price[17, 0]``),
its value and what was expected. Leaves that are tracers (params built inside ``jit`` or
``vmap``) cannot be read and are skipped: validate concrete params before tracing.

The rules of the building blocks every family shares (feeder, profiles, devices, abort
bounds, scalarisation) are declared at the end of this module; each environment family
declares its own params class's rules in ``jaxgrid/envs/<family>/params_rules.py``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from jaxgrid.data.profiles import Profiles
from jaxgrid.devices.battery import BatteryParams
from jaxgrid.devices.datacentre import DataCentreParams
from jaxgrid.devices.diesel import DieselParams
from jaxgrid.devices.ev import EVParams
from jaxgrid.devices.flexload import FlexLoadParams
from jaxgrid.grid.distflow import MAX_ITERATIONS as MAX_DISTFLOW_ITERATIONS
from jaxgrid.grid.feeder import Feeder
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import METHODS, Scalarisation
from jaxgrid.types import FLOAT32_MAX, float_dtype

_SHOWN = 10  # problems listed in one error


class ParamsError(ValueError):
    """Params that must not reach a compiled program: names each leaf, value and rule."""


# -- the rules -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Entries:
    """The array a rule's field names, with its label (``params.battery.soc_min``).

    A field is a dotted path below the params class that declares the rule; a trailing
    ``[k]`` takes entry ``k`` of the last axis (``generator.bounds[0]``).
    """

    label: str
    values: np.ndarray | None  # None: nothing to check (a tracer, or an optional leaf left out)
    column: int | None = None

    def at(self, index: tuple[int, ...]) -> str:
        """The label of one entry, ``index`` into :attr:`values`."""
        index = index + (() if self.column is None else (self.column,))
        return self.label + (f"[{', '.join(map(str, index))}]" if index else "")


def _field(node: Any, label: str, field: str) -> _Entries:
    """The :class:`_Entries` of ``field`` in ``node``, the params dataclass at ``label``."""
    name, _, column = field.partition("[")
    value = node
    for part in name.split("."):
        value = getattr(value, part)
    label = f"{label}.{name}"
    if value is None or isinstance(value, jax.core.Tracer):
        return _Entries(label, None)
    values = np.asarray(value)
    if not column:
        return _Entries(label, values)
    k = int(column.rstrip("]"))
    return _Entries(label, values[..., k], k)


def _format(value) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def _first(entries: _Entries, bad: np.ndarray, message: Callable[[str, Any], str]) -> str:
    """``message(label of the first bad entry, its value)``, plus how many more are bad."""
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    text = message(entries.at(index), entries.values[index])
    more = int(np.sum(bad)) - 1
    return text + (f" ({more} more entries likewise)" if more else "")


def first_bad(
    label: str, values: np.ndarray, bad: np.ndarray, message: Callable[[str, Any, tuple], str]
) -> str:
    """The declared rules' form of a problem, for rules an environment binds
    (``env.params_rules``): ``message(label of the first entry of values where bad, its
    value, its index)``, plus how many more are bad."""
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return _first(_Entries(label, values), bad, lambda at, value: message(at, value, index))


@dataclasses.dataclass(frozen=True)
class Range:
    """Every entry of ``field`` lies above ``ge``/``gt`` and below ``le``/``lt``, in ``unit``.

    ``no_limit`` (``math.inf`` or ``-math.inf``) is the one infinity the field may hold,
    meaning "no limit"; every other non-finite value is refused before ranges are checked.
    """

    field: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    unit: str = ""
    no_limit: float | None = None

    def expected(self) -> str:
        """The interval as an error message says it: ``expected >= 0 MW``."""
        parts = [
            f"{op} {_format(bound)}"
            for op, bound in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if bound is not None
        ]
        text = "expected " + " and ".join(parts) + (f" {self.unit}" if self.unit else "")
        return text + (f" (or {self.no_limit}: no limit)" if self.no_limit is not None else "")

    def problems(self, node: Any, label: str) -> Iterator[str]:
        """The rule's violations by ``node``, the params dataclass at ``label``."""
        entries = _field(node, label, self.field)
        x = entries.values
        if x is None:
            return
        with np.errstate(invalid="ignore"):
            bad = np.zeros(x.shape, bool)
            for bound, outside in (
                (self.ge, np.less),
                (self.gt, np.less_equal),
                (self.le, np.greater),
                (self.lt, np.greater_equal),
            ):
                if bound is not None:
                    bad |= outside(x, bound)
        bad &= np.isfinite(x)  # non-finite entries are refused, or allowed, on their own
        if np.any(bad):
            yield _first(entries, bad, lambda at, v: f"{at} = {_format(v)}: {self.expected()}")


@dataclasses.dataclass(frozen=True)
class Ordered:
    """``low <= high`` entry by entry (``low < high`` when ``strict``): the ends of a band."""

    low: str
    high: str
    strict: bool = False
    unit: str = ""

    def problems(self, node: Any, label: str) -> Iterator[str]:
        """The rule's violations by ``node``, the params dataclass at ``label``."""
        low, high = _field(node, label, self.low), _field(node, label, self.high)
        if low.values is None or high.values is None:
            return
        a, b = np.broadcast_arrays(low.values, high.values)
        bad = a >= b if self.strict else a > b
        if not np.any(bad):
            return
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        sign = "<" if self.strict else "<="
        unit = f" {self.unit}" if self.unit else ""

        def at(entries: _Entries, values: np.ndarray) -> str:
            own = index[len(index) - values.ndim :] if values.ndim else ()
            own = tuple(0 if n == 1 else i for i, n in zip(own, values.shape))
            return f"{entries.at(own)} = {_format(values[own])}"

        more = int(np.sum(bad)) - 1
        yield (
            f"{at(low, low.values)} and {at(high, high.values)}{unit}: expected "
            f"{low.label.removeprefix(label + '.')} {sign} {high.label.removeprefix(label + '.')}"
            + (f" ({more} more entries likewise)" if more else "")
        )


@dataclasses.dataclass(frozen=True)
class Index:
    """Every entry of ``field`` is a whole number in ``[0, size(node))``: it indexes ``what``."""

    field: str
    size: Callable[[Any], int]
    what: str

    def problems(self, node: Any, label: str) -> Iterator[str]:
        """The rule's violations by ``node``, the params dataclass at ``label``."""
        entries = _field(node, label, self.field)
        if entries.values is None:
            return
        n = int(self.size(node))
        x = entries.values
        bad = (x < 0) | (x >= n) | (x != np.floor(x))
        if np.any(bad):
            yield _first(
                entries, bad, lambda at, v: f"{at} = {v}: expected {self.what}, 0 to {n - 1}"
            )


Rule = Range | Ordered | Index
_RULES: dict[type, tuple[Rule, ...]] = {}


def declare(params_class: type, *rules: Rule) -> None:
    """Declare the rules of ``params_class``'s fields; they hold wherever it appears."""
    _RULES[params_class] = _RULES.get(params_class, ()) + rules


def voltage_band(low: str = "v_lower", high: str = "v_upper") -> tuple[Rule, ...]:
    """A voltage band: both ends in (0, 2) pu, ``low < high``."""
    return (
        Range(low, gt=0, lt=2, unit="pu"),
        Range(high, gt=0, lt=2, unit="pu"),
        Ordered(low, high, strict=True, unit="pu"),
    )


def bus_index(field: str) -> Index:
    """Buses of ``params.feeder`` (device locations)."""
    return Index(field, lambda p: p.feeder.n_bus, "a bus index of params.feeder")


def column_of(field: str, table: str) -> Index:
    """Columns of the table ``table`` (a dotted path, e.g. ``profiles.load``)."""

    def columns(node: Any) -> int:
        for part in table.split("."):
            node = getattr(node, part)
        return np.shape(node)[-1]

    return Index(field, columns, f"a column of params.{table}")


def code_of(field: str, codes: dict[str, int]) -> Index:
    """A code from ``codes`` (name -> 0, 1, ...): a solver, a barrier, a generator kind."""
    return Index(field, lambda p: len(codes), f"one of {codes}")


# -- the check -------------------------------------------------------------------------


def _nodes(tree: Any, label: str) -> Iterator[tuple[str, Any]]:
    """``(label, node)`` of every params dataclass in ``tree``, the root first."""
    if not dataclasses.is_dataclass(tree) or isinstance(tree, type):
        return
    yield label, tree
    for f in dataclasses.fields(tree):
        yield from _nodes(getattr(tree, f.name), f"{label}.{f.name}")


def _leaf_problems(label: str, leaf: Any, no_limit: float | None) -> Iterator[str]:
    """Non-finite entries (but ``no_limit``) and, in float32, entries beyond its range."""
    if isinstance(leaf, jax.core.Tracer):
        return
    x = np.asarray(leaf)
    if not np.issubdtype(x.dtype, np.floating):
        return
    entries = _Entries(label, x)
    nonfinite = ~np.isfinite(x) & (x != no_limit if no_limit is not None else True)
    if np.any(nonfinite):
        allowed = f" or {no_limit} (no limit)" if no_limit is not None else ""
        yield _first(
            entries, nonfinite, lambda at, v: f"{at} = {v}: expected a finite number{allowed}"
        )
    if float_dtype() == np.float32 and x.dtype.itemsize > 4:
        beyond = np.isfinite(x) & (np.abs(x) > FLOAT32_MAX)
        if np.any(beyond):
            yield _first(
                entries,
                beyond,
                lambda at, v: (
                    f"{at} = {v:g}: beyond float32 (|x| <= {FLOAT32_MAX:.4g}), "
                    "jaxgrid's float type unless jax_enable_x64 is on"
                ),
            )


def _static_problems(env: Any) -> Iterator[str]:
    """Sizes the compiled program unrolls: a huge one would compile for ever."""
    iterations = getattr(env, "distflow_iterations", None)
    if iterations is not None and not 1 <= iterations <= MAX_DISTFLOW_ITERATIONS:
        yield (
            f"distflow_iterations = {iterations}: expected 1 to {MAX_DISTFLOW_ITERATIONS} "
            "sweeps (each is unrolled into the compiled step; 3-5 reach 1e-6 pu on case33bw)"
        )


def params_problems(env: Any, params: Any) -> list[str]:
    """Every problem :func:`validate_params` would report, one line each."""
    problems = list(_static_problems(env))
    nodes = list(_nodes(params, "params"))
    no_limit = {
        f"{label}.{rule.field}": rule.no_limit
        for label, node in nodes
        for rule in _RULES.get(type(node), ())
        if isinstance(rule, Range) and rule.no_limit is not None
    }
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        label = "params" + jax.tree_util.keystr(path)
        problems += _leaf_problems(label, leaf, no_limit.get(label))
    bound = getattr(env, "params_rules", None) or {}
    for label, node in nodes:
        for rule in _RULES.get(type(node), ()) + tuple(bound.get(type(node), ())):
            problems += rule.problems(node, label)
    return problems


def validate_params(env: Any, params: Any) -> None:
    """Refuse ``params`` of ``env`` that must not reach a compiled program (module docstring).

    Raises:
        ParamsError: naming the environment, and each leaf at fault with its value.
    """
    problems = params_problems(env, params)
    if not problems:
        return
    shown = "\n  ".join(problems[:_SHOWN])
    hidden = len(problems) - _SHOWN
    more = f"\n  ... and {hidden} more" if hidden > 0 else ""
    if len(problems) == 1:
        raise ParamsError(f"{env.name}: {problems[0]}")
    raise ParamsError(f"{env.name}: {len(problems)} problems in params:\n  {shown}{more}")


# -- the shared building blocks ----------------------------------------------------------

declare(
    Feeder,
    Index("slack", lambda f: f.n_bus, "a bus index"),
    Range("r_pu", ge=0, unit="pu"),
    Range("rate_mva", gt=0, unit="MVA", no_limit=math.inf),
    Range("base_mva", gt=0, unit="MVA"),
    Range("base_kv", gt=0, unit="kV"),
    Range("vm_slack_pu", gt=0, lt=2, unit="pu"),
    Range("vmin_pu", gt=0, lt=2, unit="pu"),
    Range("vmax_pu", gt=0, lt=2, unit="pu"),
    Ordered("vmin_pu", "vmax_pu", unit="pu"),
)
declare(
    Profiles,
    Range("load", ge=0, unit="(multiplier of base load)"),
    Range("pv", ge=0, unit="(share of rated power)"),
    Range("wind", ge=0, unit="(share of rated power)"),
    Range("days", ge=0, unit="(day of the series)"),
    Range("held_out", ge=0, unit="(day of the series)"),
)
declare(
    BatteryParams,
    Range("capacity_mwh", gt=0, unit="MWh"),
    Range("p_max_mw", gt=0, unit="MW"),
    Range("s_max_mva", ge=0, unit="MVA"),
    Range("eta_charge", gt=0, le=1),
    Range("eta_discharge", gt=0, le=1),
    Range("soc_min", ge=0, le=1),
    Range("soc_max", ge=0, le=1),
    Ordered("soc_min", "soc_max", strict=True),
    Range("degradation_cost", ge=0, unit="currency/MWh"),
    Range("smoothing_mw", ge=0, unit="MW"),
    Range("q_smoothing_mvar", ge=0, unit="Mvar"),
)
declare(
    EVParams,
    Range("target_soc", ge=0, le=1),
    Ordered("battery.soc_min", "target_soc"),
    Ordered("target_soc", "battery.soc_max"),
)
declare(
    DataCentreParams,
    Range("n_gpus", gt=0, unit="GPUs"),
    Range("p_idle_mw", ge=0, unit="MW"),
    Ordered("p_idle_mw", "p_peak_mw", unit="MW"),
    Range("deadline_steps", ge=1, unit="steps"),
    Range("c_mwh_per_k", gt=0, unit="MWh/K"),
    Range("ua_mw_per_k", gt=0, unit="MW/K"),
    Range("q_max_mw", ge=0, unit="MW"),
    Ordered("t_set_min", "t_set_max", unit="°C"),
    Range("cop_ref", gt=0),
    Range("cop_slope", ge=0, unit="1/K"),
    Range("cop_min", gt=0),
    Range("cooling_smoothing_mw", ge=0, unit="MW"),
)
declare(
    DieselParams,
    Range("p_max_mw", gt=0, unit="MW"),
    Range("p_min_mw", gt=0, unit="MW"),
    Ordered("p_min_mw", "p_max_mw", unit="MW"),
    Range("ramp_mw_per_h", gt=0, unit="MW/h"),
    Range("start_steps", ge=0, unit="steps"),
    Range("start_cost", ge=0, unit="currency"),
    Range("fuel_noload_l_per_mwh", ge=0, unit="L/h per MW"),
    Range("fuel_l_per_mwh", ge=0, unit="L/MWh"),
    Range("fuel_price", ge=0, unit="currency/L"),
    Range("emission_t_per_l", ge=0, unit="t/L"),
    Range("smoothing_mw", ge=0, unit="MW"),
    Range("commit_smoothing_mw", ge=0, unit="MW"),
)
declare(
    FlexLoadParams,
    Range("curtail_cap_mw", ge=0, unit="MW"),
    Range("shift_cap_mw", ge=0, unit="MW"),
)
declare(
    AbortConditions,
    Range("low", no_limit=-math.inf),
    Range("high", no_limit=math.inf),
    Ordered("low", "high"),
)
declare(
    Scalarisation,
    code_of("method", METHODS),
    Range("cost_weights", ge=0, unit="(penalty per unit of cost)"),
)
