"""Analytic policy gradients through the differentiable environment: a short-horizon
actor-critic after SHAC (Xu et al. 2022, "Accelerated Policy Learning with Parallel
Differentiable Simulation", ICLR), in PureJaxRL's layout.

A jaxgrid environment is a pure JAX function, so the return of a rollout is a
differentiable function of the policy's parameters: ``jax.grad`` goes through the
policy, ``env.step`` (the battery model, the power flow by the implicit function theorem,
the reward) and back through the earlier steps. Backpropagating through a whole long
episode explodes or vanishes (the gradient is a product of many Jacobians) and the
landscape is rough; SHAC cuts the episode into windows of ``H = num_steps`` steps and
lets a learned value function stand for what follows a window.

``make_train(config, env, params)`` returns a :class:`~jaxgrid.train.ppo.TrainFns`
like PPO's and SAC's, so that runs, sweeps (``vmap`` over seeds and scenarios),
checkpoints, logs and the evaluation (:mod:`jaxgrid.train.run`) treat it alike.
``train(key)`` is one jittable program; the functions below read in the order they run:

1. ``init``: the actor, the critic and its target copy, the environments;
2. ``rollout``: ``H`` steps of every environment (``env.step_batch``, a ``lax.scan``)
   from where the previous window stopped, the actions from the actor, and the actor's
   loss (``N`` environments, rewards ``r_t`` divided by a running scale, ``V'`` the
   target critic)::

       L = -(1 / (N H)) sum_envs [ sum_t gamma^t r_t + gamma^H V'(s_H) ]

   where ``t`` counts from the start of the window or of the episode, whichever is
   later: an episode that ends inside the window adds ``gamma^(t+1) V'(s_final)`` if it
   was truncated (the time limit: its final observation, before the auto-reset) and
   nothing if it terminated, and the next episode starts a new sum;
3. ``update_step``: one Adam step of the actor on ``grad L`` (clipped by its global norm;
   skipped when not finite), then the critic fitted to the window's TD(lambda) targets
   (:func:`~jaxgrid.train.gae.gae`'s returns from the target critic's values, held
   fixed) over ``critic_epochs`` passes of ``critic_minibatches`` minibatches, then the
   target critic moved ``target_tau`` of the way to the critic;
4. ``run_updates``: a scan of update steps that logs every ``log_every``-th through a
   host callback; ``train``: ``init`` then all ``num_updates`` of them.

**Where gradients stop.** At the window's start (the environment state is carried from
the previous update as a constant, so every window is a short horizon); at an episode
end (the auto-reset's new state does not depend on the actions before it: its
gradient is zero, and the return sum restarts); at a failed power flow (the step ends
the episode and its reward is the constant failure penalty, so neither it nor what
follows passes a gradient back: the actor learns to avoid a collapse only through the
critic's values of the states before one). A step whose derivative is not finite (an
unconverged solve's Jacobian) must not poison the rest: the cotangents arriving at each
step's action and state are kept where finite and zeroed elsewhere
(:func:`finite_cotangent`), and an update whose gradient is still not finite is skipped
(``nonfinite_gradient`` in the log).

**Choices.** The reward differentiated is the environment's scalar reward, the one PPO
trains on (with ``normalize_reward``, divided by the running standard deviation of the
discounted return, as PPO does: Adam is scale-free but the gradient clip and the critic's
targets are not). The policy is deterministic by default, ``low + (high - low) (tanh(u) +
1) / 2`` of the network's output ``u``, so every action lies in the box (the environment
never clips it, and a clip would have a zero gradient); ``distribution = "tanh_gaussian"``
draws reparameterised squashed-Gaussian actions instead (SAC's
:class:`~jaxgrid.train.distributions.BoundedPolicy`, its learned spread moved by the
return's gradient alone: there is no entropy term). Evaluation acts with the centre. The
actor's head starts near zero: the first policy sits in the middle of the box. Networks
are tanh MLPs (smooth, as the gradient goes through them at every step), observations are
normalised by running statistics (held fixed within a window), Adam has SHAC's momenta
``(0.7, 0.95)`` by default and linearly annealed step sizes.

**Agents.** As in PPO and SAC, agents are a batch axis: observations ``(envs, agents,
obs_dim)``, one actor and one critic per agent type (:class:`~.networks.TypedMLP`, agents
of a type told apart by a learned first-layer bias). ``apg`` trains one controller on
the centralised view (:class:`~jaxgrid.wrappers.CentralisedWrapper`); ``iapg``
(:mod:`.iapg`) every agent on its own observation, with the networks shared by type: the
same program with ``centralise=False``. Either way the actor's loss is the mean over
agents of their returns (the team's: a shared network's gradient sums every agent's
influence on every reward, so there is no independent form), and each agent's critic
values its own reward. Continuous (Box) actions only: a discrete choice has no gradient.
Cost budgets are not supported (price costs into the reward with a scenario's
``[reward] cost_penalty``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct
from flax.training.train_state import TrainState
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxgrid.env import Environment
from jaxgrid.running_stats import RunningStats
from jaxgrid.train.box_setup import box_setup
from jaxgrid.train.distributions import BoundedPolicy, n_outputs
from jaxgrid.train.gae import gae
from jaxgrid.train.networks import TypedMLP
from jaxgrid.train.ppo import TrainFns, episode_means, episode_sums, scan_updates

EPISODE_INFO = ("returned_episode", "episode_return", "episode_objectives", "episode_costs")


@dataclasses.dataclass(frozen=True)
class APGConfig:
    """Hyper-parameters (static: they shape the program). Defaults: SHAC's released
    configuration for its Ant task (windows of 32 steps, 64 environments, step sizes 2e-3
    annealed linearly, Adam momenta (0.7, 0.95), gradient norm 1, TD(0.95) critic fitted
    in 16 passes of 4 minibatches, target critic step 0.8, gamma 0.99), but for the
    return normalisation (off there), the tanh networks and the deterministic actor."""

    total_steps: int = 1_000_000  # environment steps over the whole training
    num_envs: int = 64
    num_steps: int = 32  # H: the window the return is differentiated over
    gamma: float = 0.99
    td_lambda: float = 0.95  # the critic's TD(lambda) targets
    actor_lr: float = 2e-3
    critic_lr: float = 2e-3
    anneal_lr: bool = True  # both step sizes fall linearly to 0 over the training
    adam_b1: float = 0.7
    adam_b2: float = 0.95
    max_grad_norm: float = 1.0  # clip the actor's and the critic's gradients' global norm
    critic_epochs: int = 16  # passes over the window's transitions per update
    critic_minibatches: int = 4
    target_tau: float = 0.8  # step of the target critic towards the critic, per update
    hidden: tuple[int, ...] = (64, 64)  # tanh layers of the actor and of the critic
    distribution: str = "deterministic"  # or "tanh_gaussian" (reparameterised draws)
    normalize_obs: bool = True
    normalize_reward: bool = True  # divide rewards by the running std of the return
    agent_ids: bool = True  # iapg: a learned first-layer bias per agent of a shared type
    cost_budgets: tuple[tuple[str, float], ...] = ()  # not supported: must stay empty
    shard_envs: bool = True  # split the environments over all local devices
    log_every: int = 0  # call the log function every this many updates (0: never)

    @property
    def num_updates(self) -> int:
        """Windows (one actor step each) over the whole training (>= 1)."""
        return max(self.total_steps // (self.num_steps * self.num_envs), 1)

    @property
    def env_steps(self) -> int:
        """Environment steps of one member over the whole training (summed over envs)."""
        return self.num_updates * self.num_steps * self.num_envs

    def __post_init__(self):
        for name in (
            "total_steps",
            "num_envs",
            "num_steps",
            "critic_epochs",
            "critic_minibatches",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.log_every < 0:
            raise ValueError(f"log_every must be >= 0, got {self.log_every}")
        if self.num_envs * self.num_steps % self.critic_minibatches:
            raise ValueError("num_envs * num_steps must be divisible by critic_minibatches")
        for name in ("gamma", "td_lambda", "adam_b1", "adam_b2"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 < self.target_tau <= 1.0:
            raise ValueError(f"target_tau must be in (0, 1], got {self.target_tau}")
        if not (self.actor_lr > 0 and self.critic_lr > 0 and self.max_grad_norm > 0):
            raise ValueError(
                f"need actor_lr, critic_lr and max_grad_norm > 0, got {self.actor_lr}, "
                f"{self.critic_lr}, {self.max_grad_norm}"
            )
        if self.distribution not in ("deterministic", "tanh_gaussian"):
            raise ValueError(
                f"distribution must be 'deterministic' or 'tanh_gaussian', got "
                f"{self.distribution!r}"
            )
        if self.cost_budgets:
            raise ValueError(
                "APG takes no cost budgets (no Lagrangian form yet); price costs into the "
                "reward instead (a scenario file's [reward] cost_penalty)"
            )


@struct.dataclass
class Runner:
    """Everything that changes during training (a checkpoint saves all of it)."""

    actor: TrainState
    critic: TrainState
    target_critic: Any  # Polyak averages of ``critic.params``: the values the actor sees
    env_state: Any
    obs: Any
    obs_stats: RunningStats
    return_stats: RunningStats  # of the discounted return, for the reward's scale
    discounted_return: jax.Array  # (envs, agents) running discounted return
    key: jax.Array
    update: jax.Array  # () int32 updates done
    since_log: dict  # sums over the episodes ended since the last log (as PPO's)
    member: jax.Array  # () int32 which member of a sweep this run is


@jax.custom_vjp
def finite_cotangent(tree):
    """The identity; its derivative passes the cotangent where finite and 0 elsewhere, so
    that a step whose Jacobian is not finite (a failed solve) cannot make the gradient of
    everything before it NaN."""
    return tree


def _finite_fwd(tree):
    return tree, None


def _finite_bwd(_, cotangent):
    return (
        jax.tree_util.tree_map(
            lambda c: (
                jnp.where(jnp.isfinite(c), c, jnp.zeros_like(c))
                if jnp.issubdtype(c.dtype, jnp.inexact)
                else c
            ),
            cotangent,
        ),
    )


finite_cotangent.defvjp(_finite_fwd, _finite_bwd)


def make_train(
    config: APGConfig,
    env: Environment,
    params: Any = None,
    log: Callable[[dict], None] | None = None,
    centralise: bool = True,
) -> TrainFns:
    """APG for ``env`` (centralised to one agent when ``centralise``); see the module
    docstring.

    Raises:
        ValueError: the environment's actions are not continuous (a Box).
    """
    setup = box_setup(
        env,
        params,
        centralise,
        (
            "APG differentiates the return through the environment's step with respect to "
            "the actions, so it needs continuous (Box) actions"
        ),
    )
    user_env, env, default_params, space, split_obs, agent_type = setup
    centralise = centralise and user_env.num_agents > 1  # as box_setup wrapped it
    n = env.num_agents
    act_dim = space.shape[-1]
    stochastic = config.distribution == "tanh_gaussian"
    actor = TypedMLP(
        agent_type,
        n_outputs("tanh_gaussian", act_dim) if stochastic else act_dim,
        config.hidden,
        config.agent_ids,
        activation="tanh",
        head_scale=0.01,
    )
    critic = TypedMLP(agent_type, 1, config.hidden, config.agent_ids, activation="tanh")
    n_updates = config.num_updates
    minibatch = config.num_envs * config.num_steps // config.critic_minibatches
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

    def normalize(obs_stats: RunningStats, features):
        return obs_stats.normalize(features) if config.normalize_obs else features

    def value(critic_params, obs_n):
        """``(..., agents)``: each agent's value of its normalised observation."""
        return critic.apply(critic_params, obs_n)[..., 0]

    def policy_of(actor_params, obs_n, env_params) -> BoundedPolicy:
        """The actor's policy at ``obs_n``: a squashed Gaussian, or (deterministic) its
        centre alone, as a squashed Gaussian of zero spread."""
        low, high = env.action_space(env_params)._bounds()
        out = actor.apply(actor_params, obs_n)
        return BoundedPolicy("tanh_gaussian", out, None, low, high)

    def act(actor_params, obs_n, key, env_params):
        """The action the actor takes at ``obs_n`` while training (a function of the
        parameters that ``jax.grad`` differentiates)."""
        if stochastic:
            return policy_of(actor_params, obs_n, env_params).sample(key)[0]
        low, high = env.action_space(env_params)._bounds()
        u = actor.apply(actor_params, obs_n)
        return low + (high - low) * (jnp.tanh(u) + 1.0) / 2.0

    def entropy(actor_params, obs_n, env_params):
        """The Gaussian's entropy before squashing, mean over agents (0: deterministic)."""
        if not stochastic:
            return jnp.zeros((), obs_n.dtype)
        return jnp.mean(policy_of(actor_params, obs_n, env_params).entropy())

    # -- 1. init -----------------------------------------------------------------------

    def optimiser(lr: float, steps_per_update: int):
        if config.anneal_lr:
            lr = optax.linear_schedule(lr, 0.0, n_updates * steps_per_update)
        return optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm),
            optax.adam(lr, b1=config.adam_b1, b2=config.adam_b2),
        )

    def init(key, env_params=default_params, member=0) -> Runner:
        k_actor, k_critic, k_env, k_run = jax.random.split(key, 4)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_env, config.num_envs), env_params
        )
        obs, env_state = shard((obs, env_state))
        features = split_obs(obs)
        dtype = features.dtype
        critic_params = critic.init(k_critic, features[0])
        critic_steps = config.critic_epochs * config.critic_minibatches
        return Runner(
            actor=TrainState.create(
                apply_fn=actor.apply,
                params=actor.init(k_actor, features[0]),
                tx=optimiser(config.actor_lr, 1),
            ),
            critic=TrainState.create(
                apply_fn=critic.apply,
                params=critic_params,
                tx=optimiser(config.critic_lr, critic_steps),
            ),
            target_critic=critic_params,
            env_state=env_state,
            obs=obs,
            obs_stats=RunningStats.create(features.shape[-1:], dtype),
            return_stats=RunningStats.create((), dtype),
            discounted_return=jnp.zeros((config.num_envs, n), dtype),
            key=k_run,
            update=jnp.zeros((), jnp.int32),
            since_log=no_episodes(),
            member=jnp.asarray(member, jnp.int32),
        )

    def no_episodes() -> dict:
        """Zero :func:`~jaxgrid.train.ppo.episode_sums` (the log wrapper's dtype)."""
        zeros = functools.partial(jnp.zeros, dtype=jnp.result_type(float))
        return {
            "episodes": zeros(()),
            "episode_return": zeros(()),
            "episode_objectives": zeros(len(env.objective_names)),
            "episode_costs": zeros(len(env.cost_names)),
        }

    # -- 2. rollout ----------------------------------------------------------------------

    def rollout(actor_params, runner: Runner, env_params, key):
        """``(L, window)``: the actor's loss over a window of ``num_steps`` steps from the
        runner's environments (see the module docstring), and what the critic and the
        log need of the window (all held fixed)."""
        scale = jnp.sqrt(runner.return_stats.var + 1e-8) if config.normalize_reward else 1.0

        def step(carry, inputs):
            env_state, obs, discount = carry  # discount: (envs,) gamma^t in the episode
            k_act, k_env, last = inputs
            features = split_obs(obs)
            obs_n = normalize(runner.obs_stats, features)
            action = act(actor_params, obs_n, k_act, env_params)
            # the cotangents reaching the action and the state stop there if not finite
            action, env_state = finite_cotangent((action, env_state))
            obs, env_state, reward, terminated, truncated, info = env.step_batch(
                jax.random.split(k_env, config.num_envs), env_state, action, env_params
            )
            obs, env_state = shard((obs, env_state))
            final_n = normalize(runner.obs_stats, split_obs(info["final_observation"]))
            final_value = value(runner.target_critic, final_n)  # (envs, agents)
            done = terminated | truncated
            # the tail: the value of the state after a truncation or after the window
            bootstrap = ~terminated & (done | last)
            gain = reward / scale + jnp.where(bootstrap[:, None], config.gamma * final_value, 0.0)
            objective = discount * jnp.mean(gain, axis=-1)  # the agents' mean, (envs,)
            discount = jnp.where(done, 1.0, discount * config.gamma)
            window = {
                "obs_n": jax.lax.stop_gradient(obs_n),
                "features": jax.lax.stop_gradient(features),
                "final_n": jax.lax.stop_gradient(final_n),
                "reward": jax.lax.stop_gradient(reward),
                "terminated": jnp.broadcast_to(terminated[:, None], reward.shape),
                "truncated": jnp.broadcast_to(truncated[:, None], reward.shape),
                "entropy": jax.lax.stop_gradient(entropy(actor_params, obs_n, env_params)),
                "info": {k: jax.lax.stop_gradient(info[k]) for k in EPISODE_INFO},
            }
            return (env_state, obs, discount), (objective, window)

        k_act, k_env = jax.random.split(key)
        last = jnp.arange(config.num_steps) == config.num_steps - 1
        inputs = (
            jax.random.split(k_act, config.num_steps),
            jax.random.split(k_env, config.num_steps),
            last,
        )
        discount = jnp.ones(config.num_envs, runner.obs_stats.mean.dtype)
        (env_state, obs, _), (objective, window) = jax.lax.scan(
            step, (runner.env_state, runner.obs, discount), inputs
        )
        window["env_state"], window["obs"] = jax.lax.stop_gradient((env_state, obs))
        return -jnp.mean(objective), window

    # -- 3. update_step ------------------------------------------------------------------

    def update_step(runner: Runner, env_params=default_params):
        key, k_roll, k_critic = jax.random.split(runner.key, 3)
        (actor_loss, window), grads = jax.value_and_grad(rollout, has_aux=True)(
            runner.actor.params, runner, env_params, k_roll
        )
        # a NaN or infinite entry makes the norm so (as does a norm past the dtype's
        # range, whose clipped gradient would be 0 anyway): one reduction for both
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(grad_norm)
        actor_state = jax.lax.cond(
            finite,
            lambda s: s.apply_gradients(grads=grads),
            lambda s: s,
            runner.actor,
        )

        # the discounted return (for the reward's scale), step by step as PPO keeps it
        def track(carry, xs):
            discounted, stats = carry
            reward, done = xs
            discounted = discounted * config.gamma * (1.0 - done) + reward
            return (discounted, stats.update(discounted)), None

        done = (window["terminated"] | window["truncated"]).astype(window["reward"].dtype)
        (discounted, return_stats), _ = jax.lax.scan(
            track, (runner.discounted_return, runner.return_stats), (window["reward"], done)
        )
        if not config.normalize_reward:
            return_stats = runner.return_stats

        # the critic: TD(lambda) targets from the target critic's values, held fixed
        scale = jnp.sqrt(runner.return_stats.var + 1e-8) if config.normalize_reward else 1.0
        values = value(runner.target_critic, window["obs_n"])  # (T, envs, agents)
        next_values = value(runner.target_critic, window["final_n"])
        _, targets = gae(
            window["reward"] / scale,
            values,
            next_values,
            window["terminated"],
            window["truncated"],
            config.gamma,
            config.td_lambda,
        )

        def critic_loss(critic_params, obs_n, target):
            return 0.5 * jnp.mean((value(critic_params, obs_n) - target) ** 2)

        # every epoch's shuffle drawn up front, so that all the minibatch steps are one
        # scan (``critic_epochs * critic_minibatches`` steps) rather than a scan in a scan
        transitions = config.num_steps * config.num_envs
        perms = jax.vmap(jax.random.permutation, in_axes=(0, None))(
            jax.random.split(k_critic, config.critic_epochs), transitions
        ).reshape(-1, minibatch)  # (epochs * minibatches, minibatch)
        batch = jax.tree_util.tree_map(
            lambda x: x.reshape((transitions,) + x.shape[2:]), (window["obs_n"], targets)
        )

        def minibatch_step(state, perm):
            mb = jax.tree_util.tree_map(lambda x: x[perm], batch)
            loss, grads = jax.value_and_grad(critic_loss)(state.params, *mb)
            return state.apply_gradients(grads=grads), loss

        critic_state, value_losses = jax.lax.scan(minibatch_step, runner.critic, perms)
        target = optax.incremental_update(
            critic_state.params, runner.target_critic, config.target_tau
        )
        obs_stats = (
            runner.obs_stats.update(window["features"])
            if config.normalize_obs
            else runner.obs_stats
        )
        ended = episode_sums(window["info"])
        runner = runner.replace(
            actor=actor_state,
            critic=critic_state,
            target_critic=target,
            env_state=window["env_state"],
            obs=window["obs"],
            obs_stats=obs_stats,
            return_stats=return_stats,
            discounted_return=discounted,
            key=key,
            update=runner.update + 1,
            since_log=jax.tree_util.tree_map(jnp.add, runner.since_log, ended),
        )
        metrics = episode_means(ended)
        metrics.update(
            actor_loss=actor_loss,
            value_loss=value_losses.mean(),
            entropy=window["entropy"].mean(),
            grad_norm=jnp.where(finite, grad_norm, 0.0),
            nonfinite_gradient=(~finite).astype(actor_loss.dtype),
            env_steps=runner.update * config.num_steps * config.num_envs,
            update=runner.update,
            member=runner.member,
        )
        return runner, metrics

    # -- 4. train ------------------------------------------------------------------------

    def run_updates(runner: Runner, env_params=default_params, count=n_updates, first=0):
        """``count`` update steps; every ``log_every``-th (counting from update ``first``)
        sends its metrics to ``log`` through a host callback."""

        return scan_updates(update_step, runner, env_params, count, first, log, config.log_every)

    def train(key, env_params=default_params, member=0):
        return run_updates(init(key, env_params, member), env_params)

    def policy(runner: Runner, deterministic: bool = True):
        """The trained policy ``policy(key, obs) -> action`` for one (unwrapped)
        environment: the deterministic action (the squashed Gaussian's centre), or a draw."""

        def act_at(key, obs):
            if centralise:
                return act_on(key, obs.reshape(1, -1)).reshape(
                    user_env.action_space(default_params).shape
                )
            return act_on(key, obs)

        def act_on(key, obs):
            obs_n = normalize(runner.obs_stats, split_obs(obs))
            if stochastic and deterministic:
                return policy_of(runner.actor.params, obs_n, default_params).mode()
            return act(runner.actor.params, obs_n, key, default_params)

        return act_at

    return TrainFns(
        init=init,
        update_step=update_step,
        run_updates=run_updates,
        train=train,
        policy=policy,
        env=user_env,
        config=config,
    )
