"""The ``Feeder``: a radial distribution network as a pytree of plain arrays.

Buses keep the order of the source data (the rows of ``mpc.bus``, the index of
``net.bus``); ``bus_ids`` keeps their original numbers. Branches keep the order of the
in-service source branches and are oriented away from the slack (``branch_from`` is
upstream). Impedances are per unit on ``base_mva`` and each bus's ``base_kv``.

Every field is an array leaf, so feeders of equal size stack and ``vmap``; scenarios may
``replace`` impedances, loads, limits and ratings. The topology fields (``parent``,
``branch_from``, ``branch_to``, ``path``, ``levels``) come from :func:`from_branch_table`
and must not be edited by hand; feeders stack only when their topologies have the same
depth and width.
"""

from __future__ import annotations

import numpy as np
from flax import struct

from jaxgrid.grid.topology import radial_tree
from jaxgrid.types import Array


@struct.dataclass
class Feeder:
    """A radial feeder (see the module docstring).

    Attributes:
        bus_ids: ``(n_bus,)`` original bus numbers.
        slack: ``()`` index of the slack (substation) bus.
        parent: ``(n_bus,)`` upstream bus, -1 at the slack.
        branch_ids: ``(n_branch,)`` source row (MATPOWER) or line index (pandapower).
        branch_from, branch_to: ``(n_branch,)`` upstream and downstream bus of each branch.
        path: ``(n_branch, n_bus)`` 1 where branch ``k`` is on the path slack -> bus ``j``.
        levels: ``(depth, width)`` int32 branches by depth from the slack (row ``d``: those
            ``d + 1`` branches away), padded with ``n_branch``; the order of Newton's
            elimination in :func:`~jaxgrid.grid.distflow`.
        r_pu, x_pu: ``(n_branch,)`` series resistance and reactance, pu.
        b_pu: ``(n_branch,)`` total line charging susceptance, pu (half at each end).
        rate_mva: ``(n_branch,)`` thermal rating, MVA (``inf`` where the data has none).
        base_mva: ``()`` system base power, MVA.
        base_kv: ``(n_bus,)`` base voltage, kV (line-to-line).
        vm_slack_pu: ``()`` slack voltage magnitude, pu.
        p_load_mw, q_load_mvar: ``(n_bus,)`` base loads, MW and Mvar (negative = generation).
        gs_mw, bs_mvar: ``(n_bus,)`` shunt conductance (MW consumed) and susceptance
            (Mvar injected) at 1 pu voltage.
        vmin_pu, vmax_pu: ``(n_bus,)`` voltage limits, pu.
    """

    bus_ids: Array
    slack: Array
    parent: Array
    branch_ids: Array
    branch_from: Array
    branch_to: Array
    path: Array
    levels: Array
    r_pu: Array
    x_pu: Array
    b_pu: Array
    rate_mva: Array
    base_mva: Array
    base_kv: Array
    vm_slack_pu: Array
    p_load_mw: Array
    q_load_mvar: Array
    gs_mw: Array
    bs_mvar: Array
    vmin_pu: Array
    vmax_pu: Array

    @property
    def n_bus(self) -> int:
        return self.parent.shape[-1]

    @property
    def n_branch(self) -> int:
        return self.r_pu.shape[-1]

    def bus_index(self, bus_numbers) -> np.ndarray:
        """``(k,)`` int32 indices of ``bus_numbers`` (the data's own numbers, ``bus_ids``);
        each must be a bus of the feeder, and appear once."""
        ids = [int(b) for b in np.asarray(self.bus_ids)]
        index = {b: i for i, b in enumerate(ids)}
        numbers = [int(b) for b in bus_numbers]
        missing = [b for b in numbers if b not in index]
        if missing:
            raise ValueError(
                f"buses {missing} are not in the feeder (its buses: {ids[0]}..{ids[-1]})"
            )
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"buses {numbers} repeat a bus")
        return np.array([index[b] for b in numbers], np.int32)

    def device_buses(self, bus_numbers) -> np.ndarray:
        """:meth:`bus_index` of devices' buses, which are never the substation."""
        at = self.bus_index(bus_numbers)
        if np.any(at == int(self.slack)):
            slack = int(np.asarray(self.bus_ids)[int(self.slack)])
            raise ValueError(f"bus {slack} is the substation; devices go elsewhere")
        return at

    def __repr__(self) -> str:
        if np.ndim(self.parent) != 1:
            return f"Feeder(batch of {np.shape(self.parent)[:-1]}, n_bus={self.n_bus})"
        return (
            f"Feeder(n_bus={self.n_bus}, n_branch={self.n_branch}, "
            f"slack=bus {int(np.asarray(self.bus_ids)[int(self.slack)])}, "
            f"base={float(self.base_mva):g} MVA / {float(np.max(self.base_kv)):g} kV, "
            f"load={float(np.sum(self.p_load_mw)):.4g} MW + {float(np.sum(self.q_load_mvar)):.4g} Mvar)"
        )

    def summary(self) -> str:
        """The bus and branch tables, as a power engineer would print them."""
        bus_ids = np.asarray(self.bus_ids)
        lines = [repr(self), "", "bus   base_kv   p_load_mw  q_load_mvar   vmin   vmax"]
        for i in range(self.n_bus):
            lines.append(
                f"{bus_ids[i]:<5d} {float(self.base_kv[i]):7.3f} {float(self.p_load_mw[i]):11.4f}"
                f" {float(self.q_load_mvar[i]):12.4f} {float(self.vmin_pu[i]):6.3f}"
                f" {float(self.vmax_pu[i]):6.3f}"
            )
        lines += ["", "branch  from    to        r_pu        x_pu   rate_mva"]
        for k in range(self.n_branch):
            lines.append(
                f"{int(self.branch_ids[k]):<7d} {bus_ids[self.branch_from[k]]:<7d}"
                f"{bus_ids[self.branch_to[k]]:<7d} {float(self.r_pu[k]):10.6f}"
                f"  {float(self.x_pu[k]):10.6f} {float(self.rate_mva[k]):10.4g}"
            )
        return "\n".join(lines)


