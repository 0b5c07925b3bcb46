"""Proximal policy optimisation in one compiled program (after PureJaxRL).

``make_train(config, env, params)`` returns :class:`TrainFns`; ``train(key)`` runs the
whole training — rollouts, advantage estimation, minibatch updates — in one
``lax.scan`` and is jittable and vmappable over keys (seeds) and over ``params`` (scenarios,
reward weightings). The functions below read in the order they run:

1. ``init``: networks, optimiser, environments (with ``stagger_starts``, each advanced a
   random number of steps into its episode), normalisation statistics;
2. ``env_step``: act in every environment (``env.step_batch``), remember the transition
   (with ``team_spirit``, each agent's reward blended with the agents' mean);
3. ``update_step``: a rollout of ``num_steps``, truncation-aware GAE
   (:mod:`jaxgrid.train.gae`), then ``update_epochs`` passes of minibatch updates of the
   clipped surrogate, clipped value loss and entropy bonus (each minibatch's gradient summed
   over chunks of at most ``microbatch_rows`` rows);
4. ``run_updates``: a scan of update steps that logs every ``log_every``-th through a host
   callback; ``train``: ``init`` then all ``num_updates`` of them. The checkpointing driver
   (:mod:`jaxgrid.train.run`) runs ``update_step`` in chunks instead (:func:`chunk_updates`)
   and logs between them.

Agents are a batch axis: observations ``(envs, agents, obs_dim)``, one network per agent
type (:mod:`jaxgrid.train.networks`). Single-agent PPO runs on the centralised view of an
environment (:class:`jaxgrid.wrappers.CentralisedWrapper`); IPPO (:mod:`.ippo`) on the
agents themselves, the agents of a type told apart by a learned per-agent bias on the
first hidden layer (``agent_ids``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxgrid import spaces
from jaxgrid.env import Environment
from jaxgrid.running_stats import RunningStats
from jaxgrid.train.distributions import BoundedPolicy, n_outputs, starting_outputs
from jaxgrid.train.gae import gae
from jaxgrid.train.lagrangian import (
    LagrangeState,
    budget_metrics,
    charge_lost_steps,
    combine_advantages,
    dual_step,
    validate_budgets,
)
from jaxgrid.train.networks import ActorCritic
from jaxgrid.validation import validate_params
from jaxgrid.wrappers import CentralisedWrapper, LogWrapper


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Hyper-parameters (static: they shape the program)."""

    total_steps: int = 1_000_000  # environment steps over the whole training
    num_envs: int = 64
    num_steps: int = 128  # rollout length per update
    update_epochs: int = 4
    num_minibatches: int = 4
    # a minibatch's gradient is summed over equal chunks of at most this many network rows
    # (transitions x agents): the same gradient, with intermediates that stay in cache
    microbatch_rows: int | None = 20_000  # None: the whole minibatch in one pass
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    value_clip_eps: float | None = 0.2  # None: no value clipping
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    lr: float = 3e-4
    anneal_lr: bool = True
    hidden: tuple[int, ...] = (64, 64)
    shared_torso: bool = False  # actor and critic heads on one MLP (PowerZooJax's IPPO)
    # the networks' products and activations: "float32", or "bfloat16" (mixed precision:
    # parameters, optimiser state and losses stay float32)
    compute_dtype: str = "float32"
    distribution: str = "beta"  # or "gaussian" for Box actions
    log_std_init: float = 0.0  # the Gaussian's initial log standard deviation (half-ranges)
    # start each agent type's policy at the mean action of this baseline of the environment
    # (``env.baselines``, e.g. "no_control") over the first observations, instead of at the
    # middle of the box; with a Beta, ``init_concentration`` is its alpha + beta there
    init_action: str | None = None
    init_concentration: float = 20.0
    normalize_obs: bool = True
    normalize_reward: bool = True
    # IPPO: each agent of a type with several agents learns its own bias on the first hidden
    # layer (jaxgrid.train.networks), which tells agents apart as a one-hot id would
    agent_ids: bool = True
    # each agent learns from (1 - team_spirit) * its reward + team_spirit * the agents' mean
    # reward (OpenAI Five's team spirit): 0 is independent learners, 1 a cooperative team
    team_spirit: float = 0.0
    # start each environment a uniform random number of steps (< horizon) into its first
    # episode, played with random actions, so that every batch mixes all parts of an
    # episode (long episodes whose reward changes with time: smartgrid-v0's 10000 steps)
    stagger_starts: bool = False
    # constrained RL (PPO-Lagrangian, jaxgrid.train.lagrangian): ((cost name, budget), ...)
    # with each budget on the cost summed over an episode (mean over agents); empty: costs
    # stay out of training (unless the reward's scalarisation penalises them)
    cost_budgets: tuple[tuple[str, float], ...] = ()
    lagrange_lr: float = 0.05  # dual ascent step, multiplier per unit of cost over budget
    lagrange_init: float = 0.0
    pid_gains: tuple[float, float, float] | None = None  # (kp, ki, kd): the PID Lagrangian
    lagrange_max: float | None = None  # cap of each multiplier (None: none; lagrangian)
    shard_envs: bool = True  # split the environments over all local devices
    log_every: int = 0  # call the log function every this many updates (0: never)

    @property
    def num_updates(self) -> int:
        return max(self.total_steps // (self.num_steps * self.num_envs), 1)

    @property
    def env_steps(self) -> int:
        """Environment steps of one member over the whole training (summed over envs)."""
        return self.num_updates * self.num_steps * self.num_envs

    def __post_init__(self):
        for name in ("total_steps", "num_envs", "num_steps", "update_epochs", "num_minibatches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.log_every < 0:
            raise ValueError(f"log_every must be >= 0, got {self.log_every}")
        if self.num_envs * self.num_steps % self.num_minibatches:
            raise ValueError("num_envs * num_steps must be divisible by num_minibatches")
        if self.microbatch_rows is not None and self.microbatch_rows < 1:
            raise ValueError(f"microbatch_rows must be >= 1 or None, got {self.microbatch_rows}")
        if not 0.0 <= self.team_spirit <= 1.0:
            raise ValueError(f"team_spirit must be in [0, 1], got {self.team_spirit}")
        if self.compute_dtype not in ("float32", "bfloat16"):
            raise ValueError(
                f"compute_dtype must be 'float32' or 'bfloat16', got {self.compute_dtype!r}"
            )
        if self.distribution not in ("beta", "gaussian"):
            raise ValueError(
                f"distribution must be 'beta' or 'gaussian', got {self.distribution!r}"
            )
        if self.init_concentration <= 2.0:
            raise ValueError(f"init_concentration must be > 2, got {self.init_concentration}")
        validate_budgets(self)


@struct.dataclass
class Runner:
    """Everything that changes during training (a checkpoint saves all of it)."""

    train_state: TrainState
    env_state: Any
    obs: Any
    obs_stats: RunningStats
    return_stats: RunningStats
    discounted_return: jax.Array  # (envs, agents) running discounted return, for reward scaling
    key: jax.Array
    update: jax.Array  # () int32 updates done
    # sums over the episodes ended since the last log (:func:`episode_sums`): a log reports
    # every episode, also those that ended in updates between two logs
    since_log: dict
    member: jax.Array  # () int32 which member of a sweep (seed, scenario) this run is
    lagrange: LagrangeState  # multipliers of the cost budgets (empty without budgets)
    # running mean and variance of each budgeted cost's value targets: its critic learns
    # them standardised (value normalisation); ``(budgeted costs,)``
    cost_value_stats: RunningStats


class TrainFns(NamedTuple):
    init: Callable  # (key, params=default, member=0) -> Runner
    update_step: Callable  # (Runner, params) -> (Runner, metrics)
    run_updates: Callable  # (Runner, params, count, first=0) -> (Runner, metrics stacked)
    train: Callable  # (key, params=default, member=0) -> (Runner, metrics stacked over updates)
    policy: Callable  # (Runner) -> policy(key, obs) for evaluation
    env: Environment  # the environment as given (the policy acts on its observations)
    config: PPOConfig


class Transition(NamedTuple):
    obs: jax.Array
    raw_action: jax.Array
    mask: jax.Array | None
    log_prob: jax.Array
    value: jax.Array  # (envs, agents), or (envs, agents, 1 + budgeted costs) with budgets
    next_value: jax.Array
    reward: jax.Array
    costs: jax.Array  # (envs, agents, budgeted costs)
    steps_lost: jax.Array  # (envs, agents) int: steps a failed step cut off (0 otherwise)
    terminated: jax.Array
    truncated: jax.Array
    info: dict


EPISODE_FIELDS = ("episode_return", "episode_objectives", "episode_costs")


def _split_obs(obs):
    """``(features, action_mask or None)`` of an array or ``{"observation", "action_mask"}`` dict."""
    if isinstance(obs, dict):
        return obs["observation"], obs.get("action_mask")
    return obs, None


def make_train(
    config: PPOConfig,
    env: Environment,
    params: Any = None,
    log: Callable[[dict], None] | None = None,
    centralise: bool = True,
) -> TrainFns:
    """PPO for ``env`` (centralised to one agent when ``centralise``); see the module docstring."""
    user_env = env
    centralise = centralise and env.num_agents > 1
    if centralise:
        env = CentralisedWrapper(env)
    env = LogWrapper(env)
    default_params = env.default_params() if params is None else params
    validate_params(user_env, default_params)
    obs_space = env.observation_space(default_params)
    if isinstance(obs_space, spaces.Dict):
        obs_space = obs_space["observation"]
    feature_ndim = len(obs_space.shape) - 1  # per agent: > 1 for grids (gardeners' views)

    def split_obs(obs):
        """``(features, action_mask or None)``, each agent's features flattened to a vector."""
        features, mask = _split_obs(obs)
        if feature_ndim > 1:
            features = features.reshape(features.shape[: features.ndim - feature_ndim] + (-1,))
        return features, mask

    space = env.action_space(default_params)
    discrete = isinstance(space, spaces.Discrete)
    n = env.num_agents
    type_names = sorted(set(env.agent_types), key=env.agent_types.index)
    agent_type = tuple(type_names.index(t) for t in env.agent_types)
    if discrete:
        n_out = space.n
    elif isinstance(space, spaces.Box):
        n_out = n_outputs(config.distribution, space.shape[-1])
    else:
        raise ValueError(f"PPO supports Box and Discrete action spaces, not {space}")
    if config.init_action is not None:
        if discrete:
            raise ValueError("init_action needs a Box action space")
        known = env.baselines(default_params)
        if config.init_action not in known:
            raise ValueError(
                f"init_action: {user_env.name} has no baseline {config.init_action!r} for "
                f"this view of it; its baselines are {sorted(known)}"
            )
    budget_names = [name for name, _ in config.cost_budgets]
    unknown = [name for name in budget_names if name not in env.cost_names]
    if unknown:
        raise ValueError(
            f"cost_budgets: {user_env.name} has no cost {unknown}; its costs are "
            f"{list(env.cost_names)}"
        )
    budget_index = np.asarray([env.cost_names.index(name) for name in budget_names], np.int32)
    constrained = len(budget_names) > 0
    network = ActorCritic(
        agent_type=agent_type,
        n_out=n_out,
        hidden=config.hidden,
        agent_ids=config.agent_ids,
        shared_torso=config.shared_torso,
        compute_dtype=None if config.compute_dtype == "float32" else config.compute_dtype,
        n_costs=len(budget_names),
    )
    n_updates = config.num_updates
    minibatch = config.num_envs * config.num_steps // config.num_minibatches
    chunks = microbatch_count(minibatch, n, config.microbatch_rows)
    devices = jax.devices()
    mesh = (
        Mesh(devices, ("envs",))
        if config.shard_envs and len(devices) > 1 and config.num_envs % len(devices) == 0
        else None
    )

    def shard(tree):
        """Split the leading (environment) axis over the local devices."""
        if mesh is None:
            return tree
        return jax.lax.with_sharding_constraint(tree, NamedSharding(mesh, PartitionSpec("envs")))

    def distribution(out, log_std, mask, env_params):
        if discrete:
            logits = out if mask is None else jnp.where(mask, out, -1e9)
            return distrax.Categorical(logits=logits)
        low, high = env.action_space(env_params)._bounds()
        return BoundedPolicy(config.distribution, out, log_std, low, high)

    def sample(dist, key):
        if discrete:
            action = dist.sample(seed=key)
            return action, action
        return dist.sample(key)

    def log_prob(dist, raw):
        return dist.log_prob(raw)

    # -- 1. init -----------------------------------------------------------------------

    def start_at_baseline(net, key, obs, env_params):
        """``net`` with each type's actor-head bias set so that its initial policy has the
        mean of ``config.init_action``'s actions on ``obs`` (over environments and the
        type's agents): the head's kernel is initialised 0.01-orthogonal, so the head's
        outputs start at its bias."""
        policy = env.baselines(env_params)[config.init_action]
        action = jax.vmap(policy)(jax.random.split(key, config.num_envs), obs)
        low, high = env.action_space(env_params)._bounds()
        free = high > low
        share = jnp.where(free, (action - low) / jnp.where(free, high - low, 1.0), 0.5)
        share = jnp.mean(jnp.broadcast_to(share, action.shape), axis=0)  # (agents, act_dim)
        params = dict(net["params"])
        for t in sorted(set(agent_type)):
            members = np.flatnonzero(np.asarray(agent_type) == t)
            out = starting_outputs(
                config.distribution, jnp.mean(share[members], axis=0), config.init_concentration
            )
            head = dict(params[f"type_{t}"]["Dense_0"])
            head["bias"] = out.astype(head["bias"].dtype)
            params[f"type_{t}"] = {**params[f"type_{t}"], "Dense_0": head}
        return {**net, "params": params}

    def stagger(key, obs, env_state, env_params):
        """Advance environment ``i`` by ``offset_i ~ U{0, ..., horizon - 1}`` steps of
        random actions (the scan runs ``horizon - 1`` steps and keeps the states of the
        environments whose offset is not yet reached)."""
        k_offset, k_run = jax.random.split(key)
        offset = jax.random.randint(k_offset, (config.num_envs,), 0, env.horizon)

        def advance(carry, step):
            obs, env_state = carry
            t, key = step
            k_act, k_env = jax.random.split(key)
            mask = split_obs(obs)[1]
            sample = jax.vmap(space.sample, in_axes=(0, None if mask is None else 0))
            action = sample(jax.random.split(k_act, config.num_envs), mask)
            stepped = env.step_batch(
                jax.random.split(k_env, config.num_envs), env_state, action, env_params
            )[:2]
            return jax.tree_util.tree_map(
                lambda new, old: jnp.where(
                    (t < offset).reshape((-1,) + (1,) * (new.ndim - 1)), new, old
                ),
                stepped,
                (obs, env_state),
            ), None

        steps = (jnp.arange(env.horizon - 1), jax.random.split(k_run, env.horizon - 1))
        return jax.lax.scan(advance, (obs, env_state), steps)[0]

    def init(key, env_params=default_params, member=0) -> Runner:
        k_net, k_env, k_run = jax.random.split(key, 3)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_env, config.num_envs), env_params
        )
        if config.stagger_starts:
            obs, env_state = stagger(jax.random.fold_in(k_env, 1), obs, env_state, env_params)
        obs, env_state = shard((obs, env_state))
        features, _ = split_obs(obs)
        net_params = {"net": network.init(k_net, features[0])}
        if config.init_action is not None:
            net_params["net"] = start_at_baseline(
                net_params["net"], jax.random.fold_in(k_net, 1), obs, env_params
            )
        if not discrete and config.distribution == "gaussian":
            net_params["log_std"] = jnp.full(space.shape, config.log_std_init, features.dtype)
        if config.anneal_lr:
            total = n_updates * config.update_epochs * config.num_minibatches
            lr = optax.linear_schedule(config.lr, 0.0, total)
        else:
            lr = config.lr
        tx = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr, eps=1e-5))
        state = TrainState.create(apply_fn=network.apply, params=net_params, tx=tx)
        return Runner(
            train_state=state,
            env_state=env_state,
            obs=obs,
            obs_stats=RunningStats.create(features.shape[-1:], features.dtype),
            return_stats=RunningStats.create((), features.dtype),
            discounted_return=jnp.zeros((config.num_envs, n), features.dtype),
            key=k_run,
            update=jnp.zeros((), jnp.int32),
            member=jnp.asarray(member, jnp.int32),
            since_log=no_episodes(),
            lagrange=LagrangeState.create(len(budget_names), config.lagrange_init, features.dtype),
            cost_value_stats=RunningStats.create((len(budget_names),), features.dtype),
        )

    def no_episodes() -> dict:
        """Zero :func:`episode_sums` (the log wrapper's accumulators' dtype)."""
        zeros = functools.partial(jnp.zeros, dtype=jnp.result_type(float))
        return {
            "episodes": zeros(()),
            "episode_return": zeros(()),
            "episode_objectives": zeros(len(env.objective_names)),
            "episode_costs": zeros(len(env.cost_names)),
        }

    def normalize(runner: Runner, features):
        return runner.obs_stats.normalize(features) if config.normalize_obs else features

    # -- 2. env_step ---------------------------------------------------------------------

    def env_step(carry, _):
        runner, env_params = carry
        key, k_act, k_env = jax.random.split(runner.key, 3)
        features, mask = split_obs(runner.obs)
        obs_n = normalize(runner, features)
        p = runner.train_state.params
        out, value = network.apply(p["net"], obs_n)
        dist = distribution(out, p.get("log_std"), mask, env_params)
        action, raw = sample(dist, k_act)
        obs, env_state, reward, terminated, truncated, info = env.step_batch(
            jax.random.split(k_env, config.num_envs), runner.env_state, action, env_params
        )
        obs, env_state = shard((obs, env_state))
        done = (terminated | truncated)[:, None]
        if config.team_spirit:
            team = jnp.mean(reward, axis=-1, keepdims=True)
            reward = (1.0 - config.team_spirit) * reward + config.team_spirit * team
        # the value after a step is the next step's value, except where an episode ended:
        # there it is the final observation's (evaluated only on steps where one ended)
        final_value = jax.lax.cond(
            jnp.any(done),
            lambda: network.apply(
                p["net"], normalize(runner, split_obs(info["final_observation"])[0])
            )[1],
            lambda: jnp.zeros_like(value),
        )
        discounted = runner.discounted_return * config.gamma * (1.0 - done) + reward
        return_stats = (
            runner.return_stats.update(discounted)
            if config.normalize_reward
            else runner.return_stats
        )
        transition = Transition(
            obs=obs_n,
            raw_action=raw,
            mask=mask,
            log_prob=log_prob(dist, raw),
            value=value,
            next_value=final_value,  # completed after the rollout
            reward=reward,
            costs=info["costs"][..., budget_index].astype(reward.dtype),
            steps_lost=jnp.broadcast_to(
                info.get("steps_lost", jnp.zeros(terminated.shape, jnp.int32))[:, None],
                reward.shape,
            ),
            terminated=jnp.broadcast_to(terminated[:, None], reward.shape),
            truncated=jnp.broadcast_to(truncated[:, None], reward.shape),
            info={
                k: info[k]
                for k in (
                    "returned_episode",
                    "episode_return",
                    "episode_objectives",
                    "episode_costs",
                )
            },
        )
        runner = runner.replace(
            env_state=env_state,
            obs=obs,
            key=key,
            return_stats=return_stats,
            discounted_return=discounted,
        )
        return (runner, env_params), (transition, features)

    # -- 3. update_step ------------------------------------------------------------------

    def update_step(runner: Runner, env_params=default_params):
        (runner, _), (traj, raw_features) = jax.lax.scan(
            env_step, (runner, env_params), None, config.num_steps
        )
        features, _ = split_obs(runner.obs)
        _, last_value = network.apply(runner.train_state.params["net"], normalize(runner, features))
        following = jnp.concatenate([traj.value[1:], last_value[None]])
        done = traj.terminated | traj.truncated
        traj = traj._replace(
            next_value=jnp.where(
                done[..., None] if constrained else done, traj.next_value, following
            )
        )
        reward = traj.reward
        if config.normalize_reward:
            reward = reward / jnp.sqrt(runner.return_stats.var + 1e-8)

        def advantage(signal, value, next_value):
            return gae(
                signal,
                value,
                next_value,
                traj.terminated,
                traj.truncated,
                config.gamma,
                config.gae_lambda,
            )

        lagrange, episode_cost = runner.lagrange, None
        cost_value_stats = runner.cost_value_stats
        if constrained:
            advantages, targets = advantage(reward, traj.value[..., 0], traj.next_value[..., 0])
            # a failed step is charged for the steps it cut off (lagrangian's docstring)
            lagrange, charged = charge_lost_steps(
                lagrange, traj.costs, traj.steps_lost, config.gamma
            )
            # the cost critics learn their values scaled to unit size (value normalisation,
            # as in MAPPO, Yu et al. 2022; here a scale only, cost_value_scale): a failure's charge can put a cost's targets 1e4 times
            # the reward's, whose squared error would then swamp the gradient's global
            # norm, clipped to max_grad_norm, and with it the policy's share
            stats = runner.cost_value_stats
            scale = cost_value_scale(stats)
            cost_advantages, cost_targets = jax.vmap(advantage, in_axes=-1, out_axes=-1)(
                charged.value, traj.value[..., 1:] * scale, traj.next_value[..., 1:] * scale
            )
            cost_value_stats = stats.update(cost_targets.reshape(-1, len(budget_names)))
            rescale = scale / cost_value_scale(cost_value_stats)
            cost_targets = cost_targets / cost_value_scale(cost_value_stats)
            # the values the loss clips around, in the new scale
            traj = traj._replace(value=traj.value.at[..., 1:].multiply(rescale))
            # each budgeted cost of an episode: the mean over the episodes that ended in
            # this rollout (charges included), else (long episodes) the rollout's cost per
            # step x the horizon
            lagrange, episode_cost = dual_step(
                lagrange,
                episode_sums(traj.info),
                traj.costs,
                budget_index,
                env.horizon,
                config,
                charged=charged.episode,
            )
            # both standardised, so that a multiplier weighs costs against rewards in units
            # of their spread whatever the costs' scale (Ray et al. 2019 only centre the
            # cost advantages; then the multiplier must first grow to the costs' scale)
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            spread = cost_advantages.std(axis=(0, 1, 2)) + 1e-8
            cost_advantages = (cost_advantages - cost_advantages.mean(axis=(0, 1, 2))) / spread
            advantages = combine_advantages(advantages, cost_advantages, lagrange.multiplier)
            targets = jnp.concatenate([targets[..., None], cost_targets], axis=-1)
        else:
            advantages, targets = advantage(reward, traj.value, traj.next_value)

        def loss_fn(p, batch, advantages, targets):
            out, value = network.apply(p["net"], batch.obs)
            dist = distribution(out, p.get("log_std"), batch.mask, env_params)
            new_log_prob = log_prob(dist, batch.raw_action)
            ratio = jnp.exp(new_log_prob - batch.log_prob)
            surrogate = jnp.minimum(
                ratio * advantages,
                jnp.clip(ratio, 1 - config.clip_eps, 1 + config.clip_eps) * advantages,
            )
            actor_loss = -surrogate.mean()
            value_loss = (value - targets) ** 2
            if config.value_clip_eps is not None:
                clipped = batch.value + jnp.clip(
                    value - batch.value, -config.value_clip_eps, config.value_clip_eps
                )
                value_loss = jnp.maximum(value_loss, (clipped - targets) ** 2)
            value_loss = 0.5 * value_loss.mean()
            entropy = dist.entropy().mean()
            total = actor_loss + config.vf_coef * value_loss - config.ent_coef * entropy
            return total, (actor_loss, value_loss, entropy)

        grad_fn = jax.grad(loss_fn, has_aux=True)

        def minibatch_gradient(p, batch, advantages, targets):
            """``(gradient, losses)`` of the minibatch's mean loss, over ``chunks`` chunks."""
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            return chunked_gradient(grad_fn, chunks, p, batch, advantages, targets)

        def update_epoch(carry, _):
            state, key = carry
            key, k_perm = jax.random.split(key)
            # info and costs: for metrics and the multipliers only
            batch = (traj._replace(info={}, costs=None, steps_lost=None), advantages, targets)
            batch = jax.tree_util.tree_map(
                lambda x: x.reshape((-1,) + x.shape[2:]), batch
            )  # (T * E, ...)
            if config.num_minibatches > 1:  # one minibatch: its mean loss ignores the order
                perm = jax.random.permutation(k_perm, config.num_steps * config.num_envs)
                batch = jax.tree_util.tree_map(lambda x: x[perm], batch)
            batch = jax.tree_util.tree_map(
                lambda x: x.reshape((config.num_minibatches, minibatch) + x.shape[1:]), batch
            )

            def update_minibatch(state, mb):
                grads, losses = minibatch_gradient(state.params, *mb)
                return state.apply_gradients(grads=grads), losses

            state, losses = jax.lax.scan(update_minibatch, state, batch)
            return (state, key), losses

        key, k_epochs = jax.random.split(runner.key)
        (state, _), losses = jax.lax.scan(
            update_epoch, (runner.train_state, k_epochs), None, config.update_epochs
        )
        obs_stats = (
            runner.obs_stats.update(raw_features) if config.normalize_obs else runner.obs_stats
        )
        runner = runner.replace(
            train_state=state,
            obs_stats=obs_stats,
            key=key,
            update=runner.update + 1,
            lagrange=lagrange,
            cost_value_stats=cost_value_stats,
        )
        ended = episode_sums(traj.info)
        runner = runner.replace(since_log=jax.tree_util.tree_map(jnp.add, runner.since_log, ended))
        metrics = episode_means(ended)
        metrics.update(
            actor_loss=losses[0].mean(),
            value_loss=losses[1].mean(),
            entropy=losses[2].mean(),
            env_steps=runner.update * config.num_steps * config.num_envs,
            update=runner.update,
            member=runner.member,
        )
        if constrained:
            metrics.update(
                budget_metrics(lagrange, episode_cost, budget_index, len(env.cost_names))
            )
        return runner, metrics

    # -- 4. train ------------------------------------------------------------------------

    def run_updates(runner: Runner, env_params=default_params, count=n_updates, first=0):
        """``count`` update steps; every ``log_every``-th (counting from update ``first``, an
        int or a traced scalar) sends its metrics to ``log`` through a host callback."""

        return scan_updates(update_step, runner, env_params, count, first, log, config.log_every)

    def train(key, env_params=default_params, member=0):
        return run_updates(init(key, env_params, member), env_params)

    def policy(runner: Runner, deterministic: bool = True):
        """The trained policy ``policy(key, obs) -> action`` for one (unwrapped) environment."""

        def act(key, obs):
            if centralise:
                return act_on(key, obs.reshape(1, -1)).reshape(
                    user_env.action_space(default_params).shape
                )
            return act_on(key, obs)

        def act_on(key, obs):
            features, mask = split_obs(obs)
            p = runner.train_state.params
            out, _ = network.apply(p["net"], normalize(runner, features))
            dist = distribution(out, p.get("log_std"), mask, default_params)
            if discrete:
                return dist.mode() if deterministic else dist.sample(seed=key)
            return dist.mode() if deterministic else dist.sample(key)[0]

        return act

    return TrainFns(
        init=init,
        update_step=update_step,
        run_updates=run_updates,
        train=train,
        policy=policy,
        env=user_env,
        config=config,
    )


