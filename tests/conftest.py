"""Shared helpers for the test suite."""

from __future__ import annotations

import contextlib
import getpass
import os
import tempfile
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

# One persistent compilation cache for every test worker (and the notebooks and
# subprocesses they start): environments and variants of equal shapes compile to the same
# programs. Keyed by the program, JAX version and flags, so it is never stale.
_CACHE = Path(tempfile.gettempdir()) / f"jaxgrid-test-jax-cache-{getpass.getuser()}"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update(
    "jax_persistent_cache_min_compile_time_secs",
    float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
)


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
