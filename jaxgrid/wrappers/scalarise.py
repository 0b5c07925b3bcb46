"""A fixed scalarisation of the reward vector, whatever the params say."""

from __future__ import annotations

from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.wrappers.base import Wrapper


class ScalariseReward(Wrapper):
    """The reward is ``method`` (``"weighted_sum"``, ``"min"``, ``"product"``, ``"single"``)
    of the objectives with ``weights`` (one per objective of ``env.objective_names``);
    the reward vector in ``info`` is unchanged. To sweep weightings in one compiled run,
    vary ``params.scalarisation`` instead (:func:`jaxgrid.train.sweep.with_weights`)."""

    def __init__(self, env, weights, method: str = "weighted_sum"):
        super().__init__(env)
        weights = [float(w) for w in weights]
        if len(weights) != len(env.objective_names):
            raise ValueError(
                f"{env.name}: {len(weights)} weights for {len(env.objective_names)} objectives "
                f"{list(env.objective_names)}"
            )
        self._scalarisation = Scalarisation.create(len(weights), method, weights)

    def scalarisation(self, params):
        return self._scalarisation
