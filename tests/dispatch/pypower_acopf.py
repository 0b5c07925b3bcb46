"""PYPOWER's AC-OPF (the solver inside pandapower's ``runopp``) on a MATPOWER file's own
tables: the reference of ``tests/dispatch/test_acopf.py`` (whose docstring says why these
tables and not a converted net, and why the two workarounds below change nothing) and of
``benchmarks/transmission_acopf.py``."""

import warnings

import numpy as np
import pandapower.pypower.idx_brch as idx_brch
import pandapower.pypower.idx_bus as idx_bus
import pandapower.pypower.idx_gen as idx_gen
import scipy.sparse
from pandapower.pypower.opf import opf
from pandapower.pypower.ppoption import ppoption

from jaxgrid.grid.matpower import load_case

if not hasattr(scipy.sparse.csr_matrix, "H"):  # PYPOWER's d2Sbr_dV2 still uses it
    scipy.sparse.csr_matrix.H = property(lambda m: m.conj().T)


def matpower_tables(path) -> dict:
    """PYPOWER's case dict of a MATPOWER file: every row, buses renumbered 0..n-1 in row
    order, PYPOWER's column counts, generator costs of the generators only."""
    mpc = load_case(path)
    raw = {k: np.atleast_2d(np.asarray(mpc[k], float)) for k in ("bus", "branch", "gen")}
    bus = np.zeros((len(raw["bus"]), idx_bus.bus_cols))
    bus[:, :13] = raw["bus"][:, :13]
    branch = np.zeros((len(raw["branch"]), idx_brch.branch_cols))
    branch[:, :13] = raw["branch"][:, :13]
    gen = np.zeros((len(raw["gen"]), idx_gen.gen_cols))
    gen[:, :21] = raw["gen"][:, :21]
    row = {int(b): i for i, b in enumerate(bus[:, 0])}
    bus[:, 0] = np.arange(len(bus))
    for table, col in ((branch, 0), (branch, 1), (gen, 0)):
        table[:, col] = [row[int(b)] for b in table[:, col]]
    gencost = np.asarray(mpc["gencost"], float)[: len(gen)]
    return {
        "baseMVA": float(mpc["baseMVA"]),
        "bus": bus,
        "branch": branch,
        "gen": gen,
        "gencost": gencost,
    }


def pypower_opf(tables: dict, tol: float = 1e-9) -> dict:
    """PYPOWER's AC-OPF of ``tables`` (out-of-service branches and generators left out, as
    its ``ext2int`` would), with every generator's and branch's result put back in its
    row (0 where out of service)."""
    gen_on = tables["gen"][:, idx_gen.GEN_STATUS] > 0
    branch_on = tables["branch"][:, idx_brch.BR_STATUS] > 0
    ppc = {
        "baseMVA": tables["baseMVA"],
        "bus": tables["bus"].copy(),
        "branch": tables["branch"][branch_on].copy(),
        "gen": tables["gen"][gen_on].copy(),
        "gencost": tables["gencost"][gen_on].copy(),
        "version": "2",
    }
    options = ppoption(VERBOSE=0, OUT_ALL=0)
    options["INIT"] = "flat"  # pandapower's OPF entry point sets it; MATPOWER's start
    options = ppoption(
        options, PDIPM_FEASTOL=tol, PDIPM_GRADTOL=tol, PDIPM_COMPTOL=tol, PDIPM_COSTTOL=tol
    )
    rate = ppc["branch"][:, idx_brch.RATE_A]
    if not np.any((rate != 0) & (rate < 1e10)):
        options["OPF_FLOW_LIM"] = 2  # no flow limits: the path with the empty-set guard
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = opf(ppc, options)
    gen = np.zeros((len(gen_on), res["gen"].shape[1]))
    gen[gen_on] = res["gen"]
    branch = np.zeros((len(branch_on), res["branch"].shape[1]))
    branch[branch_on] = res["branch"]
    return {
        "success": bool(res["success"]),
        "f": float(res["f"]),
        "bus": res["bus"],
        "gen": gen,
        "branch": branch,
        "iterations": int(res["raw"]["output"]["iterations"]),
    }
