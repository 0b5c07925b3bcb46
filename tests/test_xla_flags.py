"""jaxlib 0.10's LAPACK kernels deadlock when as many run side by side as XLA's CPU pool
has threads: a CPU split into host devices, in a loop (jaxgrid/_xla_flags.py), or two
independent solves in one program on one device. The three-phase environments' step no
longer calls them; the DC-OPF runs one at a time."""

import os
import subprocess
import sys
import textwrap

import pytest

SPLIT_STEP = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    import jaxgrid
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    assert len(jax.devices()) == 2
    env, params = jaxgrid.make("voltage123-v0")
    envs = NamedSharding(Mesh(jax.devices(), ("envs",)), PartitionSpec("envs"))
    keys = jax.random.split(jax.random.PRNGKey(0), 64)
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    actions = jax.vmap(env.action_space(params).sample)(keys)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    @jax.jit
    def rollout(state):  # the kernels deadlocked inside a loop, as a user's rollout is
        def body(state, _):
            obs, state, reward, *_ = step(keys, state, actions, params)
            return state, reward

        return jax.lax.scan(body, state, length=3)

    state, reward = rollout(jax.device_put(state, envs))
    print("stepped", float(jnp.sum(reward)))
    """
)


def returns(script: str, env: dict, what: str) -> str:
    """The stdout of ``script`` run by this Python with ``env``; a failure if it does not
    return in 300 s (a deadlock) or fails."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not return in 300 s (deadlock)")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_step_split_over_two_cpu_devices_returns():
    """`voltage123-v0`'s step inverts each environment's tap system; with LAPACK's getrf,
    a scan of it split over two host devices at 64 environments deadlocked in jaxlib
    0.10 every time on a 2-core machine (XLA's default pool, `PJRT_NPROC` unset)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    for name in ("PJRT_NPROC", "NPROC"):  # what XLA's CPU client sizes its pool by
        env.pop(name, None)
    assert "stepped" in returns(SPLIT_STEP, env, "a step split over two CPU devices")


EIGHT_DISPATCHES = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgrid.dispatch import dcopf
    from jaxgrid.envs.tso.ratings import angle_ratings
    from jaxgrid.grid import network_from_matpower

    network = network_from_matpower("case300")
    rated = network.replace(rate_mva=jnp.asarray(angle_ratings(network), jnp.float32))
    c1 = np.asarray(network.cost_poly)[:, 1]
    tiers = jnp.asarray(np.stack([np.ones_like(c1, bool), c1 <= c1.min()]))
    levels = jnp.asarray([0.3, 0.6, 0.9, 1.1], jnp.float32)

    def flows(on, level):
        return dcopf(rated, level * network.pd_mw, commitment=on).p_branch_mw

    grid = jax.jit(jax.vmap(jax.vmap(flows, (None, 0)), (0, None)))
    print("dispatched", grid(tiers, levels).shape)
    """
)


def test_the_dcopf_runs_one_lapack_solve_at_a_time_on_one_device():
    """The DC-OPF's interior point solved its balance row and its Newton step as two
    independent Cholesky solves; on one XLA device with a pool of two threads (this 2-core
    machine's default) eight batched dispatches of case300 (234 nodes; every unit on and
    the cheapest tier at four load levels, the tso screening of the time) held both threads in jaxlib 0.10's triangular-solve kernels for ever. The balance row now
    rides along as a second right-hand side."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PJRT_NPROC="2")
    env.pop("XLA_FLAGS", None)
    assert "dispatched" in returns(EIGHT_DISPATCHES, env, "case300's eight dispatches")
