"""Reference bidding policies: ``policy(key, obs) -> action`` on observations ``(n, 11)``.

PowerZooJax's GenCos task compares learners with three fixed strategies: truthful
bidding, a uniform mid markup and the maximum markup. Each is a constant action, the
share of the markup range every company bids (:class:`~jaxgrid.envs.gencos.GenCos`
builds them for its params in ``env.baselines(params)``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def constant_share(share):
    """Every company bids the fixed share ``share`` ``(n,)`` of its markup range, whatever
    it observes."""
    action = np.asarray(share, np.float64).reshape(-1, 1)

    def policy(key, obs):
        return jnp.asarray(action.astype(obs.dtype))  # a new constant in each precision

    return policy
