"""How far flexible loads alone can take ``dso33-v0``: losses and voltage-band violations on
the held-out days when every flexible load is curtailed, or curtailed and deferred, to its
capacity at every step, beside the baselines.

    python benchmarks/dso_ceiling.py [--episodes 32] [--seed 0] [--load-scale 3.0]

PowerZooJax's DSO results (34-47 % loss reduction with no violation) are set against this
ceiling in docs/training.md: an upper bound on what any policy can reduce.
"""

from __future__ import annotations

import argparse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--load-scale", type=float, default=3.0, help="the factory's load_scale")
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp

    import jaxgrid
    from jaxgrid.train.evaluate import evaluate, evaluate_baselines

    env, params = jaxgrid.make("dso33-v0", load_scale=args.load_scale)
    key = jax.random.PRNGKey(args.seed)
    shape = env.action_space(params).shape
    n_flex = shape[-1] // 2  # curtail shares, then shift shares

    def curtail_all(key, obs):
        return jnp.zeros(shape).at[:, :n_flex].set(1.0)

    def curtail_and_defer_all(key, obs):
        return jnp.ones(shape)

    results = evaluate_baselines(env, params, key, args.episodes)
    results["curtail_all"] = evaluate(curtail_all, env, params, key, args.episodes)
    results["curtail_and_defer_all"] = evaluate(
        curtail_and_defer_all, env, params, key, args.episodes
    )
    reference = results["no_control"]["objectives"]["losses"]
    print(
        f"dso33-v0 (load_scale {args.load_scale}), {args.episodes} held-out episodes (seed {args.seed})\n"
    )
    print(
        "| policy | return | losses (MWh/day) | loss reduction | curtailed (MWh/day) | steps outside the band |"
    )
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        losses = r["objectives"]["losses"]
        print(
            f"| {name} | {r['return']:.3f} | {-losses:.3f} | {1 - losses / reference:.1%} "
            f"| {-r['objectives']['curtailment']:.2f} | {r['violation_rate']:.1%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