def scan_updates(update_step, runner, env_params, count, first, log, log_every: int):
    """``count`` calls of ``update_step(runner, env_params) -> (runner, metrics)`` in a
    ``lax.scan`` (PPO's and SAC's training loop); every ``log_every``-th (counting from
    update ``first``, an int or a traced scalar) sends its metrics and the episodes since
    the last log (``runner.since_log``) to ``log`` through a host callback. Returns the
    runner and the stacked metrics."""

    def step(carry, _):
        runner, done = carry  # ``done`` stays unbatched under vmap, so the cond stays a cond
        runner, metrics = update_step(runner, env_params)
        if log is not None and log_every:
            logs = (done + 1) % log_every == 0
            runner, logged = _take_log(runner, metrics, logs)
            jax.lax.cond(logs, lambda m: jax.debug.callback(log, m), lambda m: None, logged)
        return (runner, done + 1), metrics

    (runner, _), metrics = jax.lax.scan(step, (runner, jnp.asarray(first, jnp.int32)), None, count)
    return runner, metrics


def chunk_updates(update_step, runner, env_params, count, logs):
    """``count`` (an int or a traced int32) calls of ``update_step(runner, env_params) ->
    (runner, metrics)`` in a ``lax.fori_loop``, so that every chunk length runs one
    program: the checkpointing driver's unit (:meth:`jaxgrid.train.sweep.Sweep.run_chunk`).

    Returns ``(runner, logged)``: ``logged`` the last update's metrics and the episodes
    since the last log (``runner.since_log``, as :func:`scan_updates` logs them); where
    ``logs`` (a bool, traced or not) those sums are zeroed after it. The driver writes
    ``logged`` from Python, so the program calls no host callback and JAX's persistent
    compilation cache can keep it between processes (it keeps no program that calls one).
    """
    step = jax.jit(update_step)  # traced once: for the metrics' shapes, then in the loop
    _, shapes = jax.eval_shape(step, runner, env_params)
    metrics = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    runner, metrics = jax.lax.fori_loop(
        0, count, lambda _, carry: step(carry[0], env_params), (runner, metrics)
    )
    return _take_log(runner, metrics, logs)


