"""Automatic voltage-regulator tap control, as OpenDSS's ``RegControl`` in a snapshot solve.

A step-voltage regulator is a transformer of a :class:`~jaxgrid.grid.three_phase.Feeder3`
whose tapped winding is the params leaf ``Feeder3.tap_pu``. Its controller watches one
phase of that winding through a potential transformer (PT) and, with line-drop
compensation (LDC), estimates the voltage at a load centre downstream, on the 120 V base:

    v_seen = | (V_from - V_to) / pt_ratio + (r_ldc_v + j x_ldc_v) * I_ct / ct_primary_a |

``V_from - V_to`` is the monitored phase of the winding (phase to neutral, or phase to
phase for a delta winding), V; ``I_ct`` the current of that phase *into* the regulator at
the winding (so adding it subtracts the drop to the load centre), A; ``r_ldc_v`` and
``x_ldc_v`` are the compensator's settings, volts at rated CT current.

The control law is OpenDSS's for ``Set ControlMode=Static`` (a snapshot solve iterates
power flow and control actions until no control acts):

1. a controller acts when ``|vreg_v - v_seen| > band_v / 2``;
2. it wants ``k = round((vreg_v - v_seen) * pt_ratio / winding_vbase_v / tap_step_pu)``
   steps (round half to even);
3. it moves ``trunc(0.7 |k|)`` steps towards them, at least one and at most
   ``max_tap_change``, the tap clipped to ``[min_tap_pu, max_tap_pu]``; a controller
   already at the limit it pushes towards does not act;
4. every controller acts at once on the same power flow (OpenDSS queues them all at the
   same delay, which :func:`~jaxgrid.grid.three_phase.opendss.regcontrols_from_opendss`
   checks), then the power flow is solved again.

A tap on the grid of steps (counted from the middle of the range, as OpenDSS's tap
numbers are) moves to the exact grid value, so float32 taps do not drift by round-off;
a tap off the grid moves by whole steps from where it is. No controller acts on a power
flow that did not converge.

The 70 % move approaches the target from one side without overshooting a band that the
mutual coupling of regulators in series could otherwise make it oscillate across; it is
what OpenDSS does, so the settled taps are OpenDSS's (``tests/grid/test_regulator.py``).

Design: the settings are their own pytree, :class:`RegControlSettings`, rather than
fields of ``Feeder3``. A ``Feeder3`` is the network, whose taps an agent may set directly
(the ``voltage3`` environment does); the controller is a device acting on it, with its
own parameters to sweep under ``vmap`` (``vreg_v``, ``band_v``, the LDC) independently of
the network's. Both come from the same OpenDSS files and ``.npz`` extracts:
:func:`load_regcontrols` pairs with :func:`~jaxgrid.grid.three_phase.load_feeder3`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.grid.three_phase.feeder3 import Feeder3
from jaxgrid.grid.three_phase.opendss import (
    REGCONTROL_FIELDS,
    load_regcontrol_arrays,
    regcontrols_from_opendss,
)
from jaxgrid.grid.three_phase.upf import (
    N_ITER,
    UnbalancedPowerFlowResult,
    as_arrays,
    regulator_admittances,
    unbalanced_power_flow,
)
from jaxgrid.smooth import soft_clip, soft_round
from jaxgrid.types import Array, float_dtype

N_ROUNDS = 15  # OpenDSS's default maxcontroliter
MOVE_SHARE_TENTHS = 7  # OpenDSS's static mode moves 70 % of the wanted steps


@struct.dataclass
class RegControlSettings:
    """The settings of ``n_reg`` regulator controls; controller ``r`` drives
    ``Feeder3.tap_pu[r]``. Each array field is ``(n_reg,)``.

    Attributes:
        names: static tuple of the controls' names (OpenDSS ``RegControl`` names).
        vreg_v: target voltage, V on the 120 V (PT secondary) base.
        band_v: bandwidth, V on the 120 V base (no action within ``vreg_v +- band_v/2``).
        pt_ratio: potential-transformer ratio (winding volts per 120 V-base volt).
        ct_primary_a: current-transformer primary rating, A.
        r_ldc_v, x_ldc_v: line-drop compensator resistance and reactance settings, V on
            the 120 V base at rated CT current.
        winding_vbase_v: base voltage of the monitored winding, V.
        tap_step_pu: tap increment, pu (0.00625 on the IEEE feeders: 32 steps over
            0.9-1.1).
        min_tap_pu, max_tap_pu: tap range, pu.
        max_tap_change: int32 most steps one action moves (OpenDSS ``maxtapchange``).
        pt_node_from, pt_node_to: int32 nodes across which the PT measures
            (``Feeder3`` node index; ``n_node`` = ground).
        ct_conductor: int32 conductor of the regulator's element (position in
            ``Feeder3.elem_nodes[reg_elem[r]]``) whose current the CT measures.
    """

    names: tuple = struct.field(pytree_node=False)
    vreg_v: Array
    band_v: Array
    pt_ratio: Array
    ct_primary_a: Array
    r_ldc_v: Array
    x_ldc_v: Array
    winding_vbase_v: Array
    tap_step_pu: Array
    min_tap_pu: Array
    max_tap_pu: Array
    max_tap_change: Array
    pt_node_from: Array
    pt_node_to: Array
    ct_conductor: Array

    @property
    def n_reg(self) -> int:
        return self.vreg_v.shape[-1]

    def __repr__(self) -> str:
        if np.ndim(self.vreg_v) != 1:
            return f"RegControlSettings(batch of {np.shape(self.vreg_v)[:-1]})"
        rows = ["RegControlSettings:", "name        vreg_V band_V  PT    CT_A  R_V   X_V"]
        for r, name in enumerate(self.names):
            rows.append(
                f"{name:<10s} {float(self.vreg_v[r]):6.1f} {float(self.band_v[r]):6.2f}"
                f" {float(self.pt_ratio[r]):5.0f} {float(self.ct_primary_a[r]):6.0f}"
                f" {float(self.r_ldc_v[r]):5.2f} {float(self.x_ldc_v[r]):5.2f}"
            )
        return "\n".join(rows)


def _settings(arrays: dict) -> RegControlSettings:
    return RegControlSettings(
        names=tuple(arrays["names"]), **{f: np.asarray(arrays[f]) for f in REGCONTROL_FIELDS}
    )


def load_regcontrols(source: str) -> RegControlSettings:
    """The regulator controls of a bundled feeder (``"ieee13"``, ``"ieee34"``,
    ``"ieee37"``, ``"ieee123"``; no ``dss-python`` needed), a saved ``.npz`` or an
    OpenDSS master file, in the order of the feeder's ``regulator_names``."""
    return _settings(load_regcontrol_arrays(source))


