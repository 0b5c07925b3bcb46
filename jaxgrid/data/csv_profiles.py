"""Profiles from CSV files: a time column and a value column, scaled and resampled.

A profile source is a dict (a scenario file's inline table)::

    {"path": "load.csv", "column": "load", "time_column": "minute",
     "unit": "pu", "scale_mult": 1.0, "scale_add": 0.0}

``time_column`` holds minutes since the start (numbers) or ISO 8601 timestamps; times must
increase by one constant step. Values are ``value * scale_mult + scale_add`` after the unit
(``pu`` as is, ``percent`` divided by 100), then averaged (coarser target) or repeated
(finer target) to the environment's sampling time, and must cover whole days. Every
problem is a ``ValueError`` naming the file, the row or column and what was expected.
:func:`csv_profiles` gathers an environment's sources into :class:`~jaxgrid.data.Profiles`.
"""

from __future__ import annotations

import csv
import math
from datetime import datetime
from pathlib import Path

import numpy as np

from jaxgrid.data.profiles import Profiles, split_days
from jaxgrid.types import FLOAT32_MAX

UNITS = {"pu": 1.0, "percent": 0.01}
SOURCE_KEYS = {"path", "column", "time_column", "unit", "scale_mult", "scale_add"}


def _minutes(stamp: str, path: Path, row: int) -> float:
    try:
        return float(stamp)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(stamp).timestamp() / 60.0
    except ValueError:
        raise ValueError(
            f"{path}: row {row}: time {stamp!r} is neither minutes nor an ISO 8601 timestamp"
        ) from None


def _scale(source: dict, key: str, default: float, path: Path) -> float:
    """``source[key]`` as a finite number (``scale_mult``, ``scale_add``)."""
    value = source.get(key, default)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value):
        raise ValueError(f"profile source {path}: {key} = {value!r}; expected a finite number")
    return float(value)


def read_profile(source: dict, sampling_time_min: float, base: Path | None = None) -> np.ndarray:
    """The series ``(T,)`` of ``source`` (see the module docstring) at ``sampling_time_min``;
    a relative ``path`` is taken from ``base``."""
    unknown = sorted(set(source) - SOURCE_KEYS)
    if unknown or "path" not in source or "column" not in source:
        raise ValueError(
            f"profile source {source}: expected keys path and column (and optionally "
            f"time_column, unit, scale_mult, scale_add); unknown: {unknown}"
        )
    path = Path(source["path"])
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.is_file():
        raise ValueError(f"profile file {path} does not exist")
    column, time_column = source["column"], source.get("time_column", "time")
    unit = source.get("unit", "pu")
    if unit not in UNITS:
        raise ValueError(f"{path}: unit {unit!r}; expected one of {list(UNITS)}")
    scale_mult = _scale(source, "scale_mult", 1.0, path)
    scale_add = _scale(source, "scale_add", 0.0, path)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            for name in (time_column, column):
                if name not in header:
                    raise ValueError(f"{path}: no column {name!r}; the file has {header}")
            rows = list(reader)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a text file (byte {err.start} is not UTF-8)") from None
    if len(rows) < 2:
        raise ValueError(f"{path}: expected at least two rows of data, got {len(rows)}")
    times = np.array([_minutes(r[time_column], path, i + 2) for i, r in enumerate(rows)])
    values = np.empty(len(rows))
    for i, r in enumerate(rows):
        try:
            values[i] = float(r[column])
        except (TypeError, ValueError):
            raise ValueError(
                f"{path}: row {i + 2}: {column} = {r[column]!r} is not a number"
            ) from None
        if not math.isfinite(values[i]):
            raise ValueError(f"{path}: row {i + 2}: {column} = {r[column]!r} is not finite")
    steps = np.diff(times)
    if np.any(steps <= 0):
        row = int(np.flatnonzero(steps <= 0)[0]) + 3
        raise ValueError(
            f"{path}: row {row}: time does not increase ({time_column} must be monotone)"
        )
    step = steps[0]
    if not np.allclose(steps, step):
        row = int(np.flatnonzero(~np.isclose(steps, step))[0]) + 3
        raise ValueError(
            f"{path}: row {row}: time step changes from {step:g} min; expected a constant step"
        )
    values = values * UNITS[unit] * scale_mult + scale_add
    beyond = np.flatnonzero(np.abs(values) > FLOAT32_MAX)
    if beyond.size:
        i = int(beyond[0])
        raise ValueError(
            f"{path}: row {i + 2}: {column} = {rows[i][column]!r} ({values[i]:g} after scaling) "
            f"is beyond float32 (|x| <= {FLOAT32_MAX:.4g}), the type profiles are stored in"
        )
    ratio = sampling_time_min / step
    if ratio >= 1 and math.isclose(ratio, round(ratio)):
        factor = round(ratio)
        if len(values) % factor:
            raise ValueError(
                f"{path}: {len(values)} rows of {step:g} min do not fill whole "
                f"{sampling_time_min:g}-minute steps"
            )
        values = values.reshape(-1, factor).mean(axis=1)
    elif ratio < 1 and math.isclose(1 / ratio, round(1 / ratio)):
        values = np.repeat(values, round(1 / ratio))
    else:
        raise ValueError(
            f"{path}: a {step:g}-minute series cannot be resampled to {sampling_time_min:g} minutes"
        )
    per_day = round(24 * 60 / sampling_time_min)
    if len(values) % per_day:
        raise ValueError(
            f"{path}: {len(values)} steps of {sampling_time_min:g} min are not whole days "
            f"({per_day} steps per day)"
        )
    return values


def csv_profiles(
    steps_per_day: int,
    load: dict | None = None,
    pv: dict | None = None,
    price: dict | None = None,
) -> Profiles:
    """Profiles from CSV sources: the load multiplier (one column for every bus), the PV
    availability and the energy price (currency/MWh, every price column), each where given
    (else 0); every fifth day held out for evaluation (the training days when fewer than
    five). The sources must cover the same days."""
    minutes = 24 * 60 / steps_per_day
    series = {
        key: read_profile(source, minutes)
        for key, source in (("load_csv", load), ("pv_csv", pv), ("price_csv", price))
        if source is not None
    }
    if not series:
        raise ValueError("csv_profiles needs at least one CSV source")
    lengths = {key: len(x) // steps_per_day for key, x in series.items()}
    if len(set(lengths.values())) > 1:
        covered = ", ".join(f"{key} {days}" for key, days in lengths.items())
        raise ValueError(f"the CSV sources cover different numbers of days ({covered})")
    steps = len(next(iter(series.values())))
    days, held_out = split_days(steps // steps_per_day)
    if len(held_out) == 0:
        held_out = days
    zeros = np.zeros(steps, np.float32)
    price_series = series.get("price_csv", zeros)
    return Profiles(
        load=series.get("load_csv", zeros)[:, None].astype(np.float32),
        pv=series.get("pv_csv", zeros)[:, None].astype(np.float32),
        wind=zeros[:, None],
        price=np.stack([price_series, price_series], axis=1).astype(np.float32),
        days=days,
        held_out=held_out,
    )
