"""The bundled building profiles (OpenEI, CC BY 4.0) and the comfort curves of EthicalSmartGrid."""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

# Richards curve parameters (q, b, v, m) of the three comfort functions
COMFORT_CURVES = {
    "flexible": (0.1, 20.0, 2.0, 0.5),  # easy to satisfy
    "neutral": (1.0, 10.0, 1.0, 0.5),
    "strict": (10.0, 16.0, 0.7, 0.5),  # hard to satisfy
}
# the stock profiles: data file stem and comfort curve
PROFILES = {
    "Household": ("residential", "flexible"),
    "Office": ("office", "neutral"),
    "School": ("school", "strict"),
}
PERIODS = ("annually", "daily")


@functools.cache
def openei_profile(profile: str, period: str = "annually") -> dict[str, np.ndarray]:
    """Hourly needs (Wh), battery capacity and action limit of a stock profile.

    Args:
        profile: ``"Household"``, ``"Office"`` or ``"School"``.
        period: ``"annually"`` (8760 hours) or ``"daily"`` (an average day, 24 hours).
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown building profile {profile!r}; expected one of {list(PROFILES)}")
    if period not in PERIODS:
        raise ValueError(f"unknown profile period {period!r}; expected one of {list(PERIODS)}")
    stem = PROFILES[profile][0]
    ref = resources.files("jaxgrid.data") / "openei" / f"profile_{stem}_{period}.npz"
    with resources.as_file(ref) as path, np.load(path) as data:
        return {
            "needs": np.asarray(data["needs"], np.float64),
            "max_storage": float(np.ravel(data["max_storage"])[0]),
            "action_limit": float(np.ravel(data["action_limit"])[0]),
        }