def regcontrols_from_master(master_file, commands=()) -> RegControlSettings:
    """The regulator controls of an OpenDSS master file (needs ``dss-python``; see
    :func:`~jaxgrid.grid.three_phase.opendss.regcontrols_from_opendss`)."""
    return _settings(regcontrols_from_opendss(master_file, commands))


def regulator_voltage(
    settings: RegControlSettings, feeder: Feeder3, result: UnbalancedPowerFlowResult
) -> Array:
    """``(n_reg,)`` the voltage each controller sees, V on the 120 V base: the PT's
    measurement plus line-drop compensation (module docstring).

    The CT current is not in the power-flow result (it holds line currents only); it is
    the regulator's primitive admittance at ``feeder.tap_pu`` times its conductors'
    voltages, so ``feeder`` is the one ``result`` was solved for.
    """
    feeder = as_arrays(feeder)
    v_ext = jnp.append(result.v_volt, 0.0)
    v_pt = (v_ext[settings.pt_node_from] - v_ext[settings.pt_node_to]) / settings.pt_ratio
    y_reg = regulator_admittances(feeder)  # (n_reg, K, K)
    v_reg = v_ext[feeder.elem_nodes[feeder.reg_elem]]  # (n_reg, K)
    row = jnp.take_along_axis(y_reg, settings.ct_conductor[:, None, None], axis=1)[:, 0]
    i_ct = jnp.sum(row * v_reg, axis=-1)
    v_ldc = (settings.r_ldc_v + 1j * settings.x_ldc_v) * i_ct / settings.ct_primary_a
    return jnp.abs(v_pt + v_ldc)


