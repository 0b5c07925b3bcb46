"""The environment as the continuous-action learners (SAC, APG) see it.

Both wrap the user's environment the same way (one centralised agent when asked, the
episode log), refuse actions that are not a ``Box`` with the algorithm's reason, flatten
each agent's features to a vector and number the agent types for the typed networks;
:func:`box_setup` does it once for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from jaxgrid import spaces
from jaxgrid.env import Environment
from jaxgrid.train.ppo import _split_obs
from jaxgrid.validation import validate_params
from jaxgrid.wrappers import CentralisedWrapper, LogWrapper


class BoxSetup(NamedTuple):
    """Attributes:
    user_env: the environment as given (the policy acts on its observations).
    env: the wrapped environment the learner steps.
    default_params: the params trained on (validated).
    space: the ``Box`` action space of ``env``, ``(agents, act_dim)``.
    split_obs: each agent's features of an observation as ``(..., agents, obs_dim)``.
    agent_type: the type index of each agent, for :class:`~.networks.TypedMLP`.
    """

    user_env: Environment
    env: Environment
    default_params: Any
    space: spaces.Box
    split_obs: Callable
    agent_type: tuple[int, ...]


def box_setup(env: Environment, params: Any, centralise: bool, refusal: str) -> BoxSetup:
    """``env`` wrapped for a continuous-action learner (centralised to one agent when
    ``centralise`` and it has several).

    Raises:
        ValueError: its actions are not a ``Box``: ``refusal`` (the algorithm's reason,
            e.g. ``"SAC needs continuous (Box) actions"``), then what the environment has.
    """
    user_env = env
    if centralise and env.num_agents > 1:
        env = CentralisedWrapper(env)
    env = LogWrapper(env)
    default_params = env.default_params() if params is None else params
    validate_params(user_env, default_params)
    space = env.action_space(default_params)
    if not isinstance(space, spaces.Box):
        raise ValueError(
            f"{refusal}; {user_env.name} has {space} (train it with --algo ppo or ippo)"
        )
    obs_space = env.observation_space(default_params)
    if isinstance(obs_space, spaces.Dict):
        obs_space = obs_space["observation"]
    feature_ndim = len(obs_space.shape) - 1

    def split_obs(obs):
        """Each agent's features as a vector ``(..., agents, obs_dim)``."""
        features, _ = _split_obs(obs)
        if feature_ndim > 1:
            features = features.reshape(features.shape[: features.ndim - feature_ndim] + (-1,))
        return features

    type_names = sorted(set(env.agent_types), key=env.agent_types.index)
    agent_type = tuple(type_names.index(t) for t in env.agent_types)
    return BoxSetup(user_env, env, default_params, space, split_obs, agent_type)
