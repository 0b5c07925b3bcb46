"""An AI data centre: a queue of GPU work, IT power by utilisation, cooling of the hall.

**Work.** Two classes of batch work, training and fine-tuning (index 0 and 1 of every
``(2,)`` field), arrive as GPU-hours (GPU-h) per step and wait in a fluid queue (the
backlog). The operator gives each class a share of the ``n_gpus`` GPUs; a class is served
``min(share * n_gpus * dt_h, backlog)`` GPU-h in a step, first come first served. Shares
that add up to more than 1 are scaled down to add up to 1 (the excess is reported).

**Deadlines (SLA).** Work of class ``k`` that arrives in step ``i`` must be served by the
end of step ``i + deadline_steps[k] - 1``. The caller passes ``newly_due_gpu_h``: the
arrivals whose deadline is the end of this step. The state keeps ``ahead_gpu_h``, the work
served minus the work due so far (served first come, first served); where it is negative
that much due work is still not served: it is *late* (GPU-h), a stock charged every step it
stays late. Keeping the difference rather than two cumulative sums keeps it exact in
float32 over a long run.

**IT power.** Linear in utilisation ``u`` (busy share of the GPUs), the server power model
of Fan, Weber and Barroso (ISCA 2007): ``p_it = p_idle + (p_peak - p_idle) u`` (MW).

**Hall temperature.** A first-order (one-capacitance) thermal model: heat capacity
``c_mwh_per_k`` (MWh/K), envelope conductance ``ua_mw_per_k`` (MW/K) to the outdoor air
``t_out`` (°C), heat input ``p_it - q_cool`` (all IT power becomes heat). Over a step with
constant inputs it is solved exactly (zero-order hold)::

    t_next = a t + (1 - a) t_out + g (p_it - q_cool),   a = exp(-ua dt / c),   g = (1 - a) / ua

**Cooling.** The chiller removes, within ``[0, q_max_mw]``, the heat that brings the hall
to the cooling setpoint by the end of the step (an ideal setpoint controller; the setpoint
is clipped to ``[t_set_min, t_set_max]``). Its electric power is ``q_cool / cop``; the
coefficient of performance falls with the outdoor temperature,
``cop = max(cop_ref - cop_slope (t_out - t_ref), cop_min)``.

With ``cooling_smoothing_mw > 0`` the cooling's clip to ``[0, q_max_mw]`` is the smooth
surrogate :func:`jaxgrid.smooth.soft_clip`, rounded over that many MW: the heat removed
then moves with the setpoint where the exact chiller is off or at its capacity (its
derivative decays over a few widths instead of dropping to 0), stays within ``[0,
q_max_mw]``, and differs from the exact clip by at most ``0.69 cooling_smoothing_mw``
(at a corner; ``w exp(-d / w)`` at ``d`` MW from it). The hall temperature follows from
the heat removed, ``t_next = drift + g (p_it - q_cool)``, so it stays within what the
chiller can reach and within ``0.69 g cooling_smoothing_mw`` K of the exact model's
(``g`` about ``dt_h / c_mwh_per_k``); the cooling's power is ``q_cool / cop`` as ever.
The default, 0, is the exact model, bit for bit.

**Thermal limit.** ``overheat = max(t_next - t_max, 0)`` (K), a cost for the caller.

Every relation above is linear for given exogenous inputs (arrivals, ``t_out``), so a
perfect-foresight linear programme of the same day is exact for this model (the cooling's
clip stays inactive when the planned hall temperature is inside the setpoint range).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from flax import struct

from jaxgrid.smooth import soft_clip
from jaxgrid.types import Array


@struct.dataclass
class DataCentreParams:
    """One data centre; scalars ``()`` unless said otherwise.

    Attributes:
        n_gpus: GPUs, so ``n_gpus * dt_h`` GPU-h can be served a step.
        p_idle_mw, p_peak_mw: IT power with no GPU busy and with all busy, MW.
        deadline_steps: ``(2,)`` int32 steps from arrival to deadline (training, fine-tuning).
        c_mwh_per_k: heat capacity of the hall, MWh/K.
        ua_mw_per_k: envelope conductance to the outdoor air, MW/K (> 0).
        q_max_mw: cooling capacity (heat removed), MW.
        t_set_min, t_set_max: range of the cooling setpoint, °C.
        t_max: hall temperature limit, °C.
        cop_ref: chiller coefficient of performance at ``t_ref`` °C outdoors.
        cop_slope: its fall per K of outdoor temperature above ``t_ref``, 1/K.
        cop_min: its floor.
        t_ref: reference outdoor temperature, °C.
        cooling_smoothing_mw: width of the smooth surrogate of the cooling's clip to
            ``[0, q_max_mw]``, MW; 0 (the default): the exact clip (module docstring).
    """

    n_gpus: Array
    p_idle_mw: Array
    p_peak_mw: Array
    deadline_steps: Array
    c_mwh_per_k: Array
    ua_mw_per_k: Array
    q_max_mw: Array
    t_set_min: Array
    t_set_max: Array
    t_max: Array
    cop_ref: Array
    cop_slope: Array
    cop_min: Array
    t_ref: Array
    cooling_smoothing_mw: Array = 0.0


@struct.dataclass
class DataCentreState:
    """Attributes:
    backlog_gpu_h: ``(2,)`` work waiting, GPU-h.
    ahead_gpu_h: ``(2,)`` work served minus work due, GPU-h (negative: late).
    t_hall: ``()`` hall temperature, °C.
    """

    backlog_gpu_h: Array
    ahead_gpu_h: Array
    t_hall: Array


class DataCentreStep(NamedTuple):
    """Result of one step."""

    state: DataCentreState  # after the step
    served_gpu_h: Array  # (2,) work served this step, GPU-h
    utilisation: Array  # () busy share of the GPUs
    p_it_mw: Array  # () IT power, MW
    q_cool_mw: Array  # () heat removed by the cooling, MW
    p_cool_mw: Array  # () electric power of the cooling, MW
    p_mw: Array  # () total electric power, MW
    late_gpu_h: Array  # (2,) work past its deadline still not served, GPU-h
    overheat_k: Array  # () hall temperature above t_max after the step, K
    share_excess: Array  # () how far the requested shares added up beyond 1


def cop(t_out, params: DataCentreParams) -> Array:
    """The chiller's coefficient of performance at outdoor temperature ``t_out`` (°C)."""
    return jnp.maximum(params.cop_ref - params.cop_slope * (t_out - params.t_ref), params.cop_min)