def _take_log(runner, metrics: dict, logs):
    """``(runner, logged)``: ``metrics`` with the episodes since the last log
    (``runner.since_log``), and the runner with those sums zeroed where ``logs``."""
    logged = dict(metrics, **episode_means(runner.since_log))
    since_log = jax.tree_util.tree_map(
        lambda x: jnp.where(logs, jnp.zeros_like(x), x), runner.since_log
    )
    return runner.replace(since_log=since_log), logged


def chunked_gradient(grad_fn: Callable, chunks: int, params, *batch):
    """``grad_fn(params, *batch)`` (``(gradient, aux)`` of a loss that is a mean over the
    leading axis of ``batch``) computed over ``chunks`` equal chunks of that axis in a
    ``lax.scan``: the same gradient, with intermediates a ``chunks``-th the size."""
    if chunks == 1:
        return grad_fn(params, *batch)
    split = jax.tree_util.tree_map(lambda x: x.reshape((chunks, -1) + x.shape[1:]), batch)

    def accumulate(total, chunk):
        grads, aux = grad_fn(params, *chunk)
        return jax.tree_util.tree_map(jnp.add, total, grads), aux

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    total, aux = jax.lax.scan(accumulate, zeros, split)
    # equal chunks: the mean of the chunks' means is the whole batch's mean
    mean = functools.partial(jax.tree_util.tree_map, lambda x: x / chunks)
    return mean(total), jax.tree_util.tree_map(lambda x: x.mean(0), aux)


