"""smartgrid-v0 throughput against the real EthicalSmartGrid, side by side in one run.

    python benchmarks/smartgrid_throughput.py [--quick] [--out FILE]

The peer: ethical-smart-grid 2.0.0's basic scenario (20 Households, 5 Offices, 1 School,
annual OpenEI profiles, random generator 80-120 %, AdaptabilityThree), one environment
stepped in Python with actions drawn beforehand. jaxgrid: ``smartgrid-v0`` stepped in a
jitted ``lax.scan`` under ``vmap`` at 1, 256 and 4096 environments, with uniform random
actions and step keys drawn before each timed run (drawing 156 uniforms per env-step
inside the loop would cost about as much as the environment itself), median of
repeated runs after compilation, compile time reported apart. On a CPU the batch is
split over one XLA host device per core (``--xla_force_host_platform_device_count``,
set before JAX starts).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from peer_table import side_by_side


def peer_rate(steps: int) -> float:
    """Env-steps/s of the package's basic scenario (actions drawn before timing)."""
    import random

    import numpy as np
    from smartgrid import SmartGrid, World
    from smartgrid.agents import Agent, DataOpenEIConversion
    from smartgrid.agents.profile import comfort
    from smartgrid.observation import ObservationManager
    from smartgrid.rewards.numeric.differentiated import AdaptabilityThree
    from smartgrid.util import RandomEnergyGenerator
    from smartgrid.wrappers import SingleRewardAggregator

    data = Path(__file__).parents[1] / "jaxgrid" / "data" / "openei"
    random.seed(0)
    converter = DataOpenEIConversion()
    for name, stem, fn in (
        ("Household", "residential", comfort.flexible_comfort_profile),
        ("Office", "office", comfort.neutral_comfort_profile),
        ("School", "school", comfort.strict_comfort_profile),
    ):
        converter.load(name, str(data / f"profile_{stem}_annually.npz"), fn)
    agents = [Agent(f"Household{i + 1}", converter.profiles["Household"]) for i in range(20)]
    agents += [Agent(f"Office{i + 1}", converter.profiles["Office"]) for i in range(5)]
    agents += [Agent("School1", converter.profiles["School"])]
    env = SingleRewardAggregator(
        SmartGrid(
            World(agents, RandomEnergyGenerator()),
            [AdaptabilityThree()],
            10_000,
            ObservationManager(),
        )
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    names = env.agents
    highs = np.array([env.action_space(a).high for a in names], np.float64)
    actions = rng.uniform(0, 1, (steps, len(names), 6)) * highs
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        for act in actions:
            env.step({a: act[i] for i, a in enumerate(names)})
        rates.append(steps / (time.perf_counter() - t0))
    return float(np.median(rates))


def jaxgrid_rate(num_envs: int, steps: int, repeats: int):
    """``(env-steps/s, compile s)`` of smartgrid-v0 under vmap, median of ``repeats`` runs."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jaxgrid

    env, params = jaxgrid.make("smartgrid-v0")
    high = env.action_space(params).high
    devices = jax.devices()
    shard = len(devices) > 1 and num_envs % len(devices) == 0
    batch = NamedSharding(Mesh(devices, ("envs",)), PartitionSpec("envs")) if shard else None

    def run(state, actions, keys):
        # every agent's observation and reward is consumed (summed), as a policy and a
        # learner would, so that XLA cannot skip computing any of them
        def body(state, xs):
            action, key = xs
            obs, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                key, state, action, params
            )
            return state, jnp.sum(obs, axis=(1, 2)) + jnp.sum(reward, axis=1)

        return jax.lax.scan(body, state, (actions, keys))

    def draws(seed):  # actions and step keys for the whole run, drawn before timing
        k_act, k_step = jax.random.split(jax.random.PRNGKey(seed))
        actions = jax.random.uniform(k_act, (steps, num_envs) + high.shape) * high
        keys = jax.random.split(k_step, steps * num_envs).reshape(steps, num_envs, -1)
        if batch is not None:
            spec = NamedSharding(batch.mesh, PartitionSpec(None, "envs"))
            actions, keys = jax.device_put(actions, spec), jax.device_put(keys, spec)
        return jax.block_until_ready((actions, keys))

    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    if batch is not None:
        state = jax.device_put(state, batch)
    rollout = jax.jit(run)
    actions, step_keys = draws(1)
    t0 = time.perf_counter()
    state, _ = jax.block_until_ready(rollout(state, actions, step_keys))
    compile_s = time.perf_counter() - t0
    times = []
    for r in range(repeats):
        actions, step_keys = draws(2 + r)
        t0 = time.perf_counter()
        state, _ = jax.block_until_ready(rollout(state, actions, step_keys))
        times.append(time.perf_counter() - t0)
    return num_envs * steps / float(np.median(times)), compile_s


def main(argv=None) -> int:
    return side_by_side(
        argv,
        __doc__,
        ("ethical-smart-grid 2.0.0 (Python)", peer_rate),
        ("jaxgrid smartgrid-v0 (jit + vmap)", jaxgrid_rate),
        ((1, 1000), (256, 200), (4096, 100)),
        "smartgrid env-steps/s (26 agents)",
        26,
    )


if __name__ == "__main__":
    sys.exit(main())
