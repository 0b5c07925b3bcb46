"""Unbalanced power flow on a precomputed port Z-bus: float32-exact and fast in batches.

:func:`~jaxgrid.grid.three_phase.upf.unbalanced_power_flow` factors the nodal admittance
matrix inside the compiled program. That matrix holds the source's and the regulators'
1e3-1e4 pu admittances beside loads of 1e-2 pu, so in float32 its LU loses up to 3e-3 pu
(IEEE 34, IEEE 123), and each solve pays an LU of every node. Here the network is
inverted once, on the host, in float64, and reduced to its *ports*: the nodes where
something the compiled program varies is connected (load phases, generators, the
regulators' conductors). With ``Z`` the float64 inverse of

    Y0 = Y_pd(t0) + Y_s + Y_L0

(power-delivery elements at the taps ``t0`` of the build, the source's Thevenin
admittance, the loads' constant-impedance admittances at their nominal power; per unit of
each node's base voltage, 1 MVA base), every node's voltage is

    V = W E + Z_P (I_P(V) + y_L0 V_d) + M u,    q = Q_E E + Q_P i + Q_u u

``W E`` is the no-injection voltage of the source EMF ``E`` (so the source's magnitude and
angle stay params), ``I_P(V) + y_L0 V_d`` the loads' and generators' deviation from the
nominal constant impedance (OpenDSS's load models, :func:`load_admittance`), and ``M u``
the regulators' move from ``t0`` to the taps ``t`` of the call. A regulator's
``Yprim(t) = D(t) A D(t) + B`` (``D = 1/t`` on the tapped winding) draws
``D q + B V`` with the winding current ``q = A D V``; against ``t0``, with
``delta = D(t0) - D(t)``, that is the network at ``t0`` plus an injection ``D(t0) A u``
of the winding voltage ``u = delta V`` and an injection ``delta q``. ``A`` is a
near-short (IEEE 123: 5e5 pu): its products with ``Z`` are formed on the host in float64
(``M = Z_R D0 A``, ``Q_* = A D0 (...)``, each an O(1) number: how far the nodes move
per volt on the winding, the winding current per injection), so float32 never multiplies
the near-short by a voltage difference. Given the port injections, ``u`` and ``q`` solve a
``2 n_reg K`` linear system whose off-identity part is O(``delta``), once per call (per
tap setting) before the iterations, so taps are params leaves like every load and
``vmap`` over them works; at ``t = t0`` the terms vanish.

The fixed point iterates on the *device voltages* only: the voltages ``V_d`` across the
load phases and generators, the one thing their currents depend on. With the device
currents ``c`` (A) and the ports' incidence ``N`` (``I_P = N c``), the ports' voltages
enter only through ``N' V_P``, so the host also forms, in float64, ``Z_dd = N' Z_PP N``
(ohms), ``W_d = N' W_P``, and the regulators' terms seen from the devices (``Z_td``,
``Q_d``, ``M_d``, ``Z_dt``): an iteration is ``V_d <- W_d E + Z_dd c(V_d) + C_d (u, q)``,
accelerated by Anderson's method (:func:`anderson_step`), in pu of each device's base.
Every node's voltage, each line's phase currents and each bus's line-to-line voltages
are one product each at the end, with the devices' currents (float64 maps of them,
built with the model: in float32 a line's current as its admittance times a difference
of node voltages was 7 A off of 710 on IEEE 123, and IEEE 37's delta currents taken
through float32 port injections cost it 4.7e-6 pu). What
float32 carries is the product of exact float64 numbers (``Z``, ``W``) with the
injections, so its error is relative to the voltage drop, not to the matrix's condition:
on IEEE 123 float32 is within 1e-6 pu of OpenDSS at any taps (measured in
``tests/grid/test_port_zbus.py``; written as ``Yprim(t) - Yprim(t0)``, a tap change cost
float32 5e-3 pu there); a delta load's voltage is ``Z_dd``'s difference of four port
impedances taken in float64, not a difference of two float32 port voltages.

Derivatives are taken at the fixed point ``V_d = map(V_d)``, not through the accelerated
iterations (:func:`jaxgrid.grid.implicit.implicit_complex_fixed_point` on the device
voltages' real and imaginary parts, one dense solve of ``2 n_dev`` unknowns); with
respect to loads, taps and generation they equal central differences on IEEE 13 and the
Z-bus solver's derivatives (``tests/grid/test_three_phase_gradients.py``).

Cost per iteration: one complex ``n_dev x n_dev`` matrix-vector product (``8 n_dev^2``
real FLOPs; IEEE 123 without generators: 95 load phases, 7.2e4 FLOPs), the loads'
models (a square root and a reciprocal a load phase; a logarithm and two exponentials
more where the model has CVR loads: ``PortZbus.cvr``), and at taps other
than ``t0`` the taps' terms: the ``2 n_t`` rows of ``Z_td``, ``Q_d`` (9 tapped conductors
on IEEE 123: ``16 n_t n_dev``, 1.4e4), the ``2 n_t`` system's inverse times a vector and
the rank-``2 n_t`` correction (``32 n_t^2 + 16 n_dev n_t``, 1.6e4). At ``t0`` they are
zero, and a batch none of whose members moved its taps skips them
(:func:`~jaxgrid.numerics.skip_zero`). Once at the end
``8 (n_node + 3 n_line + 3 n_bus) (n_dev + 2 n_t)`` (9.5e5), and the ``2 n_t`` system's
inverse once per tap setting. Every device-sized matrix is shared by a batch, so under
``vmap`` the products are matrix-matrix products over the batch
(``benchmarks/three_phase_speed.py``), also when each environment has its own taps.
Iterating on the ports instead (113 on IEEE 123) took three more products an iteration,
from the ports to the devices and back, and ran 1.6-2x slower here.

The port model is valid for the feeder's elements (lines, transformers, capacitors,
source impedance) it was built from: loads (powers, models), taps, the source EMF and
generation are the compiled program's inputs; a feeder with other lines needs
:func:`build_port_zbus` again.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from flax import struct

from jaxgrid.grid.implicit import implicit_complex_fixed_point
from jaxgrid.grid.three_phase.feeder3 import Feeder3
from jaxgrid.grid.three_phase.upf import (
    S_BASE_VA,
    UnbalancedPowerFlowResult,
    as_arrays,
    element_admittances64,
    load_admittance_parts,
    network_result,
    source_emf,
)
from jaxgrid.numerics import full_precision, skip_zero, small_inverse, sum_last_axis
from jaxgrid.types import Array, float_dtype

# Default fixed-point iterations by precision. The last change shrinks about sevenfold an
# iteration (IEEE 123 at 1.6 times its load: 1.5e-4, 2.1e-5, 3.0e-6 pu after 4, 5, 6):
# float32's 1e-5 pu tolerance holds after 6-8, float64's 1e-9 after 10-12 (IEEE 13 at 1.3
# times its load with PV: 4.5e-9 after 10).
N_ITER = {"float32": 10, "float64": 16}
# Anderson acceleration's depth (the residuals' differences it fits): on 2048 random
# actions at random hours, taps and loads (a third at +-1, float32), 15 sweeps of depth 2
# converged every situation that 200 plain sweeps converged on IEEE 123 and all but 4 of
# 1472 on IEEE 13, where 40 plain sweeps missed 3 and 16 (depth 1 at 20 sweeps missed 21
# and complex coefficients did worse than none). Not a setting: anderson_step's closed
# form and the body's history are written for 2.
ANDERSON_DEPTH = 2
# The sweeps end early once the last changed every device's voltage by less than this
# share of the convergence tolerance (the whole batch under ``vmap``): the last change
# shrinks about sevenfold a sweep, so the voltages are then within about a sixtieth of
# the tolerance of the fixed point (float32: 1.7e-7 pu). IEEE 123 at 0.7-1.3 times its
# loads reaches it after 5 sweeps, IEEE 13 after 6-7, where ``N_ITER`` runs 10.
STOP_FRACTION = 0.1


@struct.dataclass
class PortZbus:
    """The host-built float64 port Z-bus of a :class:`Feeder3` (module docstring), stored
    in the default precision.

    Attributes:
        port_node: ``(n_port,)`` int32 node of each port.
        z_pp: ``(n_port, n_port)`` complex port Z-bus, pu.
        z_nc: ``(n_node, n_dev + n_t)`` complex voltage of every node (pu) per ampere of
            each device's current and per pu of ``delta q`` at each tapped port (the
            ports' injections ``N c + delta q`` taken through the port Z-bus).
        w_p, w_n: ``(n_port, 3)``, ``(n_node, 3)`` complex voltage (pu) per volt of each
            phase of the source EMF.
        src_e, src_c: ``(3, 3)``, ``(3, n_dev + n_t)`` complex current the source
            delivers into the network (A) per volt of its EMF and, as ``z_nc``, per
            device current and tapped port's ``delta q``:
            ``Y_s (E - V_s)`` with ``V_s`` written out, so float32 never forms ``E - V_s``
            (the source's 1e3-1e4 pu admittance times a difference of nearly equal
            voltages).
        load_inc, gen_inc: ``(n_port, n_lp)``, ``(n_port, n_gen)`` real incidence of
            each load phase's and generator's current (A) in the ports' injections (pu):
            ``vb / S`` at the ``from`` port, ``-vb / S`` at the ``to`` port.
        y_load0: ``(n_lp,)`` complex nominal constant-impedance admittance of each load
            phase included in ``Y0``, S.
        gen_from, gen_to: ``(n_gen,)`` int32 port of each generator's terminals
            (``n_port`` = ground).
        gen_vbase_v: ``(n_gen,)`` voltage base across each generator, V.
        tap_port: ``(n_t,)`` int32 port of each conductor of a tapped winding.
        tap_reg: ``(n_t,)`` int32 regulator of each tapped conductor.
        tap0_pu: ``(n_reg,)`` the taps ``t0`` the model was built at.
        m_p, m_n: ``(n_port, n_t)``, ``(n_node, n_t)`` complex voltage (pu) of each port
            and node per pu of winding voltage ``u`` (module docstring).
        q_e, q_p, q_u: ``(n_t, 3)``, ``(n_t, n_port)``, ``(n_t, n_t)`` complex winding
            current ``q`` (pu) per volt of source EMF, per pu of port injection and per
            pu of ``u``.
        src_u: ``(3, n_t)`` complex source current (A) per pu of ``u``.
        z_dd: ``(n_dev, n_dev)`` complex voltage across each device (V) per ampere of
            each device's current, ohms (``n_dev = n_lp + n_gen``: load phases, then
            generators).
        z_td, q_d: ``(n_t, n_dev)`` complex voltage (pu) of each tapped conductor's
            port and winding current ``q`` (pu) per ampere of each device's current.
        w_d: ``(n_dev, 3)`` complex voltage across each device (V) per volt of each
            phase of the source EMF.
        m_d, z_dt: ``(n_dev, n_t)`` complex voltage across each device (V) per pu of
            winding voltage ``u`` and per pu of ``delta q`` injected at a tapped port.
        h_e, h_c, h_u: ``(3 n_line, 3)``, ``(3 n_line, n_dev + n_t)``, ``(3 n_line,
            n_t)`` complex phase currents of each line at its first terminal (A, rows
            line by line, a phase the line lacks a zero row) per volt of source EMF, per
            device current and tapped port's ``delta q`` (as ``z_nc``) and per pu of
            ``u``.
        ll_e, ll_c, ll_u: the same for each bus's line-to-line voltages ab, bc, ca (V,
            rows bus by bus, a pair the bus lacks a zero row).
        cvr: static: some load phase has CVR exponents (OpenDSS's model 4) in the
            feeder the model was built from. Without, the loads' constant-power part is
            ``1 / |Vd|^2`` exactly and no logarithm or exponential is evaluated (a tenth
            of an IEEE 123 sweep); a feeder whose loads gain exponents needs
            :func:`build_port_zbus` again (:func:`port_power_flow` says so where it can
            see the exponents).
    """

    port_node: Array
    z_pp: Array
    z_nc: Array
    w_p: Array
    w_n: Array
    src_e: Array
    src_c: Array
    load_inc: Array
    gen_inc: Array
    y_load0: Array
    gen_from: Array
    gen_to: Array
    gen_vbase_v: Array
    tap_port: Array
    tap_reg: Array
    tap0_pu: Array
    m_p: Array
    m_n: Array
    q_e: Array
    q_p: Array
    q_u: Array
    src_u: Array
    z_dd: Array
    z_td: Array
    q_d: Array
    w_d: Array
    m_d: Array
    z_dt: Array
    h_e: Array
    h_c: Array
    h_u: Array
    ll_e: Array
    ll_c: Array
    ll_u: Array
    cvr: bool = struct.field(pytree_node=False, default=True)

    @property
    def n_port(self) -> int:
        return self.port_node.shape[-1]

    @property
    def n_gen(self) -> int:
        return self.gen_from.shape[-1]


def _nodal_admittance64(feeder: Feeder3) -> np.ndarray:
    """``(n_node, n_node)`` complex128 admittance of the power-delivery elements at the
    feeder's taps, S (numpy, float64)."""
    n = feeder.n_node
    nodes = np.asarray(feeder.elem_nodes)
    full = np.zeros((n + 1, n + 1), complex)
    np.add.at(full, (nodes[:, :, None], nodes[:, None, :]), element_admittances64(feeder))
    return full[:n, :n]


def build_port_zbus(feeder: Feeder3, gen_nodes=(), gen_pairs=()) -> PortZbus:
    """Invert ``feeder``'s network in float64 on the host and reduce it to its ports.

    Args:
        feeder: the feeder (its ``tap_pu`` become ``t0``; loads at their nominal power
            give ``Y_L0``).
        gen_nodes: node indices with a constant-power generator to ground.
        gen_pairs: ``(node_from, node_to)`` pairs with a generator between two phases.

    Returns:
        The :class:`PortZbus`; generators are in the order ``gen_nodes`` then
        ``gen_pairs``.

    Raises:
        ValueError: a generator node out of range.
    """
    n = feeder.n_node
    gen_nodes = [int(k) for k in gen_nodes]
    gen_pairs = [(int(a), int(b)) for a, b in gen_pairs]
    for k in [*gen_nodes, *(x for pair in gen_pairs for x in pair)]:
        if not 0 <= k < n:
            raise ValueError(f"generator node {k} is not a node of {feeder.name} (0..{n - 1})")
    vb = np.asarray(feeder.vbase_v, np.float64)
    frm, to = np.asarray(feeder.load_node_from), np.asarray(feeder.load_node_to)
    y_load0 = (
        np.asarray(feeder.load_p_w, np.float64) - 1j * np.asarray(feeder.load_q_var, np.float64)
    ) / np.asarray(feeder.load_vbase_v, np.float64) ** 2
    y = _nodal_admittance64(feeder)
    src = np.asarray(feeder.source_nodes)
    y_src = np.asarray(feeder.source_g_s, np.float64) + 1j * np.asarray(
        feeder.source_b_s, np.float64
    )
    y[np.ix_(src, src)] += y_src
    full = np.zeros((n + 1, n + 1), complex)
    full[:n, :n] = y
    np.add.at(full, (frm, frm), y_load0)
    np.add.at(full, (to, to), y_load0)
    np.add.at(full, (frm, to), -y_load0)
    np.add.at(full, (to, frm), -y_load0)
    y_pu = full[:n, :n] * (vb[:, None] * vb[None, :] / S_BASE_VA)
    z_pu = np.linalg.inv(y_pu)
    # V_pu = Z_pu I_pu, I_pu = I vb / S: the source's Norton current y_src E at its nodes
    w = z_pu[:, src] @ (vb[src, None] / S_BASE_VA * y_src)

    # I_s = Y_s (E - V_s), V_s = w_s E + Z_sP I_P (pu of each node's base)
    src_e = y_src @ (np.eye(3) - w[src] * vb[src, None])
    reg_nodes = np.asarray(feeder.elem_nodes)[np.asarray(feeder.reg_elem)]
    ports = sorted(
        {int(k) for k in np.concatenate([frm, to, reg_nodes.ravel()]) if k < n}
        | set(gen_nodes)
        | {x for pair in gen_pairs for x in pair}
    )
    port_of = np.full(n + 1, len(ports), np.int32)
    port_of[ports] = np.arange(len(ports))
    gen_from = [*gen_nodes, *(a for a, _ in gen_pairs)]
    gen_to = [n] * len(gen_nodes) + [b for _, b in gen_pairs]
    gen_vbase = [vb[k] for k in gen_nodes] + [np.sqrt(3.0) * vb[a] for a, _ in gen_pairs]

    # the regulators' tap-change terms (module docstring), conductor by conductor; padded
    # conductors (ground) get zero rows and columns
    reg_flat = reg_nodes.ravel()
    real_cond = reg_flat < n
    at = np.where(real_cond, reg_flat, 0)
    vb_r = np.where(real_cond, vb[at], 1.0)
    a_blocks = (np.asarray(feeder.elem_g_s, np.float64) + 1j * np.asarray(feeder.elem_b_s))[
        np.asarray(feeder.reg_elem)
    ]
    a_pu = scipy.linalg.block_diag(*a_blocks) * (vb_r[:, None] * vb_r[None, :] / S_BASE_VA)
    a_pu *= real_cond[:, None] & real_cond[None, :]
    d0 = _winding_scale(
        np.asarray(feeder.reg_tapped), np.asarray(feeder.tap_pu, np.float64)
    ).ravel()
    z_r = np.where(real_cond[None, :], z_pu[:, at], 0)  # (n_node, RK)
    m_all = z_r @ (d0[:, None] * a_pu)
    q_e = a_pu @ (d0[:, None] * np.where(real_cond[:, None], w[at], 0))
    q_p = a_pu @ (d0[:, None] * np.where(real_cond[:, None], z_pu[np.ix_(at, ports)], 0))
    q_u = a_pu @ (d0[:, None] * m_all[at] * real_cond[:, None]) - a_pu
    # only the tapped conductors carry u and delta q
    tapped = np.flatnonzero(np.asarray(feeder.reg_tapped).ravel() & real_cond)
    m_t = m_all[:, tapped]
    # the devices' form (module docstring): each device's current (A) into the ports
    # (pu), and the voltage across each device (V) from the port voltages (pu)
    gen_from_port = port_of[np.asarray(gen_from, np.int64)]
    gen_to_port = port_of[np.asarray(gen_to, np.int64)]
    load_inc = _incidence(port_of[frm], port_of[to], vb[ports])
    gen_inc = _incidence(gen_from_port, gen_to_port, vb[ports])
    inc = np.concatenate([load_inc, gen_inc], axis=1)
    across_t = S_BASE_VA * inc.T
    z_ports = z_pu[np.ix_(ports, ports)]
    tap_ports = port_of[reg_flat[tapped]]
    real, cplx = float_dtype(), jnp.result_type(float_dtype(), jnp.complex64)

    def per_device(a_p):
        """A map of the port injections (pu) as one of the device currents (A) and the
        tapped ports' ``delta q`` (pu): ``a_p i_P`` with ``i_P = N c + delta q`` there."""
        return np.concatenate([a_p @ inc, a_p[:, tap_ports]], axis=1)

    z_nc = per_device(z_pu[:, ports])

    return PortZbus(
        port_node=jnp.asarray(ports, jnp.int32),
        z_pp=jnp.asarray(z_pu[np.ix_(ports, ports)], cplx),
        z_nc=jnp.asarray(z_nc, cplx),
        w_p=jnp.asarray(w[ports], cplx),
        w_n=jnp.asarray(w, cplx),
        src_e=jnp.asarray(src_e, cplx),
        src_c=jnp.asarray(per_device(-y_src @ (vb[src, None] * z_pu[np.ix_(src, ports)])), cplx),
        load_inc=jnp.asarray(load_inc, real),
        gen_inc=jnp.asarray(gen_inc, real),
        y_load0=jnp.asarray(y_load0, cplx),
        gen_from=jnp.asarray(gen_from_port, jnp.int32),
        gen_to=jnp.asarray(gen_to_port, jnp.int32),
        gen_vbase_v=jnp.asarray(gen_vbase, real),
        tap_port=jnp.asarray(tap_ports),
        tap_reg=jnp.asarray(tapped // reg_nodes.shape[1], jnp.int32),
        tap0_pu=jnp.asarray(feeder.tap_pu, real),
        m_p=jnp.asarray(m_t[ports], cplx),
        m_n=jnp.asarray(m_t, cplx),
        q_e=jnp.asarray(q_e[tapped], cplx),
        q_p=jnp.asarray(q_p[tapped], cplx),
        q_u=jnp.asarray(q_u[np.ix_(tapped, tapped)], cplx),
        src_u=jnp.asarray(-y_src @ (vb[src, None] * m_t[src]), cplx),
        z_dd=jnp.asarray(across_t @ z_ports @ inc, cplx),
        z_td=jnp.asarray(z_ports[tap_ports] @ inc, cplx),
        q_d=jnp.asarray(q_p[tapped] @ inc, cplx),
        w_d=jnp.asarray(across_t @ w[ports], cplx),
        m_d=jnp.asarray(across_t @ m_t[ports], cplx),
        z_dt=jnp.asarray(across_t @ z_ports[:, tap_ports], cplx),
        **_output_maps(feeder, vb, w, z_nc, m_t, cplx),
        cvr=_has_cvr(feeder),
    )


def _has_cvr(feeder: Feeder3) -> bool:
    """Whether some load phase of ``feeder`` has a CVR exponent (host values)."""
    return bool(
        np.any(np.asarray(feeder.load_p_exp) != 0) or np.any(np.asarray(feeder.load_q_exp) != 0)
    )


def _output_maps(feeder: Feeder3, vb, w, z_nc, m_n, cplx) -> dict:
    """The results that are differences of node voltages, as float64 maps from the
    source EMF (per volt), the device currents (per A) and tapped ports' ``delta q`` and
    ``u`` (per pu), built from the node voltages' maps ``w``, ``z_nc``, ``m_n`` (pu):
    ``h_*``, each line's phase currents (A) at its first terminal (its primitive
    admittance times its terminals' voltages), and ``ll_*``, each bus's line-to-line
    voltages ab, bc, ca (V); zero rows for a phase or pair a line or bus lacks. Formed in
    float64, where float32 would subtract nearly equal voltages: a switch's near-short
    admittance times a near-zero difference, a delta feeder's phase-to-phase voltages."""
    v_map = np.concatenate([w, z_nc, m_n], axis=1) * vb[:, None]  # V per unit
    volts = np.vstack([v_map, np.zeros((1, v_map.shape[1]))])  # ground: 0 V
    line = np.asarray(feeder.line_elem)
    cond = np.asarray(feeder.line_cond)
    rows = element_admittances64(feeder)[line[:, None], np.maximum(cond, 0)]  # (n_line, 3, K)
    h = np.einsum("lck,lkx->lcx", rows, volts[np.asarray(feeder.elem_nodes)[line]])
    h = np.where((cond >= 0)[:, :, None], h, 0.0).reshape(-1, v_map.shape[1])
    nodes = np.asarray(feeder.bus_nodes)  # (n_bus, 3), -1 for a missing phase
    at = np.where(nodes >= 0, nodes, feeder.n_node)
    first, second = [0, 1, 2], [1, 2, 0]
    pair = (nodes >= 0)[:, first] & (nodes >= 0)[:, second]
    ll = volts[at[:, first]] - volts[at[:, second]]  # (n_bus, 3, 3 + n_dev + 2 n_t)
    ll = np.where(pair[:, :, None], ll, 0.0).reshape(-1, v_map.shape[1])
    n_e, n_c = w.shape[1], z_nc.shape[1]
    maps = {}
    for name, m in (("h", h), ("ll", ll)):
        maps[f"{name}_e"] = jnp.asarray(m[:, :n_e], cplx)
        maps[f"{name}_c"] = jnp.asarray(m[:, n_e : n_e + n_c], cplx)
        maps[f"{name}_u"] = jnp.asarray(m[:, n_e + n_c :], cplx)
    return maps


def _incidence(frm, to, vb_port) -> np.ndarray:
    """``(n_port, n)`` ``vb / S`` at each element's ``frm`` port, ``-vb / S`` at its
    ``to`` port (``n_port`` = ground: no row)."""
    m = vb_port.shape[0]
    out = np.zeros((m + 1, len(frm)))
    out[frm, np.arange(len(frm))] += 1.0
    out[to, np.arange(len(to))] -= 1.0
    return out[:m] * (vb_port / S_BASE_VA)[:, None]


def _winding_scale(tapped, tap_pu):
    """``(n_reg, K)`` diagonal of ``D(t)``: ``1 / t`` on the tapped winding, 1 elsewhere."""
    return np.where(tapped, 1.0 / tap_pu[:, None], 1.0)


_FULL = jax.lax.Precision.HIGHEST


def anderson_step(g: Array, f: Array, d_f: Array, d_g: Array, usable, real) -> Array:
    """The next iterate of Anderson acceleration of depth 2 (Walker and Ni, 2011):
    ``g - dG gamma`` with ``gamma`` the least-squares fit of the residual ``f`` by the
    residuals' last two differences ``d_f`` (older, newer: two ``(n,)``; ``d_g`` the map
    values'); ``g`` itself where not ``usable`` (too little history, the last sweep) or
    the fit is not finite.

    ``gamma`` is real: the map is not complex-analytic (a generator's current is the
    conjugate of ``S / V``), so the fit is over the real and imaginary parts as one real
    vector. Closed-form 2 x 2 normal equations, regularised by float epsilon times their
    trace, their five inner products as one product with ones (a batched solve, or
    ``einsum`` contractions, took a third of an iteration's time under ``vmap`` here).
    """
    a_r, a_i = d_f[0].real, d_f[0].imag
    b_r, b_i = d_f[1].real, d_f[1].imag
    terms = jnp.stack(
        [
            a_r * a_r + a_i * a_i,
            a_r * b_r + a_i * b_i,
            b_r * b_r + b_i * b_i,
            a_r * f.real + a_i * f.imag,
            b_r * f.real + b_i * f.imag,
        ]
    )
    aa, ab, bb, ra, rb = sum_last_axis(terms)
    reg = jnp.finfo(real).eps * (aa + bb) + jnp.finfo(real).tiny
    aa, bb = aa + reg, bb + reg
    det = aa * bb - ab * ab
    gamma_a = (bb * ra - ab * rb) / det
    gamma_b = (aa * rb - ab * ra) / det
    usable = usable & jnp.isfinite(gamma_a) & jnp.isfinite(gamma_b) & (det > 0)
    step = gamma_a * d_g[0] + gamma_b * d_g[1]
    return g - jnp.where(usable, step, 0.0)


def _dot(a: Array, b: Array) -> Array:
    """``a @ b`` in the full precision of the dtype: XLA's GPU backend otherwise runs
    float32 products in TF32 (a 10-bit mantissa): on an H200, 2 % of ``voltage123-v0``'s
    no-control steps then failed to converge to the 1e-5 pu tolerance (none on a CPU)."""
    return jnp.matmul(a, b, precision=_FULL)


def _vecmat(x: Array, a_t: Array) -> Array:
    """``x @ a_t`` (= ``a @ x``, given the transpose ``a_t``) in full precision: written
    with the vector first, a batch under ``vmap`` is the product's row axis, as XLA lays
    it out. Written ``a @ x``, XLA's CPU backend computed ``x``'s whole producing chain
    (the loads' admittances) in the transposed order the product wanted, and an IEEE 123
    iteration of 1024 solves took twice as long."""
    return jnp.matmul(x, a_t, precision=_FULL)


def _real_block_t(a: Array) -> Array:
    """``(2 n, 2 k)`` real matrix ``[[Re a^T, Im a^T], [-Im a^T, Re a^T]]`` of a complex
    ``(k, n)`` matrix ``a``, for :func:`_cmatvec`: the row ``[Re x, Im x]`` times it is
    ``[Re(a x), Im(a x)]``."""
    return jnp.block([[a.real.T, a.imag.T], [-a.imag.T, a.real.T]])


def _cmatvec(block_t: Array, x: Array) -> Array:
    """``a @ x`` for complex ``x`` and ``block_t = _real_block_t(a)``: one real product
    (a complex product of 1024 IEEE 123 port vectors took twice as long here). The
    barrier keeps it one: XLA's simplifier otherwise splits a product of a concatenation
    into two products of half the depth, and IEEE 123's 1024 solves ran 11 % slower
    (IEEE 13's 22 %) on this 2-core CPU."""
    y = _vecmat(jax.lax.optimization_barrier(jnp.concatenate([x.real, x.imag])), block_t)
    k = y.shape[-1] // 2
    return jax.lax.complex(y[:k], y[k:])


def _taps_from(tap_block, s_inv_block, delta, current, e_t, e_q):
    """``(u, q)`` of the tapped conductors (:func:`port_power_flow`) at the device
    currents ``current`` (A), given the EMF's parts ``e_t``, ``e_q`` of the right-hand
    side: ``S^-1 (delta (Z_td c + e_t), Q_d c + e_q)``."""
    n_t = delta.shape[0]
    zc = _cmatvec(tap_block, current)
    return _cmatvec(s_inv_block, jnp.concatenate([delta * (zc[:n_t] + e_t), zc[n_t:] + e_q]))


def _coupled(couple_block, delta, u_q):
    """The device voltages' move (V) by the windings' ``u`` and ``delta q``."""
    n_t = delta.shape[0]
    return _cmatvec(couple_block, jnp.concatenate([u_q[:n_t], delta * u_q[n_t:]]))


def _tap_move(tap_block, s_inv_block, couple_block, delta, current):
    """The device voltages' move (V) by the regulators' taps away from ``t0`` at the
    device currents ``current`` (A): zero at ``t0``."""
    u_q = _taps_from(tap_block, s_inv_block, delta, current, 0.0, 0.0)
    return _coupled(couple_block, delta, u_q)


@full_precision
def port_power_flow(
    zbus: PortZbus,
    feeder: Feeder3,
    load_scale=1.0,
    p_gen_kw=None,
    q_gen_kvar=None,
    n_iter: int | None = None,
    tol_pu: float | None = None,
) -> UnbalancedPowerFlowResult:
    """Solve the unbalanced power flow of ``feeder`` on its port Z-bus.

    Args:
        zbus: :func:`build_port_zbus` of this feeder's network.
        feeder: the feeder: its loads, ``tap_pu`` and source EMF are used as given.
        load_scale: ``()`` or ``(n_lp,)`` multiplier of every load phase's nominal power.
        p_gen_kw, q_gen_kvar: ``(n_gen,)`` constant-power injection of each of the
            model's generators, kW and kvar (positive = generation), or None.
        n_iter: most fixed-point iterations (static); default :data:`N_ITER` of the
            precision (10 in float32, 16 in float64). They end earlier once the last
            moved no device's voltage by :data:`STOP_FRACTION` of ``tol_pu`` (the whole
            batch under ``vmap``: every member then keeps its own last result).
        tol_pu: convergence tolerance on the last change of a load phase's (or
            generator's) voltage, pu; default 1e-9 in float64, 1e-5 in float32.

    Returns:
        An :class:`~jaxgrid.grid.three_phase.upf.UnbalancedPowerFlowResult` (the same
        fields as :func:`~jaxgrid.grid.three_phase.upf.unbalanced_power_flow`'s).
    """
    exponents = (feeder.load_p_exp, feeder.load_q_exp)
    if not zbus.cvr and not any(isinstance(e, jax.core.Tracer) for e in exponents):
        if _has_cvr(feeder):
            raise ValueError(
                f"{feeder.name}'s loads have CVR exponents but its port model was built "
                "without: call build_port_zbus on this feeder again"
            )
    feeder = as_arrays(feeder)
    real = feeder.vbase_v.dtype
    if tol_pu is None:
        tol_pu = 1e-9 if real == jnp.float64 else 1e-5
    emf = source_emf(feeder)
    w_p = _dot(zbus.w_p, emf)

    # the regulators at taps t: the tapped conductors' u and q solve S (u, q) = R c + r_e
    # for the device currents c, with R c = (delta Z_td c, Q_d c): S's inverse is formed
    # once per call (per tap setting), R c from the iteration's own product; the device
    # voltages are then w_d E + Z_dd c + C (u, q) with C = (M_d, Z_dt delta). Only the
    # 2 n_t x 2 n_t inverse is per tap setting; every device-sized product is with a
    # matrix the batch shares, so under ``vmap`` it is one matrix product (forming S^-1 R
    # and C per environment instead, as (n_port, 2 n_t) matrices, cost a batch of 256
    # voltage123-v0 steps with their own taps 31 ms a call and two batched
    # matrix-vector products an iteration on this CPU)
    delta = 1.0 / zbus.tap0_pu[zbus.tap_reg] - 1.0 / feeder.tap_pu[zbus.tap_reg]
    t = zbus.tap_port
    n_t = t.shape[0]
    n_dev = zbus.z_dd.shape[0]
    eye = jnp.eye(n_t, dtype=w_p.dtype)
    system = jnp.block(
        [
            [eye - delta[:, None] * zbus.m_p[t], -delta[:, None] * zbus.z_pp[t][:, t] * delta],
            [-zbus.q_u, eye - zbus.q_p[:, t] * delta],
        ]
    )
    # no LAPACK on a CPU (see small_inverse's docstring); the small products in real
    # block form, as the large one (XLA's complex products of 18 columns took a tenth of
    # an IEEE 123 iteration here)
    s_inv_block = _real_block_t(small_inverse(system))
    # at the taps t0 the tap terms of a sweep are zero: a batch skips them (a fifth of an
    # IEEE 123 sweep) where none of its members' taps moved (skip_zero: one decision for
    # the batch, whether it shares its taps or not)
    taps_moved = jnp.any(delta != 0)
    device_block = _real_block_t(zbus.z_dd)
    # (Z_td c, Q_d c) in one product (slices, not a gather, of its result)
    tap_block = _real_block_t(jnp.concatenate([zbus.z_td, zbus.q_d]))
    couple_block = _real_block_t(jnp.concatenate([zbus.m_d, zbus.z_dt], axis=1))  # (u, delta q)

    def taps_from(current, e_t, e_q):
        """``(u, q)`` of the tapped conductors at the device currents ``current``, given
        the EMF's parts ``e_t``, ``e_q`` of the right-hand side."""
        return _taps_from(tap_block, s_inv_block, delta, current, e_t, e_q)

    def coupled(u_q):
        """The device voltages' move (V) by the windings' ``u`` and ``delta q``."""
        return _coupled(couple_block, delta, u_q)

    e_q = _dot(zbus.q_e, emf)
    w_eff = _dot(zbus.w_d, emf) + coupled(taps_from(jnp.zeros(n_dev, w_p.dtype), w_p[t], e_q))
    tap_terms = (tap_block, s_inv_block, couple_block, delta)

    s_gen = jnp.zeros(zbus.n_gen, w_p.dtype)
    if p_gen_kw is not None:
        s_gen = s_gen + jnp.asarray(p_gen_kw, real) * 1e3
    if q_gen_kvar is not None:
        s_gen = s_gen + 1j * jnp.asarray(q_gen_kvar, real) * 1e3
    generating = jnp.abs(s_gen) > 0
    n_lp = zbus.load_inc.shape[1]
    dev_vbase = jnp.concatenate([feeder.load_vbase_v, zbus.gen_vbase_v])
    counted = jnp.concatenate([jnp.ones(n_lp, bool), generating])

    vb_lp = feeder.load_vbase_v
    g0, b0 = jnp.real(zbus.y_load0) * vb_lp, jnp.imag(zbus.y_load0) * vb_lp

    def devices(x):
        """At the device voltages ``x`` (pu of their bases): the currents (A) the load
        phases draw, the generators inject (``conj(S / V)``), and the devices'
        deviation from ``Y_L0`` (what the ports see), in real arithmetic."""
        xr, xi = jnp.real(x), jnp.imag(x)
        lr, li = xr[:n_lp], xi[:n_lp]
        g, b = load_admittance_parts(feeder, jnp.sqrt(lr * lr + li * li), load_scale, zbus.cvr)
        g, b = g * vb_lp, b * vb_lp  # amperes per pu
        i_lp = jax.lax.complex(g * lr - b * li, g * li + b * lr)
        dg, db = g0 - g, b0 - b
        deviation = jax.lax.complex(dg * lr - db * li, dg * li + db * lr)
        gr, gi = xr[n_lp:], xi[n_lp:]
        m2 = gr * gr + gi * gi
        per = jnp.where(
            generating & (m2 > 0), 1.0 / (jnp.where(m2 > 0, m2, 1.0) * zbus.gen_vbase_v), 0.0
        )
        sr, si = jnp.real(s_gen), jnp.imag(s_gen)
        i_gen = jax.lax.complex((sr * gr + si * gi) * per, (sr * gi - si * gr) * per)
        return i_lp, i_gen, jnp.concatenate([deviation, i_gen])

    def fixed_point_map(x):
        """One sweep ``V_d <- w + Z (I(V_d))`` on the device voltages ``x`` in pu of
        their bases (so that Anderson's fit weighs a 480 V load as a 2.4 kV one): the
        new ones and the largest change of a load phase's or generator's voltage, pu."""
        current = devices(x)[2]
        move = skip_zero(taps_moved, _tap_move, *tap_terms, current)
        x_new = (w_eff + _cmatvec(device_block, current) + move) / dev_vbase
        change = jnp.abs(x_new - x)
        return x_new, jnp.max(jnp.where(counted, change, 0.0), initial=0.0)

    def body(state):
        k, (x, g_prev, f_prev, d_f_prev, d_g_prev, _mismatch) = state
        g, mismatch = fixed_point_map(x)
        f = g - x
        # the newest differences; the carry holds only the last (a stack of both,
        # shifted every sweep, cost an IEEE 123 sweep of 1024 solves a tenth in copies)
        d_f, d_g = f - f_prev, g - g_prev
        usable = (k >= ANDERSON_DEPTH) & (k < n_iter - 1)
        x_next = anderson_step(g, f, (d_f_prev, d_f), (d_g_prev, d_g), usable, real)
        return k + 1, (x_next, g, f, d_f, d_g, mismatch)

    v0 = w_eff / dev_vbase
    huge = jnp.finfo(real).max
    if n_iter is None:
        n_iter = N_ITER[jnp.dtype(real).name]
    no_history = jnp.zeros_like(v0)
    carry = (v0, v0, no_history, no_history, no_history, jnp.asarray(huge, real))
    settled = STOP_FRACTION * tol_pu

    def iterate():
        """The sweeps until the last one changed every device's voltage by less than
        ``settled`` (the whole batch under ``vmap``) or ``n_iter`` ran; the result is the
        last sweep's plain map value (not its accelerated iterate) and its change."""
        count, last = jax.lax.while_loop(
            lambda state: (state[0] < n_iter) & (state[1][-1] >= settled), body, (0, carry)
        )
        return last[1], (last[-1], count)

    # differentiated at the fixed point, not through the (accelerated) iterations
    x, (mismatch, count) = implicit_complex_fixed_point(
        lambda v: fixed_point_map(v)[0], iterate, v0, has_aux=True
    )
    finite = jnp.all(jnp.isfinite(x.real) & jnp.isfinite(x.imag)) & jnp.isfinite(mismatch)
    x = jnp.where(finite, x, v0)
    mismatch = jnp.where(finite, mismatch, huge)
    i_lp, i_gen, current = devices(x)
    u_q = taps_from(current, w_p[t], e_q)
    u, q = u_q[:n_t], u_q[n_t:]
    # every output from the device currents and the tapped ports' delta q, one product
    # each (the ports' injections formed first cost one product more)
    injected = jnp.concatenate([current, delta * q, u])

    def output(per_emf, per_injection, per_u):
        """An output from its maps of the source EMF, the injections and ``u``."""
        per_unit = _real_block_t(jnp.concatenate([per_injection, per_u], axis=1))
        return _dot(per_emf, emf) + _cmatvec(per_unit, injected)

    v_node = output(zbus.w_n, zbus.z_nc, zbus.m_n) * feeder.vbase_v
    i_source = output(zbus.src_e, zbus.src_c, zbus.src_u)
    # the lines' phase currents from the same injections (float64 maps: no gathers of
    # element voltages, no scatter for the switches' KCL)
    i_line = output(zbus.h_e, zbus.h_c, zbus.h_u).reshape(feeder.line_cond.shape)
    v_ll = output(zbus.ll_e, zbus.ll_c, zbus.ll_u).reshape(feeder.bus_nodes.shape)
    # the power injected into the network, which it loses: the source's, less what the
    # loads draw at the voltages across them, plus the generators'
    v_dev = _dot(zbus.w_d, emf) + _cmatvec(device_block, current) + coupled(u_q)
    s_source = jnp.sum(v_node[feeder.source_nodes] * jnp.conj(i_source))
    drawn = jnp.sum(v_dev[:n_lp] * jnp.conj(i_lp)) - jnp.sum(v_dev[n_lp:] * jnp.conj(i_gen))
    return network_result(
        feeder,
        v_node,
        jnp.abs(i_line),
        jnp.real(s_source - drawn),
        s_source,
        mismatch,
        tol_pu,
        count,
        v_ll,
    )
