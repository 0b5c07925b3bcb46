"""Unbalanced three-phase power flow of a :class:`Feeder3`: the Z-bus fixed point.

Model (all node quantities line-to-ground phasors, volts and amperes):

    (Y_pd(tap) + Y_s + Y_L) V = I_s + Y_L V - I_load(V) + I_gen(V)

``Y_pd`` is the sum of the power-delivery elements' primitive admittances (lines, switches,
transformers, regulators at their taps, capacitors), ``Y_s`` the Thevenin admittance of the
source and ``I_s = Y_s E`` its Norton current (EMF ``E``), ``Y_L`` the loads' nominal
admittances (constant at every iteration, so the matrix is factored once per tap setting
and the fixed point only has to correct the loads' deviation from constant impedance, as
OpenDSS's own "normal" solution does). ``I_load`` is OpenDSS's per-phase load current:
for a load phase with voltage ``Vd`` across it (phase to ground for wye, phase to phase
for delta), nominal ``S = P + jQ`` at base ``Vb`` and ``Y_eq = conj(S) / Vb**2``:

- constant Z: ``Y_eq Vd``;
- constant P (between ``vminpu`` and ``vmaxpu``): ``conj(S / Vd)``; constant I:
  ``conj(S / (Vb Vd / |Vd|))``; CVR (model 4): ``conj(S' / Vd)`` with
  ``S' = P (|Vd|/Vb)**p_exp + j Q (|Vd|/Vb)**q_exp``;
- above ``vmaxpu``: the impedance that draws the nominal power (P) or current (I) at
  ``vmaxpu``; below ``vminpu``: a current that falls linearly with ``|Vd|`` to the constant
  impedance's at ``vlowpu`` (OpenDSS's ``InterpolateY95_YLow``), and constant impedance
  below ``vlowpu``. This switching is what reaches OpenDSS's numbers at +30 % load.

ZIP loads weight the three forms by their fractions, separately for P and Q.
``I_gen`` are constant-power injections (PV, negative loads), phase to ground or between
two phases of a bus.

The iteration ``V <- (Y_pd + Y_s + Y_L)^-1 (I_s + Y_L V - I_load(V) + I_gen(V))`` runs in
per unit of each node's base voltage (``1 MVA`` base), from the constant-impedance
solution, for a fixed number of iterations (``lax.fori_loop``: jittable, every member of
a ``vmap`` batch in lockstep); ``converged`` says whether the last iteration changed the
voltage across any load phase (or generator) by less than ``tol_pu``: the
injections depend on nothing else, so these voltages being still is the fixed point. Hand-written rather than with optimistix: one LU factor
reused by every iteration is the whole algorithm, and the contraction is fast (each
iteration divides the error by about 30 on the IEEE feeders).

Derivatives are taken at the fixed point, not through the iterations: the voltages are
the root of ``map(V) - V`` in their real and imaginary parts, differentiated by the
implicit function theorem (:func:`jaxgrid.grid.implicit.implicit_complex_fixed_point`,
one dense solve of ``2 n_node`` unknowns); with respect to loads, taps, generation and
the source they equal central differences on IEEE 13
(``tests/grid/test_three_phase_gradients.py``). Where the iteration diverged (the
constant-impedance solution stands in) the derivative is 0.

Precision: run it in float64 (``jax_enable_x64``) when the numbers matter. The matrix holds
the source's and the regulators' 1e3-1e4 pu admittances beside loads of 1e-2 pu, and
ungrounded delta windings leave nodes tied to ground only by OpenDSS's 1e-6 anti-floating
conductance; float32's LU resolves IEEE 13 to about 2e-6 pu but IEEE 34 only to 3e-3 pu,
losses to a few per cent, and floating nodes' voltages to ground not at all (measured
tables in docs/physics.md); ``converged`` cannot see these errors.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.grid.implicit import implicit_complex_fixed_point
from jaxgrid.grid.three_phase.feeder3 import Feeder3
from jaxgrid.numerics import angle, full_precision
from jaxgrid.types import Array, float_dtype

S_BASE_VA = 1e6
N_ITER = 40


@struct.dataclass
class UnbalancedPowerFlowResult:
    """One unbalanced power flow (leading batch axes under ``vmap``).

    Attributes:
        v_volt: ``(n_node,)`` complex node voltage to ground, V.
        vm_pu: ``(n_node,)`` line-to-neutral voltage magnitude, pu of ``vbase_v``.
        va_deg: ``(n_node,)`` voltage angle, degrees.
        vll_pu: ``(n_bus, 3)`` line-to-line magnitudes ab, bc, ca, pu of ``sqrt(3)`` times
            the line-to-neutral base (0 where a phase is missing).
        vuf: ``(n_bus,)`` voltage unbalance factor (IEC 61000-4-30): ``|V2| / |V1|`` of the
            line-to-line voltages of three-phase buses (0 elsewhere).
        lvur: ``(n_bus,)`` line voltage unbalance rate (IEEE 112 / NEMA MG-1): largest
            deviation of a line-to-line magnitude from their mean, over the mean (0 where
            not three-phase).
        i_line_a: ``(n_line, 3)`` current magnitude of phases a, b, c at each line's first
            terminal, A (0 where absent).
        line_loading: ``(n_line, 3)`` ``i_line_a / line_normamps_a``.
        loss_kw: ``()`` total active loss of lines, transformers and regulators, kW.
        p_source_kw, q_source_kvar: ``()`` power delivered by the source, kW and kvar.
        converged: ``()`` bool: the iteration stayed finite, and its last step changed no
            load phase's voltage (nor a generator's) by more than ``tol_pu``. Where it
            did not stay finite (voltage collapse), the voltages are the nominal loads'
            constant-impedance solution (a flat profile where that is not finite either)
            and ``mismatch_pu`` the largest float.
        mismatch_pu: ``()`` largest change of a load phase's voltage (pu of its base) or
            a generator's in the last iteration.
        iterations: ``()`` int32 fixed-point iterations run.
    """

    v_volt: Array
    vm_pu: Array
    va_deg: Array
    vll_pu: Array
    vuf: Array
    lvur: Array
    i_line_a: Array
    line_loading: Array
    loss_kw: Array
    p_source_kw: Array
    q_source_kvar: Array
    converged: Array
    mismatch_pu: Array
    iterations: Array


def as_arrays(feeder: Feeder3) -> Feeder3:
    """``feeder`` with JAX array leaves, floats in the default precision (tracers pass)."""

    def cast(x):
        floating = jnp.issubdtype(jnp.result_type(x), jnp.floating)
        return jnp.asarray(x, float_dtype() if floating else None)

    return jax.tree_util.tree_map(cast, feeder)


def element_admittances(feeder: Feeder3) -> Array:
    """``(n_elem, K, K)`` complex primitive admittances, S, regulators at ``tap_pu``."""
    feeder = as_arrays(feeder)
    y = feeder.elem_g_s + 1j * feeder.elem_b_s
    return y.at[feeder.reg_elem].set(regulator_admittances(feeder))


def regulator_admittances(feeder: Feeder3) -> Array:
    """``(n_reg, K, K)`` complex primitive admittances of the regulators at ``tap_pu``, S:
    ``D A D + B`` with ``D = 1 / tap`` on the tapped winding. Apart from
    :func:`element_admittances` for callers that need the regulators only: with taps
    per environment under ``vmap``, every element's matrix was broadcast to every
    environment (a tenth of a ``voltage123-v0`` step)."""
    feeder = as_arrays(feeder)
    y = feeder.elem_g_s[feeder.reg_elem] + 1j * feeder.elem_b_s[feeder.reg_elem]
    d = jnp.where(feeder.reg_tapped, 1.0 / feeder.tap_pu[:, None], 1.0)
    return d[:, :, None] * y * d[:, None, :] + (feeder.reg_g0_s + 1j * feeder.reg_b0_s)


def element_admittances64(feeder: Feeder3) -> np.ndarray:
    """:func:`element_admittances` on the host in float64 (complex128 numpy), whatever the
    default precision: for the models built once from the network (the port Z-bus,
    LinDist3Flow). Jitted: one program instead of op by op (IEEE 13's 0.3 s against
    1.4 s)."""

    def cast(x):
        x = np.asarray(x)
        return x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x

    with jax.enable_x64(True):
        return np.asarray(jax.jit(element_admittances)(jax.tree_util.tree_map(cast, feeder)))


def nodal_admittance(feeder: Feeder3) -> Array:
    """``(n_node, n_node)`` complex nodal admittance of the power-delivery elements, S
    (switches included: the matrix :func:`unbalanced_power_flow` factors joins their nodes
    instead)."""
    n = feeder.n_node
    y = element_admittances(feeder)
    rows = feeder.elem_nodes[:, :, None]
    cols = feeder.elem_nodes[:, None, :]
    rows, cols = jnp.broadcast_arrays(rows, cols)
    full = jnp.zeros((n + 1, n + 1), y.dtype).at[rows, cols].add(y)
    return full[:n, :n]


def load_admittance(feeder: Feeder3, vd: Array, load_scale) -> Array:
    """``(n_lp,)`` complex admittance ``I / Vd`` of each load phase at voltage ``vd`` (V),
    S: OpenDSS's load models (see the module docstring) at ``load_scale`` times the
    nominal power (:func:`load_admittance_parts`)."""
    g, b = load_admittance_parts(feeder, jnp.abs(vd) / feeder.load_vbase_v, load_scale)
    return jax.lax.complex(g, b)


def load_admittance_parts(
    feeder: Feeder3, vm_pu: Array, load_scale, cvr: bool = True
) -> tuple[Array, Array]:
    """``(n_lp,)`` conductance and susceptance (S) of each load phase at the magnitude
    ``vm_pu`` of the voltage across it (pu of its base): :func:`load_admittance` in real
    arithmetic.

    Every form is the nominal admittance ``Y_eq = G + jB`` times a real factor of
    ``|Vd|`` (one for ``G``, one for ``B``: they differ only in a CVR load's exponents),
    so the factors are computed with one reciprocal and one logarithm of ``|Vd|`` a load
    phase: written as complex divisions and powers, these were two thirds of a port
    Z-bus iteration on IEEE 123 (1024 solves, this 2-core CPU). With ``cvr`` False
    (static: the caller knows no load has CVR exponents) the constant-power part is
    ``1 / |Vd|^2`` exactly, with no logarithm or exponential (their pair was a tenth of
    that iteration).
    """
    vbase = feeder.load_vbase_v
    g_eq = feeder.load_p_w * load_scale / vbase**2
    b_eq = -feeder.load_q_var * load_scale / vbase**2
    vm = jnp.maximum(vm_pu, 1e-6)
    v_low, v_min = feeder.load_vlowpu, feeder.load_vminpu
    below_low = vm <= v_low
    below_min = vm <= v_min
    above_max = vm > feeder.load_vmaxpu
    inv_vm = 1.0 / vm
    # below vminpu: a current falling linearly to the constant impedance's at vlowpu,
    # ``(v_low + c (vm - v_low)) / vm`` times Y_eq, c set by the form's current at vminpu
    ramp_p = (1.0 / v_min - v_low) / (v_min - v_low)
    ramp_i = (1.0 - v_low) / (v_min - v_low)
    low_p = (v_low + ramp_p * (vm - v_low)) * inv_vm
    low_i = (v_low + ramp_i * (vm - v_low)) * inv_vm
    if cvr:
        log_vm = jnp.log(vm)
        cvr_g = jnp.exp((feeder.load_p_exp - 2.0) * log_vm)
        cvr_b = jnp.exp((feeder.load_q_exp - 2.0) * log_vm)
    else:
        cvr_g = cvr_b = inv_vm * inv_vm

    def form(low, high, normal):
        return jnp.where(
            below_low, 1.0, jnp.where(below_min, low, jnp.where(above_max, high, normal))
        )

    power_g = form(low_p, 1.0 / feeder.load_vmaxpu**2, cvr_g)
    power_b = form(low_p, 1.0 / feeder.load_vmaxpu**2, cvr_b)
    current = form(low_i, 1.0 / feeder.load_vmaxpu, inv_vm)
    zp, zq = feeder.load_zip_p, feeder.load_zip_q
    g = g_eq * (zp[:, 0] + zp[:, 1] * current + zp[:, 2] * power_g)
    b = b_eq * (zq[:, 0] + zq[:, 1] * current + zq[:, 2] * power_b)
    return g, b


def source_emf(feeder: Feeder3) -> Array:
    """``(3,)`` complex EMF of the source, V line-to-neutral, positive sequence."""
    magnitude = feeder.source_vm_pu * feeder.source_kv * 1e3 / np.sqrt(3.0)
    phase = jnp.deg2rad(feeder.source_angle_deg - 120.0 * jnp.arange(3))
    return magnitude * jnp.exp(1j * phase)


@functools.partial(jax.jit, static_argnames=("n_iter", "join_switches"))
@full_precision
def unbalanced_power_flow(
    feeder: Feeder3,
    load_scale=1.0,
    p_gen_kw=None,
    q_gen_kvar=None,
    p_gen_ll_kw=None,
    q_gen_ll_kvar=None,
    n_iter: int = N_ITER,
    tol_pu: float | None = None,
    join_switches: bool | None = None,
) -> UnbalancedPowerFlowResult:
    """Solve the unbalanced power flow of ``feeder`` (see the module docstring).

    Args:
        feeder: the feeder; its ``tap_pu`` are the regulators' (fixed) taps.
        load_scale: ``()`` or ``(n_lp,)`` multiplier of every load phase's nominal power
            (OpenDSS's ``loadmult``).
        p_gen_kw, q_gen_kvar: ``(n_node,)`` constant-power injection of each node to
            ground, kW and kvar (positive = generation), or None.
        p_gen_ll_kw, q_gen_ll_kvar: ``(n_bus, 3)`` constant-power injection between
            phases ab, bc and ca of each bus (delta-connected PV, as on a 3-wire feeder),
            kW and kvar, or None; 0 where the bus lacks the pair.
        n_iter: fixed number of fixed-point iterations (static).
        tol_pu: convergence tolerance on the last change of a load phase's (or
            generator's) voltage, pu; default 1e-9 in float64, 2e-5 in float32.
        join_switches: (static) join the two nodes of each closed switch into one instead
            of keeping its 1e-6 ohm; default True in float32 (whose LU cannot factor the
            switch's 1e6 S beside the loads' 1e-2 S), False in float64 (exact). Joined,
            the switches' own drop and loss are left out: on IEEE 123 at 0.7-1.3 times its
            load (float64) that moves voltages by 3.7e-7 to 7.3e-7 pu and the losses by
            0.6 to 2.2 W.

    Returns:
        An :class:`UnbalancedPowerFlowResult`.
    """
    feeder = as_arrays(feeder)
    vb = feeder.vbase_v
    real = vb.dtype
    if join_switches is None:
        join_switches = real != jnp.float64
    if not join_switches:
        feeder = feeder.replace(
            elem_switch=jnp.zeros_like(feeder.elem_switch),
            node_group=jnp.arange(feeder.n_node, dtype=jnp.int32),
            n_group=feeder.n_node,
        )
    n, m = feeder.n_node, feeder.n_group
    if tol_pu is None:
        tol_pu = 1e-9 if real == jnp.float64 else 2e-5
    group = jnp.append(feeder.node_group, m)  # node (ground = n) -> merged node
    vb_group = jnp.zeros(m + 1, real).at[group[:n]].set(vb)[:m]
    src = feeder.source_nodes
    y_src = feeder.source_g_s + 1j * feeder.source_b_s
    frm, to = feeder.load_node_from, feeder.load_node_to
    y_nom = (feeder.load_p_w - 1j * feeder.load_q_var) / feeder.load_vbase_v**2

    y_elem = element_admittances(feeder)
    y_series = jnp.where(feeder.elem_switch[:, None, None], 0.0, y_elem)
    at = group[feeder.elem_nodes]
    rows, cols = jnp.broadcast_arrays(at[:, :, None], at[:, None, :])
    y_full = jnp.zeros((m + 1, m + 1), y_elem.dtype).at[rows, cols].add(y_series)
    gs, gf, gt = group[src], group[frm], group[to]
    y_full = y_full.at[gs[:, None], gs[None, :]].add(y_src)
    y_full = y_full.at[gf, gf].add(y_nom).at[gt, gt].add(y_nom)
    y_full = y_full.at[gf, gt].add(-y_nom).at[gt, gf].add(-y_nom)
    y_pu = y_full[:m, :m] * (vb_group[:, None] * vb_group[None, :] / S_BASE_VA)
    lu = jax.scipy.linalg.lu_factor(y_pu)

    emf = source_emf(feeder)
    i_src = (
        jnp.zeros(m + 1, y_pu.dtype)
        .at[gs]
        .add(jnp.matmul(y_src, emf, precision=jax.lax.Precision.HIGHEST))[:m]
    )
    # generation: one two-terminal source per node (to ground) and per phase pair of
    # each bus (ab, bc, ca; ground to ground where the bus lacks it)
    pairs = jnp.where(feeder.bus_nodes >= 0, feeder.bus_nodes, n)
    pair_from = jnp.where((pairs < n) & (pairs[:, [1, 2, 0]] < n), pairs, n).reshape(-1)
    pair_to = jnp.where(pair_from.reshape(-1, 3) < n, pairs[:, [1, 2, 0]], n).reshape(-1)
    gen_from = jnp.concatenate([jnp.arange(n), pair_from])
    gen_to = jnp.concatenate([jnp.full(n, n), pair_to])
    vb_ext = jnp.append(vb, 1.0)
    gen_base = jnp.concatenate([vb, np.sqrt(3.0) * vb_ext[pair_from]])

    def gen_power(p_kw, q_kvar, shape):
        out = jnp.zeros(shape, y_pu.dtype)
        if p_kw is not None:
            out = out + jnp.asarray(p_kw, real) * 1e3
        if q_kvar is not None:
            out = out + 1j * jnp.asarray(q_kvar, real) * 1e3
        return out.reshape(-1)

    s_gen = jnp.concatenate(
        [
            gen_power(p_gen_kw, q_gen_kvar, (n,)),
            gen_power(p_gen_ll_kw, q_gen_ll_kvar, (feeder.n_bus, 3)) * (pair_from < n),
        ]
    )
    generating = jnp.abs(s_gen) > 0

    def device_injection(v):
        """``(n + 1,)`` current injected into each node by loads and generation, A; the
        voltages across the load phases and across the generators, V."""
        v_ext = jnp.append(v, 0.0)
        vd = v_ext[frm] - v_ext[to]
        i_lp = load_admittance(feeder, vd, load_scale) * vd
        v_gen = v_ext[gen_from] - v_ext[gen_to]
        v_safe = jnp.where(jnp.abs(v_gen) > 0, v_gen, 1.0)
        i_gen = jnp.where(generating, jnp.conj(s_gen / v_safe), 0.0)
        i_ext = jnp.zeros(n + 1, v.dtype).at[gen_from].add(i_gen).at[gen_to].add(-i_gen)
        return i_ext.at[frm].add(-i_lp).at[to].add(i_lp), vd, v_gen

    def solve(current_group):
        u = vb_group * jax.scipy.linalg.lu_solve(lu, current_group * vb_group / S_BASE_VA)
        return u[feeder.node_group]

    def body(_, carry):
        v, _mismatch = carry
        i_dev, vd, v_gen = device_injection(v)
        i_nom = jnp.zeros(n + 1, v.dtype).at[frm].add(y_nom * vd).at[to].add(-y_nom * vd)
        current = jnp.zeros(m + 1, v.dtype).at[group].add(i_dev + i_nom)[:m] + i_src
        v_new = solve(current)
        # the change of what the injections depend on: the voltages across the load
        # phases and the generators (a floating node's voltage to ground, e.g. of an
        # ungrounded delta winding, carries round-off the solution does not depend on)
        v_new_ext = jnp.append(v_new, 0.0)
        change_load = jnp.abs(v_new_ext[frm] - v_new_ext[to] - vd) / feeder.load_vbase_v
        change_gen = jnp.abs(v_new_ext[gen_from] - v_new_ext[gen_to] - v_gen) / gen_base
        change_gen = jnp.where(generating, change_gen, 0.0)
        return v_new, jnp.maximum(jnp.max(change_load, initial=0.0), jnp.max(change_gen))

    v0 = solve(i_src)
    huge = jnp.finfo(real).max
    # differentiated at the fixed point, not through the iterations
    v, mismatch = implicit_complex_fixed_point(
        lambda v: body(0, (v, jnp.asarray(huge, real)))[0],
        lambda: jax.lax.fori_loop(0, n_iter, body, (v0, jnp.asarray(huge, real))),
        v0,
        has_aux=True,
    )

    # a loading without solution (voltage collapse) is reported, with finite numbers: the
    # constant-impedance solution stands in for a diverged iteration, and a flat profile
    # (each node at its base voltage and phase angle) where that is not finite either
    # (float32's LU of IEEE 123 at some taps)
    def is_finite(x):
        return jnp.all(jnp.isfinite(x.real) & jnp.isfinite(x.imag))

    finite = is_finite(v) & jnp.isfinite(mismatch)
    phase = jnp.clip(feeder.node_phase - 1, 0, 2)
    flat = feeder.vbase_v * jnp.exp(1j * jnp.deg2rad(-120.0 * phase)).astype(v.dtype)
    v = jnp.where(finite, v, jnp.where(is_finite(v0), v0, flat))
    mismatch = jnp.where(finite, mismatch, huge)
    i_dev, _, _ = device_injection(v)
    return flow_result(feeder, v, y_elem, i_dev[:n], mismatch, tol_pu, n_iter)


@full_precision
def flow_result(
    feeder, v, y_elem, i_dev, mismatch, tol_pu, iterations
) -> UnbalancedPowerFlowResult:
    """The :class:`UnbalancedPowerFlowResult` of node voltages ``v`` (``(n_node,)``
    complex, V) with the devices' (loads', generators') current ``i_dev`` into each node
    (``(n_node,)``, A), the elements' admittances ``y_elem`` (S), the last of
    ``iterations``' ``mismatch`` (pu) and the tolerance ``tol_pu`` it is held to."""
    v_ext = jnp.append(v, 0.0)
    v_elem = v_ext[feeder.elem_nodes]
    # full precision: XLA's GPU backend runs float32 products in TF32 otherwise
    full = jax.lax.Precision.HIGHEST
    i_elem = jnp.einsum("eij,ej->ei", y_elem, v_elem, precision=full)
    # a closed switch joins its two nodes, so its current is what the node's other
    # elements leave over of the injection there (KCL at its first terminal)
    i_series = jnp.where(feeder.elem_switch[:, None], 0.0, i_elem)
    i_other = jnp.zeros(feeder.n_node + 1, i_elem.dtype).at[feeder.elem_nodes].add(i_series)
    # what the source delivers, from the network side: the source's own 1e3-1e4 pu
    # admittance times E - V would cancel away float32's digits
    src = feeder.source_nodes
    i_source = i_other[src]
    i_inj = i_dev.at[src].add(i_source)
    left_over = jnp.append(i_inj, 0.0) - i_other
    i_elem = jnp.where(feeder.elem_switch[:, None], left_over[feeder.elem_nodes], i_elem)
    i_lines = i_elem[feeder.line_elem]
    cond = jnp.maximum(feeder.line_cond, 0)
    i_line_a = jnp.where(
        feeder.line_cond >= 0, jnp.abs(jnp.take_along_axis(i_lines, cond, axis=1)), 0.0
    )
    # losses as the power injected into the network (source, loads, generation): in
    # float32 the sum of each element's v * conj(i) loses its digits to cancellation
    loss_w = jnp.real(jnp.vdot(i_inj, v, precision=full))
    s_src = jnp.sum(v[src] * jnp.conj(i_source))
    return network_result(feeder, v, i_line_a, loss_w, s_src, mismatch, tol_pu, iterations)


def network_result(
    feeder, v, i_line_a, loss_w, s_source_va, mismatch, tol_pu, iterations, v_ll=None
) -> UnbalancedPowerFlowResult:
    """The :class:`UnbalancedPowerFlowResult` of node voltages ``v`` (``(n_node,)``
    complex, V), the lines' phase currents ``i_line_a`` (``(n_line, 3)``, A), the
    network's losses ``loss_w`` (W) and the power the source delivers ``s_source_va``
    (complex, VA): the bus quantities (line-to-line voltages, unbalance) and the
    convergence verdict of the last iteration's ``mismatch`` (pu) against ``tol_pu``
    after ``iterations``. ``v_ll`` (``(n_bus, 3)`` complex, V: ab, bc, ca, 0 for a pair a
    bus lacks) where the
    caller has the line-to-line voltages more accurately than ``v``'s differences."""
    vb = feeder.vbase_v
    vb_ext = jnp.append(vb, 1.0)
    present = feeder.bus_nodes >= 0
    at = jnp.where(present, feeder.bus_nodes, feeder.n_node)
    first, second = jnp.array([0, 1, 2]), jnp.array([1, 2, 0])
    pair = present[:, first] & present[:, second]
    if v_ll is None:
        v_bus = jnp.append(v, 0.0)[at]
        v_ll = v_bus[:, first] - v_bus[:, second]
    vb_bus = jnp.max(jnp.where(present, vb_ext[at], 0.0), axis=1)
    vll_pu = jnp.where(pair, jnp.abs(v_ll) / (np.sqrt(3.0) * vb_bus[:, None]), 0.0)
    three = jnp.all(present, axis=1)
    a = jnp.exp(2j * np.pi / 3)
    v1 = (v_ll[:, 0] + a * v_ll[:, 1] + a * a * v_ll[:, 2]) / 3
    v2 = (v_ll[:, 0] + a * a * v_ll[:, 1] + a * v_ll[:, 2]) / 3
    vuf = jnp.where(three, jnp.abs(v2) / jnp.maximum(jnp.abs(v1), 1e-12), 0.0)
    mean = jnp.mean(vll_pu, axis=1)
    dev = jnp.max(jnp.abs(vll_pu - mean[:, None]), axis=1)
    lvur = jnp.where(three, dev / jnp.maximum(mean, 1e-12), 0.0)
    return UnbalancedPowerFlowResult(
        v_volt=v,
        vm_pu=jnp.abs(v) / vb,
        va_deg=jnp.rad2deg(angle(v)),
        vll_pu=vll_pu,
        vuf=vuf,
        lvur=lvur,
        i_line_a=i_line_a,
        line_loading=i_line_a / feeder.line_normamps_a[:, None],
        loss_kw=loss_w / 1e3,
        p_source_kw=jnp.real(s_source_va) / 1e3,
        q_source_kvar=jnp.imag(s_source_va) / 1e3,
        converged=mismatch < tol_pu,
        mismatch_pu=mismatch,
        iterations=jnp.asarray(iterations, jnp.int32),
    )
