"""The ``jaxgrid`` command line: ``jaxgrid list`` and ``jaxgrid demo``."""

from __future__ import annotations

import argparse
import sys
import time


def _demo(args) -> int:
    import jax
    import jax.numpy as jnp

    import jaxgrid

    env, params = jaxgrid.make(args.env)
    steps = env.horizon * args.episodes
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.envs)
    print(
        f"{env.name}: {env.num_agents} agents, horizon {env.horizon} steps, "
        f"{args.envs} environments x {args.episodes} episode(s) in one vmapped lax.scan "
        f"on {jax.devices()[0].platform.upper()}\n"
    )
    skip = {
        "reward_vector",
        "objective_mask",
        "costs",
        "final_observation",
        "action_clipped",
        "action_nonfinite",
    }
    header = None
    for name, policy in env.baselines(params).items():
        run = jax.jit(
            jax.vmap(lambda k, policy=policy: jaxgrid.rollout(env, params, policy, k, steps))
        )
        t0 = time.perf_counter()
        trajectory = jax.block_until_ready(run(keys))
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        trajectory = jax.block_until_ready(run(keys))
        rate = args.envs * steps / (time.perf_counter() - t0)
        info = trajectory.info
        row = {
            "policy": name,
            "return/episode": float(jnp.sum(trajectory.reward))
            / (args.envs * args.episodes * env.num_agents),
        }
        for i, obj in enumerate(env.objective_names):
            row[obj] = float(jnp.mean(info["reward_vector"][..., i]))
        for i, cost in enumerate(env.cost_names):
            row[f"cost:{cost}"] = float(jnp.mean(info["costs"][..., i]))
        for key, value in info.items():
            if key not in skip and value.ndim == 2:  # one scalar per step (time, env)
                row[key] = float(jnp.mean(value.astype(jnp.float32)))
        row["env-steps/s"] = rate
        row["compile s"] = compile_s
        if header is None:
            header = list(row)
            print("| " + " | ".join(header) + " |")
            print("|" + "|".join("---" for _ in header) + "|")
        cells = [row[h] if isinstance(row[h], str) else f"{row[h]:.4g}" for h in header]
        print("| " + " | ".join(cells) + " |")
    if "controllable" in header:
        print("\ncontrollable = share of steps with every bus voltage in [0.95, 1.05] pu (CR)")
    return 0


def _list(args) -> int:
    import jaxgrid

    for name in jaxgrid.list_envs():
        print(name)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jaxgrid", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the registered environments").set_defaults(func=_list)
    demo = sub.add_parser("demo", help="roll the baselines of an environment and print a table")
    demo.add_argument("--env", default="voltage33-v0")
    demo.add_argument("--envs", type=int, default=256, help="environments run in parallel (vmap)")
    demo.add_argument("--episodes", type=int, default=1, help="episodes per environment")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
