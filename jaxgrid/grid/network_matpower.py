"""Read MATPOWER case files (format version 2) into a meshed :class:`Network`.

The same file reader as the radial feeders (:func:`~jaxgrid.grid.matpower.load_case`, so
a case's own MATLAB unit conversions run too), another model: every bus, branch and
generator of the file, in its row order, out-of-service ones included with their
status. MATPOWER's conventions are applied as MATPOWER applies them: a tap ratio of 0
means 1, a RATE_A of 0 means no limit, an angle-difference limit of 0 or at or beyond
±360° means none (MATPOWER's ``makeAang``). ``mpc.gencost`` gives each generator a
polynomial cost of degree at most 2 or a piecewise-linear one; rows beyond the first
``n_gen`` (reactive power costs) are not read.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import jax
import numpy as np

from jaxgrid.grid.matpower import _bus_numbers, load_case
from jaxgrid.grid.network import ISOLATED, PIECEWISE_LINEAR, POLYNOMIAL, REF, Network

TRANSMISSION_CASES = (
    "case5",
    "case9",
    "case14",
    "case30",
    "case39",
    "case57",
    "case118",
    "case300",
    "case_ACTIVSg200",
    "case1354pegase",
)


def network_from_matpower(path) -> Network:
    """A :class:`Network` from a MATPOWER case file, or the bundled case of that name
    (:data:`TRANSMISSION_CASES`: MATPOWER's own files, licence beside them).

    Raises:
        ValueError: the file cannot be run, or a table refers to a bus that does not
            exist, repeats a bus number, has no slack bus, or gives a generator cost that
            is neither a polynomial of degree <= 2 nor piecewise linear — naming the
            table and row.
    """
    if str(path) in TRANSMISSION_CASES:
        return _bundled(str(path), bool(jax.config.jax_enable_x64))
    return _read(Path(path))


@functools.cache
def _bundled(name: str, x64: bool) -> Network:
    """The bundled case, read once per precision: jax 0.10 caches the conversion of a
    closed-over NumPy array by the array object, so the same arrays traced under
    ``jax.enable_x64`` and then without gave float64 constants inside float32 programs
    that failed to lower."""
    folder = resources.files("jaxgrid.grid") / "cases" / "transmission"
    with resources.as_file(folder / f"{name}.m") as path:
        return _read(path)


def _read(path: Path) -> Network:
    mpc = load_case(path)
    bus = np.atleast_2d(np.asarray(mpc["bus"], float))
    branch = np.atleast_2d(np.asarray(mpc["branch"], float))
    gen = np.atleast_2d(np.asarray(mpc.get("gen", np.zeros((0, 21))), float))
    if bus.shape[1] < 13 or branch.shape[1] < 11 or (len(gen) and gen.shape[1] < 10):
        raise ValueError(f"{path}: mpc.bus needs 13 columns, mpc.branch 11 and mpc.gen 10")
    for name, table, limits in (
        ("mpc.bus", bus, [11, 12]),  # VMAX, VMIN
        ("mpc.branch", branch, [5, 6, 7]),  # RATE_A, RATE_B, RATE_C
        ("mpc.gen", gen, [3, 4, 8, 9]),  # QMAX, QMIN, PMAX, PMIN
    ):
        bad = np.isnan(table)
        bad[:, [c for c in range(table.shape[1]) if c not in limits]] |= np.isinf(
            table[:, [c for c in range(table.shape[1]) if c not in limits]]
        )
        if np.any(bad):
            row, col = np.argwhere(bad)[0]
            raise ValueError(
                f"{path}: {name} row {row + 1} column {col + 1} is {table[row, col]} "
                "(only limits may be infinite)"
            )
    bus_ids = _bus_numbers(path, "mpc.bus", "BUS_I", bus[:, 0])
    unique, counts = np.unique(bus_ids, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"{path}: mpc.bus repeats bus numbers {unique[counts > 1].tolist()}")
    index = {int(b): i for i, b in enumerate(bus_ids)}

    def bus_index(table: str, column: str, values) -> np.ndarray:
        numbers = _bus_numbers(path, table, column, values)
        missing = [r for r, b in enumerate(numbers) if int(b) not in index]
        if missing:
            r = missing[0]
            raise ValueError(
                f"{path}: {table} row {r + 1}: {column} = {int(numbers[r])} is not a bus of mpc.bus"
            )
        return np.array([index[int(b)] for b in numbers], np.int32)

    bus_type = bus[:, 1].astype(np.int32)
    unknown = np.flatnonzero(~np.isin(bus_type, [1, 2, 3, 4]))
    if unknown.size:
        r = int(unknown[0])
        raise ValueError(f"{path}: mpc.bus row {r + 1}: BUS_TYPE = {bus[r, 1]:g} (expected 1-4)")
    if not np.any(bus_type == REF):
        raise ValueError(f"{path}: no slack bus (BUS_TYPE 3) in mpc.bus")

    n_gen = len(gen)
    gen_bus = bus_index("mpc.gen", "GEN_BUS", gen[:, 0]) if n_gen else np.zeros(0, np.int32)
    model, poly, pwl_mw, pwl_cost, startup, shutdown = _costs(path, mpc, n_gen)

    ratio = np.where(branch[:, 8] == 0, 1.0, branch[:, 8])
    rate = np.where(branch[:, 5] == 0, np.inf, branch[:, 5])
    if branch.shape[1] >= 13:
        angmin = np.where((branch[:, 11] <= -360) | (branch[:, 11] == 0), -np.inf, branch[:, 11])
        angmax = np.where((branch[:, 12] >= 360) | (branch[:, 12] == 0), np.inf, branch[:, 12])
    else:
        angmin, angmax = np.full(len(branch), -np.inf), np.full(len(branch), np.inf)
    f64 = functools.partial(np.asarray, dtype=np.float64)
    return Network(
        base_mva=f64(float(np.asarray(mpc["baseMVA"]))),
        bus_ids=bus_ids.astype(np.int32),
        bus_type=bus_type,
        base_kv=f64(bus[:, 9]),
        pd_mw=f64(bus[:, 2]),
        qd_mvar=f64(bus[:, 3]),
        gs_mw=f64(bus[:, 4]),
        bs_mvar=f64(bus[:, 5]),
        vm_pu=f64(bus[:, 7]),
        va_deg=f64(bus[:, 8]),
        vmin_pu=f64(bus[:, 12]),
        vmax_pu=f64(bus[:, 11]),
        branch_from=bus_index("mpc.branch", "F_BUS", branch[:, 0]),
        branch_to=bus_index("mpc.branch", "T_BUS", branch[:, 1]),
        r_pu=f64(branch[:, 2]),
        x_pu=f64(branch[:, 3]),
        b_pu=f64(branch[:, 4]),
        rate_mva=f64(rate),
        tap=f64(ratio),
        shift_deg=f64(branch[:, 9]),
        branch_in_service=branch[:, 10] > 0,
        angmin_deg=f64(angmin),
        angmax_deg=f64(angmax),
        gen_bus=gen_bus,
        pg_mw=f64(gen[:, 1]),
        qg_mvar=f64(gen[:, 2]),
        pmin_mw=f64(gen[:, 9]),
        pmax_mw=f64(gen[:, 8]),
        qmin_mvar=f64(gen[:, 4]),
        qmax_mvar=f64(gen[:, 3]),
        vg_pu=f64(gen[:, 5]),
        gen_in_service=(gen[:, 7] > 0) & (bus_type[gen_bus] != ISOLATED),
        cost_model=model,
        cost_poly=poly,
        cost_pwl_mw=pwl_mw,
        cost_pwl_cost=pwl_cost,
        startup_cost=startup,
        shutdown_cost=shutdown,
    )


def _costs(path, mpc: dict, n_gen: int):
    """``(model, poly, pwl_mw, pwl_cost, startup, shutdown)`` from ``mpc.gencost`` (all
    generators free of cost where the file has none)."""
    if "gencost" not in mpc:
        zeros = np.zeros(n_gen)
        return (
            np.full(n_gen, POLYNOMIAL, np.int32),
            np.zeros((n_gen, 3)),
            np.zeros((n_gen, 2)),
            np.zeros((n_gen, 2)),
            zeros,
            zeros,
        )
    cost = np.atleast_2d(np.asarray(mpc["gencost"], float))
    if len(cost) < n_gen:
        raise ValueError(f"{path}: mpc.gencost has {len(cost)} rows for {n_gen} generators")
    cost = cost[:n_gen]
    model = cost[:, 0].astype(np.int32)
    count = cost[:, 3].astype(int)
    n_points = max([2, *count[model == PIECEWISE_LINEAR]])
    poly = np.zeros((n_gen, 3))
    pwl_mw = np.zeros((n_gen, n_points))
    pwl_cost = np.zeros((n_gen, n_points))
    for g in range(n_gen):
        n = count[g]
        if model[g] == POLYNOMIAL:
            coeffs = cost[g, 4 : 4 + n]
            if n > 3 and np.any(coeffs[: n - 3] != 0):
                raise ValueError(
                    f"{path}: mpc.gencost row {g + 1}: a polynomial cost of degree {n - 1}; "
                    "degree 2 at most is supported"
                )
            if len(coeffs) < n:
                raise ValueError(f"{path}: mpc.gencost row {g + 1}: NCOST = {n} but fewer values")
            poly[g, 3 - min(n, 3) :] = coeffs[-3:] if n >= 3 else coeffs
        elif model[g] == PIECEWISE_LINEAR:
            points = cost[g, 4 : 4 + 2 * n].reshape(n, 2) if n >= 2 else None
            if points is None or np.any(np.diff(points[:, 0]) <= 0):
                raise ValueError(
                    f"{path}: mpc.gencost row {g + 1}: a piecewise-linear cost needs at "
                    "least 2 points with increasing MW"
                )
            pwl_mw[g, :n], pwl_cost[g, :n] = points[:, 0], points[:, 1]
            pwl_mw[g, n:], pwl_cost[g, n:] = points[-1, 0], points[-1, 1]
        else:
            raise ValueError(
                f"{path}: mpc.gencost row {g + 1}: MODEL = {cost[g, 0]:g} (expected 1 piecewise "
                "linear or 2 polynomial)"
            )
    return model, poly, pwl_mw, pwl_cost, cost[:, 1].copy(), cost[:, 2].copy()
