"""Out-of-distribution stress splits: params transforms that evaluate a policy on the
held-out days under conditions it was not trained on.

Each split is a pure function of an environment's params (on the held-out days), applied
where the params have what it changes (a split that does not apply is left out):

- ``in_distribution``: the held-out days as they are;
- ``load_stress``: every load profile x 1.2 (``profiles.load``);
- ``high_demand``: only the held-out days whose mean load is in the top quarter;
- ``low_renewable``: PV and wind availability x 0.5 (``profiles.pv``, ``profiles.wind``);
- ``tight_lines``: branch ratings x 0.8 (``feeder.rate_mva`` or ``network.rate_mva``).

Wrapped params (a wrapper's params holding the environment's as ``env``, e.g.
:class:`~jaxgrid.wrappers.SauteParams`) are transformed inside. The factors are the
module's constants, the same for every environment, so that results compare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxgrid.data.profiles import Profiles

LOAD_STRESS = 1.2  # load multiplier of ``load_stress``
LOW_RENEWABLE = 0.5  # PV and wind multiplier of ``low_renewable``
TIGHT_LINES = 0.8  # rating multiplier of ``tight_lines``
HIGH_DEMAND_SHARE = 0.25  # share of the held-out days ``high_demand`` keeps


def _inner(params: Any, change: Callable[[Any], Any | None]) -> Any | None:
    """``change`` applied to ``params`` or, for wrapped params, to ``params.env``."""
    changed = change(params)
    if changed is not None:
        return changed
    inner = getattr(params, "env", None)
    if inner is None or not hasattr(params, "replace"):
        return None
    changed = _inner(inner, change)
    return None if changed is None else params.replace(env=changed)


def _profiles(params) -> Profiles | None:
    profiles = getattr(params, "profiles", None)
    return profiles if isinstance(profiles, Profiles) else None


def _load_stress(params):
    p = _profiles(params)
    return None if p is None else params.replace(profiles=p.replace(load=p.load * LOAD_STRESS))


def _high_demand(params):
    p = _profiles(params)
    if p is None:
        return None
    n_days = len(np.asarray(p.days)) + len(np.asarray(p.held_out))
    per_day = p.n_steps // max(n_days, 1)
    if per_day < 1:
        return None
    days = np.asarray(p.days)  # the held-out days: params are on them already
    load = np.asarray(p.load)[: n_days * per_day].mean(axis=1).reshape(n_days, per_day)
    demand = load.mean(axis=1)[days]
    keep = max(1, int(round(HIGH_DEMAND_SHARE * len(days))))
    top = np.sort(days[np.argsort(-demand, kind="stable")[:keep]]).astype(np.int32)
    return params.replace(profiles=p.replace(days=top))


def _low_renewable(params):
    p = _profiles(params)
    if p is None:
        return None
    return params.replace(profiles=p.replace(pv=p.pv * LOW_RENEWABLE, wind=p.wind * LOW_RENEWABLE))


def _tight_lines(params):
    for field in ("feeder", "network"):
        grid = getattr(params, field, None)
        if grid is not None and hasattr(grid, "rate_mva"):
            return params.replace(**{field: grid.replace(rate_mva=grid.rate_mva * TIGHT_LINES)})
    return None


SPLITS: dict[str, Callable[[Any], Any | None]] = {
    "in_distribution": lambda params: params,
    "load_stress": _load_stress,
    "high_demand": _high_demand,
    "low_renewable": _low_renewable,
    "tight_lines": _tight_lines,
}


def stress_splits(params: Any) -> dict[str, Any]:
    """``{split name: params}`` of every split that applies to ``params`` (which should
    already be on the held-out days, :func:`~jaxgrid.train.evaluate.held_out`)."""
    out = {}
    for name, split in SPLITS.items():
        changed = _inner(params, split)
        if changed is not None:
            out[name] = changed
    return out


def bootstrap_ci(
    values, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values`` (e.g. one score
    per seed): ``(low, high)``."""
    values = np.asarray(values, float)
    rng = np.random.default_rng(seed)
    means = rng.choice(values, (resamples, len(values)), replace=True).mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
