"""The ``Feeder3``: an unbalanced three-phase distribution feeder as a pytree of arrays.

The model is node based, as in OpenDSS: a *node* is one phase conductor of a bus
(``"632.2"`` is phase b of bus 632); the ground (node 0 in OpenDSS) is not a node.
Every power-delivery element (line, switch, transformer, regulator, capacitor, reactor)
is its primitive admittance matrix ``Yprim`` between the nodes its conductors connect
(ground conductors removed), padded to ``K`` conductors; the network's nodal admittance
matrix is their sum. Lines carry their full 3x3 (or 2x2, 1x1) series impedance and shunt
capacitance matrices this way, transformers their winding connections (wye, delta) and
short-circuit impedance.

Regulators are the transformers controlled by an OpenDSS ``RegControl``; the tap of the
regulated winding is the params leaf :attr:`Feeder3.tap_pu`, so ``vmap`` over taps works.
A tap ``t`` scales the winding's conductors by ``1/t``:
``Yprim(t) = D(t) A D(t) + B`` with ``D = diag(1/t on the tapped winding, 1 elsewhere)``,
``A`` the tap-scaled part (``elem_g_s + j elem_b_s`` at ``t = 1``) and ``B`` a tiny
tap-independent part (OpenDSS's anti-floating conductance, about 1e-7 S;
``reg_g0_s + j reg_b0_s``). The builder extracts ``A`` and ``B`` from OpenDSS's ``Yprim``
at two taps; the test suite checks the formula at others. The taps are fixed here; their
automatic control (OpenDSS's ``RegControl``) is :mod:`jaxgrid.devices.regulator`, whose
settings are a pytree of their own.

Loads are split into *load phases*: one two-terminal branch each, from ``load_node_from``
to ``load_node_to`` (wye: phase to neutral, which is ground here; delta: phase to the next
phase), with OpenDSS's per-phase nominal power and voltage base and its ZIP fractions.
The voltage-dependent current of a load phase is in :mod:`jaxgrid.grid.three_phase.upf`.

Units are OpenDSS's: volts, amperes, siemens, watts and var; ``vbase_v`` is each node's
line-to-neutral base voltage. Every numeric field is an array leaf; names are static
metadata (``pytree_node=False``), so feeders built from the same file stack and ``vmap``.
"""

from __future__ import annotations

import numpy as np
from flax import struct

from jaxgrid.types import Array

ZIP_NAMES = ("Z", "I", "P")


