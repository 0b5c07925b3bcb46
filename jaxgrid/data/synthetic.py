"""Synthetic daily load and PV profiles: the fallback when no measured data is given.

Loads follow a residential double peak (morning and evening) or a commercial daytime
plateau, scaled by season (higher in winter) and by day-to-day noise. PV follows a
clear-sky half-sine between sunrise and sunset whose length and height follow the
season, attenuated by clouds that change from day to day and within the day. Wind is a
smoothed random walk, stronger in winter. Prices are the time-of-use tariff and the
merit-order price of :mod:`jaxgrid.data.prices`. Generated with NumPy from a seed, so the
same seed gives the same year.
"""

from __future__ import annotations

import numpy as np

from jaxgrid.data.prices import merit_order_price, time_of_use
from jaxgrid.data.profiles import Profiles, split_days

LOAD_KINDS = ("residential", "commercial")


def daily_load_shape(kind: str, steps_per_day: int) -> np.ndarray:
    """Load over one day, peak 1, on ``steps_per_day`` steps starting at midnight."""
    h = (np.arange(steps_per_day) + 0.5) * 24.0 / steps_per_day
    if kind == "residential":
        shape = (
            0.45
            + 0.35 * np.exp(-0.5 * ((h - 7.5) / 1.5) ** 2)
            + 0.6 * np.exp(-0.5 * ((h - 19.0) / 2.0) ** 2)
        )
    elif kind == "commercial":
        shape = 0.35 + 0.65 / (1 + np.exp(-(h - 8.0) * 2.0)) / (1 + np.exp((h - 18.0) * 2.0))
    else:
        raise ValueError(f"unknown load kind {kind!r}; expected one of {LOAD_KINDS}")
    return shape / shape.max()


def clear_sky_pv(
    day_of_year: np.ndarray, steps_per_day: int, latitude_factor: float = 0.25
) -> np.ndarray:
    """Clear-sky PV output (pu of peak), ``(n_days, steps_per_day)``; days around 172 are longest."""
    h = (np.arange(steps_per_day) + 0.5) * 24.0 / steps_per_day
    season = np.cos(2 * np.pi * (np.asarray(day_of_year)[:, None] - 172) / 365)
    half_day = 6.0 + 2.0 * season  # 4 h (winter) to 8 h (summer) either side of noon
    height = 1.0 - latitude_factor * (1 - season)
    x = (h[None, :] - (12.0 - half_day)) / (2 * half_day)
    return height * np.clip(np.sin(np.pi * x), 0.0, None) ** 1.3


def synthetic_profiles(
    n_days: int = 365,
    steps_per_day: int = 96,
    load_kinds: tuple[str, ...] = LOAD_KINDS,
    n_pv: int = 1,
    n_wind: int = 1,
    seed: int = 0,
) -> Profiles:
    """A year of synthetic profiles (see the module docstring), float32."""
    rng = np.random.default_rng(seed)
    day = np.arange(n_days)
    winter = 0.5 * (1 + np.cos(2 * np.pi * day / 365))  # 1 on 1 January, 0 in July
    loads = []
    for kind in load_kinds:
        daily = daily_load_shape(kind, steps_per_day)[None, :]
        level = (0.8 + 0.25 * winter + 0.05 * rng.standard_normal(n_days))[:, None]
        noise = 1 + 0.05 * rng.standard_normal((n_days, steps_per_day))
        loads.append((daily * level * noise).reshape(-1))
    pvs = []
    sky = clear_sky_pv(day, steps_per_day)
    for _ in range(n_pv):
        cloud_day = rng.beta(5.0, 1.5, n_days)[:, None]
        flicker = np.clip(1 - 0.15 * np.abs(rng.standard_normal((n_days, steps_per_day))), 0.2, 1.0)
        pvs.append(np.clip(sky * cloud_day * flicker, 0.0, 1.0).reshape(-1))
    winds = []
    for _ in range(n_wind):
        walk = np.cumsum(rng.standard_normal(n_days * steps_per_day)) / np.sqrt(steps_per_day)
        walk = np.convolve(walk - walk.mean(), np.ones(steps_per_day) / steps_per_day, "same")
        level = np.repeat(0.3 + 0.15 * winter, steps_per_day)
        winds.append(np.clip(level + 0.08 * walk, 0.0, 1.0))
    load = np.stack(loads, axis=1)
    pv = np.stack(pvs, axis=1)
    wind = np.stack(winds, axis=1)
    price = np.stack(
        [
            time_of_use(len(load), steps_per_day),
            merit_order_price(
                load.mean(axis=1) / load.mean(axis=1).max(), wind.mean(axis=1), pv.mean(axis=1)
            ),
        ],
        axis=1,
    )
    train, test = split_days(n_days)
    return Profiles(
        load=load.astype(np.float32),
        pv=pv.astype(np.float32),
        wind=wind.astype(np.float32),
        price=price.astype(np.float32),
        days=train,
        held_out=test,
    )
