"""LinDist3Flow: the linear, lossless unbalanced power flow of a :class:`Feeder3`.

LinDist3Flow (Gan & Low 2014; Sankur, Dobbe, Arnold et al. 2016) linearises the branch
flow model of an unbalanced radial feeder. For a line from ``m`` to ``n`` with phase
impedance matrix ``Z`` carrying the per-phase power ``S`` (the sum of what lies beyond
it: losses neglected), with squared magnitudes ``v = |V|^2`` per phase and the
*balanced-angle assumption* ``V_m^phi / V_m^psi = alpha^(phi - psi)``,
``alpha = exp(-j 2 pi / 3)``,

    v_n^phi = v_m^phi - 2 sum_psi Re[ alpha^(phi - psi) conj(Z_phi,psi) S^psi ]

(the ``|Z I|^2`` term dropped). Summed along the path from the source, every node's ``v``
is affine in the per-phase injections: ``v = v0 + R p + X q``.

How it is computed here, on the host in float64, from the feeder's elements as they are
(no tree walk, so open-delta regulators, delta-wye transformers and switches need no
special case): ``Z = (Y_series + Y_source)^-1`` is the impedance matrix of the *series*
network (each line's series impedance, the source's Thevenin impedance, transformers and
regulators at their fixed taps: an ideal ratio on the winding in series with its leakage
impedance), ``V_b = Z Y_source E`` its no-load voltages: the source EMF carried through
the ideal ratios, balanced (phases 120 degrees apart; delta-wye transformers add their 30
degrees; a regulator scales its phase by its tap). A constant power ``s`` between two
nodes ``f`` and ``t`` (a wye load phase, ``t`` = ground; a delta load phase or a
phase-to-phase source, ``t`` the next phase) draws the current
``i = conj(s / (V_b[f] - V_b[t]))``, and

    |V_k|^2 ~ |V_b[k]|^2 - 2 Re( conj(V_b[k]) (Z[k, f] - Z[k, t]) i ).

On a line-only feeder this *is* the recursion above: ``Z[k, f]`` is the sum of the
impedances of the lines shared by the paths to ``k`` and ``f``, and
``conj(V_b^phi) / conj(V_b^psi) = alpha^(phi - psi)``. A delta load ``S_ab`` becomes
``S_ab / (1 - alpha)`` on phase a and ``-S_ab alpha / (1 - alpha)`` on phase b (the
balanced-angle delta-to-wye conversion of Sankur et al.). Through a regulator of tap
``t`` the reference and the path impedance above it are referred by ``t``, so that
``v_out = t^2 v_in`` at no load and the drop above it counts ``t^2`` times, as in
LinDist3Flow's ideal-ratio regulator. Where a bank's phases have different taps, the
cross-phase terms below it carry ``t_phi / t_psi`` (the no-load magnitudes' ratio) where
LinDist3Flow's ``alpha`` has 1: a 1-2 % difference of a mutual-impedance term.

Shunts (capacitor banks, lines' charging capacitance) draw their current at ``V_b``:
constant power at the no-load voltage, LinDist3Flow's treatment of capacitors; they are
part of ``v0``. Loads are **constant power at nominal**, whatever their OpenDSS model
(``load_p_w``, ``load_q_var`` times ``load_scale``); losses are neglected, and no loss is
reported. Voltages are ``sqrt(v)`` (pu of ``vbase_v``); line-to-line voltages come from
the same linearisation of ``|V_a - V_b|^2`` (pu of ``sqrt(3) vbase_v``, as in
:class:`~jaxgrid.grid.three_phase.upf.UnbalancedPowerFlowResult`).

Floating sections: where nodes reach ground only through OpenDSS's 1e-6 S anti-floating
conductance of delta windings (all of the 3-wire IEEE 37 below its delta-delta
substation transformer, bus 610 of IEEE 123), the series network fixes the
line-to-line voltages but not the voltages to ground (the exact solver takes those from
the lines' capacitance): :attr:`LinDist3Flow.grounded` is False there, and only
``vll_pu`` means something.

The solve is two matrix-vector products (jittable, vmappable, float32 by default); its
inherent error against the exact :func:`~jaxgrid.grid.three_phase.upf.unbalanced_power_flow`
on the IEEE feeders is measured in ``benchmarks/lindist3flow_error.py`` and tabled in
docs/physics.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.grid.three_phase.feeder3 import Feeder3
from jaxgrid.grid.three_phase.upf import element_admittances64
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array, float_dtype

# a node whose driving-point impedance in the series network exceeds this (pu of its base
# voltage at 1 MVA) hangs on the anti-floating conductance: the grounded nodes of the four
# IEEE feeders measure 1e-5 to 1.4 pu, the floating ones 2.7e5 pu and more
FLOATING_Z_PU = 1e2


@struct.dataclass
class LinDist3Flow:
    """The affine map of LinDist3Flow (see the module docstring), one row per node and
    per phase pair of each bus.

    Rows: the ``n_node`` squared line-to-neutral magnitudes, then the ``3 n_bus``
    squared line-to-line magnitudes ab, bc, ca of each bus (zero rows where the bus
    lacks the pair). Columns (*ports*): the ``n_lp`` load phases, then the ``n_node``
    node-to-ground injections, then the ``3 n_bus`` phase-to-phase injections.

    Attributes:
        n_node: static number of nodes.
        v0_pu2: ``(n_row,)`` squared magnitude at no load, pu^2 (line-to-neutral rows of
            ``vbase_v``, line-to-line rows of ``sqrt(3) vbase_v``).
        r_pu2_per_kw: ``(n_row, n_port)`` change of each row per kW *injected* at each
            port, pu^2 / kW.
        x_pu2_per_kvar: ``(n_row, n_port)`` the same per kvar injected, pu^2 / kvar.
        load_p_kw, load_q_kvar: ``(n_lp,)`` nominal power of each load phase, kW, kvar
            (positive = consumption).
        pair_present: ``(n_bus, 3)`` bool: the bus has phases ab, bc, ca.
        grounded: ``(n_node,)`` bool: the node's voltage to ground is fixed by the
            series network (False on floating delta sections).
    """

    n_node: int = struct.field(pytree_node=False)
    v0_pu2: Array
    r_pu2_per_kw: Array
    x_pu2_per_kvar: Array
    load_p_kw: Array
    load_q_kvar: Array
    pair_present: Array
    grounded: Array


@struct.dataclass
class LinDist3FlowResult:
    """LinDist3Flow's voltages (leading batch axes under ``vmap``).

    Attributes:
        vm_pu: ``(n_node,)`` line-to-neutral magnitude, pu of ``vbase_v`` (meaningless
            where :attr:`LinDist3Flow.grounded` is False).
        vll_pu: ``(n_bus, 3)`` line-to-line magnitudes ab, bc, ca, pu of ``sqrt(3)``
            times the line-to-neutral base (0 where a phase is missing).
    """

    vm_pu: Array
    vll_pu: Array


def _series_and_shunt(feeder: Feeder3, y_elem: np.ndarray):
    """The nodal admittance of the series network and of the shunts, ``(m, m)`` each, S,
    over merged nodes (closed switches join their two nodes, as in the float32 solver)."""
    n, m = feeder.n_node, feeder.n_group
    group = np.append(np.asarray(feeder.node_group), m)  # ground -> m
    elem_nodes = np.asarray(feeder.elem_nodes)
    node_bus = np.append(np.asarray(feeder.node_bus), -1)
    lines = set(np.asarray(feeder.line_elem).tolist())
    switch = np.asarray(feeder.elem_switch)
    y_series = np.zeros((m + 1, m + 1), complex)
    y_shunt = np.zeros((m + 1, m + 1), complex)
    for e, name in enumerate(feeder.element_names):
        nodes = elem_nodes[e]
        k = int(np.sum(nodes < n))
        at = group[nodes[:k]]
        y = y_elem[e, :k, :k]
        if e in lines:
            if k % 2:
                raise ValueError(f"{name}: a line with an odd number of conductors")
            p = k // 2
            mutual = y[:p, p:]  # -Y_series
            series = np.block([[-mutual, mutual], [mutual.T, -mutual.T]])
            if not switch[e]:
                y_series[np.ix_(at, at)] += series
            y_shunt[np.ix_(at, at)] += y - series
        elif name.split(".")[0] in ("capacitor", "reactor") and len(set(node_bus[nodes[:k]])) == 1:
            y_shunt[np.ix_(at, at)] += y
        else:
            y_series[np.ix_(at, at)] += y
    return y_series[:m, :m], y_shunt[:m, :m]


def _pairs(feeder: Feeder3):
    """``(3 n_bus,)`` first and second node of phase pairs ab, bc, ca of each bus
    (``n_node`` where the bus lacks the pair) and ``(n_bus, 3)`` presence."""
    n = feeder.n_node
    nodes = np.asarray(feeder.bus_nodes)
    present = nodes >= 0
    second = [1, 2, 0]
    pair = present & present[:, second]
    first = np.where(pair, nodes, n).reshape(-1)
    other = np.where(pair, nodes[:, second], n).reshape(-1)
    return first, other, pair


@full_precision
def lindist3flow_model(feeder: Feeder3) -> LinDist3Flow:
    """Build LinDist3Flow's affine map of ``feeder`` at its taps (host side, float64
    numpy; leaves cast to the default float dtype).

    Raises:
        ValueError: for a line whose conductors do not pair up terminal by terminal.
    """
    feeder = jax.device_get(feeder)
    n, m = feeder.n_node, feeder.n_group
    group = np.append(np.asarray(feeder.node_group), m)
    vb = np.append(np.asarray(feeder.vbase_v, np.float64), 1.0)

    y_series, y_shunt = _series_and_shunt(feeder, element_admittances64(feeder))
    src = group[np.asarray(feeder.source_nodes)]
    y_src = np.asarray(feeder.source_g_s) + 1j * np.asarray(feeder.source_b_s)
    angle = np.deg2rad(float(feeder.source_angle_deg) - 120.0 * np.arange(3))
    emf = (
        float(feeder.source_vm_pu) * float(feeder.source_kv) * 1e3 / np.sqrt(3) * np.exp(1j * angle)
    )
    y_total = y_series.copy()
    y_total[np.ix_(src, src)] += y_src
    i_src = np.zeros(m, complex)
    np.add.at(i_src, src, y_src @ emf)
    z = np.linalg.inv(y_total)
    v_ref = z @ i_src  # no-load voltages of the series network: the balanced reference
    v_shunt = v_ref - z @ (y_shunt @ v_ref)  # shunts drawing their current at v_ref

    # ground as merged node m: zero voltage, zero impedance
    z_ext = np.zeros((m + 1, m + 1), complex)
    z_ext[:m, :m] = z
    v_ref_ext = np.append(v_ref, 0.0)
    v_shunt_ext = np.append(v_shunt, 0.0)

    pair_first, pair_second, pair_present = _pairs(feeder)
    nodes = np.arange(n)
    row_f = group[np.concatenate([nodes, pair_first])]
    row_t = group[np.concatenate([np.full(n, n), pair_second])]
    row_base = np.concatenate([vb[:n], np.sqrt(3) * vb[pair_first]])
    port_f = group[np.concatenate([np.asarray(feeder.load_node_from), nodes, pair_first])]
    port_t = group[np.concatenate([np.asarray(feeder.load_node_to), np.full(n, n), pair_second])]

    v_row = v_ref_ext[row_f] - v_ref_ext[row_t]
    v_port = v_ref_ext[port_f] - v_ref_ext[port_t]
    v_port = np.where(np.abs(v_port) > 0, v_port, 1.0)  # absent pairs: zero columns
    z_rp = (
        z_ext[np.ix_(row_f, port_f)]
        - z_ext[np.ix_(row_f, port_t)]
        - z_ext[np.ix_(row_t, port_f)]
        + z_ext[np.ix_(row_t, port_t)]
    )
    # injected s at a port: current conj(s / v_port) into f; the rise of row k's
    # squared magnitude is 2 Re(conj(v_row) z_rp conj(s) / conj(v_port)), conj(s) = p - jq
    k = np.conj(v_row)[:, None] * z_rp / np.conj(v_port)[None, :]
    per_kw = 2e3 / row_base[:, None] ** 2  # V^2 per W -> pu^2 per kW
    v_sh_row = v_shunt_ext[row_f] - v_shunt_ext[row_t]
    v0 = (2 * np.real(np.conj(v_row) * v_sh_row) - np.abs(v_row) ** 2) / row_base**2

    z_node = np.abs(np.diag(z))[group[:n]] * 1e6 / vb[:n] ** 2
    dtype = float_dtype()
    return LinDist3Flow(
        n_node=n,
        v0_pu2=jnp.asarray(v0, dtype),
        r_pu2_per_kw=jnp.asarray(per_kw * np.real(k), dtype),
        x_pu2_per_kvar=jnp.asarray(per_kw * np.imag(k), dtype),
        load_p_kw=jnp.asarray(np.asarray(feeder.load_p_w) / 1e3, dtype),
        load_q_kvar=jnp.asarray(np.asarray(feeder.load_q_var) / 1e3, dtype),
        pair_present=jnp.asarray(pair_present),
        grounded=jnp.asarray(z_node < FLOATING_Z_PU),
    )


@full_precision
def lindist3flow(
    model: LinDist3Flow,
    load_scale=1.0,
    p_gen_kw=None,
    q_gen_kvar=None,
    p_gen_ll_kw=None,
    q_gen_ll_kvar=None,
) -> LinDist3FlowResult:
    """LinDist3Flow's voltages for constant-power loads and injections (jittable).

    Args:
        model: from :func:`lindist3flow_model`.
        load_scale: ``()`` or ``(n_lp,)`` multiplier of every load phase's nominal power.
        p_gen_kw, q_gen_kvar: ``(n_node,)`` injection of each node to ground, kW and kvar
            (positive = generation), or None.
        p_gen_ll_kw, q_gen_ll_kvar: ``(n_bus, 3)`` injection between phases ab, bc, ca
            of each bus, kW and kvar, or None.

    Returns:
        A :class:`LinDist3FlowResult`; the same arguments as
        :func:`~jaxgrid.grid.three_phase.upf.unbalanced_power_flow`.
    """
    dtype = model.v0_pu2.dtype
    n = model.n_node
    n_bus = model.pair_present.shape[-2]
    n_lp = model.load_p_kw.shape[-1]
    r, x = model.r_pu2_per_kw, model.x_pu2_per_kvar
    scale = jnp.asarray(load_scale, dtype)
    p_load, q_load = model.load_p_kw, model.load_q_kvar
    if scale.ndim == 0:  # the nominal loads' change is a constant XLA folds once
        v = model.v0_pu2 - scale * (r[:, :n_lp] @ p_load + x[:, :n_lp] @ q_load)
    else:
        v = model.v0_pu2 - r[:, :n_lp] @ (scale * p_load) - x[:, :n_lp] @ (scale * q_load)

    def inject(v, matrix, value, start, size):
        # absent injections add nothing: no product with zeros for XLA to constant-fold
        # (a closed-over IEEE 123 model took it 10-14 s per product)
        if value is None:
            return v
        return v + matrix[:, start : start + size] @ jnp.asarray(value, dtype).reshape(size)

    v = inject(v, r, p_gen_kw, n_lp, n)
    v = inject(v, x, q_gen_kvar, n_lp, n)
    v = inject(v, r, p_gen_ll_kw, n_lp + n, 3 * n_bus)
    v = inject(v, x, q_gen_ll_kvar, n_lp + n, 3 * n_bus)
    vm = jnp.sqrt(jnp.maximum(v[:n], 0.0))
    # an absent phase pair's row is not a voltage: keep it out of the square root, whose
    # derivative at 0 (inf) times the mask's 0 would make every gradient NaN
    pair_v2 = jnp.where(model.pair_present, v[n:].reshape(n_bus, 3), 1.0)
    vll = jnp.where(model.pair_present, jnp.sqrt(jnp.maximum(pair_v2, 0.0)), 0.0)
    return LinDist3FlowResult(vm_pu=vm, vll_pu=vll)


def constant_power_loads(feeder: Feeder3) -> Feeder3:
    """``feeder`` with every load phase constant power at any voltage between 0.5 and
    1.5 pu (OpenDSS model 1 without its switching): the load model LinDist3Flow assumes,
    for measuring its own error with the exact
    :func:`~jaxgrid.grid.three_phase.upf.unbalanced_power_flow` (host side)."""
    k = feeder.n_load_phase
    only_p = np.tile([0.0, 0.0, 1.0], (k, 1))
    return feeder.replace(
        load_zip_p=only_p,
        load_zip_q=only_p,
        load_p_exp=np.zeros(k),
        load_q_exp=np.zeros(k),
        load_vlowpu=np.full(k, 0.4),
        load_vminpu=np.full(k, 0.5),
        load_vmaxpu=np.full(k, 1.5),
    )