@struct.dataclass
class Feeder3:
    """An unbalanced three-phase feeder (see the module docstring).

    Attributes:
        name: the feeder's name (the OpenDSS circuit).
        bus_names, node_names, element_names, load_names, regulator_names: static tuples.
        node_bus: ``(n_node,)`` int32 bus of each node.
        node_phase: ``(n_node,)`` int32 OpenDSS node number (1, 2, 3 = phases a, b, c).
        vbase_v: ``(n_node,)`` line-to-neutral base voltage, V.
        bus_nodes: ``(n_bus, 3)`` int32 node of phases a, b, c of each bus, -1 if absent.
        n_group: static number of merged nodes (nodes joined by closed switches count once).
        node_group: ``(n_node,)`` int32 merged node of each node.
        elem_nodes: ``(n_elem, K)`` int32 node of each conductor, ``n_node`` for padding.
        elem_g_s, elem_b_s: ``(n_elem, K, K)`` primitive conductance and susceptance, S
            (for a regulator: the tap-scaled part at tap 1).
        elem_switch: ``(n_elem,)`` bool closed switches (OpenDSS ``Switch=yes`` lines,
            about 1e-7 ohm): the solver joins their two nodes into one (``node_group``)
            rather than factor a matrix with their 1e7 S in it, which float32 cannot.
        reg_elem: ``(n_reg,)`` int32 element of each regulator.
        reg_tapped: ``(n_reg, K)`` bool conductors of the regulated (tapped) winding.
        reg_g0_s, reg_b0_s: ``(n_reg, K, K)`` tap-independent part of the regulator's
            ``Yprim``, S.
        tap_pu: ``(n_reg,)`` tap of each regulated winding, pu (1 + 0.00625 per step).
        line_elem: ``(n_line,)`` int32 element of each line (switches included).
        line_cond: ``(n_line, 3)`` int32 conductor (position in ``elem_nodes``) of phase
            a, b, c at the line's first terminal, -1 if absent.
        line_normamps_a: ``(n_line,)`` normal current rating, A.
        load_id: ``(n_lp,)`` int32 load (index in ``load_names``) of each load phase.
        load_node_from, load_node_to: ``(n_lp,)`` int32 nodes of each load phase
            (``n_node`` = ground).
        load_delta: ``(n_lp,)`` bool delta (phase-to-phase) connection.
        load_p_w, load_q_var: ``(n_lp,)`` nominal power per phase at ``load_vbase_v``,
            W and var (positive = consumption).
        load_vbase_v: ``(n_lp,)`` voltage base of the load phase, V.
        load_vminpu, load_vmaxpu, load_vlowpu: ``(n_lp,)`` OpenDSS's model-switching
            voltages, pu of ``load_vbase_v``: constant power and current hold between
            ``vminpu`` and ``vmaxpu``; above it the load is a constant impedance, below
            it the current is interpolated down to the impedance at ``vlowpu``.
        load_zip_p, load_zip_q: ``(n_lp, 3)`` constant Z, I and P fractions of the active
            and reactive power.
        load_p_exp, load_q_exp: ``(n_lp,)`` voltage exponents of the "P" part between
            ``vminpu`` and ``vmaxpu``: 0 for constant power, OpenDSS's ``CVRwatts`` and
            ``CVRvars`` (default 1 and 2) for its CVR model 4.
        source_nodes: ``(3,)`` int32 nodes of the Thevenin source.
        source_g_s, source_b_s: ``(3, 3)`` Thevenin admittance of the source, S.
        source_kv: ``()`` source base voltage, kV line-to-line.
        source_vm_pu: ``()`` source EMF, pu of ``source_kv``.
        source_angle_deg: ``()`` angle of phase a of the source EMF, degrees.
    """

    name: str = struct.field(pytree_node=False)
    bus_names: tuple = struct.field(pytree_node=False)
    node_names: tuple = struct.field(pytree_node=False)
    element_names: tuple = struct.field(pytree_node=False)
    load_names: tuple = struct.field(pytree_node=False)
    regulator_names: tuple = struct.field(pytree_node=False)
    n_group: int = struct.field(pytree_node=False)
    node_bus: Array
    node_phase: Array
    vbase_v: Array
    bus_nodes: Array
    node_group: Array
    elem_nodes: Array
    elem_g_s: Array
    elem_b_s: Array
    elem_switch: Array
    reg_elem: Array
    reg_tapped: Array
    reg_g0_s: Array
    reg_b0_s: Array
    tap_pu: Array
    line_elem: Array
    line_cond: Array
    line_normamps_a: Array
    load_id: Array
    load_node_from: Array
    load_node_to: Array
    load_delta: Array
    load_p_w: Array
    load_q_var: Array
    load_vbase_v: Array
    load_vminpu: Array
    load_vmaxpu: Array
    load_vlowpu: Array
    load_zip_p: Array
    load_zip_q: Array
    load_p_exp: Array
    load_q_exp: Array
    source_nodes: Array
    source_g_s: Array
    source_b_s: Array
    source_kv: Array
    source_vm_pu: Array
    source_angle_deg: Array

    @property
    def n_node(self) -> int:
        return self.node_bus.shape[-1]

    @property
    def n_bus(self) -> int:
        return len(self.bus_names)

    @property
    def n_load_phase(self) -> int:
        return self.load_p_w.shape[-1]

    @property
    def n_regulator(self) -> int:
        return self.tap_pu.shape[-1]

    @property
    def n_line(self) -> int:
        return self.line_elem.shape[-1]

    def __repr__(self) -> str:
        if np.ndim(self.node_bus) != 1:
            return f"Feeder3({self.name}, batch of {np.shape(self.node_bus)[:-1]})"
        return (
            f"Feeder3({self.name}: {self.n_bus} buses, {self.n_node} nodes, "
            f"{len(self.element_names)} elements ({self.n_line} lines, "
            f"{self.n_regulator} regulators), {len(self.load_names)} loads "
            f"= {float(np.sum(self.load_p_w)) / 1e3:.1f} kW + "
            f"{float(np.sum(self.load_q_var)) / 1e3:.1f} kvar, source "
            f"{float(self.source_kv):g} kV)"
        )

    def summary(self) -> str:
        """Bus, load, regulator, element (transformers, capacitors) and line tables, as a
        power engineer would print them."""
        phases = "abc"
        bus_nodes = np.asarray(self.bus_nodes)
        vbase = np.asarray(self.vbase_v)
        rows = [repr(self), "", "bus            phases   kV_LN"]
        for b, name in enumerate(self.bus_names):
            present = [k for k in range(3) if bus_nodes[b, k] >= 0]
            kv = vbase[bus_nodes[b, present[0]]] / 1e3 if present else 0.0
            rows.append(f"{name:<14s} {''.join(phases[k] for k in present):<8s} {kv:7.4f}")
        rows += ["", "load           nodes              conn   model     kW/ph  kvar/ph   kV"]
        node_names = (*self.node_names, "ground")
        for k in range(self.n_load_phase):
            zip_p = np.asarray(self.load_zip_p[k])
            model = "ZIP" if np.count_nonzero(zip_p) > 1 else ZIP_NAMES[int(np.argmax(zip_p))]
            if model == "P" and float(self.load_p_exp[k]) != 0.0:
                model = "CVR"
            rows.append(
                f"{self.load_names[int(self.load_id[k])]:<14s} "
                f"{node_names[int(self.load_node_from[k])] + '-' + node_names[int(self.load_node_to[k])]:<18s} "
                f"{'delta' if bool(self.load_delta[k]) else 'wye':<6s} {model:<5s}"
                f" {float(self.load_p_w[k]) / 1e3:9.2f} {float(self.load_q_var[k]) / 1e3:8.2f}"
                f" {float(self.load_vbase_v[k]) / 1e3:5.3f}"
            )
        rows += ["", "regulator      element              tap_pu"]
        for r, name in enumerate(self.regulator_names):
            rows.append(
                f"{name:<14s} {self.element_names[int(self.reg_elem[r])]:<20s}"
                f" {float(self.tap_pu[r]):.5f}"
            )
        rows += ["", "element                  nodes"]
        lines = set(np.asarray(self.line_elem).tolist())
        for e, name in enumerate(self.element_names):
            if e not in lines:
                nodes = [
                    node_names[int(i)] for i in np.asarray(self.elem_nodes[e]) if i < self.n_node
                ]
                rows.append(f"{name:<24s} {' '.join(nodes)}")
        rows += ["", "line                     phases  normamps_A"]
        for k in range(self.n_line):
            present = [p for p in range(3) if int(self.line_cond[k, p]) >= 0]
            rows.append(
                f"{self.element_names[int(self.line_elem[k])]:<24s} "
                f"{''.join(phases[p] for p in present):<7s} {float(self.line_normamps_a[k]):10.1f}"
            )
        return "\n".join(rows)


