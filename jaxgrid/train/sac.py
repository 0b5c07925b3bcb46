"""Soft actor-critic in one compiled program (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications"), in PureJaxRL's layout.

``make_train(config, env, params)`` returns a :class:`~jaxgrid.train.ppo.TrainFns` like
PPO's, so that runs, sweeps (``vmap`` over seeds and scenarios), checkpoints, logs and
the evaluation (:mod:`jaxgrid.train.run`) treat both alike. ``train(key)`` is one jittable
program; the functions below read in the order they run:

1. ``init``: the actor, twin Q-functions and their target copies, the temperature, the
   replay buffer, and ``learning_starts`` environment steps of uniform random actions
   (a ``lax.scan``) that fill the buffer before the first update;
2. ``env_step``: act in every environment (``env.step_batch``) with a draw of the policy
   and keep the transition ``(s, a, r, c, s', terminated)``, ``s'`` the observation
   before any auto-reset (``info["final_observation"]``): a time-limit truncation
   bootstraps from it, a termination does not;
3. ``update_step``: ``num_steps`` environment steps in a scan, their transitions into the
   replay buffer, then ``gradient_steps`` gradient steps (a scan), each on a batch of
   ``batch_size`` transitions drawn uniformly from the buffer:

   - critics: ``Q_i(s, a) -> r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log
     pi(a' | s'))`` with ``a' ~ pi(. | s')`` and ``Q'`` the target critics;
   - actor: minimise ``alpha log pi(a | s) - min_i Q_i(s, a)``, ``a ~ pi(. | s)``
     reparameterised;
   - temperature: minimise ``-log alpha (log pi(a | s) + target_entropy)``, which moves
     the policy's entropy towards ``target_entropy`` (by default minus the number of
     free action entries);
   - targets: ``Q' <- (1 - tau) Q' + tau Q`` (Polyak averaging);
4. ``run_updates``: a scan of update steps that logs every ``log_every``-th through a
   host callback; ``train``: ``init`` then all ``num_updates`` of them.

The policy is the squashed Gaussian of :class:`~jaxgrid.train.distributions.BoundedPolicy`
(``"tanh_gaussian"``), its ``[-1, 1]`` output mapped onto the action box (entries with
``low == high`` are fixed and carry no probability); the Q-functions see that ``[-1, 1]``
action, which the buffer stores. Continuous (Box) actions only.

**Agents.** As in PPO, agents are a batch axis: observations ``(envs, agents, obs_dim)``,
one actor and one pair of Q-functions per agent type (:class:`~.networks.TypedMLP`, agents
of a type told apart by a learned first-layer bias). ``sac`` trains one agent on the
centralised view (:class:`~jaxgrid.wrappers.CentralisedWrapper`) and ``isac``
(:mod:`.isac`) every agent on its own observation and reward with the networks shared
by type — the same program with ``centralise=False``, exactly as IPPO derives from PPO,
so that one SAC implementation serves both, and a result of one compares with the other
as IPPO's with PPO's. Each agent has its own temperature (``(agents,)``): agents of one
type may need different amounts of exploration.

**Cost budgets** (SAC-Lagrangian, after Ha et al. 2020): each budgeted cost gets one
more output of both Q-functions (its discounted cost, bootstrapped from the larger of
the two target estimates: pessimistic about costs), the actor minimises ``alpha log pi -
(Q_r - sum_c lambda_c Q_c) / (1 + sum_c lambda_c)``
(:func:`~jaxgrid.train.lagrangian.combine_advantages` on Q-values), and the multipliers
move once per update by dual ascent or PID (:mod:`jaxgrid.train.lagrangian`) on the
episode cost estimated from the update's steps (ended episodes, else the cost per step
times the horizon). Updates are frequent (one per ``num_steps`` environment steps), so
``lagrange_lr`` is per update and should be smaller than PPO's.

**Replay buffer.** flashbax's item buffer (``flashbax.make_item_buffer``): a ring of
``buffer_size`` transitions on the device, a pytree in the learner state (so in
checkpoints, and vmapped over seeds like everything else), sampled uniformly with
replacement among the transitions written so far. Its ``add``/``sample`` are pure
functions of static shapes, so they sit inside the training scan; flashbax 0.1.3 works
with this jax under ``jit``, ``vmap`` over seeds, two devices, float64 and orbax
checkpoints (all tested), so jaxgrid has no buffer of its own.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import flashbax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxgrid.env import Environment
from jaxgrid.running_stats import RunningStats
from jaxgrid.train.box_setup import box_setup
from jaxgrid.train.distributions import BoundedPolicy, n_outputs
from jaxgrid.train.lagrangian import (
    LagrangeState,
    budget_metrics,
    charge_lost_steps,
    combine_advantages,
    dual_step,
    validate_budgets,
)
from jaxgrid.train.networks import TypedMLP
from jaxgrid.train.ppo import (
    TrainFns,
    cost_value_scale,
    episode_means,
    episode_sums,
    scan_updates,
)


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """Hyper-parameters (static: they shape the program). Defaults: Haarnoja et al.'s
    (2018, table 1) but for ``num_envs`` environments stepped together and a buffer of
    1e5 transitions (1e6 in the paper) that checkpoints can hold."""

    # environment steps of one member over the whole training, summed over environments,
    # the random ``learning_starts`` included
    total_steps: int = 1_000_000
    num_envs: int = 16
    num_steps: int = 1  # steps of every environment between two rounds of gradient steps
    gradient_steps: int = 16  # per update: one per new transition with the defaults
    batch_size: int = 256  # transitions per gradient step
    # transitions the replay buffer holds (then the oldest go); checkpoints hold it too
    buffer_size: int = 100_000
    # environment steps (summed over environments, rounded down to whole steps of all of
    # them) of uniform random actions that fill the buffer before the first update
    learning_starts: int = 5_000
    gamma: float = 0.99
    tau: float = 0.005  # Polyak step of the target Q-functions, per gradient step
    lr: float = 3e-4  # Adam step of the actor, the Q-functions and the temperature
    max_grad_norm: float | None = None  # clip each network's gradient norm (None: never)
    hidden: tuple[int, ...] = (256, 256)  # ReLU layers of the actor and of each Q-function
    alpha_init: float = 1.0  # the temperature alpha (nats of reward per nat of entropy)
    # the entropy (nats per agent) the temperature steers to; None: minus the number of
    # the agent's free action entries (Haarnoja et al.'s heuristic)
    target_entropy: float | None = None
    reward_scale: float = 1.0  # rewards are multiplied by this before learning
    # normalise observations by running statistics of every observation seen (the
    # buffer keeps raw observations, normalised when sampled by the current statistics)
    normalize_obs: bool = True
    agent_ids: bool = True  # isac: a learned first-layer bias per agent of a shared type
    # constrained RL (SAC-Lagrangian): ((cost name, budget), ...) on the cost summed over
    # an episode (mean over agents); empty: costs stay out of training
    cost_budgets: tuple[tuple[str, float], ...] = ()
    lagrange_lr: float = 0.01  # dual ascent step per update, per unit of cost over budget
    lagrange_init: float = 0.0
    pid_gains: tuple[float, float, float] | None = None  # (kp, ki, kd): the PID Lagrangian
    lagrange_max: float | None = None  # cap of each multiplier (None: none; lagrangian)
    shard_envs: bool = True  # split the environments over all local devices
    log_every: int = 0  # call the log function every this many updates (0: never)

    @property
    def warmup_steps(self) -> int:
        """Steps of every environment with random actions before learning."""
        return self.learning_starts // self.num_envs

    @property
    def num_updates(self) -> int:
        """Updates after the warm-up: the rest of ``total_steps`` in whole updates (>= 1)."""
        learning = self.total_steps - self.warmup_steps * self.num_envs
        return max(learning // (self.num_steps * self.num_envs), 1)

    @property
    def env_steps(self) -> int:
        """Environment steps of one member over the whole training (summed over envs)."""
        return (self.warmup_steps + self.num_updates * self.num_steps) * self.num_envs

    def __post_init__(self):
        for name in ("total_steps", "num_envs", "num_steps", "gradient_steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("learning_starts", "log_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.buffer_size < max(self.num_envs * self.num_steps, self.batch_size):
            raise ValueError(
                f"buffer_size ({self.buffer_size}) must hold at least one update's "
                f"transitions (num_envs * num_steps = {self.num_envs * self.num_steps}) and "
                f"one batch (batch_size = {self.batch_size})"
            )
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if not self.alpha_init > 0 or not self.reward_scale > 0 or not self.lr > 0:
            raise ValueError(
                f"need alpha_init, reward_scale and lr > 0, got {self.alpha_init}, "
                f"{self.reward_scale}, {self.lr}"
            )
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm}")
        validate_budgets(self)


class Transition(NamedTuple):
    """One environment step of one environment, as the replay buffer holds it."""

    obs: jax.Array  # (agents, obs_dim) raw (unnormalised) features
    action: jax.Array  # (agents, act_dim) the policy's squashed action, in [-1, 1]
    reward: jax.Array  # (agents,) scaled by reward_scale
    costs: jax.Array  # (agents, budgeted costs)
    next_obs: jax.Array  # (agents, obs_dim) the observation after the step, before any reset
    terminated: jax.Array  # (agents,) bool: no bootstrapping from next_obs


@struct.dataclass
class Runner:
    """Everything that changes during training (a checkpoint saves all of it)."""

    actor: TrainState
    critic: TrainState  # the twin Q-functions' parameters, stacked on a leading axis of 2
    target_critic: Any  # Polyak averages of ``critic.params``
    temperature: TrainState  # params: {"log_alpha": (agents,)}
    buffer: Any  # flashbax's TrajectoryBufferState of Transition items
    env_state: Any
    obs: Any
    obs_stats: RunningStats
    key: jax.Array
    update: jax.Array  # () int32 updates done
    since_log: dict  # sums over the episodes ended since the last log (as PPO's)
    member: jax.Array  # () int32 which member of a sweep this run is
    lagrange: LagrangeState  # multipliers of the cost budgets (empty without budgets)
    # running mean and variance of each budgeted cost per step (failure charges included):
    # the Q-functions learn each cost's values in units of its scale (``cost_q_scale``)
    cost_value_stats: RunningStats


def make_train(
    config: SACConfig,
    env: Environment,
    params: Any = None,
    log: Callable[[dict], None] | None = None,
    centralise: bool = True,
) -> TrainFns:
    """SAC for ``env`` (centralised to one agent when ``centralise``); see the module docstring.

    Raises:
        ValueError: the environment's actions are not continuous (a Box), or a budget
            names a cost the environment does not have.
    """
    setup = box_setup(env, params, centralise, "SAC needs continuous (Box) actions")
    user_env, env, default_params, space, split_obs, agent_type = setup
    centralise = centralise and user_env.num_agents > 1  # as box_setup wrapped it
    n = env.num_agents
    act_dim = space.shape[-1]
    budget_names = [name for name, _ in config.cost_budgets]
    unknown = [name for name in budget_names if name not in env.cost_names]
    if unknown:
        raise ValueError(
            f"cost_budgets: {user_env.name} has no cost {unknown}; its costs are "
            f"{list(env.cost_names)}"
        )
    budget_index = np.asarray([env.cost_names.index(name) for name in budget_names], np.int32)
    constrained = len(budget_names) > 0
    actor = TypedMLP(
        agent_type,
        n_outputs("tanh_gaussian", act_dim),
        config.hidden,
        config.agent_ids,
        head_scale=0.01,
    )
    critic = TypedMLP(agent_type, 1 + len(budget_names), config.hidden, config.agent_ids)
    twin = jax.vmap(critic.apply, in_axes=(0, None))  # (2, ...) parameters -> (2, ...) values
    buffer = flashbax.make_item_buffer(
        max_length=config.buffer_size,
        min_length=1,
        sample_batch_size=config.batch_size,
        add_sequences=True,
    )
    n_updates = config.num_updates
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

    def policy_of(actor_params, obs_n, env_params) -> BoundedPolicy:
        low, high = env.action_space(env_params)._bounds()
        return BoundedPolicy("tanh_gaussian", actor.apply(actor_params, obs_n), None, low, high)

    def q_values(critic_params, obs_n, squashed):
        """``(2, ..., agents, 1 + budgeted costs)``: both Q-functions at ``(s, a)``."""
        return twin(critic_params, jnp.concatenate([obs_n, squashed], axis=-1))

    def normalize(obs_stats: RunningStats, features):
        return obs_stats.normalize(features) if config.normalize_obs else features

    def free_entries(env_params):
        """``(agents, act_dim)`` bool: the action entries the policy sets (low < high)."""
        low, high = env.action_space(env_params)._bounds()
        return high > low

    def squash(raw, env_params):
        """The action in ``[-1, 1]`` units that the Q-functions see: ``tanh`` of the raw
        draw, 0 on fixed entries (whatever the draw there)."""
        return jnp.where(free_entries(env_params), jnp.tanh(raw), 0.0)

    # -- 1. init -----------------------------------------------------------------------

    def optimiser():
        adam = optax.adam(config.lr)
        if config.max_grad_norm is None:
            return adam
        return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adam)

    def init(key, env_params=default_params, member=0) -> Runner:
        k_actor, k_critic, k_env, k_warm, k_run = jax.random.split(key, 5)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_env, config.num_envs), env_params
        )
        obs, env_state = shard((obs, env_state))
        features = split_obs(obs)
        dtype = features.dtype
        action0 = jnp.zeros((n, act_dim), dtype)
        critic_params = jax.vmap(critic.init, in_axes=(0, None))(
            jax.random.split(k_critic, 2), jnp.concatenate([features[0], action0], axis=-1)
        )
        item = Transition(
            obs=features[0],
            action=action0,
            reward=jnp.zeros(n, dtype),
            costs=jnp.zeros((n, len(budget_names)), dtype),
            next_obs=features[0],
            terminated=jnp.zeros(n, bool),
        )
        runner = Runner(
            actor=TrainState.create(
                apply_fn=actor.apply, params=actor.init(k_actor, features[0]), tx=optimiser()
            ),
            critic=TrainState.create(apply_fn=twin, params=critic_params, tx=optimiser()),
            target_critic=critic_params,
            temperature=TrainState.create(
                apply_fn=None,
                params={"log_alpha": jnp.full(n, np.log(config.alpha_init), dtype)},
                tx=optax.adam(config.lr),
            ),
            buffer=buffer.init(item),
            env_state=env_state,
            obs=obs,
            obs_stats=RunningStats.create(features.shape[-1:], dtype),
            key=k_run,
            update=jnp.zeros((), jnp.int32),
            since_log=no_episodes(),
            member=jnp.asarray(member, jnp.int32),
            lagrange=LagrangeState.create(len(budget_names), config.lagrange_init, dtype),
            cost_value_stats=RunningStats.create((len(budget_names),), dtype),
        )
        if config.warmup_steps:
            runner = runner.replace(key=k_warm)
            (runner, _), (traj, _) = jax.lax.scan(
                functools.partial(env_step, explore=True),
                (runner, env_params),
                None,
                config.warmup_steps,
            )
            runner = remember(runner, traj).replace(key=k_run)
        return runner

    def no_episodes() -> dict:
        """Zero :func:`~jaxgrid.train.ppo.episode_sums` (the log wrapper's dtype)."""
        zeros = functools.partial(jnp.zeros, dtype=jnp.result_type(float))
        return {
            "episodes": zeros(()),
            "episode_return": zeros(()),
            "episode_objectives": zeros(len(env.objective_names)),
            "episode_costs": zeros(len(env.cost_names)),
        }

    def remember(runner: Runner, traj: Transition) -> Runner:
        """Add a rollout's transitions ``(T, envs, ...)`` to the buffer and its
        observations to the normalisation statistics."""
        flat = jax.tree_util.tree_map(
            lambda x: x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), traj
        )
        obs_stats = runner.obs_stats.update(traj.obs) if config.normalize_obs else runner.obs_stats
        return runner.replace(buffer=buffer.add(runner.buffer, flat), obs_stats=obs_stats)

    # -- 2. env_step ---------------------------------------------------------------------

    def env_step(carry, _, explore: bool = False):
        """One step of every environment: a policy draw, or with ``explore`` a uniform
        random action (the warm-up)."""
        runner, env_params = carry
        key, k_act, k_env = jax.random.split(runner.key, 3)
        features = split_obs(runner.obs)
        if explore:
            low, high = env.action_space(env_params)._bounds()
            action = jax.vmap(space.sample)(jax.random.split(k_act, config.num_envs))
            squashed = jnp.where(high > low, 2.0 * (action - low) / (high - low) - 1.0, 0.0)
        else:
            dist = policy_of(runner.actor.params, normalize(runner.obs_stats, features), env_params)
            action, raw = dist.sample(k_act)
            squashed = squash(raw, env_params)
        obs, env_state, reward, terminated, truncated, info = env.step_batch(
            jax.random.split(k_env, config.num_envs), runner.env_state, action, env_params
        )
        obs, env_state = shard((obs, env_state))
        transition = Transition(
            obs=features,
            action=squashed.astype(features.dtype),
            reward=reward * config.reward_scale,
            costs=info["costs"][..., budget_index].astype(reward.dtype),
            next_obs=split_obs(info["final_observation"]),
            terminated=jnp.broadcast_to(terminated[:, None], reward.shape),
        )
        episodes = {
            k: info[k]
            for k in ("returned_episode", "episode_return", "episode_objectives", "episode_costs")
        }
        episodes["steps_lost"] = jnp.broadcast_to(
            info.get("steps_lost", jnp.zeros(terminated.shape, jnp.int32))[:, None], reward.shape
        )
        runner = runner.replace(env_state=env_state, obs=obs, key=key)
        return (runner, env_params), (transition, episodes)

    # -- 3. update_step ------------------------------------------------------------------

    def update_step(runner: Runner, env_params=default_params):
        (runner, _), (traj, episodes) = jax.lax.scan(
            env_step, (runner, env_params), None, config.num_steps
        )
        lagrange, env_costs = runner.lagrange, traj.costs
        if constrained:  # a failed step is charged for the steps it cut off (lagrangian)
            lagrange, charged = charge_lost_steps(
                lagrange, traj.costs, episodes["steps_lost"], config.gamma
            )
            traj = traj._replace(costs=charged.value)
            cost_value_stats = runner.cost_value_stats.update(
                charged.value.reshape(-1, len(budget_names))
            )
        else:
            cost_value_stats = runner.cost_value_stats
        # a cost's Q-values are learnt divided by the size of its discounted sum, as PPO's
        # cost critics learn theirs (ppo.cost_value_scale): unscaled, a loud cost (failure
        # charges of thousands) fills the shared Q-network's loss; on tanks whose cost is
        # counted 1e4 times the reward, a budget the multiplier never left 0 for cut
        # ISAC's return from -0.31 to -2.15
        cost_q_scale = cost_value_scale(cost_value_stats) / (1.0 - config.gamma)
        runner = remember(runner, traj)
        free = free_entries(env_params)
        target_entropy = (
            -jnp.sum(free, axis=-1).astype(traj.reward.dtype)
            if config.target_entropy is None
            else jnp.full(n, config.target_entropy, traj.reward.dtype)
        )  # (agents,)
        multiplier = runner.lagrange.multiplier

        def critic_loss(critic_params, target_params, actor_params, batch, alpha, key):
            """The twin Q-functions' squared soft Bellman error on ``batch``."""
            obs_n = normalize(runner.obs_stats, batch.obs)
            next_obs_n = normalize(runner.obs_stats, batch.next_obs)
            next_dist = policy_of(actor_params, next_obs_n, env_params)
            _, next_raw = next_dist.sample(key)
            next_log_prob = next_dist.log_prob(next_raw)  # (B, agents)
            next_q = q_values(target_params, next_obs_n, squash(next_raw, env_params))
            next_value = jnp.min(next_q[..., 0], axis=0) - alpha * next_log_prob
            bootstrap = config.gamma * (1.0 - batch.terminated.astype(next_value.dtype))
            target = batch.reward + bootstrap * next_value
            if constrained:  # costs: the larger of the two estimates
                next_cost = jnp.max(next_q[..., 1:], axis=0) * cost_q_scale
                cost_target = (batch.costs + bootstrap[..., None] * next_cost) / cost_q_scale
                target = jnp.concatenate([target[..., None], cost_target], axis=-1)
            else:
                target = target[..., None]
            q = q_values(critic_params, obs_n, batch.action)
            loss = 0.5 * jnp.mean(jnp.sum((q - jax.lax.stop_gradient(target)) ** 2, axis=0))
            return loss, jnp.mean(q[..., 0])

        def actor_loss(actor_params, critic_params, obs_n, alpha, key):
            """``alpha log pi - Q`` of reparameterised draws; also their log-probabilities."""
            dist = policy_of(actor_params, obs_n, env_params)
            _, raw = dist.sample(key)
            log_prob = dist.log_prob(raw)
            q = q_values(critic_params, obs_n, squash(raw, env_params))
            value = jnp.min(q[..., 0], axis=0)
            if constrained:
                cost = jnp.max(q[..., 1:], axis=0) * cost_q_scale
                value = combine_advantages(value, cost, multiplier)
            return jnp.mean(alpha * log_prob - value), log_prob

        def gradient_step(learner, key):
            """Critics, then actor, temperature and targets, on one batch from the buffer."""
            actor_state, critic_state, target, temperature = learner
            k_sample, k_next, k_pi = jax.random.split(key, 3)
            batch = buffer.sample(runner.buffer, k_sample).experience  # (B, agents, ...)
            alpha = jnp.exp(temperature.params["log_alpha"])  # (agents,)
            (q_loss, q_mean), q_grads = jax.value_and_grad(critic_loss, has_aux=True)(
                critic_state.params, target, actor_state.params, batch, alpha, k_next
            )
            critic_state = critic_state.apply_gradients(grads=q_grads)
            (pi_loss, log_prob), pi_grads = jax.value_and_grad(actor_loss, has_aux=True)(
                actor_state.params,
                critic_state.params,
                normalize(runner.obs_stats, batch.obs),
                alpha,
                k_pi,
            )
            actor_state = actor_state.apply_gradients(grads=pi_grads)
            entropy_gap = jax.lax.stop_gradient(log_prob + target_entropy)  # (B, agents)
            alpha_grad = jax.grad(lambda p: -jnp.mean(p["log_alpha"] * entropy_gap))(
                temperature.params
            )
            temperature = temperature.apply_gradients(grads=alpha_grad)
            target = optax.incremental_update(critic_state.params, target, config.tau)
            losses = (pi_loss, q_loss, -jnp.mean(log_prob), q_mean)
            return (actor_state, critic_state, target, temperature), losses

        key, k_grad = jax.random.split(runner.key)
        learner = (runner.actor, runner.critic, runner.target_critic, runner.temperature)
        (actor_state, critic_state, target, temperature), losses = jax.lax.scan(
            gradient_step, learner, jax.random.split(k_grad, config.gradient_steps)
        )
        ended = episode_sums(episodes)
        episode_cost = None
        if constrained:
            # each budgeted cost of an episode: the mean over the episodes that ended in
            # this update (charges included), else the update's cost per step x the horizon
            lagrange, episode_cost = dual_step(
                lagrange,
                ended,
                env_costs,
                budget_index,
                env.horizon,
                config,
                charged=charged.episode,
            )
        runner = runner.replace(
            actor=actor_state,
            critic=critic_state,
            target_critic=target,
            temperature=temperature,
            key=key,
            update=runner.update + 1,
            lagrange=lagrange,
            cost_value_stats=cost_value_stats,
            since_log=jax.tree_util.tree_map(jnp.add, runner.since_log, ended),
        )
        metrics = episode_means(ended)
        metrics.update(
            actor_loss=losses[0].mean(),
            value_loss=losses[1].mean(),  # the Q-functions' loss
            entropy=losses[2].mean(),  # -log pi of the policy's draws, mean over agents
            q_value=losses[3].mean(),
            alpha=jnp.mean(jnp.exp(temperature.params["log_alpha"])),
            env_steps=(config.warmup_steps + runner.update * config.num_steps) * config.num_envs,
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
        """``count`` update steps; every ``log_every``-th (counting from update ``first``)
        sends its metrics to ``log`` through a host callback."""

        return scan_updates(update_step, runner, env_params, count, first, log, config.log_every)

    def train(key, env_params=default_params, member=0):
        return run_updates(init(key, env_params, member), env_params)

    def policy(runner: Runner, deterministic: bool = True):
        """The trained policy ``policy(key, obs) -> action`` for one (unwrapped)
        environment: the squashed Gaussian's centre, or a draw."""

        def act(key, obs):
            if centralise:
                return act_on(key, obs.reshape(1, -1)).reshape(
                    user_env.action_space(default_params).shape
                )
            return act_on(key, obs)

        def act_on(key, obs):
            features = split_obs(obs)
            dist = policy_of(
                runner.actor.params, normalize(runner.obs_stats, features), default_params
            )
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
