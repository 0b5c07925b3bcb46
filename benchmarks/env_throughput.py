"""Throughput of every registered environment: env-steps/s at 1, 256 and 4096 environments.

    python benchmarks/env_throughput.py [--quick] [--envs NAME ...] [--out FILE]

Each run steps a batch of environments as users write it, ``jax.vmap(env.step)`` (its
auto-reset computes resets only where an episode ended: :mod:`jaxgrid.masked`), and at
4096 environments also with ``env.step_batch``, in a jitted ``lax.scan``; uniform random actions and
step keys are drawn before each timed run, and every observation and reward is consumed
(summed) so that XLA computes all of them. Feeder environments run with ``lindistflow``
and with ``distflow``. Median of repeated runs after compilation; compile time apart.
On a CPU the batch is split over one XLA host device per core. Environments whose step
factorises with LAPACK on a CPU (the ``tso*`` DC-OPF's Cholesky) can deadlock split over
devices: run them with ``PJRT_NPROC`` = devices + 1 (:mod:`jaxgrid._xla_flags`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

from timing import add_row, emit_table

SOLVER_ENVS = (
    "voltage33-v0",
    "voltage69-v0",
    "voltage141-v0",
    "dso33-v0",
    "ders33-v0",
    "ders141-v0",
)
BATCHES = ((1, 500), (256, 100), (4096, 20))  # (environments, steps per timed run)


def _setup_devices() -> None:
    n = os.cpu_count() or 1
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def measure(
    name: str, overrides: dict, num_envs: int, steps: int, repeats: int, batch: bool = False
):
    """``(env-steps/s, compile s)`` for one registered environment configuration, stepped
    by ``jax.vmap(env.step)`` or, with ``batch``, ``env.step_batch``."""
    import jaxgrid

    env, params = jaxgrid.make(name, **overrides)
    return measure_env(env, params, num_envs, steps, repeats, batch)


def measure_env(env, params, num_envs: int, steps: int, repeats: int, batch: bool = False):
    """``(env-steps/s, compile s)`` of any environment with gymnax's ``reset(key, params)``,
    ``step(key, state, action, params)`` and ``action_space(params).sample(key)`` (a peer's
    too), stepped by ``jax.vmap(env.step)`` (or ``env.step_batch``) in a jitted scan; every
    observation and reward leaf is consumed."""
    import numpy as np

    timed_run, compile_s = prepare_env(env, params, num_envs, steps, batch)
    times = [timed_run(2 + r) for r in range(repeats)]
    return num_envs * steps / float(np.median(times)), compile_s


def rollout(env, params, num_envs: int, batch: bool = False, policy=None):
    """``run(carry, actions, keys) -> (carry, consumed)``: a ``lax.scan`` of
    ``jax.vmap(env.step)`` (or ``env.step_batch``) over ``num_envs`` environments, one
    step per leading entry of ``actions`` and ``keys`` (:func:`draws`), every observation
    and reward summed so that XLA computes them. ``carry`` is the batched state, or with
    ``policy`` (``policy(key, obs) -> action`` of one environment, as
    :meth:`~jaxgrid.env.Environment.baselines` gives) ``(state, obs)``: the actions are
    then the policy's of each step's observation (``actions`` unused)."""
    import jax
    import jax.numpy as jnp

    step = env.step_batch if batch else jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def consumed(obs, reward):
        leaves = jax.tree_util.tree_leaves((obs, reward))
        return sum(jnp.sum(x.reshape(num_envs, -1), axis=1) for x in leaves)

    def body(state, xs):
        action, key = xs
        obs, state, reward, *_ = step(key, state, action, params)
        return state, consumed(obs, reward)

    def acting(carry, key):
        state, obs = carry
        k_act, key = jax.vmap(jax.random.split, out_axes=1)(key)
        action = jax.vmap(policy)(k_act, obs)
        obs, state, reward, *_ = step(key, state, action, params)
        return (state, obs), consumed(obs, reward)

    def run(carry, actions, keys):
        if policy is None:
            return jax.lax.scan(body, carry, (actions, keys))
        return jax.lax.scan(acting, carry, keys)

    return run


def draws(env, params, num_envs: int, steps: int):
    """``draw(key) -> (actions, keys)``, jitted: uniform random actions and step keys,
    ``(steps, num_envs, ...)`` each, for :func:`rollout`."""
    import jax

    space = env.action_space(params)

    @jax.jit
    def draw(key):
        k_act, k_step = jax.random.split(key)
        actions = jax.vmap(jax.vmap(space.sample))(
            jax.random.split(k_act, steps * num_envs).reshape(steps, num_envs, -1)
        )
        keys = jax.random.split(k_step, steps * num_envs).reshape(steps, num_envs, -1)
        return actions, keys

    return draw


def initial_carry(env, params, num_envs: int, policy=None):
    """:func:`rollout`'s first ``carry``: ``num_envs`` reset states (seed 0), with their
    observations where a ``policy`` acts."""
    import jax

    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.PRNGKey(0), num_envs), params
    )
    return state if policy is None else (state, obs)


def prepare_env(env, params, num_envs: int, steps: int, batch: bool = False, policy=None):
    """``(timed_run, compile s)``: the compiled rollout of :func:`measure_env`, and
    ``timed_run(seed)``, the seconds of one run of it on actions drawn from ``seed``
    (drawn before the clock starts), so that callers can interleave two environments'
    runs; with ``policy``, the policy's actions (:func:`rollout`)."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    shard = len(devices) > 1 and num_envs % len(devices) == 0
    mesh = Mesh(devices, ("envs",)) if shard else None
    draw = draws(env, params, num_envs, steps)

    def place(tree, spec):
        if mesh is None:
            return tree
        return jax.device_put(tree, NamedSharding(mesh, spec))

    state = [place(initial_carry(env, params, num_envs, policy), PartitionSpec("envs"))]
    run = jax.jit(rollout(env, params, num_envs, batch, policy))
    actions, keys = place(draw(jax.random.PRNGKey(1)), PartitionSpec(None, "envs"))
    t0 = time.perf_counter()
    state[0], _ = jax.block_until_ready(run(state[0], actions, keys))
    compile_s = time.perf_counter() - t0

    def timed_run(seed: int) -> float:
        actions, keys = jax.block_until_ready(
            place(draw(jax.random.PRNGKey(seed)), PartitionSpec(None, "envs"))
        )
        t0 = time.perf_counter()
        state[0], _ = jax.block_until_ready(run(state[0], actions, keys))
        return time.perf_counter() - t0

    return timed_run, compile_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--envs", nargs="*", help="only these environments")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    _setup_devices()
    warnings.simplefilter("ignore")
    import jax

    import jaxgrid

    names = args.envs or [n for n in jaxgrid.list_envs()]
    lines = [
        f"env-steps/s on {jax.devices()[0].device_kind} ({os.cpu_count()} cores, {len(jax.devices())} XLA "
        "devices), median of repeated runs; compile seconds at 4096 environments.",
        "",
        "| environment | solver | agents | 1 env | 256 envs | 4096 envs | 4096, step_batch "
        "| compile s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        solvers = ("lindistflow", "distflow") if name in SOLVER_ENVS else (None,)
        for solver in solvers:
            overrides = {"solver": solver} if solver else {}
            env, _ = jaxgrid.make(name, **overrides)
            cells, compile_s = [], 0.0
            repeats = 3 if args.quick else 7
            for num_envs, steps in BATCHES:
                steps = max(steps // 5, 4) if args.quick else steps
                rate, compile_s = measure(name, overrides, num_envs, steps, repeats)
                cells.append(f"{rate:.3g}")
            rate, _ = measure(name, overrides, num_envs, steps, repeats, batch=True)
            cells.append(f"{rate:.3g}")
            line = (
                f"| {name} | {solver or '-'} | {env.num_agents} | "
                + " | ".join(cells)
                + f" | {compile_s:.1f} |"
            )
            add_row(lines, line)
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
