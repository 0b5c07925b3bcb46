"""Residual actions: the agent's action is added to a baseline's action (residual RL).

A policy that learns a correction to a sound controller instead of the whole action
(residual policy learning: Silver et al. 2018, Johannink et al. 2019) starts where the
controller is and explores around it. Unit commitment needs it: a Gaussian policy that
starts at the middle of ``tso118-continuous-v0``'s box commits half the fleet at random
each step, and PowerZooJax trains its PPO on that task for 20 million steps, while a
correction of the priority list starts at the priority list's cost.

:class:`ResidualAction` wraps an environment with a Box action space: the agent's action
``a`` lies in ``[low - high, high - low]`` (every point of the box is reachable from every
baseline action), and the environment receives ``clip(baseline(obs) + a, low, high)``,
with ``obs`` the observation the agent acted on. The baselines of the wrapped
environment become residuals too: ``p(obs) - baseline(obs)`` for each of its baselines
``p``, so that the residual of ``baseline`` itself is 0 and, where ``baseline`` is
deterministic (it reads only the observation), every baseline plays as it did unwrapped (controllers that plan on the state are left out), and the wrapped
environment's perfect-foresight optimum is the wrapper's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid import spaces
from jaxgrid.wrappers.base import Wrapper


class ResidualAction(Wrapper):
    """``env`` whose action is a correction of its baseline ``baseline``'s action (see the
    module docstring).

    Args:
        env: an environment with a Box action space of finite bounds.
        params: the params whose baselines are read (the baseline policy is built from
            them once, as ``env.baselines(params)`` builds it).
        baseline: the name of one of ``env.baselines(params)``.
    """

    def __init__(self, env, params, baseline: str):
        super().__init__(env)
        space = env.action_space(params)
        if not isinstance(space, spaces.Box):
            raise ValueError(
                f"ResidualAction needs a Box action space; {env.name}'s is {type(space).__name__}"
            )
        low, high = space._bounds()
        if not (jnp.all(jnp.isfinite(low)) and jnp.all(jnp.isfinite(high))):
            raise ValueError(f"ResidualAction needs finite action bounds; {env.name}'s are not")
        known = Wrapper.baselines(self, params)
        if baseline not in known:
            raise ValueError(
                f"{env.name} has no baseline {baseline!r} to add residuals to; its "
                f"baselines are {sorted(known)}"
            )
        self.baseline = baseline
        self._base = known[baseline]

    def action_space(self, params):
        low, high = self.env.action_space(params)._bounds()
        return spaces.Box(low - high, high - low, low.shape, low.dtype)

    def transition(self, key, state, action, params):
        obs = self.env.observe(state, params)
        inner = self.env.action_space(params)
        low, high = inner._bounds()
        base = self._base(jax.random.fold_in(key, 1), obs)  # the step's own key stays as is
        total = jnp.clip(base + action, low, high).astype(inner.dtype)
        return self.env.transition(key, state, total, params)

    def oracle_return(self, params, state):
        """The wrapped environment's optimum: a correction reaches every one of its actions."""
        return self.env.oracle_return(params, state)

    def baselines(self, params):
        """Each baseline of the wrapped environment as its residual on ``baseline``."""
        inner = Wrapper.baselines(self, params)
        return {name: self._residual(policy) for name, policy in inner.items()}

    def _residual(self, policy):
        def residual(key, obs):
            return policy(key, obs) - self._base(key, obs)

        return residual
