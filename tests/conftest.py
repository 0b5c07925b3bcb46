"""Shared helpers for the test suite."""

from __future__ import annotations

import contextlib
import warnings

import jax
import numpy as np
import pytest


@contextlib.contextmanager
def x64():
    """Run the block with ``jax_enable_x64`` on (float64 by default)."""
    if hasattr(jax, "enable_x64"):
        with jax.enable_x64(True):
            yield
    else:  # jax < 0.6
        from jax.experimental import enable_x64

        with enable_x64():
            yield


@pytest.fixture
def float64():
    with x64():
        yield


def run_ac(net):
    """pandapower's Newton-Raphson AC power flow, solved tightly; returns the net."""
    pp = pytest.importorskip("pandapower")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.runpp(net, tolerance_mva=1e-9, numba=False, max_iteration=50)
    return net


def assert_tree_finite(tree, what: str = "tree"):
    for leaf in jax.tree_util.tree_leaves(tree):
        arr = np.asarray(leaf)
        if np.issubdtype(arr.dtype, np.floating):
            assert np.all(np.isfinite(arr)), f"{what} has non-finite values"
