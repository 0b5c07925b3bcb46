"""The library's default precision applied to params trees."""

import jax
import jax.numpy as jnp
import numpy as np
from conftest import x64

from jaxgrid.types import at_default_precision


def test_float_leaves_take_the_default_precision_and_others_keep_theirs():
    tree = {"profile": np.ones(3, np.float32), "rating": np.float64(2.5), "bus": np.arange(3)}
    with x64():
        wide = at_default_precision(tree)
        assert wide["profile"].dtype == wide["rating"].dtype == jnp.float64  # float32 data too
        assert jnp.issubdtype(wide["bus"].dtype, jnp.integer)
    narrow = at_default_precision(tree)
    assert narrow["profile"].dtype == narrow["rating"].dtype == jnp.float32
    assert all(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(narrow))
