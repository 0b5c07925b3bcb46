"""Measured profiles bundled with jaxgrid: a year of SimBench loads, PV and wind.

:func:`simbench_profiles` returns the 2016 quarter-hourly SimBench profiles (ODbL 1.0,
see ``jaxgrid/data/simbench/README.md``), averaged to the requested step, with a
time-of-use and a merit-order price series, and every fifth day held out for evaluation.
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

from jaxgrid.data.prices import merit_order_price, time_of_use
from jaxgrid.data.profiles import Profiles, resample, split_days

LOAD_NAMES = ("H0-A", "G0-A", "G1-A")  # households, commerce, business-hours commerce
PV_NAMES = ("PV1", "PV3", "PV5", "PV8")
WIND_NAMES = ("WP4", "WP10")
PRICE_NAMES = ("time_of_use", "merit_order")
DAYS = 366


@functools.cache
def _raw() -> dict[str, np.ndarray]:
    ref = resources.files("jaxgrid.data") / "simbench" / "profiles_2016.npz"
    with resources.as_file(ref) as path, np.load(path) as data:
        return {k: np.asarray(data[k]) for k in ("load", "pv", "wind")}


def simbench_profiles(steps_per_day: int = 96) -> Profiles:
    """The bundled profiles at ``steps_per_day`` steps (96: 15 min, 48: 30 min, 24: 1 h)."""
    if steps_per_day < 1 or 96 % steps_per_day:
        raise ValueError(f"steps_per_day must divide 96 (15-minute data), got {steps_per_day}")
    factor = 96 // steps_per_day
    raw = _raw()
    load, pv, wind = (resample(raw[k], factor) for k in ("load", "pv", "wind"))
    price = np.stack(
        [
            time_of_use(len(load), steps_per_day),
            merit_order_price(
                load.mean(axis=1) / load.mean(axis=1).max(), wind.mean(axis=1), pv.mean(axis=1)
            ),
        ],
        axis=1,
    )
    train, test = split_days(DAYS)
    return Profiles(
        load=load.astype(np.float32),
        pv=pv.astype(np.float32),
        wind=wind.astype(np.float32),
        price=price.astype(np.float32),
        days=train,
        held_out=test,
    )