def _per(value, n: int, name: str, default: float) -> np.ndarray:
    """``value`` as a finite float64 array of length ``n`` (a scalar broadcasts)."""
    arr = np.full(n, default, dtype=np.float64) if value is None else np.asarray(value, float)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr


def from_branch_table(
    *,
    from_bus,
    to_bus,
    r_pu,
    x_pu,
    base_mva: float,
    base_kv,
    n_bus: int | None = None,
    bus_ids=None,
    branch_ids=None,
    slack: int = 0,
    in_service=None,
    b_pu=None,
    rate_mva=None,
    p_load_mw=None,
    q_load_mvar=None,
    gs_mw=None,
    bs_mvar=None,
    vm_slack_pu: float = 1.0,
    vmin_pu=0.95,
    vmax_pu=1.05,
) -> Feeder:
    """Build a :class:`Feeder` from a branch table.

    ``from_bus``/``to_bus`` are bus numbers from ``bus_ids`` when it is given, else
    0-based bus indices. ``slack`` is a bus index. Out-of-service branches
    (``in_service`` False) are left out; the rest must form a tree rooted at the slack.
    ``rate_mva`` of 0 or ``inf`` means no rating.

    Raises:
        ValueError: naming the bad value, bus or branch (NaN, negative resistance, vmin
            above vmax, a meshed, disconnected or empty network, ...).
    """
    if n_bus is None:
        if bus_ids is None:
            raise ValueError("give n_bus or bus_ids")
        n_bus = len(bus_ids)
    bus_ids = np.arange(n_bus) if bus_ids is None else np.asarray(bus_ids, dtype=np.int64)
    if bus_ids.shape != (n_bus,) or len(np.unique(bus_ids)) != n_bus:
        raise ValueError(f"bus_ids must be {n_bus} distinct numbers")
    from_bus = np.asarray(from_bus, dtype=np.int64)
    to_bus = np.asarray(to_bus, dtype=np.int64)
    n_all = len(from_bus)
    branch_ids = np.arange(n_all) if branch_ids is None else np.asarray(branch_ids, np.int64)
    r_all = _per(r_pu, n_all, "r_pu", 0.0)
    x_all = _per(x_pu, n_all, "x_pu", 0.0)
    b_all = _per(b_pu, n_all, "b_pu", 0.0)
    rate_all = _per(rate_mva, n_all, "rate_mva", np.inf)
    live = np.ones(n_all, bool) if in_service is None else np.asarray(in_service, bool)
    if live.shape != (n_all,) or to_bus.shape != (n_all,) or branch_ids.shape != (n_all,):
        raise ValueError(
            "from_bus, to_bus, branch_ids and in_service must have one entry per branch"
        )

    index_of = {int(b): i for i, b in enumerate(bus_ids)}
    unknown = sorted(
        {int(b) for b in np.concatenate([from_bus[live], to_bus[live]])} - set(index_of)
    )
    if unknown:
        raise ValueError(f"branches refer to buses that do not exist: {unknown[:20]}")
    f_idx = np.array([index_of[int(b)] for b in from_bus[live]], dtype=np.int64)
    t_idx = np.array([index_of[int(b)] for b in to_bus[live]], dtype=np.int64)
    labels = [
        f"{int(i)} ({int(f)}-{int(t)})"
        for i, f, t in zip(branch_ids[live], from_bus[live], to_bus[live])
    ]

    r, x, b, rate = r_all[live], x_all[live], b_all[live], rate_all[live]
    for name, arr in (("r_pu", r), ("x_pu", x), ("b_pu", b)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{name} is not finite on branches {[labels[i] for i in bad[:20]]}")
    neg = np.flatnonzero(r < 0)
    if neg.size:
        raise ValueError(f"r_pu is negative on branches {[labels[i] for i in neg[:20]]}")
    rate = np.where((rate <= 0) | np.isnan(rate), np.inf, rate)

    tree = radial_tree(n_bus, f_idx, t_idx, slack, bus_labels=bus_ids, branch_labels=labels)

    bus_arrays = {}
    for name, value, default in (
        ("base_kv", base_kv, None),
        ("p_load_mw", p_load_mw, 0.0),
        ("q_load_mvar", q_load_mvar, 0.0),
        ("gs_mw", gs_mw, 0.0),
        ("bs_mvar", bs_mvar, 0.0),
        ("vmin_pu", vmin_pu, None),
        ("vmax_pu", vmax_pu, None),
    ):
        arr = _per(value, n_bus, name, default)
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{name} is not finite at buses {bus_ids[bad][:20].tolist()}")
        bus_arrays[name] = arr
    inverted = np.flatnonzero(bus_arrays["vmin_pu"] > bus_arrays["vmax_pu"])
    if inverted.size:
        raise ValueError(f"vmin_pu is above vmax_pu at buses {bus_ids[inverted][:20].tolist()}")
    if np.any(bus_arrays["base_kv"] <= 0):
        raise ValueError(f"base_kv must be > 0, got {bus_arrays['base_kv'].min()}")
    if not np.isfinite(base_mva) or base_mva <= 0:
        raise ValueError(f"base_mva must be a positive number, got {base_mva}")
    if not np.isfinite(vm_slack_pu) or vm_slack_pu <= 0:
        raise ValueError(f"vm_slack_pu must be a positive number, got {vm_slack_pu}")

    return Feeder(
        bus_ids=bus_ids,
        slack=np.int32(slack),
        parent=tree.parent,
        branch_ids=branch_ids[live],
        branch_from=tree.branch_from,
        branch_to=tree.branch_to,
        path=tree.path,
        levels=tree.levels,
        r_pu=r,
        x_pu=x,
        b_pu=b,
        rate_mva=rate,
        base_mva=np.float64(base_mva),
        vm_slack_pu=np.float64(vm_slack_pu),
        **bus_arrays,
    )
