"""Sweeps: many trainings in one compiled program, ``vmap``ped over seeds and scenarios.

A sweep trains ``seeds`` independent runs on each of ``len(scenarios)`` params pytrees (the
same structure, different leaves: feeders, price series, reward weightings...). Runners
and metrics carry two leading axes, ``(scenarios, seeds)``; sweep member
``scenario * seeds + seed`` is the ``member`` field of its runner and of its logged
metrics. Every scenario trains with the same seeds (common random numbers), so differences
between scenarios are not differences of luck.

Environments are split over the local devices inside each member
(:attr:`PPOConfig.shard_envs`); with ``shard_envs=False`` and several devices the seeds
axis is split over them instead (:meth:`Sweep.place`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxgrid.train.ppo import TrainFns, chunk_updates


def stack(trees: Sequence[Any]) -> Any:
    """Stack pytrees of one structure along a new leading axis."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def with_weights(env: Any, params: Any, weightings: Sequence[Sequence[float]]) -> list[Any]:
    """One copy of ``params`` per row of ``weightings`` (the weights of ``env``'s
    scalarisation, wherever the environment keeps it)."""
    sc = env.scalarisation(params)
    n = np.shape(sc.weights)[-1]
    out = []
    for w in weightings:
        w = np.asarray(w, np.float64)
        if w.shape != (n,):
            raise ValueError(f"a reward weighting needs {n} weights, got {w.tolist()}")
        if not np.all(np.isfinite(w)):
            raise ValueError(f"reward weights must be finite, got {w.tolist()}")
        weights = jnp.asarray(w, jax.dtypes.canonicalize_dtype(sc.weights.dtype))
        out.append(env.with_scalarisation(params, sc.replace(weights=weights)))
    return out


class Sweep:
    """``seeds`` runs of ``fns`` on each of ``scenarios`` (default: the env's default params)."""

    def __init__(self, fns: TrainFns, seeds: int = 1, scenarios: Sequence[Any] | None = None):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        self.fns, self.seeds = fns, seeds
        self.scenarios = list(scenarios) if scenarios else [fns.env.default_params()]
        self.params = stack(self.scenarios)  # leaves (scenarios, ...)
        self.members = len(self.scenarios) * seeds
        # ``first`` is traced: resuming or checkpointing in chunks reuses one program per chunk size
        self.compiled_updates = jax.jit(self._run_updates, static_argnums=1, donate_argnums=0)
        self.compiled_chunk = jax.jit(self._run_chunk, donate_argnums=0)
        self.init = jax.jit(self._init)

    def run_updates(self, runners, count: int, first=0):
        """``count`` updates of every member from update ``first``: ``(runners, metrics)``.

        ``first`` goes in as a strongly typed int32 and :meth:`init`'s runners are strongly
        typed like restored ones, so a resumed run (NumPy integers, arrays read from a
        checkpoint) and a fresh one share one compiled program per chunk size; before,
        a resumed run compiled the training program twice (7 s for the smallest run here).
        """
        return self.compiled_updates(runners, count, jnp.int32(first))

    def run_chunk(self, runners, count: int, logs: bool):
        """``count`` updates of every member in the one program of every chunk length:
        ``(runners, logged)``, ``logged`` the last update's metrics and the episodes since
        the last log, axes (scenarios, seeds) (:func:`jaxgrid.train.ppo.chunk_updates`;
        ``logs``: those episodes' sums start again from zero)."""
        return self.compiled_chunk(runners, jnp.int32(count), jnp.bool_(logs))

    def _run_chunk(self, runners, count, logs):
        return self._each_member(
            lambda r, params: chunk_updates(self.fns.update_step, r, params, count, logs), runners
        )

    def _init(self, key):
        return _strongly_typed(self._init_members(key))

    def _init_members(self, key):
        if self.members == 1:
            return _add_axes(self.fns.init(jax.random.split(key, 1)[0], self.scenarios[0], 0))
        keys = jax.random.split(key, self.seeds)
        seed_index = jnp.arange(self.seeds)

        # one member at a time (lax.map, not vmap): the networks' orthogonal initialisers
        # factorise (QR) by LAPACK, whose batched kernel waits for the XLA thread pool it
        # runs on; two of them batched over seeds at once held both threads of a 2-core
        # CPU and waited for each other for ever (5-seed runs hung before their first
        # update). Initialisation is cheap: nothing is lost by not batching it.
        def scenario(inputs):
            params, s = inputs
            return jax.lax.map(
                lambda kj: self.fns.init(kj[0], params, s * self.seeds + kj[1]), (keys, seed_index)
            )

        return jax.lax.map(scenario, (self.params, jnp.arange(len(self.scenarios))))

    def _run_updates(self, runners, count: int, first=0):
        return self._each_member(
            lambda r, params: self.fns.run_updates(r, params, count, first), runners
        )

    def _each_member(self, fn, runners):
        """``fn(runner, params) -> pytree`` of every member, axes (scenarios, seeds)."""
        if self.members == 1:  # no vmap: the rollout's conds stay conds
            runner = jax.tree_util.tree_map(lambda x: x[0, 0], runners)
            return _add_axes(fn(runner, self.scenarios[0]))
        return jax.vmap(lambda rs, params: jax.vmap(lambda r: fn(r, params))(rs))(
            runners, self.params
        )

    def train(self, key):
        """Every member's whole training: ``(runners, metrics)`` with axes (scenarios, seeds)."""
        return self.run_updates(self.place(self.init(key)), self.fns.config.num_updates, 0)

    def place(self, runners):
        """Split the seeds axis over the local devices when environments are not split;
        on one device, commit the runners to it, as a checkpoint restores them (``jit``
        keys its programs on whether arguments are committed: a resumed run compiled the
        training program again)."""
        devices = jax.devices()
        if len(devices) == 1:
            return jax.device_put(runners, devices[0])
        if self.fns.config.shard_envs or self.seeds % len(devices):
            return runners
        sharding = NamedSharding(Mesh(devices, ("seeds",)), PartitionSpec(None, "seeds"))
        return jax.device_put(runners, sharding)


def _strongly_typed(tree):
    """Every leaf of ``tree`` strongly typed (a Python number in an initial state, such as
    flax's ``TrainState.step``, is weakly typed; a checkpoint restores it strongly typed)."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, x.dtype), tree)


def _add_axes(tree):
    """A lone member's pytree with the sweep's (scenarios, seeds) axes of size 1."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None, None], tree)
