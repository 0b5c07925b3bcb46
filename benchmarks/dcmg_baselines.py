"""dcmg-v0: every baseline and the perfect-foresight oracle on the same held-out days.

    python benchmarks/dcmg_baselines.py [--episodes 8] [--seed 0]

Prints a Markdown table: each policy's mean return, objectives and costs per day
(:mod:`jaxgrid.train.evaluate`, float32 rollouts) and the oracle's mean value (HiGHS, on
the host), with the oracle's and the baselines' wall time.
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxgrid
from jaxgrid.train.evaluate import evaluate_baselines, oracle


def main() -> None:
    """Run the baselines and the oracle and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env, params = jaxgrid.make("dcmg-v0")
    key = jax.random.PRNGKey(args.seed)
    t0 = time.perf_counter()
    results = evaluate_baselines(env, params, key, args.episodes)
    t_baselines = time.perf_counter() - t0
    t0 = time.perf_counter()
    best = oracle(env, params, key, args.episodes)
    t_oracle = time.perf_counter() - t0
    columns = [*env.objective_names, *env.cost_names]
    print(f"dcmg-v0, {args.episodes} held-out days, seed {args.seed}: means per day\n")
    print("| policy | return | " + " | ".join(columns) + " |")
    print("|---" * (2 + len(columns)) + "|")
    for name, r in results.items():
        values = [*r["objectives"].values(), *r["costs"].values()]
        print(f"| {name} | {r['return']:.0f} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    print(f"| oracle | {best:.0f} |" + " |" * len(columns))
    print(f"\nbaselines {t_baselines:.1f} s (compiling included), oracle {t_oracle:.1f} s")


if __name__ == "__main__":
    main()
