"""Model-predictive control on ``dso33-v0``: losses, curtailment and voltage-band
violations of receding-horizon MPC on the environment's own model
(:mod:`jaxgrid.control.mpc`, perfect foresight) beside no control, on held-out days.

    python benchmarks/dso_mpc.py [--horizon 8] [--iterations 30] [--cost-weight 10]
                                 [--episodes 8] [--seed 0]

Set against PowerZooJax's DSO results (34-47 % loss reduction with no violation) and the
ceiling of ``benchmarks/dso_ceiling.py`` in docs/training.md.
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--horizon", type=int, default=8, help="steps planned ahead")
    parser.add_argument("--iterations", type=int, default=30, help="Adam iterations a step")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument(
        "--cost-weight", type=float, default=10.0, help="reward per pu outside the band"
    )
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import jax

    import jaxgrid
    from jaxgrid.control.mpc import MPCConfig, mpc_controller
    from jaxgrid.train.evaluate import batch_totals, held_out, summarise

    env, params = jaxgrid.make("dso33-v0")
    config = MPCConfig(args.horizon, args.iterations, args.learning_rate, args.cost_weight)
    policies = {
        "no_control": env.baselines(params)["no_control"],
        "mpc": mpc_controller(env, params, config),
    }
    test, key = held_out(params), jax.random.PRNGKey(args.seed)
    print(f"dso33-v0, {args.episodes} held-out days, {config}")
    print(
        "| policy | return | loss MW | loss reduction | curtailed MWh/day | band violation steps | s |"
    )
    print("|---|---|---|---|---|---|---|")
    reference = None
    for name, policy in policies.items():
        start = time.perf_counter()
        run = jax.jit(lambda k, p=policy: batch_totals(p, env, test, k, args.episodes))
        result = summarise(run(key), env)
        seconds = time.perf_counter() - start
        loss = result["metrics"]["loss_mw"]
        reference = loss if reference is None else reference
        print(
            f"| {name} | {result['return']:.3f} | {loss:.4f} | {1 - loss / reference:.1%} | "
            f"{abs(result['objectives']['curtailment']):.2f} | {result['violation_rate']:.1%} | "
            f"{seconds:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
