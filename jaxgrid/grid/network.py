"""The ``Network``: a meshed AC transmission network as a pytree of plain arrays.

MATPOWER's data model, in pandapower's habit of plain tables: buses, branches (lines and
transformers alike: a branch has a tap ratio and a phase shift), generators with their
cost curves, and loads at buses. Buses keep the order of the source data and their
original numbers (``bus_ids``; numbering need not be consecutive); every other table
refers to buses by 0-based index. Out-of-service branches and generators stay in the
tables with ``in_service`` False, so that a contingency or a commitment is a params leaf
rather than a new shape; isolated buses (MATPOWER type 4) stay too, with
``bus_type == ISOLATED``.

Impedances are per unit on ``base_mva`` and each bus's base voltage; powers are in MW and
Mvar, angles in degrees, costs in currency per hour. Every field is an array leaf, so
networks of equal size stack and ``vmap`` (loads, costs, ratings and statuses are what a
scenario varies).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.types import Array

PQ, PV, REF, ISOLATED = 1, 2, 3, 4  # MATPOWER's bus types
BUS_TYPE_NAMES = {PQ: "PQ", PV: "PV", REF: "slack", ISOLATED: "isolated"}
PIECEWISE_LINEAR, POLYNOMIAL = 1, 2  # MATPOWER's gencost models


@struct.dataclass
class Network:
    """A meshed AC network (see the module docstring).

    Its arrays are NumPy arrays until it is traced. Use one ``Network`` object in one
    precision: jax 0.10 reuses the conversion of a closed-over NumPy array by the array
    object, so tracing the same object under ``jax.enable_x64`` and then without can put
    float64 constants into a float32 program that fails to lower. The builders return a
    separate object per precision.

    Attributes:
        base_mva: ``()`` system base power, MVA.
        bus_ids: ``(n_bus,)`` original bus numbers.
        bus_type: ``(n_bus,)`` int32 ``PQ``, ``PV``, ``REF`` (slack) or ``ISOLATED``.
        base_kv: ``(n_bus,)`` base voltage, kV (line-to-line; 0 where the data gives none).
        pd_mw, qd_mvar: ``(n_bus,)`` loads, MW and Mvar (positive = consumption).
        gs_mw, bs_mvar: ``(n_bus,)`` shunt conductance (MW consumed) and susceptance
            (Mvar injected) at 1 pu voltage.
        vm_pu, va_deg: ``(n_bus,)`` voltage magnitude (pu) and angle (degrees) of the data:
            a power flow's starting point.
        vmin_pu, vmax_pu: ``(n_bus,)`` voltage limits, pu.
        branch_from, branch_to: ``(n_branch,)`` int32 bus indices of each branch's ends
            (the tap is on the from side).
        r_pu, x_pu: ``(n_branch,)`` series resistance and reactance, pu.
        b_pu: ``(n_branch,)`` total line charging susceptance, pu (half at each end).
        rate_mva: ``(n_branch,)`` long-term rating (MATPOWER's RATE_A), MVA; ``inf``
            where the data has none.
        tap: ``(n_branch,)`` off-nominal turns ratio (1 for a line).
        shift_deg: ``(n_branch,)`` phase shift, degrees.
        branch_in_service: ``(n_branch,)`` bool.
        angmin_deg, angmax_deg: ``(n_branch,)`` limits on the angle difference across the
            branch, degrees (``-inf``/``inf`` where the data has none).
        gen_bus: ``(n_gen,)`` int32 bus index of each generator.
        pg_mw, qg_mvar: ``(n_gen,)`` dispatch of the data, MW and Mvar.
        pmin_mw, pmax_mw: ``(n_gen,)`` active power limits, MW.
        qmin_mvar, qmax_mvar: ``(n_gen,)`` reactive power limits, Mvar.
        vg_pu: ``(n_gen,)`` voltage setpoint, pu.
        gen_in_service: ``(n_gen,)`` bool.
        cost_model: ``(n_gen,)`` int32 ``POLYNOMIAL`` or ``PIECEWISE_LINEAR``.
        cost_poly: ``(n_gen, 3)`` quadratic cost ``c2 p^2 + c1 p + c0`` of ``p`` in MW,
            columns ``(c2, c1, c0)`` in currency/MW²h, currency/MWh and currency/h (0 for
            a piecewise-linear generator).
        cost_pwl_mw, cost_pwl_cost: ``(n_gen, n_points)`` breakpoints of a
            piecewise-linear cost, MW and currency/h (the last point repeated as padding;
            zeros for a polynomial generator).
        startup_cost, shutdown_cost: ``(n_gen,)`` currency per start and per stop.
    """

    base_mva: Array
    bus_ids: Array
    bus_type: Array
    base_kv: Array
    pd_mw: Array
    qd_mvar: Array
    gs_mw: Array
    bs_mvar: Array
    vm_pu: Array
    va_deg: Array
    vmin_pu: Array
    vmax_pu: Array
    branch_from: Array
    branch_to: Array
    r_pu: Array
    x_pu: Array
    b_pu: Array
    rate_mva: Array
    tap: Array
    shift_deg: Array
    branch_in_service: Array
    angmin_deg: Array
    angmax_deg: Array
    gen_bus: Array
    pg_mw: Array
    qg_mvar: Array
    pmin_mw: Array
    pmax_mw: Array
    qmin_mvar: Array
    qmax_mvar: Array
    vg_pu: Array
    gen_in_service: Array
    cost_model: Array
    cost_poly: Array
    cost_pwl_mw: Array
    cost_pwl_cost: Array
    startup_cost: Array
    shutdown_cost: Array

    @property
    def n_bus(self) -> int:
        return self.bus_type.shape[-1]

    @property
    def n_branch(self) -> int:
        return self.r_pu.shape[-1]

    @property
    def n_gen(self) -> int:
        return self.gen_bus.shape[-1]

    def bus_index(self, bus_numbers) -> np.ndarray:
        """``(k,)`` int32 indices of ``bus_numbers`` (the data's own numbers, ``bus_ids``)."""
        index = {int(b): i for i, b in enumerate(np.asarray(self.bus_ids))}
        missing = [int(b) for b in bus_numbers if int(b) not in index]
        if missing:
            raise ValueError(f"buses {missing} are not in the network")
        return np.array([index[int(b)] for b in bus_numbers], np.int32)

    @jax.jit  # one program when called eagerly (1.4 s op by op at opf14-v0's make)
    def generation_cost(self, pg_mw: Array) -> Array:
        """``(..., n_gen)`` cost of producing ``pg_mw`` ``(..., n_gen)``, currency/h: the
        quadratic, or the piecewise-linear curve interpolated (extrapolated beyond its
        ends along the end segments). Out-of-service generators cost 0."""
        c2, c1, c0 = (self.cost_poly[..., i] for i in range(3))
        poly = (c2 * pg_mw + c1) * pg_mw + c0
        x, y = self.cost_pwl_mw, self.cost_pwl_cost
        seg = jnp.clip(jnp.sum(pg_mw[..., None] > x[..., 1:-1], axis=-1), 0, x.shape[-1] - 2)
        x0 = jnp.take_along_axis(x, seg[..., None], -1)[..., 0]
        x1 = jnp.take_along_axis(x, seg[..., None] + 1, -1)[..., 0]
        y0 = jnp.take_along_axis(y, seg[..., None], -1)[..., 0]
        y1 = jnp.take_along_axis(y, seg[..., None] + 1, -1)[..., 0]
        slope = jnp.where(x1 > x0, (y1 - y0) / jnp.where(x1 > x0, x1 - x0, 1.0), 0.0)
        pwl = y0 + slope * (pg_mw - x0)
        cost = jnp.where(self.cost_model == POLYNOMIAL, poly, pwl)
        return jnp.where(self.gen_in_service, cost, 0.0)

    def __repr__(self) -> str:
        if np.ndim(self.bus_type) != 1:
            return f"Network(batch of {np.shape(self.bus_type)[:-1]}, n_bus={self.n_bus})"
        slack = np.asarray(self.bus_ids)[np.asarray(self.bus_type) == REF]
        return (
            f"Network(n_bus={self.n_bus}, n_branch={self.n_branch}, n_gen={self.n_gen}, "
            f"slack=bus {', '.join(str(int(b)) for b in slack)}, "
            f"base={float(self.base_mva):g} MVA, "
            f"load={float(np.sum(self.pd_mw)):.6g} MW + {float(np.sum(self.qd_mvar)):.6g} Mvar)"
        )

    def summary(self) -> str:
        """The bus, branch and generator tables, as a power engineer would print them."""
        ids = np.asarray(self.bus_ids)
        lines = [
            repr(self),
            "",
            "bus     type      base_kv    pd_mw  qd_mvar    gs_mw  bs_mvar  vm_pu   vmin   vmax",
        ]
        for i in range(self.n_bus):
            lines.append(
                f"{ids[i]:<7d} {BUS_TYPE_NAMES[int(self.bus_type[i])]:<9s}"
                f"{float(self.base_kv[i]):8.2f} {float(self.pd_mw[i]):8.2f}"
                f" {float(self.qd_mvar[i]):8.2f} {float(self.gs_mw[i]):8.2f}"
                f" {float(self.bs_mvar[i]):8.2f} {float(self.vm_pu[i]):6.4f}"
                f" {float(self.vmin_pu[i]):6.3f} {float(self.vmax_pu[i]):6.3f}"
            )
        lines += [
            "",
            "branch  from    to         r_pu      x_pu      b_pu  rate_mva    tap  shift  on",
        ]
        for k in range(self.n_branch):
            lines.append(
                f"{k:<7d} {ids[self.branch_from[k]]:<7d} {ids[self.branch_to[k]]:<7d}"
                f" {float(self.r_pu[k]):9.5f} {float(self.x_pu[k]):9.5f}"
                f" {float(self.b_pu[k]):9.5f} {float(self.rate_mva[k]):9.4g}"
                f" {float(self.tap[k]):6.4f} {float(self.shift_deg[k]):6.2f}"
                f"  {'yes' if self.branch_in_service[k] else 'no'}"
            )
        lines += [
            "",
            "gen  bus       pg_mw  pmin_mw  pmax_mw  qmin_mvar  qmax_mvar  vg_pu  on   cost",
        ]
        for g in range(self.n_gen):
            if int(self.cost_model[g]) == POLYNOMIAL:
                c2, c1, c0 = (float(c) for c in self.cost_poly[g])
                cost = f"{c2:g} p² + {c1:g} p + {c0:g}"
            else:
                cost = f"piecewise linear, {len(np.unique(self.cost_pwl_mw[g]))} points"
            lines.append(
                f"{g:<4d} {ids[self.gen_bus[g]]:<7d} {float(self.pg_mw[g]):8.2f}"
                f" {float(self.pmin_mw[g]):8.2f} {float(self.pmax_mw[g]):8.2f}"
                f" {float(self.qmin_mvar[g]):10.2f} {float(self.qmax_mvar[g]):10.2f}"
                f" {float(self.vg_pu[g]):6.4f}  {'yes' if self.gen_in_service[g] else 'no ':3s}"
                f"  {cost}"
            )
        return "\n".join(lines)


def branch_admittances(network: Network) -> tuple[Array, Array, Array, Array]:
    """``(y_ff, y_ft, y_tf, y_tt)``, each ``(..., n_branch)`` complex, pu: the two-port
    admittances of every branch (MATPOWER's ``makeYbus``: series admittance
    ``1 / (r + jx)``, half the charging at each end, the tap ``tap * exp(j shift)`` on the
    from side), zero for an out-of-service branch. The from-end current is
    ``y_ff V_f + y_ft V_t`` and the to-end current ``y_tf V_f + y_tt V_t``."""
    on = network.branch_in_service
    y_series = jnp.where(on, 1.0 / (network.r_pu + 1j * network.x_pu), 0.0)
    b_half = jnp.where(on, 0.5j * network.b_pu, 0.0)
    ratio = network.tap * jnp.exp(1j * jnp.deg2rad(network.shift_deg))
    y_tt = y_series + b_half
    y_ff = y_tt / (ratio * jnp.conj(ratio))
    y_ft = -y_series / jnp.conj(ratio)
    y_tf = -y_series / ratio
    return y_ff, y_ft, y_tf, y_tt


def bus_admittance(network: Network) -> Array:
    """``(..., n_bus, n_bus)`` complex bus admittance matrix ``Y_bus``, pu, with the bus
    shunts (``(gs + j bs) / base_mva``) on the diagonal."""
    y_ff, y_ft, y_tf, y_tt = branch_admittances(network)
    n = network.n_bus
    f = _one_hot(network.branch_from, n)
    t = _one_hot(network.branch_to, n)
    y = (
        jnp.einsum("...k,...ki,...kj->...ij", y_ff, f, f)
        + jnp.einsum("...k,...ki,...kj->...ij", y_ft, f, t)
        + jnp.einsum("...k,...ki,...kj->...ij", y_tf, t, f)
        + jnp.einsum("...k,...ki,...kj->...ij", y_tt, t, t)
    )
    shunt = (network.gs_mw + 1j * network.bs_mvar) / network.base_mva[..., None]
    return y + shunt[..., :, None] * jnp.eye(n)


def _one_hot(index: Array, n: int) -> Array:
    """``(..., k, n)`` complex one-hot rows of ``index`` ``(..., k)``."""
    return (index[..., None] == jnp.arange(n)).astype(jnp.result_type(1j))
