"""MPC against the other baselines on held-out days: arbitrage-v0 and voltage33-v0.

    python benchmarks/mpc_baselines.py [--episodes N]

Prints, per environment, every baseline's mean episode return, objectives and costs over
the same ``N`` held-out episodes (``jaxgrid.train.evaluate``, key 0): for arbitrage-v0
with the perfect-foresight MILP (HiGHS) and MPC's share of it, for voltage33-v0 the
controllable ratio (CR: share of steps with every bus in [0.95, 1.05] pu) and the
reactive power (QL: the ``reactive_power`` objective, minus the summed mean ``|q|``,
Mvar, over the episode).
"""

from __future__ import annotations

import argparse

import jax

import jaxgrid
from jaxgrid.train.evaluate import evaluate, oracle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32)
    args = parser.parse_args()
    key = jax.random.PRNGKey(0)

    env, params = jaxgrid.make("arbitrage-v0")
    best = oracle(env, params, key, args.episodes)
    print(f"arbitrage-v0, {args.episodes} held-out days; MILP oracle {best:.2f} a day\n")
    print("| policy | profit + degradation a day | share of the oracle |")
    print("|---|---|---|")
    for name, policy in env.baselines(params).items():
        result = evaluate(policy, env, params, key, args.episodes)
        print(f"| {name} | {result['return']:.2f} | {100 * result['return'] / best:.1f} % |")

    env, params = jaxgrid.make("voltage33-v0")
    print(f"\nvoltage33-v0, {args.episodes} held-out days\n")
    print("| policy | CR | reactive power (sum of mean abs q, Mvar) | voltage objective |")
    print("|---|---|---|---|")
    for name, policy in env.baselines(params).items():
        result = evaluate(policy, env, params, key, args.episodes)
        objectives = result["objectives"]
        print(
            f"| {name} | {result['metrics']['controllable']:.3f} | "
            f"{0.0 - objectives['reactive_power']:.1f} | {objectives['voltage']:.3f} |"
        )


if __name__ == "__main__":
    main()