class TapStep(NamedTuple):
    """One control action, each ``(n_reg,)``."""

    tap_pu: Array  # taps after the action, pu
    moved: Array  # bool: the controller changed its tap
    steps: Array  # int32 steps moved (positive = raise)


def tap_step(settings: RegControlSettings, taps: Array, v_seen: Array) -> TapStep:
    """One action of every controller at once, OpenDSS's static mode (module docstring).

    Args:
        settings: the controls.
        taps: ``(n_reg,)`` present taps, pu.
        v_seen: ``(n_reg,)`` the voltage each controller sees, V on the 120 V base
            (:func:`regulator_voltage`).

    Returns:
        A :class:`TapStep`.
    """
    dtype = jnp.result_type(taps, v_seen, float_dtype())
    taps = jnp.asarray(taps, dtype)
    error = jnp.asarray(settings.vreg_v, dtype) - v_seen
    out_of_band = jnp.abs(error) > settings.band_v / 2
    wanted = jnp.round(error * settings.pt_ratio / settings.winding_vbase_v / settings.tap_step_pu)
    wanted = wanted.astype(jnp.int32)
    # trunc(0.7 |k|) in integers: exact in float32 too (0.7 * 30 is not 21 in float32)
    size = jnp.clip((MOVE_SHARE_TENTHS * jnp.abs(wanted)) // 10, 1, settings.max_tap_change)
    room = jnp.where(wanted > 0, taps < settings.max_tap_pu, taps > settings.min_tap_pu)
    acts = out_of_band & (wanted != 0) & room
    steps = jnp.where(acts, jnp.sign(wanted) * size, 0).astype(jnp.int32)
    # a tap on the grid of steps (OpenDSS counts them from the middle of the range) lands
    # exactly on the grid value rather than accumulating round-off, which in float32 is
    # a few ulp a move (and IEEE 123's float32 power flow fails 1 ulp off some taps)
    middle = (settings.min_tap_pu + settings.max_tap_pu) / 2
    number = jnp.round((taps - middle) / settings.tap_step_pu)
    on_grid = jnp.abs(taps - middle - number * settings.tap_step_pu) < 1e-3 * settings.tap_step_pu
    moved_to = jnp.where(
        on_grid,
        middle + (number + steps) * settings.tap_step_pu,
        taps + steps * settings.tap_step_pu,
    )
    new = jnp.clip(moved_to, settings.min_tap_pu, settings.max_tap_pu)
    new = jnp.where(acts, new, taps)
    return TapStep(tap_pu=new, moved=new != taps, steps=steps)


def move_taps(
    settings: RegControlSettings, taps: Array, steps: Array, smoothing_steps: Array = 0.0
) -> Array:
    """Taps (pu) after an operator (an agent, not the controller) moves each by
    ``round(steps)`` tap steps of ``settings.tap_step_pu``, clipped to ``[min_tap_pu,
    max_tap_pu]``.

    Args:
        settings: the controls (their tap step and range).
        taps: ``(n_reg,)`` present taps, pu.
        steps: ``(n_reg,)`` tap steps asked for, a real number each (rounded half to even).
        smoothing_steps: ``()`` or ``(n_reg,)`` width of the smooth surrogate, tap steps;
            0 (the default): the exact rounding and clip. Where positive the rounding is
            :func:`jaxgrid.smooth.soft_round` (exact at whole steps, at most half a step
            from the request; its derivative no longer 0 between them) and the clip
            :func:`jaxgrid.smooth.soft_clip` over ``smoothing_steps * tap_step_pu`` pu:
            the tap then takes positions between whole steps, which a regulator cannot.
    """
    whole = soft_round(steps, smoothing_steps)
    return soft_clip(
        taps + whole * settings.tap_step_pu,
        settings.min_tap_pu,
        settings.max_tap_pu,
        smoothing_steps * settings.tap_step_pu,
    )


@struct.dataclass
class RegulatedPowerFlow:
    """A power flow with the regulators under automatic control (leading batch axes
    under ``vmap``).

    Attributes:
        power_flow: the :class:`UnbalancedPowerFlowResult` at the final taps.
        tap_pu: ``(n_reg,)`` final taps, pu.
        tap_steps: ``(n_reg,)`` int32 final taps in steps from 1.0 pu.
        v_seen: ``(n_reg,)`` the voltage each controller sees at the final taps, V on the
            120 V base.
        settled: ``()`` bool: the last round's power flow converged and moved no tap
            (every controller in band or at a limit), so the taps are the control's
            fixed point. A round whose power flow fails moves nothing and is not settled.
        rounds_moving: ``()`` int32 rounds in which some tap moved.
    """

    power_flow: UnbalancedPowerFlowResult
    tap_pu: Array
    tap_steps: Array
    v_seen: Array
    settled: Array
    rounds_moving: Array


def solve_with_regulators(
    feeder: Feeder3,
    settings: RegControlSettings,
    load_scale=1.0,
    p_gen_kw=None,
    q_gen_kvar=None,
    p_gen_ll_kw=None,
    q_gen_ll_kvar=None,
    n_rounds: int = N_ROUNDS,
    n_iter: int = N_ITER,
    join_switches: bool | None = None,
) -> RegulatedPowerFlow:
    """Power flow and regulator control, alternated ``n_rounds`` times from
    ``feeder.tap_pu`` (OpenDSS's static snapshot solve with a fixed count).

    Each round solves the power flow at the present taps, has every controller look at it
    (:func:`regulator_voltage`) and act (:func:`tap_step`); after the last round one more
    power flow at the final taps gives the result. Rounds after the control settles change
    nothing. Jittable and ``vmap``-able (over loads, generation, settings or starting
    taps); ``n_rounds``, ``n_iter`` and ``join_switches`` are static.

    Args:
        feeder: the feeder; its ``tap_pu`` are the starting taps.
        settings: its regulator controls (:func:`load_regcontrols`).
        load_scale, p_gen_kw, q_gen_kvar, p_gen_ll_kw, q_gen_ll_kvar: as for
            :func:`~jaxgrid.grid.three_phase.unbalanced_power_flow`.
        n_iter, join_switches: as for that function too (static).
        n_rounds: fixed number of control rounds (OpenDSS's default ``maxcontroliter``,
            15, by default); from neutral taps the IEEE feeders settle in at most 6.

    Returns:
        A :class:`RegulatedPowerFlow`.
    """
    feeder = as_arrays(feeder)

    def solve(taps):
        return unbalanced_power_flow(
            feeder.replace(tap_pu=taps),
            load_scale,
            p_gen_kw,
            q_gen_kvar,
            p_gen_ll_kw,
            q_gen_ll_kvar,
            n_iter=n_iter,
            join_switches=join_switches,
        )

    def seen(taps, result):
        return regulator_voltage(settings, feeder.replace(tap_pu=taps), result)

    def body(_, carry):
        taps, _settled, moving = carry
        result = solve(taps)
        v_seen = seen(taps, result)
        # no control acts on a power flow that failed (not converged, or voltages not
        # finite): the taps stay, and the solve is not settled
        usable = result.converged & jnp.all(jnp.isfinite(v_seen))
        step = tap_step(settings, taps, v_seen)
        any_moved = jnp.any(step.moved) & usable
        taps = jnp.where(usable, step.tap_pu, taps)
        return taps, usable & ~any_moved, moving + any_moved.astype(jnp.int32)

    start = (feeder.tap_pu, jnp.asarray(False), jnp.asarray(0, jnp.int32))
    taps, settled, moving = jax.lax.fori_loop(0, n_rounds, body, start)
    result = solve(taps)
    return RegulatedPowerFlow(
        power_flow=result,
        tap_pu=taps,
        tap_steps=jnp.round((taps - 1.0) / settings.tap_step_pu).astype(jnp.int32),
        v_seen=seen(taps, result),
        settled=settled,
        rounds_moving=moving,
    )
