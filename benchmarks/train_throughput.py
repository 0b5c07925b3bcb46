"""End-to-end training throughput of the bundled PPO and IPPO: env-steps/s per env.

    python benchmarks/train_throughput.py [--quick] [--devices N] [--out FILE]
        [--compute-dtypes float32 bfloat16]

Each case compiles ``run_updates`` (rollout, GAE, minibatch updates: the whole training
loop) for a fixed number of updates, runs it once to compile, then times repeated calls;
env-steps/s is ``updates * num_envs * num_steps`` over the median time. The network size,
batch and update schedule are printed beside each number. PowerZooJax's figures (same
kind of 2-core machine, its own PPO through Rejax and its typed IPPO, see
../shared/DESIGN.md section 6) are the goals' references: its DSO PPO and DERs IPPO use
separate (or shared-trunk) 128-128 MLPs on 128 environments x 48 steps, 4 epochs.

"matmul bound" is the speed no implementation of the same networks and batch can pass on
this machine: the time the networks' matrix products alone take per environment step — the
rollout's forward pass at ``envs x agents`` rows, then per epoch the forward pass, weight
and input gradients at the rows of one gradient pass — each at the FLOP/s that
``tanh(x @ w)`` reaches here at that many rows and the widest hidden layer (best of
repeats, 50 products per timed call so that no dispatch overhead is counted).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# PowerZooJax's training batch (128 envs x 48 steps, 128-128 networks, 4 epochs)
POWERZOOJAX = dict(num_envs=128, num_steps=48, hidden=(128, 128), update_epochs=4,
                   distribution="gaussian")  # fmt: skip
# (label, env, env kwargs, algo, PPOConfig fields, reference env-steps/s, goal factor)
CASES = [
    ("PowerZooJax's DSO PPO batch", "dso33-v0", {}, "ppo",
     dict(POWERZOOJAX, num_minibatches=4), 4.7e4, 2.0),
    ("PowerZooJax's DERs IPPO batch", "ders141-v0", {}, "ippo",
     dict(POWERZOOJAX, num_minibatches=1), 1.2e4, 2.0),
    ("PowerZooJax's DERs IPPO network (shared torso)", "ders141-v0", {}, "ippo",
     dict(POWERZOOJAX, num_minibatches=1, shared_torso=True), 1.2e4, 2.0),
    ("tuned (README result)", "smartgrid-v0", {}, "ippo", dict(), None, None),
    ("small network", "smartgrid-v0", {}, "ippo",
     dict(num_envs=512, num_steps=32, hidden=(16,), shared_torso=True, update_epochs=1,
          num_minibatches=1), None, None),
    ("tuned (README result)", "arbitrage-v0", {}, "ppo", dict(), None, None),
    ("tuned (README result)", "voltage33-v0", {}, "ippo", dict(), None, None),
]  # fmt: skip
GOAL_ABSOLUTE = {"smartgrid-v0": 1e5}  # IPPO on smartgrid-v0: >= 1e5 env-steps/s


def _setup_devices(n: int) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if n > 1 and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def network_flops(net_params, agent_types) -> tuple[float, float]:
    """``(forward, first-layer)`` multiply-add counts of the networks per environment step,
    summed over agents (each agent through its type's actor and critic)."""
    import jax
    import numpy as np

    members = {t: agent_types.count(name) for t, name in enumerate(dict.fromkeys(agent_types))}
    forward = first = 0.0
    for type_name, subtree in net_params["params"].items():
        count = members[int(type_name.split("_")[1])]
        for path, leaf in jax.tree_util.tree_flatten_with_path(subtree)[0]:
            if jax.tree_util.keystr(path).endswith("['kernel']"):
                forward += count * float(np.prod(leaf.shape))
                if "Dense_0" in jax.tree_util.keystr(path) and "MLP" in jax.tree_util.keystr(path):
                    first += count * float(np.prod(leaf.shape))
    return forward, first


def matmul_rate(rows: int, width: int, repeats: int, products: int = 50) -> float:
    """FLOP/s of ``tanh(x @ w)`` at ``(rows, width) @ (width, width)``: what this machine's
    matrix products reach at the size of a pass's hidden layers (``products`` chained in
    one compiled loop, so that dispatch is not counted)."""
    import jax
    import jax.numpy as jnp

    x, w = jnp.ones((rows, width)), jnp.full((width, width), 1.0 / width)
    chain = jax.jit(lambda x, w: jax.lax.fori_loop(0, products, lambda _, h: jnp.tanh(h @ w), x))
    jax.block_until_ready(chain(x, w))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(chain(x, w))
        best = min(best, time.perf_counter() - t0)
    return products * 2.0 * rows * width * width / best


def pass_rows(ppo, agents: int) -> int:
    """Network rows (transitions x agents) in one gradient pass of a minibatch."""
    from jaxgrid.train.ppo import microbatch_count

    minibatch = ppo.num_envs * ppo.num_steps // ppo.num_minibatches
    return minibatch * agents // microbatch_count(minibatch, agents, ppo.microbatch_rows)


def matmul_bound(ppo, net_params, agent_types, repeats: int) -> float:
    """Env-steps/s above which training cannot run on this machine, counting only the
    networks' matrix products at the measured product rates: per environment step, one
    forward pass in the rollout, then per epoch a forward pass, weight gradients and
    input gradients of every layer but the first."""
    forward, first = network_flops(net_params, agent_types)
    width, agents = max(ppo.hidden), len(agent_types)
    update_flops = ppo.update_epochs * (2 * forward + 2 * forward + 2 * (forward - first))
    rollout_rate = matmul_rate(ppo.num_envs * agents, width, repeats)
    update_rate = matmul_rate(pass_rows(ppo, agents), width, repeats)
    seconds = 2 * forward / rollout_rate + update_flops / update_rate
    return 1.0 / seconds


def measure(env_name, env_kwargs, algo, fields, updates: int, repeats: int):
    """``(env-steps/s, compile s, agents, PPOConfig, matmul bound)`` of one case."""
    import jax

    import jaxgrid
    from jaxgrid.train.run import ALGOS, RunConfig

    config = RunConfig(env=env_name, algo=algo, env_kwargs=env_kwargs, ppo=dict(fields))
    ppo = config.algo_config()
    env, params = jaxgrid.make(env_name, **config.env_kwargs)
    fns = ALGOS[algo].make_train(ppo, env, params)
    run = jax.jit(fns.run_updates, static_argnums=(2,), donate_argnums=0)
    runner = jax.jit(fns.init)(jax.random.PRNGKey(0), params)
    t0 = time.perf_counter()
    runner, _ = jax.block_until_ready(run(runner, params, updates))
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        runner, _ = jax.block_until_ready(run(runner, params, updates))
        times.append(time.perf_counter() - t0)
    steps = updates * ppo.num_envs * ppo.num_steps
    agent_types = tuple(getattr(env, "agent_types", ("agent",) * env.num_agents))
    if algo == "ppo":
        agent_types = ("agent",)  # one centralised policy
    bound = matmul_bound(ppo, runner.train_state.params["net"], agent_types, repeats)
    return steps / statistics.median(times), compile_s, env.num_agents, ppo, bound


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer updates and repeats")
    parser.add_argument("--devices", type=int, default=1, help="XLA host devices (CPU)")
    parser.add_argument("--envs", nargs="*", help="only these environments")
    parser.add_argument("--out", help="also write the table to this markdown file")
    parser.add_argument(
        "--compute-dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16"],
        help="the networks' compute dtypes to time (PPOConfig.compute_dtype), each case in each",
    )  # fmt: skip
    args = parser.parse_args(argv)
    _setup_devices(args.devices)
    import jax

    updates, repeats = (2, 3) if args.quick else (4, 7)
    lines = [
        f"Training env-steps/s on {jax.devices()[0].platform} ({os.cpu_count()} cores, "
        f"{len(jax.devices())} XLA device(s)), median of {repeats} runs of {updates} "
        "updates after compilation; compute: the networks' products and activations "
        "(parameters, optimiser and losses float32); the matmul bound is float32's.",
        "",
        "| algo | env | agents | case | network | compute | envs x steps | epochs x minibatches "
        "| rows per gradient pass | env-steps/s | agent-steps/s | goal | matmul bound "
        "| first call s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    cases = [
        (*case, dtype)
        for case in CASES
        for dtype in args.compute_dtypes
        if not args.envs or case[1] in args.envs
    ]
    for label, env_name, env_kwargs, algo, fields, reference, factor, dtype in cases:
        rate, compile_s, agents, ppo, bound = measure(
            env_name, env_kwargs, algo, dict(fields, compute_dtype=dtype), updates, repeats
        )
        if reference is not None:
            goal = f">= {factor * reference:.3g} ({factor:g}x PowerZooJax {reference:.3g})"
        elif env_name in GOAL_ABSOLUTE and algo == "ippo":
            goal = f">= {GOAL_ABSOLUTE[env_name]:.3g}"
        else:
            goal = "-"
        torso = " shared" if ppo.shared_torso else ""
        network = f"{'-'.join(map(str, ppo.hidden))}{torso} tanh, {ppo.distribution}"
        row = (
            f"| {algo} | {env_name} | {agents} | {label} | {network} | {dtype} | "
            f"{ppo.num_envs} x {ppo.num_steps} | {ppo.update_epochs} x {ppo.num_minibatches} | "
            f"{pass_rows(ppo, agents if algo == 'ippo' else 1)} | {rate:.3g} | "
            f"{rate * agents:.3g} | {goal} | {bound:.3g} | {compile_s:.1f} |"
        )
        lines.append(row)
        print(row, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
