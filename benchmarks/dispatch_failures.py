"""How often the unit-commitment environments' DC-OPF reports ``converged=False``, per
baseline, on held-out days.

    python benchmarks/dispatch_failures.py [--envs NAME ...] [--episodes 8]
    JAX_ENABLE_X64=1 python benchmarks/dispatch_failures.py    # the same in float64

Each baseline of the environment (``env.baselines``) plays ``--episodes`` held-out days
with ``jax.vmap(env.step)`` in one jitted scan (an episode that ends restarts). The DC-OPF
with priced load shedding, spilling and reserve shortfall always has a solution, so every
step that reports ``power_flow_failed`` is the interior point's failure, not the
network's: the table gives the share of such steps and the median dual residual of the
failed ones (currency/MWh; the other residuals stay within tolerance), the dtype, and
the share of steps the interior point solved (the others bind no line and take the
copper plate's exact dispatch, :func:`jaxgrid.dispatch.dcopf_with_fallback`), and the
share of steps with a ``thermal_overload`` cost (a branch above its rating: one the
dispatch does not monitor, since it enforces those it does).
"""

from __future__ import annotations

import argparse

from timing import emit_table


def failures(name: str, episodes: int) -> list[dict]:
    """One row per baseline of ``name``: failed steps, their share, median dual residual,
    the share of steps by the interior point and of steps with thermal overload."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxgrid
    from jaxgrid.train.evaluate import held_out

    env, params = jaxgrid.make(name)
    params = held_out(params)
    keys = jax.random.split(jax.random.PRNGKey(0), episodes)
    thermal = env.cost_names.index("thermal_overload")
    rows = []
    for label, policy in env.baselines(params).items():

        def play(policy=policy):
            obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

            def step(carry, key):
                obs, state = carry
                k_act, k_step = jax.random.split(key)
                action = jax.vmap(policy)(jax.random.split(k_act, episodes), obs)
                request, adjust = jax.vmap(env.request)(action)
                result = jax.vmap(lambda s, r, a: env.dispatch(s, r, a, params)[2])(
                    state, request, adjust
                )
                obs, state, *_, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                    jax.random.split(k_step, episodes), state, action, params
                )
                overload = info["costs"][:, 0, thermal] > 0
                return (obs, state), (
                    result.converged,
                    result.dual_residual,
                    result.iterations,
                    overload,
                )

            steps = jax.random.split(jax.random.PRNGKey(1), env.horizon)
            return jax.lax.scan(step, (obs, state), steps)[1]

        converged, dual, iterations, overload = (np.asarray(x) for x in jax.jit(play)())
        failed = ~converged
        rows.append(
            {
                "env": name,
                "baseline": label,
                "dtype": str(jnp.result_type(float)),
                "steps": failed.size,
                "failed": int(failed.sum()),
                "share": float(failed.mean()),
                "dual": float(np.median(dual[failed])) if failed.any() else 0.0,
                "interior": float(np.mean(iterations > 0)),
                "overload": float(np.mean(overload)),
            }
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="*", default=["tso118-v0", "tso14-v0"])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    lines = [
        "| environment | baseline | dtype | steps | failed DC-OPF | share | median dual "
        "residual of the failed, currency/MWh | steps by the interior point | steps with "
        "thermal overload |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in args.envs:
        for r in failures(name, args.episodes):
            lines.append(
                f"| {r['env']} | {r['baseline']} | {r['dtype']} | {r['steps']} | {r['failed']} "
                f"| {r['share']:.1%} | {r['dual']:.3g} | {r['interior']:.0%} "
                f"| {r['overload']:.1%} |"
            )
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
