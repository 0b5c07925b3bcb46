"""A diesel generator: commitment with start-up time and cost, minimum stable load, ramps,
a fuel curve by loading and CO2 emissions.

**Commitment.** A request ``p_request_mw > 0`` asks the unit to run, ``<= 0`` to stop (it
stops at once). A unit that is off and asked to run begins a start-up: it pays
``start_cost`` once and produces from ``start_steps`` steps later (0: the same step), if
the request stays positive meanwhile (a request of 0 during start-up aborts it).

**Output.** A running unit produces the request within ``[p_min_mw, p_max_mw]`` (minimum
stable load: below it a diesel engine wet-stacks) and the ramp limits: at most
``ramp_mw_per_h * dt_h`` above and below the previous step's output, and at most
``max(p_min_mw, ramp_mw_per_h * dt_h)`` in its first running step.

**Fuel.** The linear fuel curve of HOMER (Lambert, Gilman and Lilienthal 2006, "Micropower
system modeling with HOMER"): litres per hour ``F0 * p_max_mw + F1 * p`` while running, so
the fuel cost per MWh falls with the loading ``p / p_max_mw``, to ``price * (F0 + F1)`` at
full load. HOMER's default curve is ``F0 = 0.08``, ``F1 = 0.25`` L/h per kW, i.e. 80 L/h
per MW of rating and 250 L/MWh. CO2 is ``emission_t_per_l`` per litre (2.68 kg/L for
diesel fuel).

**Convention.** Output is generation, ``p_mw >= 0`` (not the load convention of
:mod:`.battery`).

**Smooth surrogates** (for gradients, :mod:`jaxgrid.smooth`; both widths default to 0,
the exact model, bit for bit).

- ``smoothing_mw > 0``: the clip of a running unit's request to its window ``[max(p_min,
  p - ramp), min(p + ramp, p_max)]`` is :func:`jaxgrid.smooth.soft_clip`, rounded over
  that many MW. The output then moves with a request beyond the window (its derivative
  decays over a few widths instead of dropping to 0), stays within the window (never
  below the minimum stable load), and is at most ``0.69 smoothing_mw`` short of a bound
  it is asked to reach. Where the window is a single point (``low >= high``) the output
  is that point, as in the exact model.
- ``commit_smoothing_mw > 0`` relaxes the commitment in the step's flows, not in its
  state. The unit runs this step with the weight ``u = sigmoid(p_request / w)`` in
  place of the indicator ``p_request > 0``: where it is ready to produce this step
  (running, or ``start_steps == 0``) its output is ``u`` times the clipped request and
  its fuel ``u F0 p_max dt + F1 p dt``; where it would start, the start costs ``u
  start_cost``. This is the mixed-integer programme's relaxation (on/off share ``u`` in
  [0, 1], output within ``u`` times the window) at a point set by the request: a
  planner sees both the no-load fuel and start it saves by stopping and the energy it
  then loses. What stays discrete: the state (``running``, ``start_left``: a start-up
  and its end follow ``p_request > 0``), the flags ``producing`` and ``started``, and
  so the path from a start to the output it gives ``start_steps`` later, which carries
  no gradient (with ``start_steps >= 1`` a unit that is off sees the cost of a start
  and not its benefit). Output, fuel and start cost differ from the exact ones by
  ``sigmoid(-|p_request| / w)`` of what committing changes (``4.5e-5`` of it at ten
  widths from 0); at a request of 0, where the exact unit is off, the relaxed one runs
  at half weight: ask for ``p_request <= -10 w`` to be off within that. The state's
  ``p_mw`` is the relaxed output (the next ramp window starts from it).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxgrid.smooth import soft_clip
from jaxgrid.types import Array


@struct.dataclass
class DieselParams:
    """One generator; scalars ``()``.

    Attributes:
        p_max_mw: rating, MW.
        p_min_mw: minimum stable load, MW (> 0).
        ramp_mw_per_h: ramp limit up and down, MW/h.
        start_steps: int32 steps from a start command to the first running step.
        start_cost: cost of one start, currency.
        fuel_noload_l_per_mwh: ``F0``, litres per hour per MW of rating while running.
        fuel_l_per_mwh: ``F1``, litres per MWh generated.
        fuel_price: currency per litre.
        emission_t_per_l: tonnes of CO2 per litre.
        smoothing_mw: width of the smooth surrogate of the ramp window's clip, MW; 0
            (the default): the exact clip (module docstring).
        commit_smoothing_mw: width of the sigmoid that relaxes the commitment in the
            step's output, fuel and start cost, MW of request; 0 (the default): the
            exact on/off (module docstring).
    """

    p_max_mw: Array
    p_min_mw: Array
    ramp_mw_per_h: Array
    start_steps: Array
    start_cost: Array
    fuel_noload_l_per_mwh: Array
    fuel_l_per_mwh: Array
    fuel_price: Array
    emission_t_per_l: Array
    smoothing_mw: Array = 0.0
    commit_smoothing_mw: Array = 0.0


@struct.dataclass
class DieselState:
    """Attributes:
    running: ``()`` bool, produced in the last step (or finished its start-up).
    start_left: ``()`` int32 start-up steps still to wait (0: not starting).
    p_mw: ``()`` output of the last step, MW.
    """

    running: Array
    start_left: Array
    p_mw: Array


class DieselStep(NamedTuple):
    """Result of one step."""

    state: DieselState  # after the step
    p_mw: Array  # () output, MW
    producing: Array  # () bool, ran this step
    started: Array  # () bool, a start-up began this step
    fuel_l: Array  # () fuel burnt, litres
    cost: Array  # () fuel and start-up cost, currency
    emissions_t: Array  # () CO2, tonnes
    clipped_mw: Array  # () |request - output| while producing, MW


def diesel_off() -> DieselState:
    """A generator that is off and not starting."""
    return DieselState(
        running=jnp.zeros((), bool), start_left=jnp.zeros((), jnp.int32), p_mw=jnp.zeros(())
    )


def fuel_litres(p_mw, producing, dt_h, params: DieselParams) -> Array:
    """Fuel (litres) burnt in ``dt_h`` hours at output ``p_mw`` (HOMER's linear curve)."""
    rate = params.fuel_noload_l_per_mwh * params.p_max_mw + params.fuel_l_per_mwh * p_mw
    return jnp.where(producing, rate, 0.0) * dt_h


def diesel_step(state: DieselState, p_request_mw, dt_h, params: DieselParams) -> DieselStep:
    """Enact a request of ``p_request_mw`` MW for ``dt_h`` hours (see the module docstring)."""
    commit = p_request_mw > 0
    started = commit & ~state.running & (state.start_left == 0)
    left = jnp.where(started, params.start_steps, state.start_left)
    producing = commit & (state.running | (left == 0))
    still_starting = commit & ~producing
    left_after = jnp.where(still_starting, left - 1, 0)

    ramp = params.ramp_mw_per_h * dt_h
    high = jnp.where(
        state.running & (state.p_mw > 0),
        jnp.minimum(state.p_mw + ramp, params.p_max_mw),
        jnp.minimum(jnp.maximum(params.p_min_mw, ramp), params.p_max_mw),
    )
    low = jnp.maximum(params.p_min_mw, state.p_mw - ramp)
    window = soft_clip(p_request_mw, jnp.minimum(low, high), high, params.smoothing_mw)
    p = jnp.where(producing, window, 0.0)
    fuel = fuel_litres(p, producing, dt_h, params)
    start_cost = jnp.where(started, params.start_cost, 0.0)

    # the commitment's relaxation (module docstring), selected where its width is > 0
    relax = params.commit_smoothing_mw > 0
    u = jax.nn.sigmoid(p_request_mw / jnp.where(relax, params.commit_smoothing_mw, 1.0))
    would_start = ~state.running & (state.start_left == 0)
    ready = state.running | (jnp.where(would_start, params.start_steps, state.start_left) == 0)
    p_relaxed = jnp.where(ready, u * window, 0.0)
    noload = params.fuel_noload_l_per_mwh * params.p_max_mw  # L/h while running
    fuel_relaxed = jnp.where(ready, u * noload + params.fuel_l_per_mwh * p_relaxed, 0.0) * dt_h
    p = jnp.where(relax, p_relaxed, p)
    fuel = jnp.where(relax, fuel_relaxed, fuel)
    start_cost = jnp.where(relax, jnp.where(would_start, u * params.start_cost, 0.0), start_cost)
    return DieselStep(
        state=DieselState(
            running=producing | (still_starting & (left_after == 0)),
            start_left=left_after.astype(jnp.int32),
            p_mw=p,
        ),
        p_mw=p,
        producing=producing,
        started=started,
        fuel_l=fuel,
        cost=fuel * params.fuel_price + start_cost,
        emissions_t=fuel * params.emission_t_per_l,
        clipped_mw=jnp.where(producing, jnp.abs(p_request_mw - p), 0.0),
    )
