"""MPC against the other baselines on held-out days, in every environment that lists it.

    python benchmarks/mpc_baselines.py [--envs NAME ...] [--episodes N]
                                       [--mpc HORIZON ITERATIONS LEARNING_RATE COST_WEIGHT]

Prints, per environment, every baseline's mean episode return, objectives, costs, share
of steps with a cost and metrics over the same ``N`` held-out episodes
(``jaxgrid.train.evaluate``, key 0), and the seconds each took (compile included). Where
the environment has a perfect-foresight oracle (an LP/MILP through HiGHS:
``arbitrage-v0``, ``evfleet33-v0``, ``dcmg-v0``, ``tso14-continuous-v0``, ``opf14-v0``)
also its mean return and each policy's share of it (its gap to it where the optimum is
not positive).
``--mpc`` replaces the environment's MPC settings (:class:`jaxgrid.control.MPCConfig`),
which is how the settings in the environments' cards were chosen; ``--forecast-error STD
GROWTH`` makes MPC plan on noisy forecasts of the exogenous series instead of the truth
(relative error ``STD * h ** GROWTH`` at lead ``h``).
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxgrid
from jaxgrid.control import MPCConfig, mpc_controller
from jaxgrid.train.evaluate import evaluate, oracle

ENVS = (
    "arbitrage-v0",
    "voltage33-v0",
    "dso33-v0",
    "ders33-v0",
    "evfleet33-v0",
    "dcmg-v0",
    "voltage13-v0",
    "tso14-continuous-v0",
    "opf14-v0",
)


def table(name: str, episodes: int, mpc: MPCConfig | None, forecast_error) -> str:
    """The markdown table of ``name``'s baselines over ``episodes`` held-out days, MPC with
    settings ``mpc`` (else the environment's) planning on forecasts with ``forecast_error``
    ``(std, growth)`` (else on the truth)."""
    env, params = jaxgrid.make(name)
    key = jax.random.PRNGKey(0)
    policies = env.baselines(params)
    if mpc is None and forecast_error is not None:
        mpc = policies["mpc"].config
    if mpc is not None:
        if forecast_error is not None:
            mpc = mpc._replace(
                forecast_error_std=forecast_error[0], forecast_error_growth=forecast_error[1]
            )
        policies["mpc"] = mpc_controller(env, params, mpc)
    best = oracle(env, params, key, episodes)
    rows = []
    for policy_name, policy in policies.items():
        start = time.perf_counter()
        result = evaluate(policy, env, params, key, episodes)
        seconds = time.perf_counter() - start
        values = {"return": result["return"]}
        if best is not None and best > 0:
            values["share of oracle"] = result["return"] / best
        elif best is not None:  # a share of a negative optimum means nothing
            values["gap to oracle"] = best - result["return"]
        values.update(result["objectives"])
        values.update({f"cost:{k}": v for k, v in result["costs"].items()})
        values["violation steps"] = result["violation_rate"]
        values.update(result["metrics"])
        values["s"] = seconds
        rows.append((policy_name, values))
        print(f"{name} {policy_name}: {values}", flush=True)
    columns = list(rows[0][1])
    lines = [
        f"{name}, {episodes} held-out episodes"
        + (f"; perfect-foresight oracle {best:.4g} an episode" if best is not None else ""),
        "",
        "| policy | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    lines += [
        f"| {policy_name} | " + " | ".join(f"{values[c]:.4g}" for c in columns) + " |"
        for policy_name, values in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument(
        "--mpc",
        nargs=4,
        type=float,
        metavar=("HORIZON", "ITERATIONS", "LEARNING_RATE", "COST_WEIGHT"),
        help="MPC settings in place of the environment's",
    )
    parser.add_argument(
        "--final-learning-rate",
        type=float,
        help="with --mpc: Adam's step size at the last iteration (cosine decay)",
    )
    parser.add_argument(
        "--forecast-error",
        nargs=2,
        type=float,
        metavar=("STD", "GROWTH"),
        help="MPC plans on forecasts with this error model",
    )
    args = parser.parse_args()
    mpc = None
    if args.mpc:
        horizon, iterations, learning_rate, cost_weight = args.mpc
        mpc = MPCConfig(
            int(horizon),
            int(iterations),
            learning_rate,
            cost_weight,
            final_learning_rate=args.final_learning_rate,
        )
    for name in args.envs:
        print("\n" + table(name, args.episodes, mpc, args.forecast_error) + "\n", flush=True)


if __name__ == "__main__":
    main()
