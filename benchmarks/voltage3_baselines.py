"""The three-phase voltage control environments' baselines over the measured year.

    python benchmarks/voltage3_baselines.py [--env voltage13-v0] [--float64] [--fixed-taps]

For each baseline (no control, volt-var droop, random actions): the share of steps with
every monitored node in the band (MAPDN's CR), the mean of each cost a step, the mean
reactive power and the share of steps whose power flow failed; one episode a day, every
day of the year (366), without auto-reset, in one compiled program per policy.
``--fixed-taps`` holds the regulators at their reset taps (``tap_control=False``).
"""

from __future__ import annotations

import argparse


def year_table(env, params) -> list[dict]:
    """One row per baseline: CR, mean costs, mean |q| (kvar) and failed share."""
    import jax
    import jax.numpy as jnp

    n_days = params.profiles.load.shape[0] // env.horizon

    def one_day(policy, day):
        that_day = params.replace(profiles=params.profiles.replace(days=day[None]))
        obs, state = env.reset(jax.random.PRNGKey(0), that_day)

        def step(carry, key):
            obs, state, alive = carry
            obs, state, _, terminated, _, info = env.step_env(
                key, state, policy(key, obs), that_day
            )
            out = (
                info["controllable"] & alive,
                info["costs"][0] * alive,
                jnp.mean(jnp.abs(info["q_kvar"])) * alive,
                info["power_flow_failed"] & alive,
                alive,
            )
            return (obs, state, alive & ~terminated), out

        keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(1), day), env.horizon)
        return jax.lax.scan(step, (obs, state, jnp.ones((), bool)), keys)[1]

    rows = []
    for name, policy in env.baselines(params).items():
        cr, costs, q, failed, alive = jax.device_get(
            jax.jit(jax.vmap(lambda d, p=policy: one_day(p, d)))(jnp.arange(n_days))
        )
        steps = alive.sum()
        rows.append(
            dict(
                baseline=name,
                cr=cr.sum() / steps,
                costs=costs.reshape(-1, costs.shape[-1]).sum(axis=0) / steps,
                q_kvar=q.sum() / steps,
                failed=failed.sum() / steps,
                steps=int(steps),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="voltage13-v0")
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--fixed-taps", action="store_true")
    args = parser.parse_args()
    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jaxgrid

    env, params = jaxgrid.make(args.env, **({"tap_control": False} if args.fixed_taps else {}))
    rows = year_table(env, params)
    names = " | ".join(env.cost_names)
    print(
        f"| {args.env}{' (fixed taps)' if args.fixed_taps else ''} baseline | CR | {names} (mean a step) | mean abs q (kvar) | failed | steps |"
    )
    print("|---" * (6 + len(env.cost_names) - 1) + "|")
    for r in rows:
        costs = " | ".join(f"{c:.3g}" for c in r["costs"])
        print(
            f"| {r['baseline']} | {100 * r['cr']:.1f} % | {costs} | {r['q_kvar']:.0f} | "
            f"{100 * r['failed']:.2f} % | {r['steps']} |"
        )


if __name__ == "__main__":
    main()