def check_feeder3(feeder: Feeder3) -> None:
    """Refuse a feeder whose params cannot reach a compiled solve (on the host).

    Raises:
        ValueError: naming the leaf that is not finite, a non-positive tap, voltage
            base or rating, or load voltage limits out of order.
    """
    for field in (
        "vbase_v",
        "elem_g_s",
        "elem_b_s",
        "reg_g0_s",
        "reg_b0_s",
        "tap_pu",
        "line_normamps_a",
        "load_p_w",
        "load_q_var",
        "load_vbase_v",
        "load_vminpu",
        "load_vmaxpu",
        "load_vlowpu",
        "load_zip_p",
        "load_zip_q",
        "load_p_exp",
        "load_q_exp",
        "source_g_s",
        "source_b_s",
        "source_kv",
        "source_vm_pu",
        "source_angle_deg",
    ):
        value = np.asarray(getattr(feeder, field), dtype=np.float64)
        if not np.all(np.isfinite(value)):
            raise ValueError(f"Feeder3.{field} has non-finite entries")
    for field in ("vbase_v", "tap_pu", "line_normamps_a", "load_vbase_v", "source_kv"):
        if np.any(np.asarray(getattr(feeder, field)) <= 0):
            raise ValueError(f"Feeder3.{field} must be positive")
    low, vmin, vmax = (
        np.asarray(feeder.load_vlowpu),
        np.asarray(feeder.load_vminpu),
        np.asarray(feeder.load_vmaxpu),
    )
    bad = np.flatnonzero(~((0 < low) & (low < vmin) & (vmin < vmax)))
    if bad.size:
        names = sorted({feeder.load_names[int(feeder.load_id[k])] for k in bad})
        raise ValueError(
            f"loads {names}: need 0 < vlowpu < vminpu < vmaxpu (Feeder3.load_vlowpu, "
            "load_vminpu, load_vmaxpu)"
        )