def microbatch_count(minibatch: int, agents: int, max_rows: int | None) -> int:
    """The fewest equal chunks of a ``minibatch`` of transitions (each ``agents`` network
    rows) with at most ``max_rows`` rows each (a divisor of ``minibatch``; 1 for None)."""
    if max_rows is None:
        return 1
    for count in range(1, minibatch):
        if minibatch % count == 0 and minibatch * agents <= max_rows * count:
            return count
    return minibatch


def cost_value_scale(stats: RunningStats) -> jax.Array:
    """The scale ``(costs,)`` a cost critic's values are learnt in: the root mean square of
    the cost's value targets so far, ``sqrt(mean^2 + var)``. A scale, not a shift, as the
    reward's critic learns rewards scaled and not centred: an output of 0 stays a value of
    0. (Centring or not made no difference on ``toy_envs.Cliff``, where either way a
    failure in the last steps looked cheaper than finishing until the critics were
    charged a failure's discounted tail, :mod:`jaxgrid.train.lagrangian`.)"""
    return jnp.sqrt(stats.mean**2 + stats.var + 1e-8)


def episode_sums(info: dict) -> dict:
    """Count of the episodes that ended during a rollout, and the sums over them of the
    return, objectives and costs (each an episode's mean over agents)."""
    ended = info["returned_episode"]  # (T, E)

    def sum_over_ended(x):  # x: (T, E, agents, ...) -> sum over ended episodes, mean over agents
        per_env = jnp.mean(x, axis=2)
        mask = ended.reshape(ended.shape + (1,) * (per_env.ndim - 2))
        return jnp.sum(jnp.where(mask, per_env, 0.0), axis=(0, 1))

    sums = {k: sum_over_ended(info[k]) for k in EPISODE_FIELDS}
    return dict(sums, episodes=jnp.sum(ended).astype(sums["episode_return"].dtype))


def episode_means(sums: dict) -> dict:
    """:func:`episode_sums` as the number of episodes and the means over them."""
    count = jnp.maximum(sums["episodes"], 1)
    means = {k: sums[k] / count for k in EPISODE_FIELDS}
    return dict(means, episodes=sums["episodes"].astype(jnp.int32))