def thermal_coefficients(dt_h, params: DataCentreParams) -> tuple[Array, Array]:
    """``(a, g)`` of the exact step ``t_next = a t + (1 - a) t_out + g (p_it - q_cool)``:
    ``a = exp(-ua dt / c)`` and ``g = (1 - a) / ua`` (K per MW), ``1 - a`` by ``expm1``."""
    x = params.ua_mw_per_k * dt_h / params.c_mwh_per_k
    return jnp.exp(-x), -jnp.expm1(-x) / params.ua_mw_per_k


def it_power(utilisation, params: DataCentreParams) -> Array:
    """IT power (MW) at a busy share ``utilisation`` of the GPUs."""
    return params.p_idle_mw + (params.p_peak_mw - params.p_idle_mw) * utilisation


def datacentre_step(
    state: DataCentreState,
    shares: Array,
    t_setpoint,
    arrivals_gpu_h: Array,
    newly_due_gpu_h: Array,
    t_out,
    dt_h,
    params: DataCentreParams,
) -> DataCentreStep:
    """One step: ``shares`` ``(2,)`` of the GPUs for training and fine-tuning (each in
    [0, 1]), a cooling setpoint ``t_setpoint`` (°C), this step's ``arrivals_gpu_h`` ``(2,)``,
    the arrivals due by the end of this step ``newly_due_gpu_h`` ``(2,)`` and the outdoor
    temperature ``t_out`` (°C)."""
    total = jnp.sum(shares)
    shares = shares / jnp.maximum(total, 1.0)
    backlog = state.backlog_gpu_h + arrivals_gpu_h
    served = jnp.minimum(shares * params.n_gpus * dt_h, backlog)
    utilisation = jnp.sum(served) / (params.n_gpus * dt_h)
    p_it = it_power(utilisation, params)

    a, g = thermal_coefficients(dt_h, params)
    setpoint = jnp.clip(t_setpoint, params.t_set_min, params.t_set_max)
    drift = a * state.t_hall + (1.0 - a) * t_out  # where the hall goes with no heat input
    q_wanted = p_it - (setpoint - drift) / g  # the heat that reaches the setpoint
    q_cool = soft_clip(q_wanted, 0.0, params.q_max_mw, params.cooling_smoothing_mw)
    t_next = drift + g * (p_it - q_cool)
    p_cool = q_cool / cop(t_out, params)

    ahead = state.ahead_gpu_h + served - newly_due_gpu_h
    return DataCentreStep(
        state=DataCentreState(backlog_gpu_h=backlog - served, ahead_gpu_h=ahead, t_hall=t_next),
        served_gpu_h=served,
        utilisation=utilisation,
        p_it_mw=p_it,
        q_cool_mw=q_cool,
        p_cool_mw=p_cool,
        p_mw=p_it + p_cool,
        late_gpu_h=jnp.maximum(-ahead, 0.0),
        overheat_k=jnp.maximum(t_next - params.t_max, 0.0),
        share_excess=jnp.maximum(total - 1.0, 0.0),
    )
